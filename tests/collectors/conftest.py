"""Fixtures for the collector tests: the shared lab with short lease timeouts, and helpers.

The lab fixture (tests/conftest.py) is one real PostgreSQL per test session. These tests use a
copy of its config with lease timeouts of a few seconds, so a stuck lease shows without waiting
the lab's 20-30 s.
"""

from __future__ import annotations

import contextlib
import re
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from collectors import registry, runner
from queueops import config as config_mod
from queueops.rows import SnapshotRow, StatusRow

LEASE_TIMEOUT_S = 2


def short_config(lab_config_path: Path, lease_timeout_s: float = LEASE_TIMEOUT_S) -> Path:
    """A copy of the lab config whose queues all time leases out after ``lease_timeout_s``."""
    text = re.sub(r"^lease_timeout_s = .*$", f"lease_timeout_s = {lease_timeout_s}",
                  lab_config_path.read_text(), flags=re.M)
    path = lab_config_path.parent / "collectors-test.toml"
    path.write_text(text)
    return path


@dataclass
class Collected:
    rows: list[SnapshotRow]
    status: list[StatusRow]
    round_trips: int

    def value(self, queue: str, metric: str) -> float | None:
        return self.row(queue, metric).value

    def row(self, queue: str, metric: str) -> SnapshotRow:
        found = [r for r in self.rows if r.queue == queue and r.metric == metric]
        assert len(found) == 1, f"expected one {queue}/{metric} row, got {found}"
        return found[0]

    def ok(self, collector: str) -> StatusRow:
        st = [s for s in self.status if s.collector == collector]
        assert len(st) == 1
        return st[0]


def collect(cfg: config_mod.Config, *names: str) -> Collected:
    """One real cycle of the named collectors (default: all) against the config's targets."""
    chosen: Sequence[registry.Collector] | None = [registry.by_name(n) for n in names] or None
    res = runner.run_once(cfg, chosen)
    return Collected(res.rows, res.status, res.round_trips)


def one_queue(lab, queue: dict[str, object], **target: object) -> config_mod.Config:  # noqa: ANN001
    """The lab's target with one queue on a table of the test's own in schema ``lab``; ``target``
    overrides the target's fields (another login's url and password, shorter timeouts)."""
    t = {"name": "lab", "dialect": "postgresql", "url": lab.url, "password": lab.password, **target}
    return config_mod.parse({"targets": [t], "queues": [{"target": "lab", "schema": "lab", **queue}]})


@pytest.fixture()
def cfg(clean_lab) -> config_mod.Config:  # noqa: ANN001
    """The lab's config with 2 s lease timeouts, on a freshly emptied lab."""
    return config_mod.load(short_config(clean_lab.config_path))


@contextmanager
def holding(conn_factory, *statements: str) -> Iterator[psycopg.Connection]:  # noqa: ANN001
    """A session that runs ``statements`` (e.g. ``BEGIN``, ``LOCK TABLE``) and keeps them until the
    block ends; then ``ROLLBACK`` and disconnect. Explicit BEGIN on an autocommit connection, so the
    isolation level the statements ask for is the one the server uses."""
    conn = conn_factory()
    try:
        for s in statements:
            conn.execute(s)
        yield conn
    finally:
        with contextlib.suppress(psycopg.Error):
            conn.execute("ROLLBACK")
        conn.close()


@contextmanager
def waiting(conn_factory, statement: str, lock_timeout: str = "30s") -> Iterator[int]:  # noqa: ANN001
    """A session blocked on ``statement`` in a thread; yields its pid. Cancelled on exit."""
    conn = conn_factory()
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    conn.execute(f"SET lock_timeout = '{lock_timeout}'")
    errors: list[BaseException] = []

    def run() -> None:
        try:
            conn.execute(statement)
        except psycopg.Error as exc:
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield pid
    finally:
        with conn_factory() as admin:
            admin.execute("SELECT pg_cancel_backend(%s)", (pid,))
        t.join(10)
        conn.close()


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.1) -> bool:  # noqa: ANN001
    """Poll ``predicate`` until true (a condition, never a timing assertion)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


@contextmanager
def reader_login(lab, *tables: str) -> Iterator[dict[str, str]]:  # noqa: ANN001
    """A login of its own with SELECT on ``tables`` (schema-qualified) and nothing else: outside
    pg_stat_scan_tables, so without pgstattuple's functions. Yields the target fields that log in
    as it (``url``, ``password``, for :func:`one_queue`); dropped, with what it owns, afterwards."""
    name, password = f"reader_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    role = sql.Identifier(name)
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, sql.Literal(password)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA lab TO {}").format(role))
        conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(
            sql.SQL(", ").join(sql.Identifier(*t.split(".")) for t in tables), role))
    try:
        yield {"url": lab.url.replace("queueops@", f"{name}@"), "password": password}
    finally:
        with lab.connect() as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(role))
            conn.execute(sql.SQL("DROP ROLE {}").format(role))
