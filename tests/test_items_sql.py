"""The drill-down reads and requeue's selected keys rendered for both dialects, without a server:
every value bound (placeholders = parameters), identifiers quoted, T-SQL parsed by sqlglot tsql,
every read bounded by TOP / LIMIT (issue 32, item 6)."""

from __future__ import annotations

import pytest
import sqlglot

from queueops import config as config_mod
from queueops import items, mapping, sqlfiles
from queueops.actions import requeue

QUEUES = [
    {"name": "lease", "target": "t", "kind": "lease", "schema": "odd schema", "table": "jobs q", "key": "id",
     "enqueued_at": "created", "lease_column": "taken", "error_column": "err", "attempts_column": "tries",
     "owner_column": "worker", "max_attempts": 5},
    {"name": "plain", "target": "t", "kind": "lease", "table": "jobs", "key": "id", "enqueued_at": "created",
     "lease_column": "taken"},
    {"name": "status", "target": "t", "kind": "status", "table": "meta", "key": "id", "enqueued_at": "created",
     "status_column": "state", "status_changed_at": "changed", "ready_values": ["new"],
     "processing_values": ["running"]},
    {"name": "delete", "target": "t", "kind": "delete", "table": "del", "key": "id"},
    {"name": "due", "target": "t", "kind": "due", "table": "due", "key": "id", "due_column": "due_at"},
    {"name": "ring", "target": "t", "kind": "ring", "table": "slots", "key": "slot", "sequence_table": "seq",
     "push_column": "push", "pop_column": "pop", "capacity": 8},
]


def cfg(dialect: str) -> config_mod.Config:
    url = "postgresql://u@h:5432/d" if dialect == "postgresql" else "mssql+pyodbc://u@h:1433/d?driver=FreeTDS"
    return config_mod.parse({"targets": [{"name": "t", "dialect": dialect, "url": url}], "queues": QUEUES})


CASES = [(d, q, w) for d in ("postgresql", "mssql") for q in ("lease", "plain", "status", "delete", "due")
         for w in ("stuck", "waiting", "key")]


@pytest.mark.parametrize(("dialect", "queue", "which"), CASES)
def test_every_read_is_bounded_bound_and_quoted(dialect: str, queue: str, which: str) -> None:
    q = cfg(dialect).queue(queue)
    try:
        read = items.read_of(q, dialect, which, key="k-1" if which == "key" else None)
    except items.NotApplicable as exc:
        assert which == "stuck" and q.kind in ("delete", "due"), exc
        return
    sql = read.statement.sql
    marker = "%s" if dialect == "postgresql" else "?"
    assert sql.count(marker) == len(read.statement.params)
    assert "k-1" not in sql and "running" not in sql and "new'" not in sql  # values are bound, never inlined
    assert ("LIMIT" in sql) if dialect == "postgresql" else ("TOP (" in sql)
    if queue == "lease":
        assert ('"odd schema"."jobs q"' if dialect == "postgresql" else "[odd schema].[jobs q]") in sql
    if dialect == "mssql":
        assert sqlglot.parse(sql.replace("?", "1"), read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
    if which == "stuck" and queue in ("lease", "plain"):
        assert read.block == "stuck_lease"
    if which == "stuck" and queue == "lease":  # maps max_attempts: neither failed nor exhausted
        assert "NOT " + mapping.compile_queue(q, dialect).fragments["exhausted"] in sql


@pytest.mark.parametrize("dialect", ["postgresql", "mssql"])
@pytest.mark.parametrize("queue", ["lease", "plain", "status"])
def test_the_stuck_list_reads_the_rule_stuck_leases_counts_by(dialect: str, queue: str) -> None:
    """One compiled stuck rule: the text of the queue's {stuck_if} (and {stuck_held}) is in both the
    stuck_leases statement and the drill-down's stuck read, so the two cannot count different items."""
    from collectors import registry, runner

    c = cfg(dialect)
    q = c.queue(queue)
    compiled = mapping.compile_queue(q, dialect)
    count = runner.build_statement(registry.by_name("stuck_leases"), c.targets[0], [q])
    listed = items.read_of(q, dialect, "stuck").statement.sql
    assert count is not None
    rule = [compiled.fragments["stuck_if"], *([compiled.fragments["stuck_held"]] if q.kind == "lease" else [])]
    for text in rule:
        escaped = text.replace("%", "%%") if dialect == "postgresql" else text
        assert escaped in count.sql and escaped in listed, text


def test_limits_and_what_does_not_apply() -> None:
    q = cfg("postgresql").queue("plain")
    assert items.read_of(q, "postgresql", "stuck", limit=10**9).statement.params[-1] == items.MAX_LIMIT
    ring = cfg("postgresql").queue("ring")
    for which in ("stuck", "waiting", "key"):
        with pytest.raises(items.NotApplicable):
            items.read_of(ring, "postgresql", which)


@pytest.mark.parametrize("dialect", ["postgresql", "mssql"])
def test_requeue_keys_restrict_every_block_and_stay_bound(dialect: str) -> None:
    q = cfg(dialect).queue("plain")
    sqlf = sqlfiles.load(dialect, "actions/requeue")
    compiled = mapping.compile_queue(q, dialect)
    frags = dict(compiled.names)
    values = {**requeue._values(compiled, "2026-01-01T00:00:00+00:00"), "batch_n": 10, "limit_n": 5,
              "sample_n": 3}
    for block in ("count_lease", "sample_lease", "batch_lease"):
        stmt = requeue._render(sqlf, block, frags, values, compiled.bind(["k-1", 7]))
        assert "k-1" not in stmt.sql and 7 in stmt.params
        marker = "%s" if dialect == "postgresql" else "?"
        assert stmt.sql.count(marker) == len(stmt.params)
        if dialect == "mssql":
            assert "IN (CAST(? AS varchar(8000)), ?)" in stmt.sql  # a text key sought as varchar, as archive's
            assert sqlglot.parse(stmt.sql.replace("?", "1"), read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
        else:
            assert 'AND "id" IN (%s, %s)' in stmt.sql
        assert requeue._render(sqlf, block, frags, values, None).sql == sqlf.render(block, frags, values).sql


@pytest.mark.parametrize("preset", ["river", "oban", "pgboss12", "pgqueuer", "procrastinate"])
def test_the_waiting_list_of_a_library_reads_as_its_age_does(preset: str) -> None:
    """Each library's oldest-waiting list is the age's own read (block waiting_reads, or Oban's
    status_follow without the catalog), in a schema whose name needs quoting: quoted, bounded by the cap inside
    and the list's LIMIT outside, the list's limit bound; with River's fetch index known (catalog
    types), the skip walk of that index, as oldest_age_s reads it."""
    from queueops import coltypes

    c = config_mod.parse({"targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
                          "queues": [{"name": "q", "target": "t", "preset": preset, "schema": "odd schema"}]})
    q = c.queue("q")
    read = items.read_of(q, "postgresql", "waiting")
    sql = read.statement.sql
    assert read.block == ("waiting_status" if preset == "river" else
                          "waiting_status_follow" if preset == "oban" else "waiting_reads"), read.block
    assert '"odd schema".' in sql and sql.rstrip().endswith("LIMIT %s") and sql.count("%s") == len(read.statement.params)
    assert read.statement.params[-1] == items.LIMIT
    if preset != "river":  # the inner reads stop at the cap, inlined by the age's reads or bound
        assert f"LIMIT {items.CAP}" in sql or items.CAP in read.statement.params
    table = coltypes.qualified(q.schema_, q.table, "postgresql")
    fetch = coltypes.ColumnType(table, q.status_column, "public", "river_job_state", "river_job_state", "E",
                                tuple(q.ready_values), "r", True, ("queue", "priority"), (),
                                ((("state", True), ("queue", True), ("priority", True), (q.enqueued_at, True),
                                  ("id", True)),))
    if preset in ("river", "oban"):
        typed = items.read_of(q, "postgresql", "waiting", types={(table, q.status_column): fetch})
        assert typed.block == "waiting_reads" and "WITH RECURSIVE k" in typed.statement.sql
        assert f"LIMIT {items.LIMIT}) AS " in typed.statement.sql  # at most the list's length per prefix


@pytest.mark.parametrize(("dialect", "queue", "block"), [
    ("postgresql", {"preset": "pgmq", "table": "q_orders"}, "waiting_due_enqueued"),
    ("postgresql", {"preset": "que"}, "waiting_due"),
    ("mssql", {"preset": "masstransit", "partition": {"column": "QueueId", "value": 7}}, "waiting_due_follow"),
    ("mssql", {"preset": "rebus", "table": "Orders"}, "waiting_due"),
    ("postgresql", {**QUEUES[0], "runnable_at": "run_at"}, "waiting_lease_follow_runnable"),
    ("mssql", {**QUEUES[0], "runnable_at": "run_at"}, "waiting_lease_follow_runnable"),
    ("mssql", {**QUEUES[2], "runnable_at": "run_at", "max_attempts": 3, "attempts_column": "tries"}, "waiting_status_follow_runnable"),
    ("mssql", {**QUEUES[2], "max_attempts": 3, "attempts_column": "tries"}, "waiting_status_follow"),
    ("postgresql", {**QUEUES[2], "max_attempts": 3, "attempts_column": "tries"}, "waiting_status_follow"),
    ("mssql", {**QUEUES[2], "order": "heap"}, "waiting_status_heap"),
    ("mssql", {**QUEUES[3], "order": "heap", "enqueued_at": "at"}, "waiting_delete_heap"),
    ("postgresql", {**QUEUES[3], "order": "heap", "enqueued_at": "at"}, "waiting_delete_heap"),
])
def test_each_kinds_waiting_list_is_read_as_its_age(dialect: str, queue: dict[str, object],
                                                               block: str) -> None:
    """The list's block follows the age's: PGMQ's from the enqueue order (its age is the oldest
    message, read or not), MassTransit's below MaxDeliveryCount, a lease or status queue with
    runnable_at from the runnable time, one with max_attempts below it (T-SQL parsed); every value
    bound."""
    url = "postgresql://u@h:5432/d" if dialect == "postgresql" else "mssql+pyodbc://u@h:1433/d?driver=FreeTDS"
    q = config_mod.parse({"targets": [{"name": "t", "dialect": dialect, "url": url}],
                          "queues": [{**queue, "name": "q", "target": "t"}]}).queue("q")
    read = items.read_of(q, dialect, "waiting")
    sql = read.statement.sql
    assert read.block == block
    marker = "%s" if dialect == "postgresql" else "?"
    assert sql.count(marker) == len(read.statement.params)
    if dialect == "mssql":
        assert sqlglot.parse(sql.replace("?", "1"), read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
    if "follow" in block:  # items at their attempt limit are left out, as the age leaves them
        assert mapping.compile_queue(q, dialect).fragments["exhausted"] in sql


@pytest.mark.parametrize("dialect", ["postgresql", "mssql"])
def test_every_block_the_age_is_read_by_has_its_list(dialect: str) -> None:
    """A block added to oldest_age_s.sql without its list in items.sql would leave the drill-down
    reading the kind's plain list, which disagrees with the age: each has one (a ring has none)."""
    ages = sqlfiles.load(dialect, "oldest_age_s")
    lists = sqlfiles.load(dialect, "items")
    for block in ages.blocks:
        if block == "ring":
            continue
        listed = items.LIST_OF_AGE.get(block)
        assert listed is not None, f"{dialect} oldest_age_s block {block!r} has no list in items.LIST_OF_AGE"
        assert lists.has_block(listed) or lists.has_block(f"waiting_{block}"), (dialect, block, listed)


@pytest.mark.parametrize(("dialect", "queue", "order"), [
    ("postgresql", {**QUEUES[0], "runnable_at": "run_at"}, '"run_at"'),
    ("mssql", {**QUEUES[0], "runnable_at": "run_at"}, "[run_at], [id]"),
    ("mssql", {**QUEUES[2], "runnable_at": "run_at", "max_attempts": 3, "attempts_column": "tries"},
     "[state], [run_at], [id]"),
    ("mssql", {**QUEUES[0], "runnable_at": "run_at", "order": "heap"}, "[run_at]"),
])
def test_the_items_without_a_runnable_time_are_read_in_one_order_by_the_age_and_its_list(
        dialect: str, queue: dict[str, object], order: str) -> None:
    """In the NULL range of a runnable column the column is no order: the age and the list read it
    in {runnable_null_order}, the same order, so the list's first row is the age's item. SQL Server:
    the runnable column then the key (a nonclustered index on it carries the clustering key, so it
    serves that order as it is); the key only where it is the age's order (not heap). PostgreSQL
    without the catalog types: the runnable column, as before (tests/mapping reads the key order
    once the types are read)."""
    url = "postgresql://u@h:5432/d" if dialect == "postgresql" else "mssql+pyodbc://u@h:1433/d?driver=FreeTDS"
    q = config_mod.parse({"targets": [{"name": "t", "dialect": dialect, "url": url}],
                          "queues": [{**queue, "name": "q", "target": "t"}]}).queue("q")
    c = mapping.compile_queue(q, dialect)
    first = mapping.render_first(sqlfiles.load(dialect, "oldest_age_s"), c)
    assert first is not None and first[0].endswith("_follow_runnable")
    listed = items.read_of(q, dialect, "waiting").statement.sql

    def null_range_order(sql: str) -> str:
        tail = sql[sql.index("IS NULL", sql.index("run_at] <=" if dialect == "mssql" else '"run_at" <=')):]
        return " ".join(tail[tail.index("ORDER BY") + 9:].split(")")[0].split(" LIMIT")[0].split())

    assert null_range_order(first[1].sql) == null_range_order(listed) == order
