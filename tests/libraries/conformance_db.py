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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from queueops import livecheck
from queueops.finding import Finding
from tests.conformance import common
from tests.libraries.conftest import NODE_DIR, LibServer, pgboss_on, require_pgboss


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


@contextmanager
def pgboss_shaped(lib: LibServer, major: int, build: Sequence[str], fetched: int, completed: int,
                  failed: int) -> Iterator[LibServer]:
    """pg-boss ``major``'s job table at production size, in a database of its own (10, 11 and 12
    alike): the schema from pg-boss's own ``start()`` (boss.mjs install), ``build`` written
    set-based, then pg-boss's own API (conformance.mjs of the version) fetches ``fetched`` jobs,
    completes ``completed`` and fails ``failed`` of them; analyzed as every conformance table is."""
    require_pgboss(major)
    with own_database(lib, f"conformance_pgboss{major}") as db:
        db.run(pgboss_on(major, "install"), cwd=NODE_DIR)

        def node(*args: str) -> list[str]:
            out = db.run(pgboss_on(major, *args, script="conformance.mjs"), cwd=NODE_DIR)
            return list(json.loads(out.strip().splitlines()[-1]))

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
        print(f"\nBUILD pg-boss {major}: {rows} rows in {time.monotonic() - started:.1f} s")
        assert rows >= common.ROWS, f"{rows} rows: the shape is below production size ({common.ROWS})"
        yield db


def preset_config(db: LibServer, preset: str, zone: str, tmp: Path | None = None) -> common.config.Config:
    """A config of one queue, named as its ``preset``, on ``db`` read in ``zone`` (``tmp``: the
    SQLite store actions audit to)."""
    return common.make_config(db.url, Path(db.info.password_file), zone, [{"name": preset, "preset": preset}],
                              store=tmp)


def reads_and_live_check(db: LibServer, preset: str) -> tuple[dict[str, Any], list[Finding]]:
    """Each fast statement of ``preset``'s queue read once at production size (shared buffers,
    printed) and ``config check --live`` on it: its seek-or-scan verdict on each statement must be
    what the read measured, with no error. Returns the reads by collector and the live findings."""
    cfg = preset_config(db, preset, "UTC")
    with db.connect() as conn:
        reads = {r.collector: r for r in common.measured_reads(cfg, preset, conn)}
    report = livecheck.report_live(cfg)
    print(f"\nREADS {preset}: " + "; ".join(f"{r.collector} {r.buffers} buffers" for r in reads.values()))
    print(f"LIVE {preset}:\n" + "\n".join(f.line("") for f in report.findings))
    scans = {f.field for f in report.findings if "scans instead of seeking" in f.reason}
    assert set(reads) == set(common.FAST_COLLECTORS)
    for r in reads.values():
        assert (r.buffers <= common.BUFFER_BOUND) == (r.collector not in scans), (r, scans)
    assert not [f for f in report.findings if f.severity == "error"], report.findings
    return reads, report.findings
