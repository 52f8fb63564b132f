"""The SQL Server integration suite's fixtures: a real server named by QUEUEOPS_TEST_MSSQL_URL.

The URL is a SQLAlchemy ``mssql+pyodbc`` URL of a database the suite may drop and create tables
in (schema ``lab``), e.g.
``mssql+pyodbc://sa@localhost:1433/queueops_test?driver=ODBC+Driver+18+for+SQL+Server&TrustServerCertificate=yes``.
The password may be in the URL or in ``QUEUEOPS_TEST_MSSQL_PASSWORD``. Every statement the suite
runs is a block of ``sql/mssql/lab/*.sql``; nothing here fakes a server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from queueops import config as config_mod
from queueops import engine, sqlfiles

URL_ENV = "QUEUEOPS_TEST_MSSQL_URL"
PASSWORD_ENV = "QUEUEOPS_TEST_MSSQL_PASSWORD"
LEASE_TIMEOUT_S = 2
SQL_TXN_SS_SNAPSHOT = 0x20  # SQL Server's ODBC isolation level SNAPSHOT (msodbcsql's sqlncli.h)


def split_url() -> tuple[str, str | None]:
    """The URL without its password, and the password (from the URL or the environment)."""
    from sqlalchemy.engine import make_url

    url = make_url(os.environ[URL_ENV])
    password = url.password or os.environ.get(PASSWORD_ENV)
    return url.set(password=None).render_as_string(hide_password=False), password


@dataclass
class Server:
    url: str
    password: str | None

    def connect(self, autocommit: bool = True) -> Any:
        import pyodbc

        return pyodbc.connect(engine.odbc_connection_string(self.url, self.password), autocommit=autocommit)

    def run(self, conn: Any, block: str, file: str = "faults", frags: dict[str, str] | None = None,
            **values: Any) -> list[dict[str, Any]]:
        """Run one block of sql/mssql/lab/<file>.sql on ``conn``; the first result's rows."""
        stmt = sqlfiles.load("mssql", f"lab/{file}").render(block, frags or {}, values)
        cur = conn.cursor()
        cur.execute(stmt.sql, *stmt.params) if stmt.params else cur.execute(stmt.sql)
        while cur.description is None and cur.nextset():
            pass
        rows = [dict(zip([d[0] for d in cur.description], r, strict=False)) for r in cur.fetchall()] \
            if cur.description else []
        cur.close()
        return rows

    def config(self) -> config_mod.Config:
        os.environ[PASSWORD_ENV] = self.password or ""
        lab = {"target": "sqlserver", "schema": "lab", "lease_timeout_s": LEASE_TIMEOUT_S}
        return config_mod.parse({
            "targets": [{"name": "sqlserver", "dialect": "mssql", "url": self.url,
                         "password": f"env:{PASSWORD_ENV}", "lock_timeout_ms": 500, "statement_timeout_ms": 10_000}],
            "queues": [
                {**lab, "name": "delete", "kind": "delete", "table": "q_delete", "key": "id",
                 "enqueued_at": "enqueued_at", "watermark": {"table": "q_delete_watermark", "column": "low_key"}},
                {**lab, "name": "status", "kind": "status", "table": "q_status_meta", "data_table": "q_status_data",
                 "data_key": "id", "key": "id", "enqueued_at": "enqueued_at", "status_column": "status",
                 "status_changed_at": "status_changed_at", "attempts_column": "attempts"},
                {**lab, "name": "lease", "kind": "lease", "table": "q_lease", "key": "id", "enqueued_at": "created_at",
                 "lease_column": "processing_started_at", "error_column": "errors", "attempts_column": "attempts"},
                {**lab, "name": "due", "kind": "due", "table": "q_due", "key": "id", "enqueued_at": "enqueued_at",
                 "due_column": "due_at"},
                {**lab, "name": "ring", "kind": "ring", "table": "q_ring_slot", "key": "slot",
                 "enqueued_at": "enqueued_at", "sequence_table": "q_ring_seq", "push_column": "push_seq",
                 "pop_column": "pop_seq", "refcount_column": "reference_count", "capacity": 1024},
            ],
        })


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    url, password = split_url()
    srv = Server(url, password)
    conn = srv.connect()
    try:
        srv.run(conn, "drop", "schema")
        if srv.run(conn, "schema_id", "schema")[0]["schema_id"] is None:
            srv.run(conn, "create_schema", "schema")
        srv.run(conn, "tables", "schema")
        srv.run(conn, "seed", "schema")
        srv.run(conn, "snapshot_on", "schema")
        yield srv
    finally:
        srv.run(conn, "drop", "schema")
        conn.close()


@pytest.fixture()
def mssql(server: Server) -> Iterator[tuple[Server, config_mod.Config, Any]]:
    """The lab emptied, its config, and an autocommit admin connection."""
    conn = server.connect()
    server.run(conn, "reset")
    try:
        yield server, server.config(), conn
    finally:
        conn.close()
