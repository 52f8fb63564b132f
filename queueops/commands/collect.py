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
    svc = p.add_argument_group("service (without --once)")
    svc.add_argument("--duration", type=_positive, metavar="SECONDS",
                     help="stop cleanly after this many seconds (default: run until SIGINT/SIGTERM)")
    svc.add_argument("--metrics-port", type=int, metavar="PORT",
                     help="serve /metrics (Prometheus) and /healthz on this port (0: any free port)")
    svc.add_argument("--metrics-addr", default="127.0.0.1", metavar="ADDR",
                     help="address for --metrics-port (default 127.0.0.1)")
    svc.add_argument("--no-lake", action="store_true",
                     help="do not export to the lake (e.g. all but one of several schedulers sharing a store)")
    svc.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.set_defaults(func=_collect, parser=p)


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def _collect(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    selected = [registry.by_name(n) for n in args.collector] or None
    if not args.once:
        from queueops.service import run_service  # the scheduler's imports only when it runs

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
