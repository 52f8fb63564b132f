"""A timeout blanks one queue, not the collector for every queue of the target (issue 33, item 3).

Before: a queue-scoped statement that failed was run again queue by queue only when the error was
not a timeout, so one table held by a lock (a migration's ALTER TABLE, an offline rebuild) left every
queue of the server without depth for as long as it lasted. Now a timeout is isolated as any other
error, and the page-reading collectors (ghost_records, fragmentation_pct) always run one queue per
statement, each under its own timeout. Run on PostgreSQL (the runner is the same for both dialects:
SQL Server's error 1222 is a timeout like PostgreSQL's 55P03; tests/mssql checks it there).
"""

from __future__ import annotations

import pytest
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



def test_the_live_check_ends_at_the_lock_timeout_behind_a_locked_table(lab: Lab, lab_copy: str,
                                                                      write_cfg) -> None:  # noqa: ANN001
    """``config check --live`` (and the console's Settings check) planned and read the queue tables
    on a session without timeouts: behind an ACCESS EXCLUSIVE lock it waited for as long as the lock
    was held (killed after 120 s). On the collectors' session it ends at the lock timeout; that is
    the locked table's queue's error, and the other queues are checked (a statement that failed
    was the whole target's "check failed")."""
    from queueops import livecheck

    cfg: Config = write_cfg(lab_copy_sections(lab, lab_copy))
    holder = lab.connect(autocommit=False)
    try:
        holder.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(lab_copy, "q_lease")))
        report = livecheck.report_live(cfg)
    finally:
        holder.rollback()
        holder.close()
    failed = {f.queue: f.reason for f in report.findings if "check failed" in f.reason}
    print("\nLIVE CHECK BEHIND A LOCK: " + repr(failed))
    assert set(failed) == {"lease"} and "lock timeout" in failed["lease"], failed  # the others checked
    free = livecheck.report_live(cfg)  # the lock released: the other queues' findings are the same
    assert [f for f in report.findings if f.queue != "lease"] == [f for f in free.findings if f.queue != "lease"]
    assert not [f for f in free.findings if "check failed" in f.reason]


def test_a_locked_table_costs_only_its_own_catalog_types(lab: Lab, lab_copy: str, write_cfg) -> None:  # noqa: ANN001
    """The catalog types are one statement for every queue table of a target, and it reads index
    predicates (pg_get_expr takes ACCESS SHARE on the table): one table held by a migration failed
    it, and every queue of the target was collected without its types. Read again table by table,
    only the locked table's columns are missing, and it is named."""
    from queueops import coltypes, engine

    cfg: Config = write_cfg(lab_copy_sections(lab, lab_copy))
    target = cfg.targets[0]
    holder = lab.connect(autocommit=False)
    try:
        holder.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(lab_copy, "q_lease")))
        with engine.connection(target, "collect", cfg.base_dir) as conn:
            conn.execute(sessions.reading(target))
            with pytest.raises(engine.TargetError, match="lock timeout"):
                coltypes.read_types(conn, cfg.queues)  # the one statement: every table's types lost
            types, unread = coltypes.read_types_apart(conn, cfg.queues)
    finally:
        holder.rollback()
        holder.close()
    locked = coltypes.qualified(lab_copy, "q_lease", "postgresql")
    assert unread == (locked,)
    read = {t for t, _ in types}
    others = {coltypes.qualified(q.schema_, q.table, "postgresql") for q in cfg.queues} - {locked}
    assert others and others <= read and locked not in read, (read, others)


def test_discovery_reads_every_other_tables_checks_while_one_is_locked(lab: Lab, schema: str, write_cfg) -> None:  # noqa: ANN001
    """Discovery reads a text status column's values from its CHECK constraint, printed by
    pg_get_constraintdef, which takes ACCESS SHARE on the table: one table of the database held by
    a migration hung `queueops discover` and the console's "Find queues" (no lock timeout on its
    session). On a reading session, that table's constraints are left out and said so; every other
    table's are read."""
    from queueops import discovery, engine
    from tests.mapping.conftest import target_section

    with lab.connect() as conn:
        for t in ("tasks_a", "tasks_b"):
            conn.execute(sql.SQL("CREATE TABLE {} (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, "
                                 "state text NOT NULL CHECK (state IN ('queued', 'running', 'done')))")
                         .format(sql.Identifier(schema, t)))
    cfg: Config = write_cfg(target_section(lab))
    holder = lab.connect(autocommit=False)
    try:
        holder.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(schema, "tasks_a")))
        with engine.connection(cfg.targets[0], "check", cfg.base_dir, application="queueops discover") as conn:
            tables = discovery.read_catalog(conn)
    finally:
        holder.rollback()
        holder.close()
    a, b = tables[(schema, "tasks_a")], tables[(schema, "tasks_b")]
    assert a.checks_unread and not a.columns["state"].checks
    assert not b.checks_unread and b.columns["state"].checks == ["queued", "running", "done"]
    said = {p.table.name: p.advice for p in discovery.survey(tables, "postgresql") if p.table.schema == schema}
    assert any("CHECK constraints were not read" in line for line in said["tasks_a"]), said
    assert not any("CHECK constraints were not read" in line for line in said["tasks_b"]), said
