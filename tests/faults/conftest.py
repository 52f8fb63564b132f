"""Fixtures for the fault suite: a lab PostgreSQL of its own (killed and restarted by the tests,
so the session's shared ``lab`` is never disturbed), a second PostgreSQL that serves as a store
the tests can stop, the lab's real workload, and ``queueops collect`` as a real child process.

The fault lab keeps ``synchronous_commit = on`` (not the ``fast`` mode of the other tests): an
immediate stop is a crash of the server's processes, and what a client saw committed must
survive it, exactly as on a production server. ``fsync`` is off: it guards against the *machine*
losing power (the kernel's page cache), which no test here simulates, and it costs a 2-core
machine shared with other suites dearly.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from queueops import sqlfiles
from queueops.lab import control
from queueops.lab.config import write_lab_config
from queueops.lab.pgserver import EmbeddedPostgres
from tests.conftest import ROOT, Lab, make_state_dir, wait_for  # noqa: F401 - re-exported

T = TypeVar("T")

# The workload while a fault test runs: every queue busy, consumers well ahead of the producers
# (so what a fault leaves behind drains within a test's patience), short simulated work.
WORKLOAD_SETTINGS = {
    "produce_per_s": "6",
    "consume_per_s": "60",
    "consumers": "2",
    "work_ms": "20",
    "wave": "0",
    "due_delay_s": "1",
    "lease_reclaim_s": "0",  # never re-claim: only a requeue gives a stuck lease back
}
QUEUES = ("delete", "status", "lease", "due", "ring")




# ---------------------------------------------------------------------------------------------
# The fault lab


class FaultLab(Lab):
    """A :class:`~tests.conftest.Lab` whose server the tests may kill."""

    def kill(self) -> None:
        """Crash the server: ``pg_ctl stop -m immediate`` (no checkpoint, recovery at the next start)."""
        self.server.kill()

    def restart(self) -> None:
        info = self.server.start()
        assert info.port == self.info.port, "the restarted lab moved to another port"

    def one(self, sql: str, *params: Any) -> Any:
        with self.connect() as conn:
            row = conn.execute(sql, params).fetchone()
            return row[0] if row else None

    def ledger(self) -> dict[str, dict[str, int]]:
        """``sql/postgresql/lab/ledger_check.sql`` per queue.

        Valid while the workload runs too: every ledger row commits in the same statement as the
        queue change it records, and the check is one statement (one snapshot), so an item in
        flight is either still queued (claimed, processing) or done -- never half of each.
        """
        from psycopg.rows import dict_row

        with self.connect(row_factory=dict_row) as conn:
            rows = conn.execute(sqlfiles.load("postgresql", "lab/ledger_check").text).fetchall()
        return {r.pop("queue"): r for r in rows}

    def assert_ledger_clean(self) -> dict[str, dict[str, int]]:
        """No item lost, produced or processed twice, processed without being produced, or still
        queued after being processed."""
        book = self.ledger()
        bad = {q: {k: v for k, v in r.items() if k not in ("produced", "processed", "queued") and v}
               for q, r in book.items()}
        assert not any(bad.values()), f"ledger broken: {bad} (full: {book})"
        return book

    def config_text(self, *, store_url: str, lake: Path | None = None, schedule: str = "fast_s = 1\nslow_s = 2",
                    statement_timeout_ms: int | None = None, lock_timeout_ms: int | None = None,
                    lease_timeout_s: float | None = None, store_extra: str = "", extra: str = "") -> str:
        """The lab's targets and queues with a store, lake and schedule of the test's choosing."""
        text = self.config_path.read_text()
        body = text[text.index("[[targets]]"):]
        if statement_timeout_ms is not None:
            body = re.sub(r"(?m)^statement_timeout_ms = \d+$", f"statement_timeout_ms = {statement_timeout_ms}", body)
        if lock_timeout_ms is not None:
            body = re.sub(r"(?m)^lock_timeout_ms = \d+$", f"lock_timeout_ms = {lock_timeout_ms}", body)
        if lease_timeout_s is not None:
            body = re.sub(r"(?m)^lease_timeout_s = .*$", f"lease_timeout_s = {lease_timeout_s:g}", body)
        head = f'[store]\nurl = "{store_url}"\n{store_extra}\n\n'
        if lake is not None:
            head += f'[lake]\npath = "{lake}"\n\n'
        head += f'[schedule]\n{schedule}\n\n[identity]\nuser = "fault-suite"\ndefault_role = "operator"\n\n'
        return head + extra + "\n" + body

    def write_config(self, name: str, **kwargs: Any) -> Path:
        """A config next to lab.toml (so ``password = "file:lab.secret"`` resolves)."""
        path = self.state_dir / f"{name}.toml"
        path.write_text(self.config_text(**kwargs))
        if kwargs["store_url"].startswith("sqlite:///"):
            Path(kwargs["store_url"].removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        return path


def crash_safe_without_fsync(srv: EmbeddedPostgres, database: str = "postgres") -> None:
    """Commits reach the kernel before they are acknowledged; no fsync (see the module docstring)."""
    import psycopg

    info = srv.start()
    with psycopg.connect(host="127.0.0.1", port=info.port, user="queueops", dbname=database,
                         password=srv.password(), autocommit=True) as conn:
        for name, value in (("fsync", "off"), ("full_page_writes", "off"), ("synchronous_commit", "on")):
            conn.execute(f"ALTER SYSTEM SET {name} = {value}")  # constant names and values
        conn.execute("SELECT pg_reload_conf()")


@pytest.fixture(scope="session")
def flab() -> Iterator[FaultLab]:
    """The fault lab with its workload running for the whole suite: every fault happens while the
    queues are busy. The ledger is checked by each test, and once more after the workload stopped."""
    state = make_state_dir("queueops-faults-")
    srv = EmbeddedPostgres(state)  # synchronous commits: a kill is a real crash
    info = srv.start()
    crash_safe_without_fsync(srv)
    control.apply_schema(srv, info)
    config_path = write_lab_config(state, info.url(), info.port)
    the_lab = FaultLab(state, srv, info, config_path)
    try:
        start_workload(the_lab)
        yield the_lab
        if not srv.running():
            the_lab.restart()
        stop_workload(the_lab)
        the_lab.assert_ledger_clean()
    finally:
        control.stop_workload(state)
        srv.destroy()
        shutil.rmtree(state.parent, ignore_errors=True)


@pytest.fixture()
def busy_lab(flab: FaultLab) -> Iterator[FaultLab]:
    """The fault lab, up, its workload running, faults off; left up for the next test."""
    if not flab.server.running():
        flab.restart()
    assert control.workload_pid(flab.state_dir), "the lab's workload died"
    yield flab
    if not flab.server.running():
        flab.restart()
    assert control.workload_pid(flab.state_dir), "the lab's workload died during the test"


# ---------------------------------------------------------------------------------------------
# A PostgreSQL store that can be stopped


class StoreServer:
    def __init__(self, server: EmbeddedPostgres, url_file: Path):
        self.server = server
        self.url_file = url_file

    @property
    def ref(self) -> str:
        """The store URL as a ``file:`` reference (it holds the password; config never does)."""
        return f"file:{self.url_file}"

    @property
    def url(self) -> str:
        return self.url_file.read_text().strip()

    def stop(self) -> None:
        self.server.kill()

    def start(self) -> None:
        self.server.start()

    def reset(self) -> None:
        """Drop the store's tables (each test starts with an empty store)."""
        import psycopg

        if not self.server.running():
            self.server.start()
        with psycopg.connect(self.url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
            conn.execute("DROP SCHEMA public CASCADE")
            conn.execute("CREATE SCHEMA public")


@pytest.fixture(scope="session")
def store_server() -> Iterator[StoreServer]:
    state = make_state_dir("queueops-faults-store-")
    srv = EmbeddedPostgres(state, database="queueops_store")
    info = srv.start()
    crash_safe_without_fsync(srv)
    url_file = state / "store.url"
    url_file.write_text(f"postgresql+psycopg://queueops:{srv.password()}@127.0.0.1:{info.port}/queueops_store\n")
    url_file.chmod(0o600)
    try:
        yield StoreServer(srv, url_file)
    finally:
        srv.destroy()
        shutil.rmtree(state.parent, ignore_errors=True)


@pytest.fixture()
def pg_store(store_server: StoreServer) -> StoreServer:
    store_server.reset()
    return store_server


# ---------------------------------------------------------------------------------------------
# The lab's workload


def start_workload(lab: FaultLab) -> int:
    with lab.connect() as conn:
        conn.execute("DELETE FROM lab.settings")
        for name, value in WORKLOAD_SETTINGS.items():
            conn.execute("INSERT INTO lab.settings (name, value) VALUES (%s, %s)", (name, value))
    pid = control.start_workload(lab.state_dir, lab.config_path)
    for q in QUEUES:
        wait_for(lambda q=q: lab.one("SELECT count(*) FROM lab.ledger WHERE queue = %s AND event = 'produced'", q),
                 30, what=f"the {q} producer")
    return pid


def stop_workload(lab: FaultLab) -> None:
    """SIGTERM: workers finish the item in hand (retrying its finish after a reconnect), then exit."""
    assert control.stop_workload(lab.state_dir, timeout=20), "the workload was not running"


def drain(lab: FaultLab, timeout: float = 40) -> None:
    """Stop producing, and wait until every queue is empty except stuck claims.

    A claim the server committed just before a crash, whose answer never reached its consumer,
    is an item nobody works on: a stuck lease (never re-claimed here) or a status item left
    processing. It stays queued -- not lost -- for a requeue; a claim older than a few seconds
    is such a claim (the lab's consumers work at most ``work_ms`` on an item).
    """
    def produce(rate: str) -> None:
        with lab.connect() as conn:
            conn.execute("UPDATE lab.settings SET value = %s WHERE name = 'produce_per_s'", (rate,))

    def empty() -> bool:
        return not lab.one(
            "SELECT (SELECT count(*) FROM lab.q_delete) + (SELECT count(*) FROM lab.q_due)"
            " + (SELECT count(*) FROM lab.q_lease WHERE processing_started_at IS NULL"
            "    OR processing_started_at > now() - interval '3 seconds')"
            " + (SELECT count(*) FROM lab.q_status_meta WHERE status = 0"
            "    OR (status = 1 AND status_changed_at > now() - interval '3 seconds'))"
            " + (SELECT push_seq - pop_seq FROM lab.q_ring_seq)")

    produce("0")
    try:
        wait_for(empty, timeout, 0.3, "the consumers to drain every queue")
    finally:
        produce(WORKLOAD_SETTINGS["produce_per_s"])


# ---------------------------------------------------------------------------------------------
# queueops collect as a real process


class Service:
    """``python -m queueops.cli collect --config ...``, its output in a log file."""

    def __init__(self, config: Path, *args: str, log: Path):
        self.config = config
        self.log = log
        self._fh = open(log, "a")  # noqa: SIM115 - closed by wait() / kill()
        self.offset = log.stat().st_size
        self.proc = subprocess.Popen([sys.executable, "-m", "queueops.cli", "collect", "--config", str(config), *args],
                                     cwd=ROOT, stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        with open(self.log, "rb") as fh:
            fh.seek(self.offset)
            return fh.read().decode(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_log(self, pattern: str, timeout: float) -> re.Match[str]:
        def probe() -> re.Match[str] | None:
            m = re.search(pattern, self.text())
            if m is None and not self.alive():
                pytest.fail(f"the service exited ({self.proc.returncode}) before logging {pattern!r}:\n{self.text()}")
            return m

        return wait_for(probe, timeout, 0.1, f"{pattern!r} in the service log")

    def terminate(self, timeout: float = 60) -> int:
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._fh.close()

    def sigkill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        self._fh.close()

    def cleanup(self) -> None:
        if self.alive():
            self.sigkill()
        self._fh.close()


@pytest.fixture()
def services() -> Iterator[Callable[..., Service]]:
    started: list[Service] = []

    def start(config: Path, *args: str) -> Service:
        s = Service(config, *args, log=config.with_suffix(".log"))
        started.append(s)
        return s

    yield start
    for s in started:
        s.cleanup()


def cli(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real ``queueops`` command line."""
    return subprocess.run([sys.executable, "-m", "queueops.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout, env={**os.environ, **(env or {})})


def popen_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "queueops.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
