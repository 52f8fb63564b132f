"""``queueops demo``: the lab, its workload and the console, stopped together by Ctrl-C."""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import time
from pathlib import Path

from queueops import children as child_procs
from queueops.commands.common import fail
from queueops.commands.serve import streamlit_command
from queueops.lab import control
from queueops.lab.pgserver import LabError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="start the lab and the console together (Ctrl-C stops everything)")
    p.add_argument("--state-dir", default=str(control.DEFAULT_STATE), metavar="DIR",
                   help="where the lab keeps its data and lab.toml (default: .queueops)")
    p.add_argument("--port", type=int, default=8501, help="console port (default 8501)")
    p.set_defaults(func=_demo)


def _demo(args: argparse.Namespace) -> int:
    state = Path(args.state_dir)
    try:
        info = control.start(state)
    except LabError as exc:
        return fail(str(exc))
    children: list[subprocess.Popen[bytes]] = []
    # Bound to this process: if the demo is SIGKILLed, the reaper stops the database and workload.
    reaper = subprocess.Popen([sys.executable, "-m", "queueops.lab.reaper", str(state)], stdin=subprocess.DEVNULL,
                              start_new_session=True, **child_procs.popen_kwargs())
    try:
        # The collector service fills the store, so history charts and alerts work from the start.
        service_log = open(state / "service.log", "ab")  # noqa: SIM115 - handed to the child
        children.append(subprocess.Popen(
            [sys.executable, "-m", "queueops.cli", "collect", "--config", info["config"]],
            stdout=service_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            **child_procs.popen_kwargs()))
        cmd, env = streamlit_command(info["config"], args.port)
        children.append(subprocess.Popen(cmd, env=env, start_new_session=True, **child_procs.popen_kwargs()))
    except BaseException:
        _stop_all(children, state)
        raise
    print(f"\n  queueops console: http://localhost:{args.port}\n"
          "  sign in as operator / queueops-operator (or viewer / queueops-viewer)\n"
          f"  lab config: {info['config']}   service log: {state / 'service.log'}\n"
          "  Ctrl-C stops the console, the collector service, the workload and the database.\n", flush=True)

    def _term(_signum: int) -> None:
        raise KeyboardInterrupt

    # SIGINT, SIGTERM and SIGHUP (a closed terminal) stop everything in order; a SIGKILLed demo
    # takes the console and the service with it (die_with_parent), and the reaper stops the
    # database and the workload.
    child_procs.forward_stop_signals(_term)
    try:
        while all(c.poll() is None for c in children):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        _stop_all(children, state)
        reaper.terminate()
    return 0


def _stop_all(children: list[subprocess.Popen[bytes]], state: Path) -> None:
    """Stop the console and the service, then the workload and the database: nothing left behind."""
    for c in children:
        with contextlib.suppress(ProcessLookupError):
            c.terminate()
    for c in children:
        try:
            c.wait(timeout=15)
        except subprocess.TimeoutExpired:
            c.kill()
    control.stop(state)
    print("demo stopped: console, service, workload and database are down.", flush=True)
