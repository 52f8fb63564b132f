"""The collectors against a real SQL Server: the T-SQL lab, each fault switched on, each metric moves.

Runs only when QUEUEOPS_TEST_MSSQL_URL names a server (see conftest.py); SQL Server cannot run on
this machine, and a fake would prove nothing.
"""

from __future__ import annotations

import os

import pytest

if not os.environ.get("QUEUEOPS_TEST_MSSQL_URL"):
    pytest.skip("QUEUEOPS_TEST_MSSQL_URL is not set: the SQL Server suite needs a real server (a SQLAlchemy "
                "mssql+pyodbc URL of a disposable database; see tests/mssql/conftest.py)", allow_module_level=True)

import json  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from collectors import registry, runner  # noqa: E402
from collectors.counters import CounterRates  # noqa: E402
from tests.mssql.conftest import LEASE_TIMEOUT_S, SQL_TXN_SS_SNAPSHOT  # noqa: E402

ALL_KINDS = {"depth", "rows_total", "oldest_age_s", "lock_waiters", "lock_wait_max_s", "row_lock_waits_total",
             "page_latch_waits_total", "page_splits_total", "leaf_ghosts_total", "ghost_records", "version_ghost_records",
             "fragmentation_pct", "page_count", "page_density_pct"}
BY_KIND = {
    "delete": {"watermark_drift", "stranded_count"},
    "status": {"count_processing", "count_done", "stuck_leases", "oldest_lease_age_s"},
    "lease": {"count_leased", "stuck_leases", "oldest_lease_age_s"},
    "due": {"count_not_due"},
    "ring": {"occupancy", "free_slots", "pop_ahead_of_push", "slots_in_use"},
}
TARGET = {"lock_timeouts_total", "lock_timeouts_gt0_total", "lock_waits_total", "deadlocks_total",
          "page_splits_total", "skipped_ghosted_records_total", "sqlserver_start_time", "probe_lock_timeouts",
          "oldest_snapshot_age_s", "snapshot_transactions", "blocked_sessions", "blocking_max_wait_s", "head_blockers"}


def collect(cfg, *names: str) -> dict[tuple[str, str], object]:  # noqa: ANN001
    res = runner.run_once(cfg, [registry.by_name(n) for n in names] or None)
    bad = [s for s in res.status if not s.ok]
    assert not bad, bad
    return {(r.queue, r.metric): r for r in res.rows}


def value(rows, queue: str, metric: str) -> float | None:  # noqa: ANN001
    return rows[(queue, metric)].value


def wait_until(probe, timeout: float = 30, interval: float = 0.5):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(interval)


def test_every_collector_runs_and_every_metric_is_there(mssql) -> None:  # noqa: ANN001
    srv, cfg, conn = mssql
    for kind in ("delete", "status", "lease", "due"):
        srv.run(conn, f"produce_{kind}", n=3, age_s=5)
    srv.run(conn, "push_ring", n=2)
    res = runner.run_once(cfg)
    assert all(s.ok for s in res.status), [s for s in res.status if not s.ok]
    assert sorted(s.collector for s in res.status) == sorted(c.name for c in registry.COLLECTORS)
    seen: dict[str, set[str]] = {}
    for r in res.rows:
        seen.setdefault(r.queue, set()).add(r.metric)
    for kind, extra in BY_KIND.items():
        assert not (ALL_KINDS | extra) - seen[kind], (kind, sorted((ALL_KINDS | extra) - seen[kind]))
    assert not TARGET - seen[""], sorted(TARGET - seen[""])
    rows = {(r.queue, r.metric): r for r in res.rows}
    # The lab has q_lease_leased (processing_started_at) WHERE processing_started_at IS NOT NULL.
    assert rows[("lease", "missing_index")].value == 0, rows[("lease", "missing_index")]
    assert json.loads(rows[("", "lock_timeouts_total")].note)["counter"] == "Lock Timeouts/sec"
    assert rows[("delete", "ghost_records")].note in ("DETAILED", "SAMPLED")


def test_depth_age_and_counts(mssql) -> None:  # noqa: ANN001
    srv, cfg, conn = mssql
    srv.run(conn, "produce_delete", n=7, age_s=90)
    srv.run(conn, "produce_status", n=4, age_s=40)
    srv.run(conn, "produce_lease", n=5, age_s=30)
    srv.run(conn, "produce_due", n=2, age_s=50)
    srv.run(conn, "push_ring", n=6)
    rows = collect(cfg, "depth", "oldest_age_s")
    assert [value(rows, q, "depth") for q in ("delete", "status", "lease", "due", "ring")] == [7, 4, 5, 2, 6]
    assert rows[("delete", "depth")].note == "exact"
    assert 85 <= value(rows, "delete", "oldest_age_s") < 600
    assert 45 <= value(rows, "due", "oldest_age_s") < 600


def test_dead_consumer_leaves_stuck_leases_until_requeued(mssql) -> None:  # noqa: ANN001
    srv, cfg, conn = mssql
    srv.run(conn, "produce_lease", n=5, age_s=1)
    srv.run(conn, "produce_status", n=5, age_s=1)
    srv.run(conn, "dead_consumer_lease", n=3)
    srv.run(conn, "dead_consumer_status", n=2)
    rows = wait_until(lambda: (r := collect(cfg, "stuck_leases")) and value(r, "lease", "stuck_leases") == 3
                      and value(r, "status", "stuck_leases") == 2 and r, timeout=LEASE_TIMEOUT_S * 10)
    assert rows, "the dead consumer's leases never showed as stuck"
    assert value(rows, "lease", "oldest_lease_age_s") >= LEASE_TIMEOUT_S
    srv.run(conn, "requeue_stuck")
    rows = collect(cfg, "stuck_leases")
    assert value(rows, "lease", "stuck_leases") == 0 and value(rows, "status", "stuck_leases") == 0


def test_watermark_jump_is_negative_drift_with_the_stranded_count(mssql) -> None:  # noqa: ANN001
    srv, cfg, conn = mssql
    srv.run(conn, "produce_delete", n=20, age_s=1)
    srv.run(conn, "watermark_reset")
    assert value(collect(cfg, "watermark_drift"), "delete", "watermark_drift") == 0
    srv.run(conn, "watermark_jump")
    rows = collect(cfg, "watermark_drift")
    assert value(rows, "delete", "watermark_drift") == -20
    assert value(rows, "delete", "stranded_count") == 20
    srv.run(conn, "watermark_reset")
    rows = collect(cfg, "watermark_drift")
    assert value(rows, "delete", "watermark_drift") == 0 and value(rows, "delete", "stranded_count") == 0


def test_lock_hold_shows_waiters_an_idle_head_blocker_and_lock_timeouts(mssql) -> None:  # noqa: ANN001
    srv, cfg, conn = mssql
    srv.run(conn, "produce_lease", n=5, age_s=1)
    rates = CounterRates()
    first = runner.run_once(cfg, [registry.by_name("lock_timeouts")], rates)
    before = next(r.value for r in first.rows if r.metric == "lock_timeouts_gt0_total")
    holder = srv.connect(autocommit=False)
    waiter = srv.connect()
    errors: list[Exception] = []
    try:
        holder_spid = srv.run(holder, "spid")[0]["spid"]
        srv.run(holder, "lock_hold_lease")  # the exclusive table lock stays: no commit

        def dequeue(timeout_ms: int) -> None:
            try:
                srv.run(waiter, "set_lock_timeout", frags={"lock_timeout_ms": str(timeout_ms)})
                srv.run(waiter, "dequeue_lease")
            except Exception as exc:  # noqa: BLE001 - error 1222 is the point
                errors.append(exc)

        t = threading.Thread(target=dequeue, args=(15_000,))
        t.start()
        rows = wait_until(lambda: (r := collect(cfg, "lock_waits", "blocking_chains"))
                          and value(r, "lease", "lock_waiters") >= 1 and r, timeout=10, interval=0.2)
        assert rows, "no lock waiter on the lease queue's table"
        assert value(rows, "delete", "lock_waiters") == 0
        assert value(rows, "", "blocked_sessions") >= 1
        heads = json.loads(rows[("", "head_blockers")].note)
        assert heads[0]["session_id"] == holder_spid and heads[0]["state"].startswith("idle")
        holder.rollback()
        t.join(20)
        # A dequeuer with a short lock timeout fails with 1222: the server's counter moves.
        srv.run(holder, "lock_hold_lease")
        dequeue(100)
        assert any("1222" in str(e) for e in errors), errors
    finally:
        holder.rollback()
        holder.close()
        waiter.close()
    second = runner.run_once(cfg, [registry.by_name("lock_timeouts")], rates)
    after = next(r.value for r in second.rows if r.metric == "lock_timeouts_gt0_total")
    assert after > before
    rate = next(r for r in second.rows if r.metric == "lock_timeouts_gt0_per_s")
    assert rate.value is not None and rate.value > 0
    rows = collect(cfg, "lock_waits", "blocking_chains")
    assert value(rows, "lease", "lock_waiters") == 0


def test_snapshot_hold_keeps_version_ghosts_and_names_the_session(mssql) -> None:  # noqa: ANN001
    import pyodbc

    srv, cfg, conn = mssql
    srv.run(conn, "produce_delete", n=2000, age_s=1)
    srv.run(conn, "produce_status", n=1, age_s=1)
    holder = srv.connect(autocommit=False)
    try:
        holder.set_attr(pyodbc.SQL_ATTR_TXN_ISOLATION, SQL_TXN_SS_SNAPSHOT)
        spid = srv.run(holder, "spid")[0]["spid"]
        srv.run(holder, "snapshot_read")  # the snapshot starts here and stays open
        assert value(collect(cfg, "depth"), "delete", "depth") >= 1000  # above the cap: an estimate
        srv.run(conn, "delete_below", below=10**18)  # every row deleted while the snapshot may need them
        rows = collect(cfg, "oldest_snapshot")
        detail = json.loads(rows[("", "oldest_snapshot_age_s")].note)
        assert detail["session_id"] == spid and detail["is_snapshot"] in (1, True)
        assert value(rows, "", "snapshot_transactions") >= 1
        ghosts = wait_until(lambda: (r := collect(cfg, "ghost_records")) and
                            (value(r, "delete", "version_ghost_records") or 0) > 0 and r, timeout=20)
        assert ghosts, "no version ghost while a snapshot transaction is open"
    finally:
        holder.rollback()
        holder.close()
    rows = wait_until(lambda: (r := collect(cfg, "oldest_snapshot")) and
                      r[("", "oldest_snapshot_age_s")].note in ("{}", "") and r, timeout=20)
    assert rows, "the snapshot transaction is still listed after its rollback"
    assert wait_until(lambda: (value(collect(cfg, "ghost_records"), "delete", "version_ghost_records") or 0) == 0,
                      timeout=120, interval=2), "version ghosts stayed after the snapshot ended"


def test_churn_splits_pages_and_lowers_density(mssql) -> None:  # noqa: ANN001
    srv, cfg, conn = mssql
    srv.run(conn, "produce_due", n=2000, age_s=1)
    before = collect(cfg, "fragmentation_pct", "lock_waits")
    for _ in range(3):
        srv.run(conn, "churn_insert", n=5000)
        srv.run(conn, "churn_delete")
    after = collect(cfg, "fragmentation_pct", "lock_waits", "ghost_records")
    assert value(after, "due", "page_splits_total") > value(before, "due", "page_splits_total")
    assert value(after, "due", "index_fragmentation_max_pct") > (value(before, "due", "index_fragmentation_max_pct") or 0)
    assert value(after, "due", "page_density_pct") < value(before, "due", "page_density_pct")
    assert after[("due", "page_density_pct")].note == "DETAILED"


def test_the_drill_down_reads_past_a_dequeuers_exclusive_lock(mssql) -> None:  # noqa: ANN001
    """The console's items drill-down opens its connection as 'queueops-console'; it read at READ
    COMMITTED (the isolation was chosen by the application name's suffix) and so waited on a held
    exclusive lock until its query timeout. Every reading session is READ UNCOMMITTED now
    (engine.reads_uncommitted): the list comes back while the lock is held."""
    from queueops import engine, items

    srv, cfg, conn = mssql
    srv.run(conn, "produce_lease", n=5, age_s=60)
    q = cfg.queue("lease")
    target = cfg.target(q.target)
    holder = srv.connect(autocommit=False)
    try:
        srv.run(holder, "lock_hold_lease")  # the exclusive table lock stays: no commit
        with engine.connection(target, "collect", cfg.base_dir, application="queueops-console") as reader:
            rows = items.read(reader, q, "waiting")
        assert len(rows) == 5, rows
    finally:
        holder.rollback()
        holder.close()
