"""Fixtures of the console tests: a console config on the real lab, its users, the real server.

The console gets its own copy of the lab's config with its own store and users file, so that its
audit records and snapshots never mix with other test modules sharing the session's lab.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from queueops import config as config_mod
from queueops import users
from tests.conftest import ROOT, Lab

OPERATOR = ("oncall", "operator-pass-1", "operator")
VIEWER = ("watcher", "viewer-pass-1", "viewer")
ARTIFACTS = ROOT / "artifacts" / "console"


@dataclass
class ConsoleEnv:
    lab: Lab
    dir: Path
    config_path: Path

    def config(self) -> config_mod.Config:
        return config_mod.load(self.config_path)

    @property
    def store_path(self) -> Path:
        return self.dir / "store.db"

    @property
    def users_path(self) -> Path:
        return self.dir / "users.toml"


def write_console_config(lab: Lab, folder: Path, *, store: Path | None = None) -> Path:
    """The lab's config with its own store and users file (and the lab's secret by absolute path)."""
    text = lab.config_path.read_text()
    store = store or folder / "store.db"
    text = re.sub(r'(?m)^url = "sqlite:///.*"$', f'url = "sqlite:///{store}"', text, count=1)
    text = re.sub(r'(?m)^users_file = ".*"$', f'users_file = "{folder / "users.toml"}"', text, count=1)
    text = text.replace('password = "file:lab.secret"', f'password = "file:{lab.state_dir / "lab.secret"}"')
    # No Spark run started by the service under the browser tests (the lab's own lake and gold are
    # shared); tests/service/test_pipeline_after_export.py covers after_export.
    text = re.sub(r"(?m)^after_export = true$", "after_export = false", text)
    path = folder / "console.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def console_env(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> ConsoleEnv:
    folder = tmp_path_factory.mktemp("console")
    path = write_console_config(lab, folder)
    for name, pw, role in (OPERATOR, VIEWER):
        users.add(folder / "users.toml", name, pw, role)
    return ConsoleEnv(lab, folder, path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 60, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - our own local server
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    """Stop a process group we started (SIGTERM, then SIGKILL)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.wait(timeout=5)


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    log: Path


def start_console(config_path: Path, log: Path) -> Server:
    """``queueops serve`` as a real subprocess on a free port, the way an engineer runs it."""
    port = free_port()
    out = open(log, "wb")  # noqa: SIM115 - closed by the process's exit
    proc = subprocess.Popen([sys.executable, "-m", "queueops.cli", "serve", "--config", str(config_path),
                             "--port", str(port), "--address", "127.0.0.1"], cwd=ROOT, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/_stcore/health", proc=proc)
    except Exception:
        stop(proc)
        raise
    return Server(url, proc, log)


def start_service(config_path: Path, log: Path) -> subprocess.Popen:
    """``queueops collect`` (the scheduler) writing snapshots to the console's store."""
    out = open(log, "wb")  # noqa: SIM115
    return subprocess.Popen([sys.executable, "-m", "queueops.cli", "collect", "--config", str(config_path),
                             "--no-lake"], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)


STUCK_SQL = "SELECT count(*) FROM lab.q_lease WHERE processing_started_at < now() - interval '20 seconds'"


@dataclass
class Stack:
    """The live lab as an engineer runs it: its workload, ``queueops collect`` and ``queueops serve``."""

    env: ConsoleEnv
    server: Server
    service: subprocess.Popen
    artifacts: Path

    @property
    def url(self) -> str:
        return self.server.url

    def one(self, sql: str, *params: object) -> object:
        """The first column of the first row of a query on the lab (None without a row)."""
        with self.env.lab.connect() as conn:
            row = conn.execute(sql, params).fetchone()
            return row[0] if row else None

    def stuck(self) -> int:
        """Leases older than the lab's lease timeout (20 s), as the database sees them."""
        return int(self.one(STUCK_SQL))  # type: ignore[arg-type]

    def fault(self, name: str, on: bool) -> float:
        """Switch a lab fault; returns when (``time.monotonic()``)."""
        from queueops.lab import control

        control.set_fault(name, on, self.env.lab.state_dir)
        return time.monotonic()


@contextmanager
def live_stack(console_env: ConsoleEnv, artifacts: Path, name: str, faults: Iterable[str] = ()) -> Iterator[Stack]:
    """A clean lab with its workload running and ``faults`` switched on from the start, the collector
    service and the console; everything stopped and the lab reset afterwards. Logs go to
    artifacts/console/NAME-service.log and NAME-console.log."""
    from queueops.lab import control

    env = reset_console(console_env)
    lab = env.lab
    control.start_workload(lab.state_dir, lab.config_path)
    server = None
    service = None
    try:
        for fault in faults:
            control.set_fault(fault, True, lab.state_dir)
        service = start_service(env.config_path, artifacts / f"{name}-service.log")
        server = start_console(env.config_path, artifacts / f"{name}-console.log")
        yield Stack(env, server, service, artifacts)
    finally:
        if server is not None:
            stop(server.proc)
        if service is not None:
            stop(service)
        control.stop_workload(lab.state_dir)
        lab.reset()


def open_page(page: object, stack: Stack, path: str) -> None:
    """Go to a console page (``""`` is the Overview) and wait until it is drawn."""
    from tests.console.browser import settle

    page.goto(f"{stack.url}/{path}")  # type: ignore[attr-defined]
    page.locator("h1").first.wait_for()  # type: ignore[attr-defined]
    settle(page)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def copy_for_readme(src: Path, name: str) -> Path:
    """Refresh the README's screenshot only when asked (QUEUEOPS_UPDATE_DOCS_IMG=1): a plain test run
    must not leave the work tree dirty. The run's screenshots are always under artifacts/."""
    if os.environ.get("QUEUEOPS_UPDATE_DOCS_IMG") != "1":
        return src
    dest = ROOT / "docs" / "img" / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    return dest


def reset_console(console_env: ConsoleEnv) -> ConsoleEnv:
    """A clean lab (queues empty, faults off) and an empty console store (sign-ins included: one
    test's failed sign-ins must not throttle the next one's)."""
    from sqlalchemy import delete

    from queueops.store import open_engine
    from queueops.store.schema import (
        audit_commands,
        audit_log,
        collector_status,
        console_sessions,
        signin_log,
        signin_throttle,
        snapshots,
    )

    console_env.lab.reset()
    engine = open_engine(console_env.config())
    with engine.begin() as conn:
        for table in (snapshots, collector_status, audit_log, audit_commands, console_sessions, signin_throttle,
                      signin_log):
            conn.execute(delete(table))
    engine.dispose()
    return console_env


@pytest.fixture()
def console_lab(console_env: ConsoleEnv) -> ConsoleEnv:
    return reset_console(console_env)


# -- shared by the page tests (AppTest) ----------------------------------------------------------

TIMEOUT = 60


def _page(module: str) -> None:
    import importlib

    importlib.import_module(module).render()


def page(module: str, role: str = "operator", **query: str) -> AppTest:
    at = AppTest.from_function(_page, args=(module,), default_timeout=TIMEOUT)
    at.session_state["qo_identity"] = {"name": "oncall" if role == "operator" else "watcher", "role": role,
                                       "method": "local"}
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


@pytest.fixture()
def env(console_lab: ConsoleEnv, monkeypatch: pytest.MonkeyPatch) -> Iterator[ConsoleEnv]:
    import streamlit as st

    monkeypatch.setenv("QUEUEOPS_CONFIG", str(console_lab.config_path))
    st.cache_resource.clear()  # the live sampler is shared on purpose; each test wants a fresh one
    yield console_lab


def stuck_leases(env: ConsoleEnv, n: int, ready: int = 0) -> None:
    with env.lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_lease (created_at, processing_started_at) "
                     "SELECT now() - interval '5 min', now() - interval '2 min' FROM generate_series(1, %s)", (n,))
        if ready:
            conn.execute("INSERT INTO lab.q_lease (created_at) SELECT now() FROM generate_series(1, %s)", (ready,))


def count_stuck(env: ConsoleEnv) -> int:
    with env.lab.connect() as conn:
        return conn.execute("SELECT count(*) FROM lab.q_lease WHERE processing_started_at < now() - interval '20 s'"
                            ).fetchone()[0]


def texts(at: AppTest) -> str:
    parts = [e.value for e in (*at.markdown, *at.caption, *at.info, *at.warning, *at.error, *at.success)]
    parts += [str(e.value) for e in at.metric]
    return "\n".join(str(p) for p in parts)
