"""Issue 33's SQL Server items that can be verified by reading the rendered statements (each test
fails on the code before the issue); what only a real server can verify is in tests/mssql."""

from __future__ import annotations

import logging
from pathlib import Path

import sqlglot
from sqlglot import exp

from collectors import registry, runner
from queueops import config as config_mod
from queueops import sessions, sqlfiles

logging.getLogger("sqlglot").setLevel(logging.ERROR)
ROOT = Path(__file__).resolve().parents[2]


def _cfg(name: str) -> config_mod.Config:
    return config_mod.load(ROOT / "examples" / "mssql" / f"{name}.toml")


def _where_text(sql: str) -> list[str]:
    return [w.sql("tsql") for t in sqlglot.parse(sql, read="tsql") for w in t.find_all(exp.Where)]


def test_item6_terminate_offers_a_snapshot_holder_of_this_database_only() -> None:
    text = sqlfiles.load("mssql", "actions/terminate").block("candidates")
    snap = text[text.index("snap AS ("):text.index("causes AS (")]
    assert "dbt.database_id = DB_ID()" in snap and "ss.database_id = DB_ID()" in snap
    assert "ORDER BY sn.is_snapshot DESC, sn.elapsed_time_seconds DESC" in snap


def test_item6_the_persistent_version_store_is_read_where_the_server_has_it() -> None:
    target = _cfg("rebus").targets[0]
    c = registry.by_name("oldest_snapshot")
    old = runner.build_statement(c, target, [], server={"major_version": 14, "engine_edition": 3})
    new = runner.build_statement(c, target, [], server={"major_version": 16, "engine_edition": 3})
    azure = runner.build_statement(c, target, [], server={"major_version": 12, "engine_edition": 5})
    assert old is not None and new is not None and azure is not None
    assert "persistent_version_store" not in old.sql  # a 2017 server cannot compile the view's name
    assert new.sql == azure.sql and "sys.dm_tran_persistent_version_store_stats AS pvs WHERE pvs.database_id = DB_ID()" in new.sql
    assert "'persistent_version_store_kb'" in new.sql
    sqlglot.parse(new.sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
    # The collector session reads the version and edition that choose it.
    assert "SERVERPROPERTY('ProductMajorVersion')" in sessions.reading(target).sql


def test_item10_the_kill_guard_converts_login_time_on_the_server() -> None:
    sqlf = sqlfiles.load("mssql", "actions/terminate")
    for block in ("kill", "gone"):
        stmt = sqlf.render(block, {"session_n": "57"}, {"session_id": 57, "session_start": "2026-01-01T00:00:00.003"})
        (where,) = [w for w in _where_text(stmt.sql) if "login_time" in w]
        assert "login_time = CAST(CAST(? AS DATETIME2(7)) AS DATETIME)" in where, where


def test_item7_no_openjson_the_catalog_types_pairs_travel_as_xml() -> None:
    """OPENJSON needs compatibility level 130; on an older level --live failed the whole target."""
    import xml.etree.ElementTree as ET

    from queueops import coltypes

    for rel, text in sqlfiles.all_files("mssql"):
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
        assert "OPENJSON" not in code.upper(), rel
    pairs = [("[dbo].[Jobs]", "Id"), ("[odd schema].[a&b<c>\"d']", "col'\"&<>")]
    stmt = coltypes._statement("mssql", pairs)  # noqa: SLF001
    (xml,) = stmt.params
    assert [(p.get("t"), p.get("c")) for p in ET.fromstring(f"<r>{xml}</r>")] == pairs
    assert "CAST(? AS xml)" in stmt.sql and ".nodes('/p')" in stmt.sql
    sqlglot.parse(stmt.sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)


SERVER = {"major_version": 16, "product_version": "16.0.4135.4", "engine_edition": 2, "edition": "Standard Edition",
          "compatibility_level": 120, "is_read_committed_snapshot_on": True, "snapshot_isolation_state": 0,
          "login_name": "qo_monitor", "user_name": "qo_monitor", "database_name": "Jobs", "view_server_state": 1,
          "alter_any_connection": 0, "view_database_state": 1, "kill_database_connection": None}


def test_item7_version_edition_and_compatibility_level_are_said() -> None:
    from queueops import mssqlcheck

    line = mssqlcheck.describe("sql", SERVER, "collector")
    assert "compatibility level 120" in line and "online index operations no" in line
    assert mssqlcheck.version_checks(SERVER) == []
    old = mssqlcheck.version_checks({**SERVER, "major_version": 12, "product_version": "12.0.6024.0"})
    assert old and old[0].severity == "error" and "2016 (13.x) is the minimum" in old[0].reason
    assert mssqlcheck.online_index({**SERVER, "engine_edition": 3}) and not mssqlcheck.online_index(SERVER)


def test_item8_each_missing_permission_names_what_it_disables_and_the_grant() -> None:
    from queueops import mssqlcheck

    cfg = _cfg("simple_queue")
    q = cfg.queues[0]
    blind = {**SERVER, "view_server_state": 0}
    (c,) = mssqlcheck.server_checks(blind, action=False)
    assert c.severity == "error" and "silent zero" in c.reason and "blocking_chains" in c.reason
    assert c.fix == "USE master; GRANT VIEW SERVER STATE TO [qo_monitor]"
    nodb = mssqlcheck.server_checks({**SERVER, "view_database_state": 0}, action=False)
    assert [x.fix for x in nodb] == ["GRANT VIEW DATABASE STATE TO [qo_monitor]"] and "depth" in nodb[0].reason
    # Azure SQL Database: no server-level permissions; VIEW DATABASE STATE or ##MS_ServerStateReader##.
    azure = {**SERVER, "engine_edition": 5, "view_server_state": None, "alter_any_connection": None,
             "view_database_state": 0, "kill_database_connection": 0}
    (a,) = mssqlcheck.server_checks(azure, action=False)
    assert "GRANT VIEW DATABASE STATE TO [qo_monitor]" in a.fix and "##MS_ServerStateReader##" in a.fix
    kills = [x.fix for x in mssqlcheck.server_checks(azure, action=True) if "KILL" in x.reason]
    assert kills == ["GRANT KILL DATABASE CONNECTION TO [qo_monitor]"]
    assert [x.fix for x in mssqlcheck.server_checks(SERVER, action=True)] == [
        "USE master; GRANT ALTER ANY CONNECTION TO [qo_monitor]"]
    rights = {"can_select": 0, "can_update": 0, "can_delete": 1, "can_insert": 1, "can_alter": 0}
    (sel,) = mssqlcheck.table_checks(q, rights, SERVER, action=False, table="[dbo].[SimpleQueue]")
    assert sel.severity == "error" and sel.fix == "GRANT SELECT ON [dbo].[SimpleQueue] TO [qo_monitor]"
    acts = mssqlcheck.table_checks(q, rights, SERVER, action=True, table="[dbo].[SimpleQueue]")
    assert [x.reason.split(": ")[1] for x in acts] == ["requeue fails", "rebuild (ALTER INDEX) fails", "every preview fails"]
    assert mssqlcheck.table_checks(q, dict.fromkeys(rights), SERVER, action=False, table="x") == []  # no table


class _Recorder:
    """A session that records the statements an action's plan renders and answers each with the
    rows its reader expects (no database: only the rendering is under test)."""

    def __init__(self, answers: dict[str, list[dict[str, object]]]) -> None:
        self.sent: list[sqlfiles.Statement] = []
        self.answers = answers

    def run(self, stmt: sqlfiles.Statement) -> list[dict[str, object]]:
        self.sent.append(stmt)
        return next((rows for marker, rows in self.answers.items() if marker in stmt.sql), [])


def test_item11_archive_move_tables_are_schema_qualified() -> None:
    """INSERT INTO [JobsArchive] went to the action login's default schema: the archive tables are
    now qualified with the archive schema, else the queue's, else dbo."""
    import datetime as dt

    from queueops.actions import archive
    from queueops.actions.context import PlanContext
    from queueops.actions.model import ArchiveOptions

    cfg = config_mod.parse(__import__("tomllib").loads(
        '[[targets]]\nname = "sql"\ndialect = "mssql"\nurl = "mssql+pyodbc://u@h/db?driver=x"\n'
        '[[queues]]\nname = "jobs"\ntarget = "sql"\nkind = "status"\ntable = "Jobs"\nkey = "Id"\n'
        'enqueued_at = "CreatedAt"\nstatus_column = "State"\nstatus_changed_at = "ChangedAt"\n'))
    cols = [{"name": "Id", "type": "bigint", "is_identity": False}]
    rec = _Recorder({"AS cutoff": [{"cutoff": dt.datetime(2026, 1, 1), "db_now": dt.datetime(2026, 1, 2)}],
                     "sys.columns": cols})
    ctx = PlanContext(cfg, cfg.targets[0], cfg.queues[0],
                      ArchiveOptions(mode="move", archive_table="JobsArchive"), rec)  # type: ignore[arg-type]
    plan = archive.plan(ctx)
    assert plan.observed["archive"]["archive_table"] == "[dbo].[JobsArchive]"
    assert any("'[dbo].[JobsArchive]'" in repr(s.params) for s in rec.sent)  # its columns read qualified


def test_item11_the_cli_text_preview_shows_sql_as_the_server_receives_it() -> None:
    import io

    from queueops.actions.model import Preview, Step
    from queueops.commands.act import _print_preview

    stmt = sqlfiles.render("SELECT 1 WHERE x LIKE 'a%' AND {c} > 0", "postgresql", {"c": '"c%d"'}, {})
    assert "%%" in stmt.sql  # psycopg's escaping
    out = io.StringIO()
    _print_preview(Preview(action="requeue", queue="q", target="t", dialect="postgresql", summary="s",
                           steps=[Step("batch", stmt)], rows=[], row_count=0, warnings=[], destructive=False), out)
    assert "LIKE 'a%'" in out.getvalue() and '"c%d"' in out.getvalue() and "%%" not in out.getvalue()


def test_item11_smaller_statements() -> None:
    """Failed rows of a lease queue counted apart (not leased), fragmentation read for the clustered
    index or heap only and a heap not judged (act rebuild skips it), leaf_ghosts a counter."""
    from queueops import catalog

    cfg = _cfg("simple_queue")
    target, q = cfg.targets[0], cfg.queues[0]
    (depth,) = runner.build_statements(registry.by_name("depth"), target, [q])
    assert "'count_failed'" in depth.sql and "WHEN [Errors] IS NOT NULL AND [ProcessingStartedAt] IS NOT NULL" in depth.sql
    assert "n.total - n.ready - n.failed" in depth.sql
    sqlglot.parse(depth.sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
    (frag,) = runner.build_statements(registry.by_name("fragmentation_pct"), target, [q])
    assert "sys.dm_db_index_physical_stats(DB_ID(), o.oid, o.base_id, NULL, o.mode)" in frag.sql
    assert "CASE WHEN c.index_id = 0 THEN NULL ELSE c.frag END" in frag.sql
    assert catalog.get("leaf_ghosts_total").kind == "counter" and catalog.get("leaf_ghosts") is None
    (waits,) = runner.build_statements(registry.by_name("lock_waits"), target, [q])
    assert "'leaf_ghosts_total'" in waits.sql


def test_item9_the_docs_say_what_a_collector_can_hold_and_the_session_bounds_its_waits() -> None:
    """A READ UNCOMMITTED statement still holds Sch-S for its run; a queued Sch-M (and every dequeuer
    behind it) waits for it. The docs said collectors "cannot block a dequeuer": they now say how
    long they can (at most the statement's time), and every collector session sets LOCK_TIMEOUT."""
    readme = (ROOT / "README.md").read_text()
    security = (ROOT / "docs" / "security.md").read_text()
    assert "can never block a dequeuer" not in readme and "cannot block a dequeuer" not in security
    assert "Sch-S" in security and "Sch-M" in security and "statement_timeout_ms" in security
    setup = sessions.reading(_cfg("rebus").targets[0]).sql
    assert "SET LOCK_TIMEOUT 1000;" in setup


def test_item11_requeue_says_when_its_batches_may_escalate_to_a_table_lock() -> None:
    """Without an index leading with the lease column, a requeue batch reads and sorts every stuck item
    under UPDLOCK: the preview says that past ~5,000 row locks SQL Server may escalate to a table lock
    (blocking every dequeuer), and names the index; with the index, nothing is said."""
    import datetime as dt

    from queueops.actions import requeue
    from queueops.actions.context import PlanContext
    from queueops.actions.model import RequeueOptions

    cfg = _cfg("simple_queue")
    q = cfg.queues[0]

    def ix(name: str, index_id: int, cols: list[str], filt: str | None = None) -> list[dict[str, object]]:
        return [{"index_name": name, "index_id": index_id, "filter_definition": filt, "is_disabled": False,
                 "column_name": c, "key_ordinal": i + 1, "is_descending_key": False} for i, c in enumerate(cols)]

    pop = ix("PK_SimpleQueue", 1, ["Id"]) + ix("IX_SIMPLEQUEUE_POP", 2, ["ProcessingStartedAt", "CreatedAt"],
                                                "([ProcessingStartedAt] IS NULL)")
    leased = pop + ix("IX_lease", 3, ["ProcessingStartedAt"])
    for indexes, warned in ((pop, True), (leased, False)):
        rec = _Recorder({"AS cutoff": [{"cutoff": dt.datetime(2026, 1, 1), "db_now": dt.datetime(2026, 1, 2)}],
                         "AS ahead_s": [{"ahead_s": -5.0}],
                         "ic.key_ordinal": indexes,
                         "AS not_null": [{"column_name": "ProcessingStartedAt", "not_null": False, "comment": ""}],
                         "COUNT(*) AS n": [{"n": 12_000}]})
        ctx = PlanContext(cfg, cfg.targets[0], q, RequeueOptions(), rec)  # type: ignore[arg-type]
        warnings = requeue.plan(ctx).preview.warnings
        said = [w for w in warnings if "escalate to a table lock" in w]
        assert bool(said) is warned, warnings
        if warned:
            assert "CREATE INDEX [IX_queueops_SimpleQueue_ProcessingStartedAt]" in said[0]
