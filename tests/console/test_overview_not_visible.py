"""The Overview never reads healthy where the collector cannot see other sessions (issue 32).

Without pg_read_all_stats the snapshot and blocker rows read 0 / none and say "not visible: ..."
in their notes (sql/postgresql/oldest_snapshot.sql, blocking_chains.sql, lock_waits.sql; the
notes below are their exact texts). Pure: the Overview's table and banners from a sample.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from console.data import LiveSample
from console.views.overview import cell_note, judge_all, table, unseen_targets
from queueops import config as config_mod
from queueops.rows import SnapshotRow

T0 = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
CFG = config_mod.parse({
    "targets": [{"name": "a", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
    "queues": [{"name": "jobs", "target": "a", "kind": "lease", "table": "jobs", "key": "id",
                "lease_column": "taken_at"}],
})
SNAPSHOT_WHY = ("not visible: the collector login lacks pg_read_all_stats (other logins' transactions show "
                "no snapshot or start in pg_stat_activity, so theirs read as none)")
CHAINS_WHY = ("not visible: the collector login lacks pg_read_all_stats (other logins' waits show no wait "
              "event in pg_stat_activity, so their chains read as none)")
LOCK_WHY = ("not visible: the collector login lacks pg_read_all_stats (another login's lock holder "
            "shows no transaction start in pg_stat_activity, so how long it has held the lock reads 0 s)")
SHORT = "not visible: the collector login lacks pg_read_all_stats"


def row(queue: str, metric: str, value: float, note: object = "") -> SnapshotRow:
    return SnapshotRow(T0, "a", "d", queue, metric, value, note if isinstance(note, str) else json.dumps(note))


def sample(visible: bool, holder: bool = False) -> LiveSample:
    """One sample of the queue 'jobs', quiet: as the documented login sees it, or one without
    pg_read_all_stats (``holder``: a table-lock holder still seen by pg_locks, its age unknown)."""
    rows = [row("", "oldest_snapshot_age_s", 0, "{}" if visible else SNAPSHOT_WHY),
            row("", "head_blockers", 0, "[]" if visible else CHAINS_WHY),
            row("", "blocked_sessions", 0, ("" if visible else CHAINS_WHY + "; ") + "pg_locks (...)"),
            row("jobs", "depth", 3), row("jobs", "oldest_age_s", 1), row("jobs", "stuck_leases", 0),
            row("jobs", "ghost_records", 0), row("jobs", "lock_waiters", 0, "exact (pg_locks now)")]
    if holder:
        rows += [row("jobs", "lock_blockers", 1, {"held": ["7:ShareLock"], "holders": [{"pid": 7, "mode": "ShareLock"}],
                                                  "not_visible": LOCK_WHY}),
                 row("jobs", "lock_wait_max_s", 0, LOCK_WHY + "; pg_locks.waitstart")]
    else:
        rows += [row("jobs", "lock_blockers", 0, "exact (pg_locks now)"),
                 row("jobs", "lock_wait_max_s", 0, "pg_locks.waitstart")]
    return LiveSample(T0, rows)


def overview(s: LiveSample) -> tuple[dict, dict]:
    df, states = table(CFG, judge_all(CFG, s), {}, notes=s.notes())
    return df.iloc[0].to_dict(), states.iloc[0].to_dict()


def test_cell_note_reads_not_counted_and_not_visible_in_text_or_json() -> None:
    assert cell_note("not counted: no index serves it (see missing_index)") == "not counted: no index serves it"
    assert cell_note(SNAPSHOT_WHY) == SHORT
    assert cell_note(CHAINS_WHY + "; pg_locks.waitstart") == SHORT
    assert cell_note(json.dumps({"kind": "prepared transaction", "not_visible": SNAPSHOT_WHY})) == SHORT
    for healthy in ("", "{}", "[]", "exact (pg_locks now)", json.dumps({"pid": 4}), "{not json"):
        assert cell_note(healthy) == ""


def test_root_cause_columns_say_not_visible_instead_of_a_healthy_zero() -> None:
    values, states = overview(sample(visible=False))
    assert values["Ghosts / dead tuples"] == f"0 · {SHORT}"
    assert values["Lock waiters"] == f"0 · {SHORT}"
    assert states["Ghosts / dead tuples"] == states["Lock waiters"] == "unknown"  # grey, not green
    assert values["Depth"] == 3 and states["Depth"] == "ok"  # depth needs no other session: as before


def test_a_holder_seen_without_its_age_marks_the_lock_column_from_its_json() -> None:
    s = sample(visible=True, holder=True)
    values, _ = overview(s)
    assert values["Lock waiters"] == f"0 · {SHORT}"
    assert values["Ghosts / dead tuples"] == 0  # the snapshot row is visible: a plain number


def test_the_documented_login_shows_plain_numbers_and_no_banner() -> None:
    values, states = overview(sample(visible=True))
    assert values["Ghosts / dead tuples"] == 0 and values["Lock waiters"] == 0
    assert states["Lock waiters"] == "ok"
    assert unseen_targets(sample(visible=True)) == {}
    assert unseen_targets(sample(visible=False)) == {"a": SHORT}
