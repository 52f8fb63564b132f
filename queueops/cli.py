"""The ``queueops`` command: one sub-command module per verb under :mod:`queueops.commands`."""

from __future__ import annotations

import argparse
import importlib
import sys

# Each module defines ``register(subparsers)`` and sets ``func`` on its parsers.
COMMANDS = ("lab", "config", "discover", "collect", "serve", "demo", "act", "audit", "autopilot", "lake", "pipeline", "report",
            "users", "sql")

EPILOG = """\
quick start:
  queueops lab start            start the embedded PostgreSQL lab with a live workload
  queueops serve --config .queueops/lab.toml
  queueops collect --once --json --config .queueops/lab.toml
  queueops lab fault dead-consumer on
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="queueops",
        description="Observe and operate database tables used as queues (SQL Server, PostgreSQL).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"queueops.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from queueops.extras import MissingExtra

    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except MissingExtra as exc:  # an optional part this command needs is not installed
        print(f"queueops: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
