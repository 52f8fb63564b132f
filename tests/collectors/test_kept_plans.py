"""The collector service's connection keeps its statements prepared with generic plans, and makes
them again when a table's size moved: a plan made on an empty table must not go on reading the
table whole once it fills (the reason prepared statements were once ruled out, issue 17).

The observable is PostgreSQL's own: ``pg_stat_user_tables.seq_tup_read`` of the queue table, which
grows only when a statement scans it sequentially.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import psycopg.sql
import pytest

from collectors import registry, runner
from queueops import config as config_mod
from queueops import engine, sessions

FAST = list(registry.by_cadence("fast"))


def test_replan_needed_when_a_table_moved_by_the_factor_above_the_floor() -> None:
    made = {"a": 0.0, "b": 5_000.0}
    assert not runner.replan_needed(made, {"a": 0.0, "b": 5_000.0})
    assert not runner.replan_needed(made, {"a": runner.REPLAN_MIN_ROWS - 1, "b": 9_000.0})  # a: still tiny
    assert runner.replan_needed(made, {"a": runner.REPLAN_MIN_ROWS, "b": 5_000.0})  # a: from empty to the floor
    assert runner.replan_needed(made, {"a": 0.0, "b": 2_500.0})  # b: halved
    assert runner.replan_needed(made, {"a": 0.0})  # a table left the config
    assert runner.replan_needed(made, {**made, "c": 0.0})  # one joined it


@pytest.fixture()
def empty_due(lab) -> Iterator[config_mod.Config]:  # noqa: ANN001
    """An empty, analyzed due queue with its index, and no autovacuum from then on (no ANALYZE
    re-plans behind the test's back)."""
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.kept_due")
        conn.execute("CREATE TABLE lab.kept_due (id bigint PRIMARY KEY, due_at timestamptz NOT NULL, "
                     "enqueued_at timestamptz NOT NULL DEFAULT now()) WITH (autovacuum_enabled = off)")
        conn.execute("CREATE INDEX ON lab.kept_due (due_at, id)")
        conn.execute("VACUUM ANALYZE lab.kept_due")  # a drained queue, as autovacuum leaves it
    yield config_mod.parse({
        "targets": [{"name": "lab", "dialect": "postgresql", "url": lab.url, "password": lab.password,
                     "lock_timeout_ms": 500, "statement_timeout_ms": 10_000}],
        "queues": [{"name": "kept", "target": "lab", "kind": "due", "schema": "lab", "table": "kept_due",
                    "key": "id", "enqueued_at": "enqueued_at", "due_column": "due_at"}],
    })
    with lab.connect() as conn:
        conn.execute("DROP TABLE lab.kept_due")


def seq_read(lab, collector: psycopg.Connection) -> int:  # noqa: ANN001
    """Rows read by sequential scans of the table so far, with the collector session's counters flushed."""
    collector.execute("SELECT pg_stat_force_next_flush()", prepare=False)
    collector.execute("SELECT 1", prepare=False)  # the flush happens at the end of a statement
    with lab.connect() as conn:
        return conn.execute("SELECT seq_tup_read FROM pg_stat_user_tables WHERE relid = 'lab.kept_due'::regclass"
                            ).fetchone()[0]


def kept_session(cfg: config_mod.Config) -> engine.Connection:
    conn = engine.connect(cfg.targets[0], "collect", cfg.base_dir)
    runner.keep_plans(conn)
    return conn


def fill(lab, n: int) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        conn.execute("INSERT INTO lab.kept_due (id, due_at) SELECT g, now() + make_interval(secs => g - %s) "
                     "FROM generate_series(1, %s) AS g", (n // 2, n))
        conn.execute("SELECT pg_stat_force_next_flush()")  # the live-row counter, now
        conn.execute("SELECT 1")


def cycle(cfg: config_mod.Config, conn: engine.Connection) -> runner.CycleResult:
    res = runner.run_collectors(cfg, cfg.targets[0], FAST, conn=conn)
    assert all(s.ok for s in res.status), [s.error for s in res.status if not s.ok]
    return res


def test_plans_made_on_an_empty_table_are_made_again_once_it_fills(lab, empty_due) -> None:  # noqa: ANN001
    cfg = empty_due
    conn = kept_session(cfg)
    try:
        cycle(cfg, conn)  # plans made on the empty table
        prepared = conn.raw.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]
        assert prepared >= len([c for c in FAST if c.scope == "queue"])  # kept, not thrown away
        fill(lab, 20_000)
        before = seq_read(lab, conn.raw)
        res = cycle(cfg, conn)
        assert seq_read(lab, conn.raw) == before  # every read went through the index again
        assert conn.kept_plans == {'"lab"."kept_due"': 20_000.0}
        due = next(r for r in res.rows if r.queue == "kept" and r.metric == "depth")
        assert due.value >= runner.COUNT_CAP and due.note != "exact"  # 10,000 due: past the cap
    finally:
        conn.close()


def test_without_the_size_check_the_empty_table_plan_scans_the_filled_table(
        lab, empty_due, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    # The control: what the check prevents is real on this server.
    monkeypatch.setattr(runner, "replan_needed", lambda made, now: False)
    cfg = empty_due
    conn = kept_session(cfg)
    try:
        cycle(cfg, conn)
        fill(lab, 20_000)
        before = seq_read(lab, conn.raw)
        cycle(cfg, conn)
        assert seq_read(lab, conn.raw) > before
    finally:
        conn.close()


def test_a_one_cycle_connection_keeps_nothing(empty_due) -> None:  # noqa: ANN001
    # The console's own collection opens a connection per cycle: nothing to reuse, nothing kept.
    cfg = empty_due
    conn = engine.connect(cfg.targets[0], "collect", cfg.base_dir)
    try:
        conn.execute(sessions.reading(cfg.targets[0]))
        cycle(cfg, conn)
        assert conn.kept_plans is None
        assert conn.raw.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0
        assert conn.raw.execute("SHOW plan_cache_mode").fetchone()[0] == "force_custom_plan"
    finally:
        conn.close()


def test_a_kept_session_reads_a_table_whose_name_looks_like_placeholders(lab) -> None:  # noqa: ANN001
    # Kept plans send the server's own $n form: a '%s', '%%' or '$1' inside a quoted name stays a name.
    name = "odd %s %% $1 q"
    with lab.connect() as conn:
        conn.execute(psycopg.sql.SQL("DROP TABLE IF EXISTS lab.{}").format(psycopg.sql.Identifier(name)))
        conn.execute(psycopg.sql.SQL("CREATE TABLE lab.{} (id bigint PRIMARY KEY, enqueued_at timestamptz NOT NULL "
                                     "DEFAULT now())").format(psycopg.sql.Identifier(name)))
        conn.execute(psycopg.sql.SQL("INSERT INTO lab.{} (id) SELECT generate_series(1, 3)").format(
            psycopg.sql.Identifier(name)))
    cfg = config_mod.parse({
        "targets": [{"name": "lab", "dialect": "postgresql", "url": lab.url, "password": lab.password}],
        "queues": [{"name": "odd", "target": "lab", "kind": "delete", "schema": "lab", "table": name, "key": "id",
                    "enqueued_at": "enqueued_at"}],
    })
    conn = kept_session(cfg)
    try:
        for _ in range(2):  # made, then reused
            res = cycle(cfg, conn)
            assert next(r.value for r in res.rows if r.queue == "odd" and r.metric == "depth") == 3
    finally:
        conn.close()
        with lab.connect() as c:
            c.execute(psycopg.sql.SQL("DROP TABLE lab.{}").format(psycopg.sql.Identifier(name)))


def test_a_partitioned_table_counts_its_partitions_rows(lab) -> None:  # noqa: ANN001
    # pg-boss keeps its jobs in a table partitioned by queue name: the parent has no rows of its own.
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.parted_due")
        conn.execute("CREATE TABLE lab.parted_due (id bigint NOT NULL, name text NOT NULL, due_at timestamptz NOT NULL, "
                     "enqueued_at timestamptz NOT NULL DEFAULT now()) PARTITION BY LIST (name)")
        conn.execute("CREATE TABLE lab.parted_due_a PARTITION OF lab.parted_due FOR VALUES IN ('a')")
        conn.execute("CREATE TABLE lab.parted_due_b PARTITION OF lab.parted_due FOR VALUES IN ('b')")
        conn.execute("CREATE INDEX ON lab.parted_due (due_at, id)")
    cfg = config_mod.parse({
        "targets": [{"name": "lab", "dialect": "postgresql", "url": lab.url, "password": lab.password}],
        "queues": [{"name": "parted", "target": "lab", "kind": "due", "schema": "lab", "table": "parted_due",
                    "key": "id", "enqueued_at": "enqueued_at", "due_column": "due_at"}],
    })
    conn = kept_session(cfg)
    try:
        cycle(cfg, conn)
        assert conn.kept_plans == {'"lab"."parted_due"': 0.0}
        with lab.connect() as c:
            c.execute("INSERT INTO lab.parted_due (id, name, due_at) SELECT g, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, "
                      "now() FROM generate_series(1, 3000) AS g")
            c.execute("SELECT pg_stat_force_next_flush()")
            c.execute("SELECT 1")
        cycle(cfg, conn)
        assert conn.kept_plans == {'"lab"."parted_due"': 3000.0}  # both partitions: the plans were made again
    finally:
        conn.close()
        with lab.connect() as c:
            c.execute("DROP TABLE lab.parted_due")

