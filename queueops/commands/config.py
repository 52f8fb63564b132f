"""``queueops config check``: validate a config file, optionally against the live databases."""

from __future__ import annotations

import argparse
import sys

from queueops import config as config_mod
from queueops import configcheck
from queueops.commands.common import add_config_arg, load_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="check a config file")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    c = csub.add_parser("check", help="validate the file; with --live, also that tables and columns exist",
                        description="Exits 0 when the config is valid. Every problem is printed as "
                                    "FILE: FIELD = VALUE: MESSAGE. Every env:/file: secret is resolved (relative "
                                    "file: paths against the config file's folder) and the file read is "
                                    "named. Nothing is executed against a database unless --live is given, "
                                    "and then only catalog lookups.")
    add_config_arg(c)
    c.add_argument("--live", action="store_true", help="connect to each target and check tables, columns, their types, "
                   "which metrics each queue can produce, and whether statements seek or scan")
    c.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    # Secrets first: "ok" is printed only for a config whose every env:/file: reference resolves
    # here (a copied config whose relative file: secret stayed behind is not ok).
    problems = config_mod.secret_problems(cfg)
    for p in problems:
        # Not through secrets.mask: its "password = ..." pattern would hide the reference itself,
        # which is no secret (env:NAME / file:PATH), and the message holds only the resolved path.
        print(p.render(cfg.source or "<config>"), file=sys.stderr)
    if problems:
        return 1
    # What the service builds at start from the file (its alert rules, its collection plan): a rule
    # naming an unknown queue or metric must fail here, not when the service starts.
    wiring = configcheck.service_problem(cfg)
    if wiring:
        print(f"{cfg.source or '<config>'}: {wiring}", file=sys.stderr)
        return 1
    # With --live the verdict comes last, after the servers were asked: no early "ok".
    warnings = configcheck.warnings(cfg, live=args.live)
    verdict = "valid" if args.live else "ok" if not warnings else f"ok with {len(warnings)} warning(s)"
    print(f"{cfg.source}: {verdict} ({len(cfg.targets)} targets, {len(cfg.queues)} queues)")
    source = cfg.source or "<config>"
    for w in warnings:
        print(w.render(source).replace(f"{source}: ", f"{source}: warning: ", 1))
    for field, path in config_mod.secret_files(cfg):
        print(f"  {field}: secret read from {path}")
    if not args.live:
        return 0
    from queueops.livecheck import print_live

    return print_live(cfg)  # one stream (stdout), one verdict for the file, exit 1 on errors
