"""Fixtures for the lab workload tests: the real workload process on the session's lab database."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from queueops.lab import control
from tests.conftest import Lab, wait_for  # noqa: F401 - re-exported

T = TypeVar("T")
LEASE_TIMEOUT_S = 3  # the test config's lease timeout (lab.toml says 20-30 s)
# Faster fault dynamics than the lab's defaults, and consumers well ahead of the producers so a
# backlog drains within a test's patience.
TEST_SETTINGS = {
    "dead_consumer_per_s": "2",
    "watermark_jump_every_s": "3",
    "consume_per_s": "10",
    "produce_per_s": "5",
    "wave_period_s": "20",
}




def one(lab: Lab, sql: str, *params: Any) -> Any:
    with lab.connect() as conn:
        row = conn.execute(sql, params).fetchone()
        return row[0] if row else None


def counter(lab: Lab, name: str) -> int:
    return int(one(lab, "SELECT coalesce((SELECT value FROM lab.counters WHERE name = %s), 0)", name))


def counters_flushed(lab: Lab, timeout: float = 30) -> None:
    """Wait until everything the workload counted before this call is in ``lab.counters``.

    The workload adds its counts to the table every 2 s and then bumps ``workload.heartbeat``; the
    second beat after this call belongs to a flush that took its counts after this call began. A
    fixed sleep of one flush interval is not enough on a loaded 2-core machine (CI once saw a
    churn round reach the table more than 2.5 s after the fault's last round).
    """
    beat = counter(lab, "workload.heartbeat")
    wait_for(lambda: counter(lab, "workload.heartbeat") >= beat + 2, timeout, what="two counter flushes")


def set_fault(lab: Lab, name: str, on: bool) -> None:
    control.set_fault(name, on, lab.state_dir)


@contextmanager
def fault_switched_on(lab: Lab, name: str) -> Iterator[None]:
    """Switch a fault on for the ``with`` block and off again however the block ends, so one
    failing test cannot leave its fault (a held snapshot, say) running under the next one."""
    set_fault(lab, name, True)
    try:
        yield
    finally:
        set_fault(lab, name, False)


def write_test_config(lab: Lab, name: str, lease_timeout_s: float) -> Path:
    """A copy of the lab's lab.toml with short lease timeouts, next to it (the password is file:)."""
    text = re.sub(r"(?m)^lease_timeout_s = \d+$", f"lease_timeout_s = {lease_timeout_s:g}",
                  lab.config_path.read_text())
    path = lab.state_dir / name
    path.write_text(text)
    return path


def workload_processes(config_path: Path) -> list[int]:
    """Pids of every process running the workload with this config (read from /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"queueops.lab.workload" in cmdline and str(config_path).encode() in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


def workload_sessions(lab: Lab) -> int:
    return int(one(lab, "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'queueops-lab-%%' "
                        "AND pid <> pg_backend_pid()"))


@dataclass
class Running:
    lab: Lab
    pid: int
    config_path: Path
    log_path: Path
    log_offset: int = 0  # where this run's lines begin in workload.log


def start(lab: Lab, config_path: Path, settings: dict[str, str]) -> Running:
    """Start the workload with ``settings`` on a reset lab (stopping one left running) and wait
    until every queue's producer has produced."""
    control.stop_workload(lab.state_dir)
    lab.reset()
    with lab.connect() as conn:
        conn.execute("DELETE FROM lab.settings")
        for name, value in settings.items():
            conn.execute("INSERT INTO lab.settings (name, value) VALUES (%s, %s)", (name, value))
    log_path = lab.state_dir / "workload.log"
    offset = log_path.stat().st_size if log_path.exists() else 0
    pid = control.start_workload(lab.state_dir, config_path)
    running = Running(lab, pid, config_path, log_path, offset)
    for queue in ("delete", "status", "lease", "due", "ring"):
        wait_for(lambda q=queue: counter(lab, f"produced.{q}") > 0, 30, what=f"the {queue} producer")
    return running


def log_text(running: Running) -> str:
    with open(running.log_path, "rb") as fh:
        fh.seek(running.log_offset)
        return fh.read().decode(errors="replace")


def stop(running: Running) -> None:
    control.stop_workload(running.lab.state_dir)
    with running.lab.connect() as conn:
        conn.execute("UPDATE lab.faults SET enabled = false")
        conn.execute("DELETE FROM lab.settings")
    assert not workload_processes(running.config_path), "a workload process survived stop_workload"
    with pytest.raises(ProcessLookupError):
        os.kill(running.pid, 0)


@pytest.fixture(scope="module")
def workload(lab: Lab) -> Iterator[Running]:
    """The workload, running on the lab with short lease timeouts, for every test of a module."""
    config_path = write_test_config(lab, "lab-workload-test.toml", LEASE_TIMEOUT_S)
    running = start(lab, config_path, TEST_SETTINGS)
    try:
        yield running
    finally:
        stop(running)
        lab.reset()
