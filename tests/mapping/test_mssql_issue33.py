"""Issue 33's SQL Server items that can be verified by reading the rendered statements (each test
fails on the code before the issue); what only a real server can verify is in tests/mssql."""

from __future__ import annotations

import logging
from pathlib import Path

import sqlglot
from sqlglot import exp

from collectors import registry, runner
from queueops import config as config_mod
from queueops import sqlfiles

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
    assert "SERVERPROPERTY('ProductMajorVersion')" in runner.session_setup(target).sql


def test_item10_the_kill_guard_converts_login_time_on_the_server() -> None:
    sqlf = sqlfiles.load("mssql", "actions/terminate")
    for block in ("kill", "gone"):
        stmt = sqlf.render(block, {"session_n": "57"}, {"session_id": 57, "session_start": "2026-01-01T00:00:00.003"})
        (where,) = [w for w in _where_text(stmt.sql) if "login_time" in w]
        assert "login_time = CAST(CAST(? AS DATETIME2(7)) AS DATETIME)" in where, where
