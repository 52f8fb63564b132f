"""One broken queue never blinds the others (issue 13, "What was seen" 4).

The queue-scoped collectors join every queue of a target into one statement; before the fix one
renamed or unreadable table failed that statement, and with it every queue of the server, and the
console blamed the target. Now the broken queue gets a ``queue_error`` row with the engine's own
reason, the other queues keep every metric, and the console names the reason on the queue.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from pathlib import Path

from psycopg import sql

from collectors import runner
from collectors.registry import COLLECTORS
from console.data import LiveSampler
from console.views import overview
from queueops.config import Config
from tests.conftest import Lab
from tests.mapping.conftest import lab_copy_sections

QUEUE_COLLECTORS = [c for c in COLLECTORS if c.scope == "queue"]


def metric_sets(result: runner.CycleResult) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for r in result.rows:
        if r.queue:
            out[r.queue].add(r.metric)
    return out


def test_a_renamed_table_fails_only_its_queue_and_the_console_names_the_reason(lab: Lab, lab_copy: str,
                                                                               write_cfg) -> None:  # noqa: ANN001
    cfg: Config = write_cfg(lab_copy_sections(lab, lab_copy))
    target = cfg.targets[0]
    first = runner.run_collectors(cfg, target, QUEUE_COLLECTORS)
    # The first collection of a target also reads its columns' types (one statement). The
    # page-reading collectors (slow cadence) run one statement per queue (issue 33, item 3).
    per_queue = sum(len([q for q in cfg.queues_of(target.name) if runner.build_statement(c, target, [q])]) - 1
                    for c in QUEUE_COLLECTORS if c.name in runner.PER_QUEUE)
    assert first.round_trips == 2 + len(QUEUE_COLLECTORS) + per_queue
    before = runner.run_collectors(cfg, target, QUEUE_COLLECTORS)
    assert all(s.ok for s in before.status), [s.error for s in before.status if not s.ok]
    # The normal case stays one round trip per collector per target (plus the session setup).
    assert before.round_trips == 1 + len(QUEUE_COLLECTORS) + per_queue
    baseline = metric_sets(before)
    assert set(baseline) == {"delete", "status", "lease", "due", "ring"}

    with lab.connect() as conn:
        conn.execute(sql.SQL("ALTER TABLE {} RENAME TO q_lease_gone").format(sql.Identifier(lab_copy, "q_lease")))
    after = runner.run_collectors(cfg, target, QUEUE_COLLECTORS)
    got = metric_sets(after)
    for q in ("delete", "status", "due", "ring"):
        assert got[q] == baseline[q], q
    errors = [r for r in after.rows if r.queue == "lease" and r.metric == runner.QUEUE_ERROR]
    assert errors and all("does not exist" in r.note and f"{lab_copy}.q_lease" in r.note for r in errors)
    assert "depth" not in got["lease"]
    # No collector reads as failed for the target: the other queues answered.
    assert all(s.ok for s in after.status), [s.error for s in after.status if not s.ok]
    depth_status = next(s for s in after.status if s.collector == "depth")
    assert "lease:" in depth_status.error and "does not exist" in depth_status.error

    sample = LiveSampler(cfg).sample(force=True)
    assert sample.unreachable() == {}
    healths = overview.judge_all(cfg, sample)
    df, _ = overview.table(cfg, healths, {}, sample.unreachable())
    why = dict(zip(df["Queue"], df["Why"], strict=True))
    assert "does not exist" in why["lease"] and "unreachable" not in why["lease"]
    state = dict(zip(df["Queue"], df["State"], strict=True))
    assert state["lease"] == "UNKNOWN"
    assert all(state[q] != "UNKNOWN" for q in ("delete", "status", "due", "ring")), state


def test_an_unreadable_table_fails_only_its_queue_with_permission_denied(lab: Lab, lab_copy: str, write_cfg,
                                                                         tmp_path: Path) -> None:  # noqa: ANN001
    role = f"map_ro_{uuid.uuid4().hex[:8]}"
    password = uuid.uuid4().hex
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal(password)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(lab_copy), sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
            sql.Identifier(lab_copy), sql.Identifier(role)))
        conn.execute(sql.SQL("REVOKE SELECT ON {} FROM {}").format(sql.Identifier(lab_copy, "q_due"),
                                                                   sql.Identifier(role)))
    try:
        secret = tmp_path / "ro.secret"
        secret.write_text(password)
        secret.chmod(0o600)
        body = lab_copy_sections(lab, lab_copy)
        body = body.replace("postgresql://queueops@", f"postgresql://{role}@", 1)
        body = body.replace(f'password = "file:{Path(lab.server.password_file).resolve()}"',
                            f'password = "file:{secret}"', 1)
        cfg: Config = write_cfg(body)
        assert role in cfg.targets[0].url
        result = runner.run_collectors(cfg, cfg.targets[0], QUEUE_COLLECTORS)
        got = metric_sets(result)
        for q in ("delete", "status", "lease", "ring"):
            assert {"depth", "oldest_age_s"} <= got[q], (q, got[q])
        errors = [r.note for r in result.rows if r.queue == "due" and r.metric == runner.QUEUE_ERROR]
        assert errors and all("permission denied" in n for n in errors), errors
    finally:
        with lab.connect() as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
