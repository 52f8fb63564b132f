"""rebuild on the real PostgreSQL: bloat falls while dequeuers keep running; failures leave no
invalid index behind; the preview says what will run and why."""

from __future__ import annotations

import time

import pytest

from queueops import actions
from queueops.actions import rebuild
from tests.actions.conftest import CHURN_NAME, Dequeuers, snapshot_held

DEQUEUE = "DELETE FROM @churn WHERE id = (SELECT id FROM @churn ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id"


def _churn(acts, rows: int = 450_000) -> None:  # noqa: ANN001
    """Fill, then delete 90 % of the rows: dead tuples and index pages that are mostly garbage."""
    with acts.connect() as conn:
        conn.execute("INSERT INTO @churn (id, payload) SELECT g, 'p' FROM generate_series(1, %s) AS g", (rows,))
        conn.execute("DELETE FROM @churn WHERE id % 10 <> 0")
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT 1")  # the next statement's end flushes this session's counters
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _table(acts)["dead"] < rows * 0.8:
        time.sleep(0.1)


def _table(acts) -> dict[str, int]:  # noqa: ANN001
    row = acts.sql("SELECT n_dead_tup, pg_indexes_size(relid), pg_relation_size(relid) FROM pg_stat_user_tables "
                   "WHERE relid = to_regclass(%s)", (CHURN_NAME,))[0]
    return {"dead": row[0], "index_bytes": row[1], "heap_bytes": row[2]}


def _invalid(acts) -> list[str]:  # noqa: ANN001
    return [r[0] for r in acts.sql("SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                                   "WHERE i.indrelid = to_regclass(%s) AND NOT i.indisvalid", (CHURN_NAME,))]


def test_rebuild_after_churn_bloat_falls_and_dequeuers_keep_running(acts, monkeypatch) -> None:  # noqa: ANN001
    _churn(acts)
    before = _table(acts)
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn")
    p = plan.preview
    by_name = {r["index"]: r for r in p.rows}
    assert set(by_name) == {"churn_q_pkey", "churn_q_enq"}
    for r in by_name.values():
        assert r["operation"] == "reindex_concurrently" and r["bloat_pct"] >= 30 and r["bytes"] > 0, (r, p.details)
        assert ">= 30 %" in r["reason"] and not r["offline"]
    assert [s.label for s in p.steps] == ["reindex_concurrently churn_q_enq", "reindex_concurrently churn_q_pkey",
                                          'vacuum "qa äct"."churn_q"']
    assert "REINDEX INDEX CONCURRENTLY" in p.sql and "VACUUM (ANALYZE)" in p.sql
    assert p.row_count == 3 and not p.destructive
    monkeypatch.setattr(rebuild, "POLL_S", 0.02)
    deq = Dequeuers()
    deq.start(acts.connect, DEQUEUE, n=2, lock_timeout_ms=500)
    time.sleep(0.3)
    seen: list[actions.Progress] = []
    start = time.monotonic()
    result = actions.execute(cfg, plan, progress=seen.append)
    end = time.monotonic()
    time.sleep(0.2)
    deq.finish()
    assert result.outcome == "ok", result.error
    assert result.rows_affected == 3 and [r["statement"] for r in result.rows] == [s.label for s in p.steps]
    after = _table(acts)
    assert after["index_bytes"] < before["index_bytes"] / 3  # bloat fell
    assert after["dead"] < before["dead"] / 10
    bloat_before = {r["index"]: r["bloat_pct"] for r in p.rows}
    bloat_after = {r["index"]: r["bloat_pct"] for r in actions.plan(cfg, "rebuild", "churn").preview.rows}
    assert all(bloat_after[i] < 15 < bloat_before[i] for i in bloat_before), (bloat_before, bloat_after)
    # Dequeuers kept running and none waited past its 500 ms lock timeout.
    assert deq.errors == []
    assert sum(1 for t in deq.times if start <= t <= end) > 0
    # Progress came from the engine's own views, per statement.
    engine_phases = [s.phase for s in seen if ": " in s.phase and s.total is not None]
    assert engine_phases, [s.phase for s in seen]
    assert {s.step for s in seen} == {1, 2, 3} and all(s.steps == 3 for s in seen)
    print(f"\nlongest dequeue stall during rebuild: {deq.longest_gap(start, end) * 1000:.0f} ms "
          f"over {end - start:.2f} s")


def test_small_or_healthy_indexes_are_left_alone(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 2000) AS g")
    cfg = acts.config()
    p = actions.plan(cfg, "rebuild", "churn").preview
    assert all(r["operation"] == "none" and "too small" in r["reason"] for r in p.rows)
    assert [s.label for s in p.steps] == ['vacuum "qa äct"."churn_q"']
    p = actions.plan(cfg, "rebuild", "churn", {"min_pages": 0, "vacuum": False}).preview
    assert all(r["operation"] == "none" and r["bloat_pct"] < 30 for r in p.rows), p.rows
    assert p.steps == [] and p.row_count == 0
    # Named by the operator: rebuilt whatever its figures.
    p = actions.plan(cfg, "rebuild", "churn", {"indexes": ["churn_q_enq"], "vacuum": False}).preview
    assert [s.label for s in p.steps] == ["reindex_concurrently churn_q_enq"]
    with pytest.raises(actions.ActionError, match="no index 'nope' on this table; its indexes: churn_q_enq, churn_q_pkey"):
        actions.plan(cfg, "rebuild", "churn", {"indexes": ["nope"]})


def test_leftover_of_a_failed_reindex_is_listed_and_dropped_first(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 100) AS g")
    with pytest.raises(Exception, match="could not create unique index"):
        acts.sql("CREATE UNIQUE INDEX CONCURRENTLY churn_q_enq_ccnew ON @churn (payload)")
    assert _invalid(acts) == ["churn_q_enq_ccnew"]
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn", {"vacuum": False})
    assert [s.label for s in plan.preview.steps] == ["drop_leftover churn_q_enq_ccnew"]
    assert "DROP INDEX CONCURRENTLY" in plan.preview.sql
    assert actions.execute(cfg, plan).outcome == "ok"
    assert _invalid(acts) == []


def test_lock_timeout_fails_cleanly_without_leaving_an_invalid_index(acts) -> None:  # noqa: ANN001
    """An old snapshot makes REINDEX CONCURRENTLY wait; the lock timeout ends the wait, the
    half-built index is dropped, the retries give up, and the audit says failed."""
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 1000) AS g")
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn", {"indexes": ["churn_q_enq"], "vacuum": False, "lock_retries": 1})
    with snapshot_held(acts):
        result = actions.execute(cfg, plan)
    assert result.outcome == "failed" and "lock timeout" in result.error
    assert "dropped leftover churn_q_enq_ccnew" in result.error  # it had built one, and removed it
    assert _invalid(acts) == []
    assert acts.sql("SELECT count(*) FROM @churn")[0][0] == 1000
