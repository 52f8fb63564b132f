"""SQL Server statements for real queue schemas, rendered exactly as queueops renders them and parsed
with sqlglot's ``tsql`` dialect (issue 13, "What was seen" 7): parameter limit, OUTPUT ... INTO, the
in-row filter, the lease error predicate, and an explicit default schema."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from collectors import registry, runner
from queueops import config as config_mod
from queueops import indexadvice, sqlfiles
from queueops.fragments import fragments_for

logging.getLogger("sqlglot").setLevel(logging.ERROR)

TARGET = ('[[targets]]\nname = "sql"\ndialect = "mssql"\n'
          'url = "mssql+pyodbc://queueops@db.example:1433/jobs?driver=FreeTDS"\n')

# Hangfire's JobQueue / Job, the seeds' SimpleQueue (no schema: dbo), Rebus and NServiceBus tables.
QUEUES = """
[[queues]]
name = "hangfire"
target = "sql"
kind = "status"
schema = "HangFire"
table = "Job"
key = "Id"
enqueued_at = "CreatedAt"
status_column = "StateName"
ready_values = ["Enqueued"]
processing_values = ["Processing"]
done_values = ["Succeeded", "Deleted"]
data_table = "State"
data_key = "JobId"

[[queues]]
name = "hangfire_jobqueue"
target = "sql"
kind = "lease"
schema = "HangFire"
table = "JobQueue"
key = "Id"
lease_column = "FetchedAt"

[[queues]]
name = "simple_queue"
target = "sql"
kind = "lease"
table = "SimpleQueue"
key = "Id"
enqueued_at = "CreatedAt"
lease_column = "ProcessingStartedAt"
error_column = "Errors"

[[queues]]
name = "rebus"
target = "sql"
kind = "delete"
schema = "dbo"
table = "Messages"
key = "id"
enqueued_at = "visible"

[[queues]]
name = "nservicebus"
target = "sql"
kind = "delete"
schema = "dbo"
table = "Orders"
key = "RowVersion"
"""


def load(tmp_path: Path, body: str) -> config_mod.Config:
    path = tmp_path / "mssql.toml"
    path.write_text(TARGET + body)
    return config_mod.load(path)


def parse(stmt: sqlfiles.Statement) -> list[exp.Expression]:
    trees = sqlglot.parse(stmt.sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
    assert trees and all(t is not None for t in trees)
    return trees  # type: ignore[return-value]


def placeholders(trees: list[exp.Expression]) -> int:
    return sum(len(list(t.find_all(exp.Placeholder))) for t in trees)


def test_every_collector_statement_for_real_schemas_parses_and_binds_every_placeholder(tmp_path: Path) -> None:
    cfg = load(tmp_path, QUEUES)
    target = cfg.targets[0]
    for c in registry.COLLECTORS:
        for stmt in runner.build_statements(c, target, cfg.queues):
            trees = parse(stmt)
            assert placeholders(trees) == len(stmt.params), c.name


def test_statements_stay_under_the_parameter_limit_at_any_number_of_queues(tmp_path: Path) -> None:
    many = "".join(QUEUES.split("[[queues]]")[1].replace('name = "hangfire"', f'name = "hangfire_{i}"')
                   .join(["[[queues]]", ""]) for i in range(300))
    cfg = load(tmp_path, many)
    target = cfg.targets[0]
    for name in ("depth", "oldest_age_s", "stuck_leases", "watermark_drift", "lock_waits", "ghost_records",
                 "fragmentation_pct"):
        single = runner.build_statement(registry.by_name(name), target, cfg.queues)
        stmts = runner.build_statements(registry.by_name(name), target, cfg.queues)
        if single is None:
            continue
        assert sum(len(s.params) for s in stmts) == len(single.params)
        assert all(len(s.params) <= runner.MSSQL_MAX_PARAMS < 2100 for s in stmts), name
        if len(single.params) > 2100:  # before: one statement SQL Server refuses (more than 2,100)
            assert len(stmts) > 1
        if name == "depth":  # parsing every part of every collector costs seconds; depth's is the largest
            for s in stmts:
                assert placeholders(parse(s)) == len(s.params)
    depth = runner.build_statements(registry.by_name("depth"), target, cfg.queues)
    assert len(depth) > 1  # 300 status queues really are past the limit in one statement
    # Every queue answered exactly once across the parts.
    names = [p for s in depth for p in s.params if isinstance(p, str) and p.startswith("hangfire_")]
    assert sorted(set(names)) == sorted(q.name for q in cfg.queues)


def test_actions_write_output_into_a_table_variable(tmp_path: Path) -> None:
    cfg = load(tmp_path, QUEUES)
    by = {q.name: q for q in cfg.queues}
    values = {"cutoff": "2026-01-01", "batch_n": 10, "processing_values": ["Processing"], "ready_value": "Enqueued",
              "done_values": ["Succeeded"], "item_ids": [1, 2], "new_value": 5, "old_value": 3, "limit_n": 10}
    cases = [("actions/requeue", "batch_lease_unfailed", by["simple_queue"]),
             ("actions/requeue", "batch_lease_attempts_unfailed", by["simple_queue"]),
             ("actions/requeue", "batch_lease", by["hangfire_jobqueue"]),
             ("actions/requeue", "batch_status", by["hangfire"]),
             ("actions/archive", "delete", by["hangfire"])]
    for name, block, q in cases:
        frags = {"status_changed_at": "[StateChangedAt]", **fragments_for(q, "mssql"), "attempts": "[Attempts]",
                 "age": "[CreatedAt]"}
        stmt = sqlfiles.load("mssql", name).render(block, frags, values)
        trees = parse(stmt)
        outputs = [t.find(exp.Returning) for t in trees if t.find(exp.Returning) is not None]
        assert len(outputs) == 1, (name, block)
        assert isinstance(outputs[0].args.get("into"), exp.Parameter), (name, block)  # INTO @queueops_out
        assert isinstance(trees[-1], exp.Select)
    wm = sqlfiles.load("mssql", "actions/watermark_reset").render(
        "apply", {"wm_table": "[dbo].[Watermark]", "wm_column": "[LowKey]"}, values)
    assert parse(wm)[-2].find(exp.Returning).args["into"] is not None
    # No OUTPUT without INTO anywhere in the T-SQL actions.
    for rel, text in sqlfiles.all_files("mssql"):
        if rel.startswith("actions/"):
            for line in text.splitlines():
                if line.lstrip().startswith("OUTPUT "):
                    assert " INTO @" in line, (rel, line)


def test_ghosts_and_fragmentation_read_in_row_data_and_size_the_mode_by_every_allocation_unit(tmp_path: Path) -> None:
    cfg = load(tmp_path, QUEUES)
    target = cfg.targets[0]
    for name in ("ghost_records", "fragmentation_pct"):
        stmt = runner.build_statement(registry.by_name(name), target, [cfg.queue("nservicebus")])
        assert stmt is not None
        trees = parse(stmt)
        dmf = [f for t in trees for f in t.find_all(exp.Anonymous) if f.name.lower() == "dm_db_index_physical_stats"]
        assert dmf
        text = stmt.sql
        assert text.count("alloc_unit_type_desc = N'IN_ROW_DATA'") == len(dmf)
        assert "SUM(p.used_page_count)" in text and "in_row_data_page_count" not in text


def test_a_lease_error_column_is_honoured_and_a_missing_schema_is_dbo(tmp_path: Path) -> None:
    cfg = load(tmp_path, QUEUES)
    target = cfg.targets[0]
    simple = cfg.queue("simple_queue")
    stuck = runner.build_statement(registry.by_name("stuck_leases"), target, [simple])
    assert stuck is not None
    where = [w.sql("tsql") for t in parse(stuck) for w in t.find_all(exp.Where)]
    assert sum("[Errors] IS NULL" in w for w in where) == 2, where  # the count and the oldest lease
    # missing_index is checked from the index catalog (filtered indexes included), no longer "not checked".
    assert "FROM sys.indexes AS i" in stuck.sql and "not checked on SQL Server" not in stuck.sql
    assert "N' IS NOT NULL)'" in stuck.sql
    no_error = runner.build_statement(registry.by_name("stuck_leases"), target, [cfg.queue("hangfire_jobqueue")])
    assert no_error is not None and "[Errors]" not in no_error.sql  # no error column mapped: {stuck_held} leaves it out
    requeue = sqlfiles.load("mssql", "actions/requeue").render(
        "count_lease_unfailed", fragments_for(simple, "mssql"), {"cutoff": "x", "limit_n": 5})
    assert "[Errors] IS NULL" in requeue.sql
    # No schema in config: [dbo] explicitly, never the login's default schema.
    for c in registry.COLLECTORS:
        stmt = runner.build_statement(c, target, [simple])
        if stmt is not None and "SimpleQueue" in stmt.sql:
            assert "[dbo].[SimpleQueue]" in stmt.sql and " [SimpleQueue]" not in stmt.sql, c.name
    assert runner.compiled(simple, "mssql").values["qualified_table"] == "[dbo].[SimpleQueue]"


def _rows(index_id: int, name: str, cols: list[str], filt: str | None = None) -> list[dict[str, object]]:
    """Rows as sql/mssql/catalog_indexes.sql returns them (one per key column)."""
    return [{"index_name": name, "index_id": index_id, "filter_definition": filt, "is_disabled": False,
             "column_name": c, "key_ordinal": i + 1, "is_descending_key": False} for i, c in enumerate(cols)]


def test_seek_or_scan_from_the_index_catalog_of_real_schemas(tmp_path: Path) -> None:
    cfg = load(tmp_path, QUEUES)
    catalogs = {
        # the seeds' SimpleQueue: a clustered GUID key and the filtered pop index only
        "simple_queue": _rows(1, "PK_SimpleQueue", ["Id"])
        + _rows(2, "IX_SIMPLEQUEUE_POP", ["ProcessingStartedAt", "CreatedAt"], "([ProcessingStartedAt] IS NULL)"),
        # Hangfire JobQueue: clustered primary key (Queue, Id)
        "hangfire_jobqueue": _rows(1, "PK_HangFire_JobQueue", ["Queue", "Id"]),
        # Rebus: clustered key leads with the priority
        "rebus": _rows(1, "PK_Messages", ["priority", "visible", "id"]),
        # Hangfire Job: clustered Id, IX on StateName filtered WHERE [StateName] IS NOT NULL (schema 6+)
        "hangfire": _rows(1, "PK_HangFire_Job", ["Id"])
        + _rows(2, "IX_HangFire_Job_StateName", ["StateName"], "([StateName] IS NOT NULL)"),
    }
    verdict = {}
    for name, rows in catalogs.items():
        q = cfg.queue(name)
        indexes = indexadvice.indexes_from_rows(rows)
        for collector in ("depth", "oldest_age_s", "stuck_leases"):
            need = indexadvice.needed(collector, q)
            if need is not None:
                verdict[(name, collector)] = (indexadvice.served(need, indexes),
                                              indexadvice.create_index(q, need, "mssql"))
    # The filtered pop index serves the free items in enqueue order, but cannot find leased rows.
    assert verdict[("simple_queue", "oldest_age_s")][0] is True
    online = " WITH (ONLINE = ON)  -- ONLINE = ON needs Enterprise, Developer or Azure SQL"  # edition unknown here
    assert verdict[("simple_queue", "stuck_leases")] == (
        False, "CREATE INDEX [IX_queueops_SimpleQueue_ProcessingStartedAt] ON [dbo].[SimpleQueue] "
               "([ProcessingStartedAt]) WHERE [ProcessingStartedAt] IS NOT NULL" + online)
    assert verdict[("hangfire_jobqueue", "stuck_leases")] == (
        False, "CREATE INDEX [IX_queueops_JobQueue_FetchedAt] ON [HangFire].[JobQueue] ([FetchedAt]) "
               "WHERE [FetchedAt] IS NOT NULL" + online)
    assert verdict[("rebus", "oldest_age_s")][0] is False and "([id])" in verdict[("rebus", "oldest_age_s")][1]
    # A count with no WHERE (delete) or with only the lease's IS NULL is bounded by the cap along any
    # index: no advice (issue 33, item 4: it advised ([Id]) on JobQueue and (id) on Rebus).
    assert ("rebus", "depth") not in verdict and ("hangfire_jobqueue", "depth") not in verdict
    # The filtered IX_HangFire_Job_StateName (WHERE [StateName] IS NOT NULL) serves StateName IN (...).
    assert verdict[("hangfire", "depth")][0] is True
    # Every fix parses as T-SQL.
    for _ok, fix in verdict.values():
        sqlglot.parse_one(fix, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
    # The catalog statement itself parses and binds one value.
    stmt = sqlfiles.load("mssql", "catalog_indexes").render(values={"qualified_table": "[dbo].[SimpleQueue]"})
    assert placeholders(parse(stmt)) == len(stmt.params) == 1


STATUS_QUEUES = """
[[queues]]
name = "odd_statuses"
target = "sql"
kind = "status"
table = "Jobs"
key = "Id"
enqueued_at = "CreatedAt"
status_column = "State"
status_changed_at = "ChangedAt"
ready_values = ["new", "prêt"]
processing_values = ["running"]
done_values = ["done"]

[[queues]]
name = "int_statuses"
target = "sql"
kind = "status"
table = "Work"
key = "Id"
enqueued_at = "CreatedAt"
status_column = "Code"
status_changed_at = "ChangedAt"
ready_values = [0]
processing_values = [1]
done_values = [2]
"""


def _status_in_lists(trees: list[exp.Expression], column: str) -> list[list[exp.Expression]]:
    """The elements of every ``<column> IN (...)`` in the statements."""
    return [list(i.expressions) for t in trees for i in t.find_all(exp.In)
            if isinstance(i.this, exp.Column) and i.this.name == column]


def _kind(e: exp.Expression) -> str:
    if isinstance(e, exp.Cast) and isinstance(e.this, exp.Placeholder):
        return e.to.sql("tsql")
    return "bound" if isinstance(e, exp.Placeholder) else f"unexpected {e.sql('tsql')}"


def test_text_values_are_compared_as_varchar_so_the_index_is_sought(tmp_path: Path) -> None:
    """pyodbc binds a str as nvarchar, which against a varchar status column converts the column
    (non-sargable under a SQL collation: a scan of the status index per count, per cycle). Every
    ``{status} IN (...)`` of the collectors and the actions casts an ASCII value to varchar (sought on
    varchar and nvarchar columns alike), and so does archive with the text keys it picked; a
    non-ASCII value and integers stay plain parameters."""
    from queueops import mapping
    from queueops.actions import archive, requeue, watermark
    from queueops.actions.model import ArchiveOptions

    cfg = load(tmp_path, STATUS_QUEUES)
    target, odd, ints = cfg.targets[0], cfg.queue("odd_statuses"), cfg.queue("int_statuses")
    seen = 0
    for name in ("depth", "oldest_age_s", "stuck_leases"):
        (stmt,) = runner.build_statements(registry.by_name(name), target, [odd, ints])
        trees = parse(stmt)
        assert placeholders(trees) == len(stmt.params), name
        # Values still travel as parameters, as they were configured: nothing is inlined.
        assert not any(isinstance(p, sqlfiles.Cast) for p in stmt.params)
        assert "'new'" not in stmt.sql and "'running'" not in stmt.sql
        for elements in _status_in_lists(trees, "State"):
            kinds = [_kind(e) for e in elements]
            assert kinds in (["VARCHAR(8000)", "bound"], ["VARCHAR(8000)"]), (name, kinds)  # "prêt" stays nvarchar
            seen += 1
        for elements in _status_in_lists(trees, "Code"):
            assert [_kind(e) for e in elements] == ["bound"], name
    assert seen >= 4  # depth's ready / processing / done, oldest_age_s, stuck_leases
    # The actions' WHERE clauses: requeue's UPDATE, archive's DELETE, the watermark's pending rows.
    compiled = mapping.compile_queue(odd, "mssql")
    values = requeue._values(compiled, "2026-01-01")
    stmt = sqlfiles.load("mssql", "actions/requeue").render(
        "batch_status", {"status_changed_at": "[ChangedAt]", **fragments_for(odd, "mssql")}, {**values, "batch_n": 10})
    assert [[_kind(e) for e in el] for el in _status_in_lists(parse(stmt), "State")] == [["VARCHAR(8000)"]]
    # Archive: the batch's DELETE re-checks the done statuses and seeks the picked keys (text keys cast too).
    steps = archive._steps(compiled, ArchiveOptions(), archive._frags(compiled, {}),
                           {"cutoff": "2026-01-01", "done_values": compiled.values["done_values"]},
                           10, ["k-1", "k-2", 3], binding={"keys": ["k-1", "k-2", 3], "last_key": None},
                           chunk=["k-1", "k-2", 3])
    pick = parse(steps[0].statement)  # the previewed keys the batch may take: text keys cast too
    assert [[_kind(e) for e in el] for el in _status_in_lists(pick, "Id")] == [["VARCHAR(8000)"] * 2 + ["bound"]]
    delete = parse(next(s.statement for s in steps if s.label == "delete queue rows"))
    assert [[_kind(e) for e in el] for el in _status_in_lists(delete, "State")] == [["VARCHAR(8000)"]]
    assert [[_kind(e) for e in el] for el in _status_in_lists(delete, "Id")] == [["VARCHAR(8000)"] * 2 + ["bound"]]
    assert watermark._pending(compiled.values)["pending_values"] == [
        sqlfiles.Cast("new", "varchar(8000)"), "prêt", sqlfiles.Cast("running", "varchar(8000)")]
    # PostgreSQL types the values in the statement itself (ARRAY[...]::{status_type}[]): no cast there.
    assert requeue._values(mapping.compile_queue(odd, "postgresql"), "2026-01-01")["processing_values"] == ["running"]


def test_a_cast_names_a_plain_type_only() -> None:
    stmt = sqlfiles.render("x IN (:v)", "postgresql", {}, {"v": [sqlfiles.Cast("a", "text"), 2]})
    assert (stmt.sql, stmt.params) == ("x IN (CAST(%s AS text), %s)", ("a", 2))
    for bad in ("varchar(8000)) OR 1=1 --", "varchar(max)", "nvarchar(4000) COLLATE x", ""):
        with pytest.raises(ValueError, match="plain SQL type"):
            sqlfiles.Cast("a", bad)
