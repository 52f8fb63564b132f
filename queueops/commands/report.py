"""``queueops report``: write the daily health report (one self-contained HTML file).

By default it first brings the gold tables up to date (``queueops pipeline run``, incremental, in
a child process so the JVM does not outlive it) when the lake exists; ``--no-pipeline`` only
reads what is there. The service runs this command daily at ``report.daily_at``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from queueops import causes
from queueops.commands.common import add_config_arg, fail, load_config, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write the daily health report (HTML)",
                       description="Findings, forecasts, charts, the fleet view and the actions taken, for one "
                                   "day, in one self-contained HTML file.")
    add_config_arg(p)
    p.add_argument("--out", metavar="FILE", help="where to write it (default: [report] path of the config)")
    p.add_argument("--gold", metavar="PATH", help="gold tables folder (default: [pipeline] out of the config)")
    p.add_argument("--date", metavar="YYYY-MM-DD", help="that UTC day (default: the --hours before the last pipeline run, else before now)")
    p.add_argument("--hours", type=float, default=24.0, help="period length without --date (default 24)")
    p.add_argument("--no-pipeline", action="store_true", help="do not run the pipeline first")
    p.add_argument("--json", action="store_true", help="print what was written as one JSON object")
    p.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    from queueops.report import write_report

    cfg = load_config(args)
    setting, gold_value = ("--gold", args.gold) if args.gold else ("[pipeline] out", cfg.pipeline.out)
    gold: str | Path = gold_value if "://" in gold_value else cfg.path(gold_value)
    out = Path(args.out) if args.out else cfg.path(cfg.report.path)
    if args.date:
        try:
            from datetime import datetime

            datetime.strptime(args.date, "%Y-%m-%d")
        except ValueError:
            return fail(f"--date {args.date!r}: expected YYYY-MM-DD", 2)
    from queueops.report.data import GoldError, gold_location

    try:
        gold_location(gold, setting)
    except GoldError as exc:
        return fail(str(exc), 2)
    if not args.no_pipeline and "://" in cfg.lake.path:
        print(f"queueops report: [lake] path = {cfg.lake.path!r} is a URI: the pipeline is not run "
              "first (run 'queueops pipeline run' before, or let the service's after_export do it); reporting "
              "what the gold tables hold", file=sys.stderr)
    elif not args.no_pipeline and cfg.path(cfg.lake.path).exists():
        cmd = [sys.executable, "-m", "queueops.cli", "pipeline", "run", "--quiet", "--out", str(gold)]
        if cfg.source:
            cmd += ["--config", cfg.source]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=6 * 3600)
        if proc.returncode != 0:
            print(f"queueops report: the pipeline run failed ({proc.returncode}); reporting what the gold "
                  f"tables hold:\n{proc.stderr.strip()[-2000:]}", file=sys.stderr)
    engine = None
    try:
        from queueops.store import open_engine

        engine = open_engine(cfg, create=False)
    except Exception as exc:  # noqa: BLE001 - the report still shows the gold tables
        from queueops import secrets

        print(f"queueops report: store unavailable: {secrets.mask(str(exc))}", file=sys.stderr)
    result = write_report(gold, out, day=args.date, hours=args.hours, audit_engine=engine, setting=setting,
                          snapshot_thresholds=causes.snapshot_thresholds(cfg.queues))
    if args.json:
        print_json(result)
    else:
        print(f"wrote {result['path']} ({result['findings']} finding(s), {result['critical']} critical, "
              f"{result['actions']} action(s), {result['start']} - {result['end']})")
        for p in result["problems"]:
            print(f"  note: {p}")
    return 0
