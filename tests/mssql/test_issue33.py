"""Issue 33's items that only a real SQL Server can verify (see docs/security.md, section 5, and
docs/presets.md): the KILL guard matches a login_time read back through pyodbc, a collector waiting
behind a schema change gives up at its lock timeout and costs only that queue, and a login without
VIEW SERVER STATE sees only its own requests while `config check --live` names the grant.

Runs only when QUEUEOPS_TEST_MSSQL_URL names a server (tests/mssql/conftest.py); the URL's login must
be allowed to create and drop a login (sa on a disposable server). Every lab statement is a block of
sql/mssql/lab/issue33.sql or faults.sql.
"""

from __future__ import annotations

import os

import pytest

if not os.environ.get("QUEUEOPS_TEST_MSSQL_URL"):
    pytest.skip("QUEUEOPS_TEST_MSSQL_URL is not set: the SQL Server suite needs a real server (a SQLAlchemy "
                "mssql+pyodbc URL of a disposable database; see tests/mssql/conftest.py)", allow_module_level=True)

import secrets  # noqa: E402
import time  # noqa: E402

from collectors import registry, runner  # noqa: E402
from queueops import config as config_mod  # noqa: E402
from queueops import engine, livecheck, sessions, sqlfiles  # noqa: E402


def test_the_kill_guard_matches_the_login_time_it_read_and_kills(mssql) -> None:  # noqa: ANN001
    """Item 10: login_time (datetime) read through pyodbc and bound back (datetime2) compared equal on
    the server, at the database's own compatibility level, so the compare-and-set KILL runs."""
    srv, cfg, _conn = mssql
    victim = srv.connect()
    conn = engine.connect(cfg.targets[0], "action", cfg.base_dir)
    try:
        spid = int(srv.run(victim, "spid")[0]["spid"])
        sqlf = sqlfiles.load("mssql", "actions/terminate")
        (row,) = conn.execute(sqlf.render("session", {}, {"session_id": spid}))
        ident = {"session_id": spid, "session_start": row["session_start"]}
        assert conn.execute(sqlf.render("gone", {}, ident))[0]["present"] == 1  # before: 0 at level >= 130
        assert conn.execute(sqlf.render("kill", {"session_n": str(spid)}, ident))[0]["signalled"] == 1
        deadline = time.monotonic() + 10
        while conn.execute(sqlf.render("gone", {}, ident))[0]["present"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert conn.execute(sqlf.render("gone", {}, ident))[0]["present"] == 0
    finally:
        conn.close()
        victim.close()


def test_a_schema_change_costs_only_its_queue_and_the_collector_waits_its_lock_timeout(mssql) -> None:  # noqa: ANN001
    """Items 3 and 9: a session holding Sch-M on the lease table (an ALTER TABLE in a transaction);
    the depth collector's Sch-S request waits at most lock_timeout_ms (500) and gets error 1222, the
    other queues keep their depth, and the cycle does not last the statement timeout (10 s)."""
    srv, cfg, _conn = mssql
    holder = srv.connect(autocommit=False)
    try:
        srv.run(holder, "schema_change_hold", "issue33")
        started = time.monotonic()
        result = runner.run_collectors(cfg, cfg.targets[0], [registry.by_name("depth")])
        took = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()
    depth = {r.queue: r.value for r in result.rows if r.metric == "depth"}
    errors = {r.queue: r.note for r in result.rows if r.metric == runner.QUEUE_ERROR}
    assert {"delete", "status", "due", "ring"} <= set(depth), (depth, errors)
    assert "lease" not in depth and "1222" in errors["lease"], errors
    assert took < 5, took


def test_a_login_without_view_server_state_sees_only_itself_and_the_live_check_says_so(mssql, tmp_path) -> None:  # noqa: ANN001
    """Item 8: without VIEW SERVER STATE sys.dm_exec_requests shows the login's own request only (the
    figures of blocking_chains / lock_waiters would read "nothing"); config check --live says which
    metrics that disables and prints the GRANT."""
    srv, cfg, conn = mssql
    name = f"qo_blind_{secrets.token_hex(4)}"
    password = "Aa1!" + secrets.token_hex(12)
    frags = {"login": f"[{name}]", "password_literal": f"N'{password}'"}
    srv.run(conn, "create_login", "issue33", frags=frags)
    try:
        srv.run(conn, "create_user", "issue33", frags=frags)
        srv.run(conn, "grant_select", "issue33", frags=frags)
        from sqlalchemy.engine import make_url

        url = make_url(srv.url).set(username=name).render_as_string(hide_password=False)
        os.environ["QUEUEOPS_TEST_BLIND_PASSWORD"] = password
        text = (f'[[targets]]\nname = "sqlserver"\ndialect = "mssql"\nurl = "{url}"\n'
                'password = "env:QUEUEOPS_TEST_BLIND_PASSWORD"\n\n'
                '[[queues]]\nname = "lease"\ntarget = "sqlserver"\nkind = "lease"\nschema = "lab"\n'
                'table = "q_lease"\nkey = "id"\nenqueued_at = "created_at"\nlease_column = "processing_started_at"\n')
        path = tmp_path / "blind.toml"
        path.write_text(text)
        blind_cfg = config_mod.load(path)
        bconn = engine.connect(blind_cfg.targets[0], "check", blind_cfg.base_dir)
        try:
            other = srv.connect()  # another session with a running request would be invisible anyway
            try:
                seen = bconn.execute(sqlfiles.load("mssql", "lab/issue33").render("requests_seen"))[0]
            finally:
                other.close()
        finally:
            bconn.close()
        assert seen["seen"] == seen["own"] == 1
        report = livecheck.report_live(blind_cfg)
        lines = [f.line("blind.toml") for f in report.findings]
        vss = [line for line in lines if "lacks VIEW SERVER STATE" in line]
        assert vss and "silent zero" in vss[0] and f"GRANT VIEW SERVER STATE TO [{name}]" in vss[0], lines
    finally:
        srv.run(conn, "drop_user", "issue33", frags=frags)
        srv.run(conn, "drop_login", "issue33", frags=frags)


def test_the_persistent_version_store_is_read_where_the_server_has_it(mssql) -> None:  # noqa: ANN001
    """Item 6: on SQL Server 2019+ (and Azure SQL) oldest_snapshot also reports this database's ADR
    persistent version store; on an older server the statement never names the view and still runs."""
    srv, cfg, _conn = mssql
    result = runner.run_once(cfg, [registry.by_name("oldest_snapshot")])
    assert all(s.ok for s in result.status), [s.error for s in result.status]
    got = {r.metric: r for r in result.rows}
    conn = engine.connect(cfg.targets[0], "collect", cfg.base_dir)
    try:
        server = conn.execute(sessions.reading(cfg.targets[0]))[0]
    finally:
        conn.close()
    if runner.has_pvs(server):
        assert "persistent_version_store_kb" in got and "sys.dm_tran_persistent_version_store_stats" in \
            got["persistent_version_store_kb"].note
    else:
        assert "persistent_version_store_kb" not in got
