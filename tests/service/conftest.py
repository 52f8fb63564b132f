"""Fixtures for the service tests: configs derived from the lab's, a PostgreSQL store database on
the lab's server, a webhook receiver, and helpers to run ``queueops collect`` as a real process."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from tests.conftest import ROOT, Lab


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_sections(lab: Lab, lease_timeout_s: float | None = None) -> str:
    """The lab's [[targets]] and [[queues]] with the password file as an absolute reference
    (and, if given, every queue's lease timeout shortened)."""
    text = lab.config_path.read_text()
    body = text[text.index("[[targets]]"):]
    secret = Path(lab.server.password_file).resolve()
    body = body.replace('password = "file:lab.secret"', f'password = "file:{secret}"')
    if lease_timeout_s is not None:
        body = re.sub(r"^lease_timeout_s = .*$", f"lease_timeout_s = {lease_timeout_s}", body, flags=re.M)
    return body


def write_config(lab: Lab, path: Path, *, store_url: str, lake: Path, schedule: str = "fast_s = 1\nslow_s = 3",
                 alerts: str = "", store_extra: str = "", lake_extra: str = "", extra: str = "",
                 lease_timeout_s: float | None = None) -> Path:
    path.write_text(
        f'[store]\nurl = "{store_url}"\n{store_extra}\n\n'
        f'[lake]\npath = "{lake}"\n{lake_extra}\n\n'
        f"[schedule]\n{schedule}\n\n"
        f"{alerts}\n\n"
        f"{lab_sections(lab, lease_timeout_s)}\n{extra}\n")
    return path


@pytest.fixture(scope="session")
def pg_store(lab: Lab) -> Iterator[str]:
    """A database of its own on the lab's server for the store; yields a SQLAlchemy URL."""
    name = f"store_{uuid.uuid4().hex[:8]}"
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = f"postgresql+psycopg://queueops:{lab.password}@127.0.0.1:{lab.info.port}/{name}"
    yield url
    with lab.connect() as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def pg_store_ref(url: str, folder: Path) -> str:
    """The store URL as a ``file:`` reference (it holds the password, which config never does)."""
    f = folder / "store.url"
    f.write_text(url)
    f.chmod(0o600)
    return f"file:{f}"


@dataclass
class Webhook:
    """A local HTTP receiver that records every JSON body POSTed to it."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def wait_for(self, pred: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self.calls):
                return True
            time.sleep(0.1)
        return pred(self.calls)


@pytest.fixture()
def webhook() -> Iterator[Webhook]:
    hook = Webhook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            hook.calls.append(json.loads(body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    hook.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=hook.server.serve_forever, daemon=True)
    t.start()
    yield hook
    hook.server.shutdown()
    hook.server.server_close()


class ServiceProcess:
    """``python -m queueops.cli collect --config ...`` as a real child process."""

    runs = 0

    def __init__(self, config: Path, *args: str):
        ServiceProcess.runs += 1
        self.log = config.with_name(f"{config.stem}-{ServiceProcess.runs}.log")
        self._fh = open(self.log, "w")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen([sys.executable, "-m", "queueops.cli", "collect", "--config", str(config),
                                      *args], cwd=ROOT, stdout=self._fh, stderr=subprocess.STDOUT)

    def text(self) -> str:
        return self.log.read_text()

    def wait_log(self, pattern: str, timeout: float) -> re.Match[str] | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.text())
            if m or self.proc.poll() is not None:
                return m
            time.sleep(0.1)
        return re.search(pattern, self.text())

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._fh.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._fh.close()


@pytest.fixture()
def service_process() -> Iterator[Any]:
    started: list[ServiceProcess] = []

    def start(config: Path, *args: str) -> ServiceProcess:
        p = ServiceProcess(config, *args)
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()


def http_get(url: str, timeout: float = 3.0) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - local test server
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def block_connections(lab: Lab, database: str, allow: bool) -> None:
    """Make a database refuse new connections (and drop the open ones), or accept them again."""
    with lab.connect() as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS {}").format(
            sql.Identifier(database), sql.SQL("true" if allow else "false")))
        if not allow:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (database,))


__all__ = ["Webhook", "block_connections", "free_port", "http_get", "pg_store_ref", "write_config"]
