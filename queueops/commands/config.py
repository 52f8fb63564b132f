"""``queueops config check``: validate a config file, optionally against the live databases."""

from __future__ import annotations

import argparse
import sys

from queueops import secrets
from queueops.commands.common import add_config_arg, load_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="check a config file")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    c = csub.add_parser("check", help="validate the file; with --live, also that tables and columns exist",
                        description="Exits 0 when the config is valid. Every problem is printed as "
                                    "FILE: FIELD = VALUE: MESSAGE. Nothing is executed against a database "
                                    "unless --live is given, and then only catalog lookups.")
    add_config_arg(c)
    c.add_argument("--live", action="store_true", help="connect to each target and check tables and columns")
    c.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    print(f"{cfg.source}: ok ({len(cfg.targets)} targets, {len(cfg.queues)} queues)")
    if not args.live:
        return 0
    from queueops.livecheck import check_live

    problems = check_live(cfg)
    for p in problems:
        print(secrets.mask(p), file=sys.stderr)
    return 1 if problems else 0
