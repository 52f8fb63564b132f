"""Pure judgement: health states from thresholds, worst-first order, staleness, recommendations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from console.data import parse_note
from console.findings import RootCause, recommend, root_causes
from console.health import count_states, format_age, is_stale, judge, queue_health, worst_first
from console.views.audit import filter_audit
from queueops.config import Queue, Threshold


def _queue(kind: str = "lease", **kw: object) -> Queue:
    cols = {"lease": {"lease_column": "leased_at"}, "status": {"status_column": "status"},
            "delete": {}, "due": {"due_column": "due_at"},
            "ring": {"sequence_table": "seq", "push_column": "push", "pop_column": "pop", "capacity": 100}}[kind]
    return Queue(name=f"q_{kind}", target="t", kind=kind, table="tbl", key="id", **cols, **kw)  # type: ignore[arg-type]


def test_judge_above_fires_at_the_level_and_below_strictly_under_it() -> None:
    thr = Threshold(warn=10, crit=100)
    assert [judge(v, thr) for v in (9, 10, 99, 100)] == ["ok", "warn", "warn", "crit"]
    drift = Threshold(crit=0, direction="below")
    assert [judge(v, drift) for v in (-1, 0, 5)] == ["crit", "ok", "ok"]
    assert judge(None, thr) == "unknown"
    assert judge(5, None) == "ok"


def test_one_stuck_lease_is_critical_with_the_default_thresholds() -> None:
    h = queue_health(_queue(), {"depth": 3, "oldest_age_s": 1, "stuck_leases": 1})
    assert h.state == "crit"
    assert h.reasons[0].metric == "stuck_leases"
    assert "stuck leases 1 ≥ 1" in h.reason


def test_per_queue_thresholds_override_the_defaults() -> None:
    q = _queue(thresholds={"depth": Threshold(warn=5, crit=50)})
    assert queue_health(q, {"depth": 6, "oldest_age_s": 0}).state == "warn"
    assert queue_health(_queue(), {"depth": 6, "oldest_age_s": 0}).state == "ok"


def test_fragmentation_of_an_index_too_small_to_rebuild_is_not_a_problem() -> None:
    base = {"depth": 3, "oldest_age_s": 1}
    assert queue_health(_queue(), {**base, "fragmentation_pct": 95, "page_count": 50}).state == "ok"
    assert queue_health(_queue(), {**base, "fragmentation_pct": 95, "page_count": 50000}).state == "crit"
    assert queue_health(_queue(), {**base, "fragmentation_pct": 95}).state == "crit"  # no page count: judged


def test_negative_watermark_drift_is_critical() -> None:
    h = queue_health(_queue("delete"), {"depth": 1, "oldest_age_s": 1, "watermark_drift": -3})
    assert h.state == "crit" and h.reasons[0].metric == "watermark_drift"


def test_unreachable_or_unsampled_queue_is_unknown_never_green() -> None:
    assert queue_health(_queue(), {"depth": 0, "oldest_age_s": 0}, reachable=False).state == "unknown"
    assert queue_health(_queue(), {}).state == "unknown"


def test_worst_first_orders_critical_unknown_warning_ok_and_by_how_far_past() -> None:
    q = _queue()
    hs = [queue_health(q.model_copy(update={"name": n}), v) for n, v in (
        ("ok", {"depth": 1, "oldest_age_s": 1}),
        ("warn", {"depth": 20_000, "oldest_age_s": 1}),
        ("crit-small", {"depth": 1, "oldest_age_s": 1, "stuck_leases": 1}),
        ("crit-big", {"depth": 1, "oldest_age_s": 1, "stuck_leases": 50}),
        ("unknown", {}),
    )]
    assert [h.queue for h in worst_first(hs)] == ["crit-big", "crit-small", "unknown", "warn", "ok"]
    assert count_states(hs) == {"crit": 2, "unknown": 1, "warn": 1, "ok": 1}


def test_staleness_after_three_intervals() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert not is_stale(now - timedelta(seconds=44), now, 15)
    assert is_stale(now - timedelta(seconds=46), now, 15)
    assert is_stale(None, now, 15)


def test_format_age() -> None:
    assert [format_age(s) for s in (None, 5, 65, 3600, 90061)] == ["—", "5 s", "1 min 5 s", "1 h 0 min", "1 d 1 h"]


def test_root_causes_skip_empty_details_and_young_snapshots_and_expand_blocker_lists() -> None:
    rows = [
        ("oldest_snapshot_age_s", 0.0, parse_note("{}")),
        ("head_blockers", 0.0, parse_note("[]")),
        ("oldest_xmin_age_xids", 900.0, {"pid": 7}),
        ("deadlocks_total", 3.0, parse_note("pg_stat_database.deadlocks (cumulative)")),
    ]
    assert root_causes(rows) == []
    rows = [
        ("oldest_snapshot_age_s", 5.0, {"pid": 1}),  # ordinary work: not a cause
        ("oldest_snapshot_age_s", 240.0, {"pid": 42, "usename": "lab", "application_name": "snap",
                                          "state": "idle in transaction"}),
        ("head_blockers", 2.0, {"items": [{"pid": 9, "xact_age_s": 30.5, "blocked": 3}, {"pid": 8, "xact_age_s": 3}]}),
    ]
    causes = root_causes(rows)
    assert [(c.kind, c.details["pid"]) for c in causes] == [("snapshot", 42), ("blocker", 9), ("blocker", 8)]
    assert causes[0].summary == "session 42 (lab, snap) holds the oldest snapshot for 4 min"


def test_recommendations_follow_the_seeds() -> None:
    lease = recommend(_queue(), "postgresql", {"depth": 1, "oldest_age_s": 1, "stuck_leases": 4,
                                               "oldest_lease_age_s": 90})
    assert lease[0].action == "requeue" and lease[0].severity == "crit" and lease[0].rule == "stuck_leases"
    assert lease[0].source.startswith("Implementing a Simple Queue")

    wm = _queue("delete", watermark={"table": "wm", "column": "low"})
    assert recommend(wm, "postgresql", {"watermark_drift": -10})[0].action == "watermark-reset"

    holder = RootCause("snapshot", "oldest_snapshot_age_s", 600, {"pid": 5})
    ghosts = recommend(_queue("delete"), "mssql", {"ghost_records": 600_000}, [holder])
    assert [r.rule for r in ghosts] == ["ghosts_held_by_snapshot", "use_watermark"]
    assert "version store" in ghosts[0].advice  # the SQL Server text, not PostgreSQL's VACUUM
    assert "session 5" in ghosts[0].evidence

    locks = recommend(_queue("delete"), "mssql", {"lock_waiters": 6})
    assert "READPAST" in locks[0].advice
    assert "SKIP LOCKED" in recommend(_queue("delete"), "postgresql", {"lock_waiters": 6})[0].advice
    held = recommend(_queue("delete"), "postgresql", {"lock_waiters": 0, "lock_blockers": 1})
    assert held and "holding a table lock that blocks every change" in held[0].evidence

    frag = recommend(_queue("status"), "postgresql", {"fragmentation_pct": 70})
    assert [r.action for r in frag][0] == "rebuild"
    assert "split_payload" in [r.rule for r in frag]
    assert "ring_buffer" in [r.rule for r in recommend(_queue("delete"), "postgresql", {"fragmentation_pct": 70})]

    archive = recommend(_queue("status"), "postgresql", {"depth": 10, "rows_total": 50_000})
    assert any(r.action == "archive" and "small batches" in r.advice for r in archive)

    assert recommend(_queue(), "postgresql", {"depth": 1, "oldest_age_s": 1, "stuck_leases": 0}) == []


def test_audit_search_is_literal_and_filters_combine() -> None:
    df = pd.DataFrame({"start_time": pd.to_datetime(["2026-01-01T10:00Z", "2026-01-02T10:00Z"]),
                       "user_name": ["alice", "bob"], "action": ["requeue", "rebuild"], "target": ["t", "t"],
                       "queue": ["lease", "status"], "command": ["UPDATE x SET a = NULL", "REINDEX (.*)"],
                       "error": ["", ""], "outcome": ["ok", "failed"], "params": ["[]", "[]"], "preview": ["{}", "{}"]})
    assert list(filter_audit(df, text="(.*)")["user_name"]) == ["bob"]  # a regex would match both
    assert list(filter_audit(df, outcomes=["ok"])["queue"]) == ["lease"]
    assert filter_audit(df, text="alice", actions=["rebuild"]).empty
    assert list(filter_audit(df, since=datetime(2026, 1, 2, tzinfo=UTC))["user_name"]) == ["bob"]


def test_a_long_snapshot_or_a_blocker_is_a_finding_before_any_threshold_breaks() -> None:
    holder = RootCause("snapshot", "oldest_snapshot_age_s", 600, {"pid": 5, "state": "idle in transaction"})
    recs = recommend(_queue("delete"), "postgresql", {"ghost_records": 10}, [holder])
    assert [r.title for r in recs] == ["A long transaction holds cleanup back"]
    assert "VACUUM cannot remove" in recs[0].advice
    young = RootCause("snapshot", "oldest_snapshot_age_s", 40, {"pid": 5})
    assert recommend(_queue("delete"), "postgresql", {"ghost_records": 10}, [young]) == []
    blocker = RootCause("blocker", "head_blockers", 30, {"pid": 9, "blocked": 3})
    assert [r.rule for r in recommend(_queue(), "mssql", {}, [blocker])] == ["blocker"]
