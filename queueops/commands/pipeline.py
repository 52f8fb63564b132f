"""``queueops pipeline run``: the Spark pipeline over the snapshot lake (see docs/pipeline.md).

A thin adapter: the job itself is ``pipeline/run.py``, which ``spark-submit`` runs unchanged on a
cluster; this verb only finds the config (``--config``, ``$QUEUEOPS_CONFIG`` or ``./queueops.toml``
when present, for the lake path, the gold folder and the thresholds) and calls it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from queueops.config import DEFAULT_CONFIG


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pipeline", help="roll up the lake on Spark: rollups, findings, forecasts",
                       description="The Spark pipeline over the snapshot lake (docs/pipeline.md).")
    verbs = p.add_subparsers(dest="pipeline_command", metavar="VERB")
    run = verbs.add_parser("run", help="bring the gold tables up to date with the lake (incremental)",
                           description="Recompute the gold tables (rollups, findings, forecasts, fleet view) "
                                       "for lake hours that are new or changed since the last run; --full "
                                       "recomputes everything. Progress goes to stderr, the summary to stdout.")
    from pipeline.run import add_arguments

    add_arguments(run)
    run.set_defaults(func=_run)
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])


def _run(args: argparse.Namespace) -> int:
    from pipeline.run import execute
    from queueops import extras

    extras.require("pipeline", "queueops pipeline run (Spark)")

    if not args.config:
        implicit = os.environ.get("QUEUEOPS_CONFIG") or DEFAULT_CONFIG
        if Path(implicit).exists():
            args.config = implicit
    return execute(args)
