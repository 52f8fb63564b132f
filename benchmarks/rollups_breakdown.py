"""Benchmark: where the rollups step's time goes, next to Spark's floor, in one warm JVM.

Each part is the rollups' plan cut at one point and run to the ``noop`` sink (the last one is the
step as ``pipeline.run`` runs it: persisted on disk and written as gold), alternated with the floor
``--repeat`` times in one SparkSession, so the JIT is warm for all of them alike. Spark's event log
gives each part's task CPU, GC, spill and shuffle bytes (steadier than wall time on a shared
machine). Prints one JSON object: per part the median of the repeats, and each part's CPU over the
floor's.

    .venv/bin/python benchmarks/rollups_breakdown.py                  # 10M rows, 2 repeats (~9 min)
    .venv/bin/python benchmarks/rollups_breakdown.py --rows 2000000 --repeat 3

Parts (each includes the ones before it):

* ``floor``: the benchmark's floor (benchmarks/pipeline.py: read, group by hour and key, count,
  min, mean, max, percentile_approx; count and write);
* ``read``: the lake read and cleaned (``rollups.prepare``);
* ``deltas``: plus the counter deltas and signals (``rollups.with_deltas``);
* ``shuffle``: plus the one shuffle to the hours' tasks (``rollups.by_hour_task``);
* ``five_minute``: plus the 5-minute aggregation (``rollups.five_minute_rollups``);
* ``hours``: plus the hours merged (``rollups.rollups_and_signals``);
* ``step``: persisted and written as gold (``pipeline.run``'s rollups step).

And three parts measured alone, each the cost of one thing the 5-minute rows need, on the lake's
rows without the counter deltas (their columns null): ``hour_shuffle_alone`` (read, cleaned and
sent to the hours' tasks), ``fixed_aggregates_alone`` (plus the 5-minute aggregates with a
fixed-width buffer, which Spark evaluates in generated code) and ``value_lists_alone`` (plus only
the sorted value lists, an object aggregation). ``parts_alone`` adds the shuffle and what each
aggregation costs over it: a plan computing the 5-minute rows from one shuffle of the rows costs
at least that, before the deltas, the hours and the write.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARTS = ["read", "deltas", "shuffle", "five_minute", "hours", "step"]
ALONE = ["hour_shuffle_alone", "fixed_aggregates_alone", "value_lists_alone"]


def _task_metrics(event_dir: Path) -> dict[str, Counter]:
    """Per job group (one run of one part): task CPU, run time, GC, spill and shuffle written."""
    groups: dict[str, Counter] = {}
    stage_group: dict[int, str] = {}
    for log in event_dir.iterdir():
        with open(log, encoding="utf-8") as fh:
            for line in fh:
                e = json.loads(line)
                kind = e["Event"]
                if kind == "SparkListenerJobStart":
                    g = (e.get("Properties") or {}).get("spark.jobGroup.id")
                    for s in e["Stage IDs"]:
                        stage_group[s] = g
                elif kind == "SparkListenerTaskEnd" and (g := stage_group.get(e["Stage ID"])):
                    m = e.get("Task Metrics") or {}
                    c = groups.setdefault(g, Counter())
                    c["cpu_s"] += m.get("Executor CPU Time", 0) / 1e9
                    c["run_s"] += m.get("Executor Run Time", 0) / 1e3
                    c["gc_s"] += m.get("JVM GC Time", 0) / 1e3
                    c["spill_mb"] += m.get("Disk Bytes Spilled", 0) / 2**20
                    c["shuffle_write_mb"] += (m.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0) / 2**20
                    c["tasks"] += 1
    return groups


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="lake rows (100 queues x 10 metrics every 15 s)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each part (medians are printed)")
    ap.add_argument("--driver-memory", default="1g")
    a = ap.parse_args()

    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_pipeline", ROOT / "benchmarks" / "pipeline.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    from pyspark.sql import functions as F

    from pipeline import rollups as ru
    from pipeline import run as pipeline_run
    from pipeline.params import Params
    from pipeline.spark import get_session
    from pipeline.storage import LocalStorage

    base = Path(tempfile.mkdtemp(prefix="qo-breakdown-"))
    try:
        lake = base / "lake"
        info = bench.make_lake(lake, a.rows)
        events = base / "events"
        events.mkdir()
        spark = get_session("local[*]", driver_memory=a.driver_memory, extra={
            "spark.eventLog.enabled": "true", "spark.eventLog.dir": str(events),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"})
        parts = LocalStorage().list_partitions(f"{lake}/snapshots")
        files = [f for p in parts for f in p.files]
        hours = [p.hour for p in parts]
        params = Params()

        def samples():  # noqa: ANN202 - a DataFrame
            return ru.prepare(ru.read_lake(spark, files), hours)

        def noop(df) -> None:  # noqa: ANN001 - a DataFrame
            df.write.format("noop").mode("overwrite").save()

        def step() -> None:
            out = base / "gold"
            shutil.rmtree(out, ignore_errors=True)
            rolled = pipeline_run.rolled_up(spark, files, hours, params)
            pipeline_run.write_rollups(rolled, str(out))
            rolled.unpersist()

        def shuffled_alone():  # noqa: ANN202 - a DataFrame
            rows = samples().where("in_scope").selectExpr(
                *ru.KEYS, "hour_start", "ts", "value", "note", "CAST(NULL AS DOUBLE) AS delta",
                "CAST(NULL AS DOUBLE) AS covered_s", "CAST(NULL AS INT) AS reset", f"{ru.SIMPLE_SIGNAL} AS signal")
            return ru.to_hour_tasks(rows, hours)

        def five_alone(keep) -> None:  # noqa: ANN001 - a predicate on an aggregate's name
            aggs = [a for a in ru.five_minute_aggregates() if keep(a.rsplit(" AS ", 1)[1])]
            noop(shuffled_alone().groupBy(*ru.KEYS, "task", "hour_start",
                                          F.expr(ru.floor_sql("ts", 300)).alias("window_start"))
                 .agg(*[F.expr(a) for a in aggs]))

        runs = {
            "read": lambda: noop(samples()),
            "deltas": lambda: noop(ru.with_deltas(samples(), params)),
            "shuffle": lambda: noop(ru.by_hour_task(samples(), params, hours)),
            "five_minute": lambda: noop(ru.five_minute_rollups(samples(), params, hours)),
            "hours": lambda: noop(ru.rollups_and_signals(samples(), params, hours)),
            "step": step,
            "hour_shuffle_alone": lambda: noop(shuffled_alone()),
            "fixed_aggregates_alone": lambda: five_alone(lambda name: name not in ru.OBJECT_AGGREGATES),
            "value_lists_alone": lambda: five_alone(lambda name: name == "vals"),
            "floor": lambda: bench.floor_job(spark, str(lake), str(base / "floor")),
        }
        walls: dict[str, list[float]] = {}
        load = [round(os.getloadavg()[0], 2)]
        for i in range(a.repeat):
            for name in ["floor", *PARTS, *ALONE]:
                spark.sparkContext.setJobGroup(f"{name}#{i}", name)
                t = time.perf_counter()
                runs[name]()
                walls.setdefault(name, []).append(time.perf_counter() - t)
                print(f"{name} #{i}: {walls[name][-1]:.1f} s", file=sys.stderr, flush=True)
            load.append(round(os.getloadavg()[0], 2))
        spark.stop()
        metrics = _task_metrics(events)
        out: dict = {"rows": info["rows"], "hours": info["hours"], "repeat": a.repeat,
                     "driver_memory": a.driver_memory, "load_avg": load, "parts": {}}
        for name in ["floor", *PARTS, *ALONE]:
            runs_m = [metrics.get(f"{name}#{i}", Counter()) for i in range(a.repeat)]
            out["parts"][name] = {"wall_s": round(statistics.median(walls[name]), 2),
                                  **{k: round(statistics.median(r[k] for r in runs_m), 2)
                                     for k in ("cpu_s", "gc_s", "spill_mb", "shuffle_write_mb", "tasks")}}
        floor_cpu = out["parts"]["floor"]["cpu_s"] or 1.0
        cpu = {n: out["parts"][n]["cpu_s"] for n in ALONE}
        alone = (cpu["fixed_aggregates_alone"] + cpu["value_lists_alone"] - cpu["hour_shuffle_alone"])
        out["parts"]["parts_alone"] = {"cpu_s": round(alone, 2)}
        out["cpu_over_floor"] = {n: round(out["parts"][n]["cpu_s"] / floor_cpu, 2)
                                 for n in [*PARTS, *ALONE, "parts_alone"]}
        print(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
