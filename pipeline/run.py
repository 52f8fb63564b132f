"""The pipeline job: lake -> rollups, findings, forecasts, fleet view (gold tables).

Runs as ``queueops pipeline run`` or, unchanged, as ``spark-submit pipeline/run.py --lake L --out O``
(local or on a cluster: no Python UDFs, so executors need nothing but Spark itself).

Incremental by default. The lake hours that are new or changed since the last run (pipeline state
beside the gold tables) are recomputed, together with the hour after each (its first counter
interval and look-backs start in the changed hour); the hour before each is read as margin only.
Then the days containing them are re-derived from their hourly rows, and the forecasts and fleet
view are recomputed from the gold tables. ``--full`` recomputes everything (or everything from
``--since`` on). Changing rule parameters or thresholds makes the next run a full one.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # spark-submit pipeline/run.py: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline import gold, state  # noqa: E402
from pipeline.params import Params  # noqa: E402
from pipeline.storage import MissingFileSystem, Partition, hadoop_uri, is_local, join, storage_for  # noqa: E402
from pipeline.thresholds import Thresholds  # noqa: E402

HOUR = timedelta(hours=1)
LAYOUT_VERSION = 1
# A run that reads at most this many lake hours (the hourly run reads two) starts a light JVM
# (pipeline.spark.SMALL_RUN_JVM_OPTIONS); a larger one needs the optimizing JIT compiler.
SMALL_RUN_HOURS = 4


class PipelineError(Exception):
    """A problem with the input or the arguments, reported without a traceback."""


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """``2026-11-20``, ``2026-11-20T13``, an ISO time, or relative ``36h`` / ``7d``: floored to the hour."""
    if not text:
        return None
    now = now or datetime.now(UTC)
    rel = re.fullmatch(r"\s*(\d+)\s*([hd])\s*", text)
    if rel:
        n, unit = int(rel.group(1)), rel.group(2)
        t = now - (timedelta(hours=n) if unit == "h" else timedelta(days=n))
    else:
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}", text.strip()):
                t = datetime.strptime(text.strip(), "%Y-%m-%dT%H")
            else:
                t = datetime.fromisoformat(text.strip())
        except ValueError:
            raise PipelineError(f"--since {text!r}: expected YYYY-MM-DD, YYYY-MM-DDTHH, an ISO time, "
                                "or a relative 36h / 7d") from None
        t = t.replace(tzinfo=t.tzinfo or UTC).astimezone(UTC)
    return t.replace(minute=0, second=0, microsecond=0)


def absolute(path: str) -> str:
    """Local paths become absolute (the Spark driver and the pipeline agree on them)."""
    if is_local(path):
        return str(Path(path.removeprefix("file:")).expanduser().resolve())
    return path.rstrip("/")


def settings_fingerprint(params: Params, th: Thresholds) -> str:
    return state.fingerprint({"layout": LAYOUT_VERSION, "params": asdict(params), "thresholds": th.as_json()})


def run(spark: Any, lake: str, out: str, *, since: datetime | None = None, full: bool = False,
        params: Params | None = None, thresholds: Thresholds | None = None,
        progress: Any | None = None, now: datetime | None = None) -> dict[str, Any]:
    """Bring the gold tables under ``out`` up to date with the lake; return what was done."""
    from pipeline import findings as fnd
    from pipeline import fleet as flt
    from pipeline import forecasts as fc
    from pipeline import rollups as ru

    params = params or Params()
    th = thresholds or Thresholds()
    started = time.monotonic()
    lake, out = absolute(lake), absolute(out)
    fs_lake, fs_out = storage_for(lake, spark), storage_for(out, spark)
    step = progress.step if progress is not None else _no_step

    parts = fs_lake.list_partitions(join(lake, "snapshots"))
    by_hour: dict[datetime, Partition] = {p.hour: p for p in parts}
    st = state.load(fs_out, out)
    settings = settings_fingerprint(params, th)
    full, reason = _mode(st, settings, full, fs_out, out)
    in_range = [p for p in parts if since is None or p.hour >= since]

    cleared: list[str] = []
    if full:
        if since is None:
            cleared = gold.clear(fs_out, [join(out, t) for t in gold.TABLES])
            st = state.State()
        else:
            cleared = _clear_from(fs_out, out, since)
            st.partitions = {k: v for k, v in st.partitions.items() if state.parse_hour_key(k) < since}
    changes, recompute = _changes(st, in_range, set(by_hour), full)
    removed = [] if full else [state.hour_key(h) for h in changes.removed if since is None or h >= since]
    for key in removed:  # gone from the lake (retention): gold keeps its history
        st.partitions.pop(key, None)

    summary: dict[str, Any] = {
        "lake": lake, "out": out, "mode": "full" if full else "incremental", "full_reason": reason,
        "since": since.isoformat() if since else None,
        "lake_hours": len(parts), "new_hours": [state.hour_key(h) for h in changes.new],
        "changed_hours": [state.hour_key(h) for h in changes.changed], "removed_hours": removed,
        "recomputed_hours": [state.hour_key(h) for h in recompute], "read_hours": [],
        "written": [], "findings": [], "forecasts": 0,
    }
    if not recompute:
        if removed:
            state.save(fs_out, out, st)
        summary["wall_s"] = round(time.monotonic() - started, 3)
        summary["up_to_date"] = True
        return summary

    read = _read(recompute, set(by_hour))
    summary["read_hours"] = [state.hour_key(h) for h in read]
    files = [f for h in read for f in by_hour[h].files]
    if not full:
        cleared = gold.clear(fs_out, [p for h in recompute for p in gold.hour_paths(out, h)])
    summary["cleared"] = len(cleared)

    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    rolled = rolled_up(spark, files, recompute, params)
    rollup_base = join(out, gold.ROLLUPS)
    findings_base = join(out, gold.FINDINGS)
    with step("rollups"):
        write_rollups(rolled, rollup_base)
    with step("findings"):
        # The profile is small (queues x hours): computed once into one partition (a local
        # checkpoint), so that the rules' union reads it instead of recomputing its aggregation
        # once per rule. Checkpointed rather than cached: its plan becomes a leaf, and building
        # the rules' union over the whole rollups plan took about 3 s of planning per run.
        prof = fnd.profile(rolled, fnd.signals(rolled, params), th, params).coalesce(1).localCheckpoint()
        found = fnd.evaluate(prof, params).cache()
        gold.write_partitioned(found, findings_base, ["date", "hour"], gold.FINDING_ORDER)
        rolled.unpersist()
        # Sorted here, not by Spark: an orderBy is one more shuffle (and a sampling job) for a few rows.
        summary["findings"] = [
            {"rule": r["rule"], "severity": r["severity"], "target": r["target"], "queue": r["queue"],
             "hour": f"{r['date']}T{r['hour']}", "summary": r["summary"]}
            for r in sorted(found.select("rule", "severity", "target", "queue", "date", "hour", "summary").collect(),
                            key=lambda r: (r["date"], r["hour"], r["rule"], r["target"], r["queue"]))]
        found.unpersist()

    days = sorted({h.strftime("%Y-%m-%d") for h in recompute})
    with step("daily rollups"):
        gold.clear(fs_out, [gold.rollup_day_path(out, d) for d in days])
        hour_dirs = [join(rollup_base, "window=1h", f"date={d}", hd) for d in days
                     for hd in fs_out.list_dirs(join(rollup_base, "window=1h", f"date={d}")) if hd.startswith("hour=")]
        hourly = gold.read_partitions(spark, rollup_base, hour_dirs, fs_out, ru.ROLLUP_SCHEMA)
        gold.write_partitioned(ru.day_from_hours(hourly), rollup_base, ["window", "date", "hour"], gold.ROLLUP_ORDER)

    as_of = max(by_hour) + HOUR
    with step("forecasts"):
        want = int(params.forecast_hours) + (params.forecast_hours % 1 > 0)
        r5w = gold.read_partitions(spark, rollup_base, [gold.rollup_hour_path(out, "5m", as_of - HOUR * (i + 1))
                                                        for i in range(want)], fs_out, ru.ROLLUP_SCHEMA)
        # The count of 'ok' forecasts is observed while the table is written: no second action.
        ok = Observation("forecasts")
        fcs = fc.forecasts(r5w, th, params, as_of).observe(ok, F.expr("count_if(status = 'ok') AS ok"))
        gold.write_snapshot(fcs, join(out, gold.FORECASTS), ["target", "queue", "metric"])
        summary["forecasts"] = int(ok.get["ok"])
    with step("fleet"):
        want = int(params.fleet_hours) + (params.fleet_hours % 1 > 0)
        back = [as_of - HOUR * (i + 1) for i in range(want)]
        h1 = gold.read_partitions(spark, rollup_base, [gold.rollup_hour_path(out, "1h", h) for h in back], fs_out,
                                  ru.ROLLUP_SCHEMA)
        fw = gold.read_partitions(spark, findings_base, [gold.findings_hour_path(out, h) for h in back], fs_out,
                                  fnd.FINDING_SCHEMA)
        gold.write_snapshot(flt.fleet(h1, fw, params, as_of), join(out, gold.FLEET), ["problem", "rank"])

    summary["as_of"] = as_of.isoformat()
    summary["written"] = sorted([p for h in recompute for p in gold.hour_paths(out, h)]
                                + [gold.rollup_day_path(out, d) for d in days]
                                + [join(out, gold.FORECASTS), join(out, gold.FLEET)])

    state.record(st, parts, set(recompute))
    st.settings = settings
    st.last_run = {"at": datetime.now(UTC).isoformat(), "mode": summary["mode"],
                   "recomputed": len(recompute), "as_of": as_of.isoformat()}
    state.save(fs_out, out, st)
    summary["wall_s"] = round(time.monotonic() - started, 3)
    return summary


def rolled_up(spark: Any, files: list[str], hours: list[datetime], params: Params) -> Any:
    """The 5-minute and hourly rollups, with the findings' signal columns, of the lake ``files`` for
    the ``hours`` recomputed (the files may hold earlier hours too: their rows are margin), persisted.

    Only the rollups read the lake: their aggregation is kept for the rollups' write
    (:func:`write_rollups`) and the findings, then dropped by the caller. On disk only: a memory
    level unrolls each partition's cached batches in the heap first, which ran a 1 GB driver out of
    memory on a 100M-row lake (docs/benchmarks.md); on disk, one batch at a time is in memory.
    """
    from pyspark import StorageLevel

    from pipeline import rollups as ru

    rolled = ru.rollups_and_signals(ru.prepare(ru.read_lake(spark, files), hours), params, hours)
    return rolled.persist(StorageLevel.DISK_ONLY)


def write_rollups(rolled: Any, rollup_base: str) -> None:
    """The gold rollups (5-minute and hourly rows of :func:`rolled_up`): one folder per window, date
    and hour under ``rollup_base``."""
    from pipeline import rollups as ru

    gold.write_by_hour(rolled.select(*ru.ROLLUP_COLUMNS), rollup_base, ["window", "date", "hour"],
                       gold.ROLLUP_ORDER)


def _mode(st: state.State, settings: str, full: bool, fs_out: Any, out: str) -> tuple[bool, str]:
    """Full or incremental, and why full when not asked for."""
    if full:
        return True, "requested"
    if st.partitions and st.settings != settings:
        return True, "rule parameters or thresholds changed since the last run"
    if not st.partitions and any(fs_out.exists(join(out, t)) for t in gold.TABLES):
        return True, "gold tables without pipeline state"
    return False, ""


def hours_to_read(lake: str, out: str, *, since: datetime | None = None, full: bool = False,
                  params: Params | None = None, thresholds: Thresholds | None = None) -> int | None:
    """How many lake hours :func:`run` will read, known before Spark starts (so that a small run
    gets a light JVM, :func:`pipeline.spark.session_conf`); None for a lake or gold folder that is
    not local (listing it needs Spark's Hadoop file system)."""
    lake, out = absolute(lake), absolute(out)
    if not (is_local(lake) and is_local(out)):
        return None
    fs_lake, fs_out = storage_for(lake), storage_for(out)
    parts = fs_lake.list_partitions(join(lake, "snapshots"))
    st = state.load(fs_out, out)
    full, _reason = _mode(st, settings_fingerprint(params or Params(), thresholds or Thresholds()), full, fs_out, out)
    in_range = [p for p in parts if since is None or p.hour >= since]
    hours = {p.hour for p in parts}
    return len(_read(_changes(st, in_range, hours, full)[1], hours))


def _changes(st: state.State, in_range: list[Partition], hours: set[datetime],
             full: bool) -> tuple[state.Changes, list[datetime]]:
    """The lake's changes since the last run, and the hours to recompute: each new or changed hour
    and the hour after it (or every hour in range when full)."""
    if full:
        recompute = sorted(p.hour for p in in_range)
        return state.Changes(recompute, [], []), recompute
    changes = state.diff(st, in_range)
    touched = set(changes.touched)
    return changes, sorted(touched | {h + HOUR for h in touched if h + HOUR in hours})


def _read(recompute: list[datetime], hours: set[datetime]) -> list[datetime]:
    """The lake hours to read: the recomputed ones and the hour before each (margin)."""
    return sorted(set(recompute) | {h - HOUR for h in recompute if h - HOUR in hours})


def _no_step(_name: str) -> Any:
    from contextlib import nullcontext

    return nullcontext()


def _clear_from(fs: Any, out: str, since: datetime) -> list[str]:
    """Delete every gold partition from ``since`` on (the day of ``since`` is re-derived anyway)."""
    paths: list[str] = []
    day0 = since.strftime("%Y-%m-%d")
    for window in ("5m", "1h", "1d"):
        base = join(out, gold.ROLLUPS, f"window={window}")
        for dd in fs.list_dirs(base):
            d = dd.removeprefix("date=")
            if d < day0:
                continue
            for hd in fs.list_dirs(join(base, dd)):
                h = hd.removeprefix("hour=")
                if window == "1d" or f"{d}T{h}" >= state.hour_key(since):
                    paths.append(join(base, dd, hd))
    for dd in fs.list_dirs(join(out, gold.FINDINGS)):
        for hd in fs.list_dirs(join(out, gold.FINDINGS, dd)):
            if f"{dd.removeprefix('date=')}T{hd.removeprefix('hour=')}" >= state.hour_key(since):
                paths.append(join(out, gold.FINDINGS, dd, hd))
    return gold.clear(fs, paths)


# ---- command line (shared by `queueops pipeline run` and spark-submit) -------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lake", metavar="PATH", help="the snapshot lake (default: [lake] path of the config)")
    p.add_argument("--out", metavar="PATH", help="gold tables folder (default: [pipeline] out of the config)")
    p.add_argument("--since", metavar="WHEN",
                   help="only lake hours from then on: YYYY-MM-DD, YYYY-MM-DDTHH, ISO time, or 36h / 7d ago")
    p.add_argument("--full", action="store_true", help="recompute everything (from --since on) instead of "
                                                       "only new or changed lake hours")
    p.add_argument("--master", metavar="URL", help="Spark master (default: [pipeline] master of the config, else "
                                                   "spark-submit's, else local[*])")
    p.add_argument("--driver-memory", metavar="SIZE", help="driver memory (default: [pipeline] driver_memory of the "
                                                          "config, 1g unless set; under spark-submit, spark-submit's "
                                                          "--driver-memory)")
    p.add_argument("--conf", metavar="KEY=VALUE", action="append", default=[],
                   help="a Spark setting, as spark-submit's --conf (repeatable), e.g. spark.executor.memory=512m "
                        "for a cluster's executors")
    p.add_argument("--config", metavar="PATH", help="queueops config: lake, out, thresholds, [pipeline] params")
    p.add_argument("--json", action="store_true", help="print the run's summary as one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr")


def resolve(args: argparse.Namespace) -> dict[str, Any]:
    """Paths, params, thresholds and Spark settings from the arguments and the optional config."""
    cfg = None
    if args.config:
        from queueops import config as config_mod

        try:
            cfg = config_mod.load(args.config)
        except config_mod.ConfigError as exc:
            raise PipelineError(str(exc)) from None
    pcfg = getattr(cfg, "pipeline", None)
    lake = args.lake or (_config_path(cfg, cfg.lake.path) if cfg else None)
    out = args.out or (_config_path(cfg, pcfg.out) if cfg and pcfg else None)
    if not lake or not out:
        raise PipelineError("give --lake and --out, or --config with [lake] path (and [pipeline] out)")
    try:
        params = Params().with_overrides(dict(pcfg.params) if pcfg else None)
    except ValueError as exc:
        raise PipelineError(str(exc)) from None
    extra: dict[str, str] = {}
    for item in getattr(args, "conf", None) or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise PipelineError(f"--conf {item!r}: expected KEY=VALUE, e.g. spark.executor.memory=512m")
        extra[key.strip()] = value
    return {"cfg": cfg, "lake": lake, "out": out, "params": params, "thresholds": Thresholds.from_config(cfg),
            "since": parse_since(args.since),
            "master": args.master or (pcfg.master if pcfg else None),
            "driver_memory": args.driver_memory or (pcfg.driver_memory if pcfg else "1g"),
            "shuffle_partitions": pcfg.shuffle_partitions if pcfg else 4, "conf": extra}


def _config_path(cfg: Any, value: str) -> str:
    """A path from the config: a URI (the lake on object storage, ``s3://bucket/lake``) as Spark's
    Hadoop file system names it (:func:`pipeline.storage.hadoop_uri`), a relative path against the
    config file's folder."""
    if "://" in value:
        return hadoop_uri(value)
    return str(cfg.path(value))


def checked(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`resolve`, plus the checks made before Spark starts: the lake exists, and ``hours``,
    how many lake hours the run reads (:func:`hours_to_read`; None when not known beforehand)."""
    r = resolve(args)
    if is_local(r["lake"]) and not Path(r["lake"].removeprefix("file:")).exists():
        raise PipelineError(f"lake {r['lake']} does not exist (export one with 'queueops lake export')")
    r["hours"] = hours_to_read(r["lake"], r["out"], since=r["since"], full=args.full, params=r["params"],
                               thresholds=r["thresholds"])
    return r


def is_small(r: dict[str, Any]) -> bool:
    """A run that reads few lake hours (the hourly one): it gets the light JVM of
    :data:`pipeline.spark.SMALL_RUN_JVM_OPTIONS`."""
    return r["hours"] is not None and r["hours"] <= SMALL_RUN_HOURS


def execute(args: argparse.Namespace) -> int:
    """Run the job for parsed arguments in this process's own session; 0 ok, 2 bad input."""
    from pipeline import classcache
    from pipeline.spark import SMALL_RUN_JVM_OPTIONS, get_session, launches_local_jvm

    try:
        r = checked(args)
    except PipelineError as exc:
        print(f"queueops pipeline: {exc}", file=sys.stderr)
        return 2
    small = is_small(r)
    # The hourly run's JVM maps (or, the first time, writes) a class-data-sharing archive.
    archive = (classcache.plan(SMALL_RUN_JVM_OPTIONS) if small and launches_local_jvm(r["master"])
               else classcache.Plan(""))
    spark = get_session(r["master"], driver_memory=r["driver_memory"], shuffle_partitions=r["shuffle_partitions"],
                        small=small, jvm_options=archive.options, extra=r["conf"])
    try:
        return run_and_print(spark, args, r)
    finally:
        classcache.publish(spark, archive)


def run_and_print(spark: Any, args: argparse.Namespace, r: dict[str, Any]) -> int:
    """One run in ``spark`` (a fresh session, or the resident worker's, :mod:`pipeline.worker`);
    print the summary; 0 ok, 2 bad input."""
    from pipeline.progress import Progress

    progress = Progress(spark, enabled=not args.quiet).start()
    try:
        try:
            summary = run(spark, r["lake"], r["out"], since=r["since"], full=args.full, params=r["params"],
                          thresholds=r["thresholds"], progress=progress)
        finally:
            progress.stop()
        if args.json:
            print(json.dumps(summary, default=str, separators=(",", ":")))
        else:
            print(render(summary))
        sys.stdout.flush()  # the summary is out before the JVM writes its archive (first run only)
        return 0
    except (PipelineError, MissingFileSystem) as exc:
        print(f"queueops pipeline: {exc}", file=sys.stderr)
        return 2


def render(s: dict[str, Any]) -> str:
    if s.get("up_to_date"):
        return (f"gold tables in {s['out']} are up to date with {s['lake_hours']} lake hour(s) "
                f"({s['wall_s']} s); --full recomputes everything")
    lines = [f"{s['mode']} run{' (' + s['full_reason'] + ')' if s['full_reason'] else ''}: "
             f"recomputed {len(s['recomputed_hours'])} hour(s), read {len(s['read_hours'])} of "
             f"{s['lake_hours']} lake hour(s) in {s['wall_s']} s; forecasts as of {s['as_of']}: {s['forecasts']} ok",
             f"gold tables: {s['out']}"]
    if s["removed_hours"]:
        lines.append(f"{len(s['removed_hours'])} hour(s) gone from the lake (gold keeps them)")
    lines.append(f"{len(s['findings'])} finding(s):")
    lines += [f"  {f['hour']}  {f['severity']:4}  {f['rule']:24} {f['target']}/{f['queue'] or '-'}  {f['summary']}"
              for f in s["findings"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pipeline/run.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return execute(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
