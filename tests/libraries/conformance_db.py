"""A database of its own on the libraries' private server, for one conformance module (issue 29).

Each conformance module installs its library with the library's own tool into a fresh database on
the package's one server (``libserver``), builds its 200,000-row shape there once, and drops the
database at the end: the shared ``installed`` schemas the other modules of tests/libraries use are
never filled or left with dead tuples, and no second server is started.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from tests.conformance import common
from tests.libraries.conftest import LibServer


@contextmanager
def own_database(lib: LibServer, name: str) -> Iterator[LibServer]:
    """``lib`` pointed at a new database ``name`` (dropped, with its sessions, afterwards)."""
    with lib.connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    db = dataclasses.replace(lib, info=dataclasses.replace(lib.info, database=name), children=[])
    try:
        yield db
    finally:
        for proc in db.children:
            if proc.poll() is None:
                db.kill(proc)
        with lib.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def shape_pgboss(db: LibServer, build: Sequence[str], node: Callable[..., list[str]], fetched: int, completed: int,
                 failed: int, label: str) -> None:
    """pg-boss's job table at production size (pg-boss 10 and 12 alike): ``build`` written set-based,
    then pg-boss's own API (``node``: conformance.mjs of the version) fetches ``fetched`` jobs,
    completes ``completed`` and fails ``failed`` of them; analyzed as every conformance table is."""
    started = time.monotonic()
    with db.connect() as conn:
        for sql in build:
            conn.execute(sql)
    ids = node("fetch", str(fetched))
    assert len(ids) == fetched
    node("complete", json.dumps(ids[:completed]))
    node("fail", json.dumps(ids[completed:completed + failed]))
    with db.connect() as conn:
        common.analyze(conn, "pgboss.job")
        rows = conn.execute("SELECT count(*) FROM pgboss.job").fetchone()[0]
    print(f"\nBUILD {label}: {rows} rows in {time.monotonic() - started:.1f} s")
    assert rows >= common.ROWS
