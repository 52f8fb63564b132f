"""No orphans: a stopped or killed ``queueops serve`` leaves no console process and frees its port.

Before, ``serve`` ran Streamlit as a child and did not pass signals on, so SIGTERM (or SIGKILL) of
``queueops serve`` left Streamlit adopted by init, holding the port and serving the old config.
These tests signal only the process they started (never its group) and then look at every process
on the machine for a console on that port.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from queueops.lab import control
from tests.conftest import ROOT, make_state_dir, wait_for
from tests.console.conftest import ConsoleEnv, free_port, start_console, stop, wait_http


def _console_pids(port: int) -> list[int]:
    """Every live process whose command line runs a Streamlit console on ``port``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = next((ln for ln in (entry / "status").read_text().splitlines() if ln.startswith("State:")), "")
        except OSError:
            continue
        if "Z" in state.split()[1:2]:
            continue  # a zombie holds no port; its parent (this test) reaps it
        if b"streamlit" in b" ".join(argv) and b"--server.port" in argv and \
                argv[argv.index(b"--server.port") + 1] == str(port).encode():
            pids.append(int(entry.name))
    return pids


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_signalled_serve_leaves_no_console_and_frees_its_port(console_env: ConsoleEnv, tmp_path: Path,
                                                                 sig: signal.Signals) -> None:
    server = start_console(console_env.config_path, tmp_path / "serve.log")
    port = int(server.url.rsplit(":", 1)[1])
    try:
        assert _console_pids(port), "the console is not running: nothing to check"
        os.kill(server.proc.pid, sig)  # the process we started, as a supervisor would, not its group
        server.proc.wait(timeout=10)
        wait_for(lambda: not _console_pids(port) and _port_free(port), timeout=10,
                 what=f"no console process left on port {port} and the port free after {sig.name}")
    finally:
        stop(server.proc)


def test_a_child_started_to_die_with_its_parent_dies_when_the_parent_is_killed(tmp_path: Path) -> None:
    # The service's pipeline run and demo's children use this: SIGKILL leaves the parent no chance
    # to stop them, so the kernel must (PR_SET_PDEATHSIG).
    pidfile = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys, time
        from queueops import children
        c = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], **children.popen_kwargs())
        open({str(pidfile)!r}, "w").write(str(c.pid))
        time.sleep(600)
    """)], start_new_session=True)
    try:
        child = int(wait_for(lambda: pidfile.exists() and pidfile.read_text(), timeout=30, what="the child's pid"))
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)

        def gone() -> bool:
            try:
                state = Path(f"/proc/{child}/status").read_text()
            except OSError:
                return True
            return "State:\tZ" in state  # reaped by init shortly

        wait_for(gone, timeout=10, what="the child to die with its killed parent")
    finally:
        stop(parent)


def _processes_mentioning(needle: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                zombie = "State:\tZ" in (entry / "status").read_text()
            except OSError:
                continue
            if needle in cmd and not zombie:
                found.append(f"{entry.name}: {cmd[:160]}")
    return found


@pytest.mark.timeout(300)
def test_a_killed_demo_leaves_nothing_behind() -> None:
    # demo starts a database, a workload, the service and the console; SIGKILL gives it no chance
    # to stop them, so the kernel and the reaper must.
    state = make_state_dir("queueops-demo-")
    port = free_port()
    log = open(state.parent / "demo.log", "wb")  # noqa: SIM115 - closed below
    demo = subprocess.Popen([sys.executable, "-m", "queueops.cli", "demo", "--state-dir", str(state),
                             "--port", str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/_stcore/health", timeout=180, proc=demo)
        assert len(_processes_mentioning(str(state))) >= 3  # database, workload, service at least
        os.kill(demo.pid, signal.SIGKILL)
        demo.wait(timeout=10)
        wait_for(lambda: not _processes_mentioning(str(state)) and not _console_pids(port) and _port_free(port),
                 timeout=60, what=f"every demo process gone: {_processes_mentioning(str(state))}")
    finally:
        stop(demo)
        log.close()
        control.stop(state)
        shutil.rmtree(state.parent, ignore_errors=True)
