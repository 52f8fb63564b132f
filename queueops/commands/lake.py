"""``queueops lake export``: write closed hours of the store to the Parquet lake now.

Without ``--hour`` it does what the service's hourly job does (every closed hour not exported
yet, and exported hours that received rows since); ``--hour`` (repeatable) re-exports exactly
those hours, replacing their partitions.
"""

from __future__ import annotations

import argparse
from datetime import datetime

from queueops.commands.common import add_config_arg, fail, load_config, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lake", help="the Parquet lake (export closed hours)",
                       description="The lake holds closed hours of the store as Parquet: "
                                   "<lake>/snapshots|status/date=YYYY-MM-DD/hour=HH/part-0.parquet.")
    lsub = p.add_subparsers(dest="lake_command", metavar="COMMAND", required=True)
    e = lsub.add_parser("export", help="export closed hours now",
                        description="Export every closed hour not in the lake yet (and hours that received "
                                    "rows since they were exported), or exactly the --hour(s) given.")
    add_config_arg(e)
    e.add_argument("--hour", action="append", default=[], type=_hour, metavar="YYYY-MM-DDTHH",
                   help="re-export this UTC hour (repeatable), replacing its partition")
    e.add_argument("--json", action="store_true", help="print the result as one JSON object")
    e.set_defaults(func=_export)


def _hour(text: str) -> datetime:
    try:
        from queueops.store.timeutil import parse_hour

        return parse_hour(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _export(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    from queueops.lake.export import export_hours
    from queueops.store import open_engine

    try:
        engine = open_engine(cfg)
        result = export_hours(cfg, engine, hours=args.hour or None)
    except Exception as exc:  # noqa: BLE001 - one clear line; the hours stay unexported
        return fail(f"lake export failed: {type(exc).__name__}: {exc}")
    if args.json:
        print_json(result.to_json())
    else:
        for h in result.exported:
            print(f"exported {h['hour']}  {h['rows']:>9} snapshot rows  {h['status_rows']:>7} status rows  "
                  f"({h['reason']}, {h['how']})")
        for h in result.skipped:
            print(f"skipped  {h['hour']}  {h['reason']}")
        if not result.exported and not result.skipped:
            print("nothing to export: every closed hour is in the lake")
    return 1 if args.hour and result.skipped else 0
