"""``queueops collect``: sample every queue now (``--once``), or run the scheduled service."""

from __future__ import annotations

import argparse

from collectors import registry, runner
from queueops.commands.common import add_config_arg, load_config, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("collect", help="run the collectors (once, or on a schedule)",
                       description="With --once: one cycle of every collector against every target, "
                                   "printed as one JSON object per snapshot row and per collector status.")
    add_config_arg(p)
    p.add_argument("--once", action="store_true", help="run one cycle and exit")
    p.add_argument("--json", action="store_true", help="print rows as JSON lines (with --once)")
    p.add_argument("--collector", action="append", default=[], metavar="NAME",
                   help="run only these collectors (repeatable); default: all")
    p.set_defaults(func=_collect, parser=p)


def _collect(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    selected = [registry.by_name(n) for n in args.collector] or None
    if not args.once:
        try:
            from queueops.service import run_service
        except ModuleNotFoundError:
            args.parser.error("the scheduled service is not available yet; use --once")
        return run_service(cfg, args)
    result = runner.run_once(cfg, selected)
    if args.json:
        for row in result.rows:
            print_json(row.to_json())
        for st in result.status:
            print_json(st.to_json())
    else:
        for row in result.rows:
            print(f"{row.target:10} {row.queue:16} {row.metric:24} {row.value!s:>14} {row.note}")
        for st in result.status:
            print(f"{st.target:10} {st.collector:16} {'ok' if st.ok else 'ERROR'} {st.duration_ms:.1f} ms {st.error}")
    return 0 if all(s.ok for s in result.status) else 1
