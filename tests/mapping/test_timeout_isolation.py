"""A timeout blanks one queue, not the collector for every queue of the target (issue 33, item 3).

Before: a queue-scoped statement that failed was run again queue by queue only when the error was
not a timeout, so one table held by a lock (a migration's ALTER TABLE, an offline rebuild) left every
queue of the server without depth for as long as it lasted. Now a timeout is isolated as any other
error, and the page-reading collectors (ghost_records, fragmentation_pct) always run one queue per
statement, each under its own timeout. Run on PostgreSQL (the runner is the same for both dialects:
SQL Server's error 1222 is a timeout like PostgreSQL's 55P03; tests/mssql checks it there).
"""

from __future__ import annotations

from psycopg import sql

from collectors import registry, runner
from queueops import sessions
from queueops.config import Config
from tests.conftest import Lab
from tests.mapping.conftest import lab_copy_sections


def test_a_locked_table_times_out_alone_and_the_other_queues_keep_their_metrics(lab: Lab, lab_copy: str,
                                                                                write_cfg) -> None:  # noqa: ANN001
    cfg: Config = write_cfg(lab_copy_sections(lab, lab_copy))
    target = cfg.targets[0]
    holder = lab.connect(autocommit=False)
    try:
        holder.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(lab_copy, "q_lease")))
        result = runner.run_collectors(cfg, target, [registry.by_name("depth")])
    finally:
        holder.rollback()
        holder.close()
    depth = {r.queue: r.value for r in result.rows if r.metric == "depth"}
    errors = {r.queue: r.note for r in result.rows if r.metric == runner.QUEUE_ERROR}
    assert {"delete", "status", "due", "ring"} <= set(depth), depth  # before: no depth for any queue
    assert "lease" not in depth and "lock timeout" in errors["lease"], errors
    (status,) = [s for s in result.status if s.collector == "depth"]
    assert status.ok and status.timeout and "lease: " in status.error


def test_physical_stats_collectors_run_one_queue_per_statement(lab: Lab, lab_copy: str, write_cfg) -> None:  # noqa: ANN001
    cfg: Config = write_cfg(lab_copy_sections(lab, lab_copy))
    target = cfg.targets[0]
    queues = cfg.queues_of(target.name)
    for name in sorted(runner.PER_QUEUE):
        result = runner.CycleResult()
        conn = runner.engine.connect(target, "collect", cfg.base_dir)
        try:
            conn.execute(sessions.reading(target))
            trips = runner._run_one(registry.by_name(name), target, queues, conn,  # noqa: SLF001
                                    runner.utcnow(), "db", result)
        finally:
            conn.close()
        applicable = [q for q in queues if runner.build_statement(registry.by_name(name), target, [q]) is not None]
        assert trips == len(applicable) > 1, name  # one statement (and one timeout) per queue


def test_the_drill_down_reads_on_the_collectors_session_a_locked_table_times_out(lab: Lab, lab_copy: str,
                                                                                write_cfg) -> None:  # noqa: ANN001
    """The console's drill-down (items.load) read on a connection without the collectors' settings:
    no lock_timeout, no statement_timeout, writable. Behind a migration's ACCESS EXCLUSIVE lock it
    waited as long as the lock was held (every dequeuer queued behind it did too). It sets the
    session up as the collectors do now: the read ends at the target's lock timeout, named as one."""
    from queueops import engine, items, sqlfiles

    cfg: Config = write_cfg(lab_copy_sections(lab, lab_copy))
    q = cfg.queue("lease")
    holder = lab.connect(autocommit=False)
    try:
        holder.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(lab_copy, "q_lease")))
        with engine.connection(cfg.targets[0], "collect", cfg.base_dir, application="queueops-console") as conn:
            try:
                items.read(conn, q, "stuck")
            except engine.TargetError as exc:
                assert exc.timeout and "lock timeout" in str(exc), exc
            else:
                raise AssertionError("the drill-down read a table held ACCESS EXCLUSIVE")
            show = sqlfiles.Statement("SELECT current_setting('default_transaction_read_only') AS v")
            assert conn.execute(show)[0]["v"] == "on"
    finally:
        holder.rollback()
        holder.close()

