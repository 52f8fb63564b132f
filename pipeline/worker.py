"""The service's resident pipeline process: the hourly run in a SparkSession started once.

Why: the service's ``[pipeline] after_export`` ran every hour as a fresh ``queueops pipeline run``,
whose JVM start, SparkContext and first query's class loading were about 4-5 s of a ~12 s hour
(docs/benchmarks.md). This process keeps one session for as long as the service runs and takes
one run per request, so only its first run pays for them (and the JIT's code stays warm).

Why a process of its own and not a session inside the service: the service's collectors must not
share a process with a 1 GB JVM gateway that can fail (docs/architecture.md); a worker that dies
(the JVM ran out of memory, a py4j error) is started again by the service at the next run, and
the collectors never notice. Its cost: the idle JVM's resident memory between runs
(docs/pipeline.md, "The service's hourly run").

Only small runs are run here (at most :data:`pipeline.run.SMALL_RUN_HOURS` lake hours, local lake
and gold, the session's master, memory and settings): the session's JVM has the small run's
options (client compiler, serial collector), which make a large run ~1.7x slower, and a JVM's
options cannot change once it runs. A larger run (the first one, a ``--full``, new thresholds) is
answered ``{"fresh": ...}`` and the service runs it as a child process of its own, as before.

Protocol, one line each way: the request is a JSON array of ``queueops pipeline run`` arguments
on stdin; the reply is :data:`MARKER` then a JSON object, ``{"code", "out", "err"}`` (exit code,
what the run printed on stdout and stderr) or ``{"fresh": reason}``. Other lines on stdout (a
JVM's own messages) are not replies. End of stdin ends the process; so does an unexpected error
(after its reply), so that the next run starts from a new JVM.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline import run as job  # noqa: E402

MARKER = "@@queueops-pipeline-worker "


class Worker:
    """One session, created by the first small run, reused by the next ones."""

    def __init__(self) -> None:
        self.parser = argparse.ArgumentParser(prog="queueops pipeline run", add_help=False)
        job.add_arguments(self.parser)
        self.spark: Any = None
        self.key: tuple | None = None
        self.runs = 0

    def handle(self, argv: list[str]) -> dict[str, Any]:
        """One request: the reply (see the module's docstring)."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                args = self.parser.parse_args(argv)
            except SystemExit as exc:  # argparse has printed the reason to (our) stderr
                return {"code": int(exc.code or 2), "out": out.getvalue(), "err": err.getvalue()}
            _implicit_config(args)
            try:
                r = job.checked(args)
            except job.PipelineError as exc:
                print(f"queueops pipeline: {exc}", file=sys.stderr)
                return {"code": 2, "out": out.getvalue(), "err": err.getvalue()}
            why = self.not_here(r)
            if why:
                return {"fresh": why}
            spark = self.session(r)
            code = job.run_and_print(spark, args, r)
            self.runs += 1
            spark.catalog.clearCache()
        return {"code": code, "out": out.getvalue(), "err": err.getvalue()}

    def not_here(self, r: dict[str, Any]) -> str:
        """Why this run needs a fresh process ('' when this session can run it)."""
        from pipeline.spark import launches_local_jvm

        if not job.is_small(r):
            return f"reads {r['hours'] if r['hours'] is not None else 'an unknown number of'} lake hours"
        if not launches_local_jvm(r["master"]):
            return f"master {r['master']} is not local"
        if self.key is not None and self.key != _session_key(r):
            return "Spark settings changed since this worker's session started"
        return ""

    def session(self, r: dict[str, Any]) -> Any:  # noqa: ANN401 - a SparkSession
        if self.spark is None:
            from pipeline.spark import get_session

            self.spark = get_session(r["master"], driver_memory=r["driver_memory"],
                                     shuffle_partitions=r["shuffle_partitions"], small=True, extra=r["conf"])
            self.key = _session_key(r)
        return self.spark

    def stop(self) -> None:
        if self.spark is not None:
            with contextlib.suppress(Exception):
                self.spark.stop()
            self.spark = None


def _session_key(r: dict[str, Any]) -> tuple:
    return (r["master"], r["driver_memory"], r["shuffle_partitions"], tuple(sorted(r["conf"].items())))


def _implicit_config(args: argparse.Namespace) -> None:
    """As ``queueops pipeline run``: ``$QUEUEOPS_CONFIG`` or ``./queueops.toml`` when no --config."""
    if not args.config:
        from queueops.config import DEFAULT_CONFIG

        implicit = os.environ.get("QUEUEOPS_CONFIG") or DEFAULT_CONFIG
        if Path(implicit).exists():
            args.config = implicit


def reply(obj: dict[str, Any]) -> None:
    sys.stdout.write(MARKER + json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main() -> int:
    from queueops import extras

    extras.require("pipeline", "the resident pipeline worker (Spark)")
    # SIGTERM (the service stopping) stops the session, whose JVM exits with its gateway.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    worker = Worker()
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                argv = json.loads(line)
                if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
                    raise ValueError("a request is a JSON array of strings")
            except ValueError as exc:
                reply({"code": 2, "out": "", "err": f"pipeline worker: bad request: {exc}"})
                continue
            try:
                reply(worker.handle(argv))
            except Exception:  # noqa: BLE001 - told to the service, then a new JVM next time
                reply({"code": 1, "out": "", "err": traceback.format_exc()[-2000:]})
                return 1
    finally:
        worker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
