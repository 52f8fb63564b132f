"""Shared fixtures: a real, throwaway PostgreSQL lab per test session (never a mock)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import psycopg
import pytest

from queueops import config as config_mod
from queueops.lab import control
from queueops.lab.pgserver import EmbeddedPostgres, ServerInfo

T = TypeVar("T")


def wait_for(probe: Callable[[], T], timeout: float, interval: float = 0.2, what: str = "condition") -> T:
    """Poll ``probe`` until it returns something truthy; fail the test with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {value!r})")
        time.sleep(interval)

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Lab:
    """A running lab database (schema applied, no workload unless a test starts one)."""

    state_dir: Path
    server: EmbeddedPostgres
    info: ServerInfo
    config_path: Path

    @property
    def url(self) -> str:
        return self.info.url()

    @property
    def password(self) -> str:
        return self.server.password()

    def config(self) -> config_mod.Config:
        return config_mod.load(self.config_path)

    def connect(self, **kwargs: object) -> psycopg.Connection:
        kwargs.setdefault("autocommit", True)
        return psycopg.connect(self.url, password=self.password, **kwargs)  # type: ignore[arg-type]

    def reset(self) -> None:
        """Empty every lab queue and switch every fault off: a known state for the next test."""
        with self.connect() as conn:
            conn.execute("TRUNCATE lab.q_delete, lab.q_status_meta, lab.q_status_data, lab.q_lease, lab.q_due, "
                         "lab.ledger RESTART IDENTITY CASCADE")
            conn.execute("UPDATE lab.q_delete_watermark SET low_key = 0")
            conn.execute("UPDATE lab.q_ring_slot SET message_id = NULL, enqueued_at = NULL, reference_count = 0, "
                         "payload = NULL")
            conn.execute("UPDATE lab.q_ring_seq SET push_seq = 0, pop_seq = 0")
            conn.execute("UPDATE lab.faults SET enabled = false")

    def cli(self, *args: str, check: bool = False, timeout: float = 120, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        """Run the real ``queueops`` command line against this lab."""
        full_env = {**os.environ, **(env or {})}
        return subprocess.run([sys.executable, "-m", "queueops.cli", *args], capture_output=True, text=True,
                              cwd=ROOT, timeout=timeout, check=check, env=full_env)


def make_state_dir(prefix: str = "queueops-test-") -> Path:
    """A state folder the unprivileged PostgreSQL owner can traverse (pytest's tmp is 0700)."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o755)
    return base / "state"


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    state = make_state_dir()
    srv = EmbeddedPostgres(state, fast=True)
    info = srv.start()
    control.apply_schema(srv, info)
    from queueops.lab.config import write_lab_config

    config_path = write_lab_config(state, info.url(), info.port)
    the_lab = Lab(state, srv, info, config_path)
    try:
        yield the_lab
    finally:
        control.stop_workload(state)
        srv.destroy()
        shutil.rmtree(state.parent, ignore_errors=True)


@pytest.fixture()
def clean_lab(lab: Lab) -> Lab:
    lab.reset()
    return lab
