"""A database of its own on the libraries' private server, for one conformance module (issue 29).

Each conformance module installs its library with the library's own tool into a fresh database on
the package's one server (``libserver``), builds its 200,000-row shape there once, and drops the
database at the end: the shared ``installed`` schemas the other modules of tests/libraries use are
never filled or left with dead tuples, and no second server is started.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

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
