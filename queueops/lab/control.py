"""``queueops lab start|stop|status|fault``: the embedded database, its schema and its workload.

State lives in one folder (default ``.queueops/``): the cluster (``pg/``), its port
(``server.json``), the generated password (``lab.secret``), the lab's config (``lab.toml``) and
the workload's pid (``workload.pid``) and log (``workload.log``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from queueops import sqlfiles
from queueops.lab.config import write_lab_config
from queueops.lab.pgserver import EmbeddedPostgres, LabError, ServerInfo
from queueops.users import ensure_demo_users

FAULTS = ("dead-consumer", "snapshot-hold", "watermark-jump", "lock-hold", "churn")
DEFAULT_STATE = Path(".queueops")


def server(state_dir: Path = DEFAULT_STATE, **kwargs: Any) -> EmbeddedPostgres:
    return EmbeddedPostgres(Path(state_dir), **kwargs)


def admin_connect(srv: EmbeddedPostgres, info: ServerInfo | None = None):  # noqa: ANN201 - psycopg.Connection
    import psycopg

    info = info or srv.start()
    return psycopg.connect(info.url(), password=srv.password(), autocommit=True, application_name="queueops-lab")


def apply_schema(srv: EmbeddedPostgres, info: ServerInfo) -> None:
    with admin_connect(srv, info) as conn:
        conn.execute(sqlfiles.load("postgresql", "lab/schema").text)


def start(state_dir: Path = DEFAULT_STATE, *, workload: bool = True, port: int | None = 5544,
          fast: bool = False, rates: dict[str, float] | None = None) -> dict[str, Any]:
    """Start the database (idempotent), create the lab queues, write lab.toml, start the workload."""
    srv = server(state_dir, port=port, fast=fast)
    info = srv.start()
    apply_schema(srv, info)
    config_path = write_lab_config(Path(state_dir), info.url(), info.port)
    # The console's documented demo accounts (README "Console"), only if no users file exists yet.
    ensure_demo_users(Path(state_dir) / "users.toml")
    if rates:
        set_rates(srv, rates)
    pid = start_workload(Path(state_dir), config_path) if workload else None
    return {"url": info.url(), "config": str(config_path), "workload_pid": pid, "datadir": info.datadir}


def set_rates(srv: EmbeddedPostgres, rates: dict[str, float]) -> None:
    with admin_connect(srv) as conn:
        for name, value in rates.items():
            conn.execute("INSERT INTO lab.settings (name, value) VALUES (%s, %s) "
                         "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (name, str(value)))


def _pid_file(state_dir: Path) -> Path:
    return Path(state_dir) / "workload.pid"


def workload_pid(state_dir: Path) -> int | None:
    try:
        pid = int(_pid_file(state_dir).read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def start_workload(state_dir: Path, config_path: Path) -> int:
    """Start the producers/consumers in a background process of their own (idempotent)."""
    pid = workload_pid(state_dir)
    if pid:
        return pid
    log_path = Path(state_dir) / "workload.log"
    log = open(log_path, "ab")  # noqa: SIM115 - handed to the child
    offset = log.tell()
    proc = subprocess.Popen([sys.executable, "-m", "queueops.lab.workload", "--config", str(config_path)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    log.close()
    _pid_file(state_dir).write_text(str(proc.pid))
    # A workload that cannot start (bad config) exits at once: say so instead of reporting a pid.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and proc.poll() is None:
        if b"workload starting" in log_path.read_bytes()[offset:]:
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        _pid_file(state_dir).unlink(missing_ok=True)
        tail = log_path.read_bytes()[offset:].decode(errors="replace").strip().splitlines()[-3:]
        raise LabError(f"the workload exited at once (code {proc.returncode}); {log_path}: " + " / ".join(tail))
    return proc.pid


def stop_workload(state_dir: Path, timeout: float = 10) -> bool:
    pid = workload_pid(state_dir)
    if not pid:
        _pid_file(state_dir).unlink(missing_ok=True)
        return False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and workload_pid(state_dir):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    if workload_pid(state_dir):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    _pid_file(state_dir).unlink(missing_ok=True)
    return True


def stop(state_dir: Path = DEFAULT_STATE) -> dict[str, bool]:
    """Stop the workload, then the database. Idempotent."""
    stopped_workload = stop_workload(Path(state_dir))
    try:
        stopped_db = server(state_dir).stop()
    except LabError:
        stopped_db = False
    return {"workload_stopped": stopped_workload, "database_stopped": stopped_db}


def status(state_dir: Path = DEFAULT_STATE) -> dict[str, Any]:
    srv = server(state_dir)
    out: dict[str, Any] = srv.status()
    out["workload_pid"] = workload_pid(Path(state_dir))
    out["config"] = str(Path(state_dir) / "lab.toml") if (Path(state_dir) / "lab.toml").exists() else None
    if out["running"]:
        out["faults"] = faults(state_dir)
    return out


def faults(state_dir: Path = DEFAULT_STATE) -> dict[str, bool]:
    srv = server(state_dir)
    with admin_connect(srv) as conn:
        return {name: enabled for name, enabled in conn.execute("SELECT name, enabled FROM lab.faults ORDER BY name")}


def set_fault(name: str, on: bool, state_dir: Path = DEFAULT_STATE) -> dict[str, bool]:
    """Switch a fault; the workload process polls lab.faults and acts within a second."""
    if name not in FAULTS:
        raise LabError(f"unknown fault {name!r}; known faults: {', '.join(FAULTS)}")
    srv = server(state_dir)
    with admin_connect(srv) as conn:
        conn.execute("UPDATE lab.faults SET enabled = %s, changed_at = clock_timestamp() WHERE name = %s", (on, name))
    return faults(state_dir)
