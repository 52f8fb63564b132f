"""``queueops serve``: run the Streamlit console."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from queueops.commands.common import add_config_arg


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the Streamlit console",
                       description="Serves the console on http://localhost:PORT (default 8501).")
    add_config_arg(p)
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--address", default="localhost", help="address to listen on (default localhost)")
    p.set_defaults(func=_serve)


def streamlit_command(config: str | None, port: int, address: str = "localhost") -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run the console (shared with demo and the tests)."""
    import console

    app = Path(console.__file__).resolve().parent / "app.py"
    env = dict(os.environ)
    if config:
        env["QUEUEOPS_CONFIG"] = str(Path(config).resolve())
    env.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.headless", "true",
           "--server.port", str(port), "--server.address", address, "--browser.gatherUsageStats", "false"]
    return cmd, env


def _serve(args: argparse.Namespace) -> int:
    cmd, env = streamlit_command(args.config, args.port, args.address)
    print(f"queueops console: http://{args.address}:{args.port}", flush=True)
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 0
