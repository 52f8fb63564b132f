"""``queueops serve``: run the Streamlit console."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tomllib
from pathlib import Path

from queueops import config as config_mod
from queueops import extras
from queueops.commands.common import add_config_arg

# Streamlit reads .streamlit/config.toml from the *working directory* only. The console keeps the
# user's working directory (their own .streamlit/secrets.toml, e.g. OIDC, lives there) and passes
# the project's theme and server options as command-line flags instead.
PROJECT_STREAMLIT_CONFIG = Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the Streamlit console",
                       description="Serves the console on http://localhost:PORT (default 8501).")
    add_config_arg(p)
    p.add_argument("--port", type=int, default=8501, help="console port (default 8501)")
    p.add_argument("--address", default="localhost", help="address to listen on (default localhost)")
    p.set_defaults(func=_serve)


def config_options(path: Path = PROJECT_STREAMLIT_CONFIG) -> dict[str, str]:
    """``{"section.option": "value"}`` for every option of the project's .streamlit/config.toml."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    out: dict[str, str] = {}

    def walk(prefix: str, options: dict) -> None:  # nested sections too: [theme.light], [theme.dark]
        for key, value in options.items():
            if isinstance(value, dict):
                walk(f"{prefix}.{key}", value)
            elif not isinstance(value, list):
                out[f"{prefix}.{key}"] = str(value).lower() if isinstance(value, bool) else str(value)

    for section, options in raw.items():
        if isinstance(options, dict):
            walk(section, options)
    return out


def streamlit_command(config: str | None, port: int, address: str = "localhost") -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run the console (shared with demo and the tests).

    The console is found, not imported: the CLI sits below the console in the layering (it
    launches it in its own process) and a collector-only install has no Streamlit.
    """
    extras.require("console", "queueops serve (the console)")
    spec = importlib.util.find_spec("console")
    if spec is None or not spec.submodule_search_locations:
        raise extras.MissingExtra("queueops serve: the console package is not installed with queueops")
    # server.py serves app.py through st.App with the console's sign-in routes (console/signin.py).
    app = Path(list(spec.submodule_search_locations)[0]).resolve() / "server.py"
    env = dict(os.environ)
    # Resolve the config now: a relative path (or the ./queueops.toml default) means the caller's folder.
    path = config or env.get("QUEUEOPS_CONFIG") or config_mod.DEFAULT_CONFIG
    env["QUEUEOPS_CONFIG"] = str(Path(path).resolve())
    env.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
    options = {**config_options(), "server.headless": "true", "server.port": str(port),
               "server.address": address, "browser.gatherUsageStats": "false",
               "server.fileWatcherType": "none"}
    flags = [part for key, value in options.items() for part in (f"--{key}", value)]
    return [sys.executable, "-m", "streamlit", "run", str(app), *flags], env


def _serve(args: argparse.Namespace) -> int:
    """Replace this process with Streamlit (exec), so there is no parent to outlive or forget.

    Every signal (SIGTERM, SIGHUP, SIGINT, and SIGKILL too) then reaches the console itself, and
    whoever supervises ``queueops serve`` supervises the console: no orphan can hold the port.
    """
    cmd, env = streamlit_command(args.config, args.port, args.address)
    print(f"queueops console: http://{args.address}:{args.port}", flush=True)
    sys.stderr.flush()
    os.execve(cmd[0], cmd, env)
    return 0  # not reached
