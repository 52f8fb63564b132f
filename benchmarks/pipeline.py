"""Benchmark: the pipeline's rollup on Spark versus the same rollup in pandas, at 1M and 10M rows.

Generates lakes in the contract's layout (``<lake>/snapshots/date=/hour=/part-0.parquet``: 100
queues x 10 metrics sampled every 15 s, one of them a cumulative counter with restarts), then, each
in a fresh child process so that memory is measured per engine:

* **spark**: the pipeline's own code (``pipeline.rollups``: counter deltas with resets and gaps,
  then min / mean / max / p95 / count / first / last / slope per key and 5-minute window, and the
  hours merged from those), on ``local[*]``
  with 1 GB of driver memory, forced with the ``noop`` sink;
* **pandas**: the same numbers with categorical keys, a sorted ``diff`` for the counter, and
  ``groupby().agg`` / ``quantile(0.95)`` (nearest-rank is not one of pandas' interpolations:
  ``higher`` is used; see docs/benchmarks.md).

Before those, on the same lake: Spark's own **floor** (read, group by hour, target, queue and metric:
count, min, mean, max, percentile_approx 0.95; count and write the result: two actions) and the
pipeline's **whole job** (``pipeline.run.run``, full: rollups, findings, days, forecasts, fleet),
with ``pipeline_over_floor``. Also the hourly **incremental** run (one more closed hour of 100
queues, as the service runs it, JVM start included) and, with ``--big N``, the whole job on an
N-row lake on ``local[2]`` with a 1 GB driver (``--no-compare``: only these).

Peak RSS is the whole process tree's (Spark: the Python driver plus its JVM), sampled every 0.1 s,
and so is its CPU time (``cpu_s``: steadier than wall time on a shared machine); ``jvm_peak_rss_mb``
is the JVM's own peak as the kernel recorded it (``VmHWM``), which no sampling interval can miss.
Also pandas under a memory cap equal to what Spark needed at 10M rows (``--cap-mb``): the "lake
larger than memory" case. Prints one JSON object.

    .venv/bin/python benchmarks/pipeline.py                 # 1M and 10M (about 5 minutes here)
    .venv/bin/python benchmarks/pipeline.py --sizes 1000000 # 1M only
    .venv/bin/python benchmarks/pipeline.py --sizes "" --incremental-history 0 --big 100000000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUEUES, METRICS, STEP_S = 100, 10, 15
ROWS_PER_HOUR = QUEUES * METRICS * (3600 // STEP_S)  # 240,000
# Files as the exporter writes them (queueops.lake.export): zstd, one row group per 50,000-row chunk
# that queueops.store.reader.rows_between yields. Row groups are where Spark can split a file.
EXPORT_ROW_GROUP_ROWS = 50_000
T0 = datetime(2026, 1, 1, tzinfo=UTC)


# ---- lake generation ----------------------------------------------------------------------------

def make_lake(root: Path, rows: int, seed: int = 7) -> dict:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.metrics import DEPTH

    rng = np.random.default_rng(seed)
    metric_names = [DEPTH, "oldest_age_s", "stuck_leases", "ghost_records", "fragmentation_pct", "page_count",
                    "watermark_drift", "lock_waiters", "rows_total", "row_lock_waits_total"]
    assert len(metric_names) == METRICS
    hours = -(-rows // ROWS_PER_HOUR)
    per_step = QUEUES * METRICS
    q = np.tile(np.repeat(np.arange(QUEUES), METRICS), 3600 // STEP_S)
    mi = np.tile(np.arange(METRICS), QUEUES * (3600 // STEP_S))
    qnames = pa.array([f"q{i:03d}" for i in range(QUEUES)])
    mnames = pa.array(metric_names)
    written = 0
    counter = np.zeros(QUEUES)
    for h in range(hours):
        n = min(ROWS_PER_HOUR, rows - written)
        start = T0 + timedelta(hours=h)
        steps = np.repeat(np.arange(3600 // STEP_S), per_step)[:n]
        ts = (np.int64(start.timestamp() * 1e6) + steps * STEP_S * 1_000_000).astype("datetime64[us]")
        value = rng.gamma(2.0, 50.0, n)
        # the counter: running totals per queue, restarting now and then
        is_c = mi[:n] == METRICS - 1
        qc = q[:n][is_c]
        inc = rng.poisson(3, qc.size)
        cum = np.zeros(qc.size)
        for i in range(QUEUES):
            sel = qc == i
            c = counter[i] + np.cumsum(inc[sel])
            if rng.random() < 0.05:  # a restart in this hour
                cut = rng.integers(0, max(1, c.size))
                c[cut:] -= c[cut]
            cum[sel] = c
            counter[i] = c[-1] if c.size else counter[i]
        value[is_c] = cum
        table = pa.table({
            "ts": pa.array(ts, type=pa.timestamp("us", tz="UTC")),
            "target": pa.array(np.where(q[:n] < QUEUES // 2, "srv1", "srv2")),
            "database": pa.array(["queues"] * n),
            "queue": qnames.take(pa.array(q[:n])),
            "metric": mnames.take(pa.array(mi[:n])),
            "value": pa.array(value),
            "note": pa.array(["exact"] * n),
        })
        folder = root / "snapshots" / f"date={start:%Y-%m-%d}" / f"hour={start:%H}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, folder / "part-0.parquet", row_group_size=EXPORT_ROW_GROUP_ROWS, compression="zstd")
        written += n
    size = sum(p.stat().st_size for p in root.rglob("*.parquet"))
    return {"rows": written, "hours": hours, "files": hours, "parquet_mb": round(size / 2**20, 1)}


# ---- the two engines (run in child processes) ---------------------------------------------------

def spark_worker(lake: str, driver_memory: str) -> dict:
    from pipeline import rollups as ru
    from pipeline.params import Params
    from pipeline.spark import get_session
    from pipeline.storage import LocalStorage

    t0 = time.perf_counter()
    spark = get_session(driver_memory=driver_memory)
    started = time.perf_counter() - t0
    files = [f for p in LocalStorage().list_partitions(f"{lake}/snapshots") for f in p.files]
    t1 = time.perf_counter()
    ru.rollup(ru.prepare(ru.read_lake(spark, files)), "1h", Params()).write.format("noop").mode("overwrite").save()
    job = time.perf_counter() - t1
    spark.stop()
    return {"startup_s": round(started, 2), "job_s": round(job, 2)}


def _jobs_and_stages(spark) -> dict:  # noqa: ANN001 - SparkSession
    """How many Spark jobs (actions, plus listing / schema jobs) and stages (each shuffle adds one) ran."""
    tracker = spark.sparkContext.statusTracker()
    jobs = tracker.getJobIdsForGroup(None)
    stages = sum(len(info.stageIds) for j in jobs if (info := tracker.getJobInfo(j)) is not None)
    return {"spark_jobs": len(jobs), "spark_stages": stages}


def plan_shape(df) -> dict:  # noqa: ANN001 - DataFrame
    """How many of each operator the physical plan of ``df`` has (``explain("formatted")``'s numbered
    list, before adaptive execution re-plans): scans, exchanges (shuffles), sorts, windows, aggregates."""
    text = df._sc._jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "formatted")
    ops = re.findall(r"^\(\d+\) (\w+)", text, flags=re.M)
    count = {name: ops.count(name) for name in ("Exchange", "Sort", "Window")}
    return {"scans": ops.count("Scan"), "shuffles": count["Exchange"], "sorts": count["Sort"],
            "windows": count["Window"], "aggregates": sum(o.endswith("Aggregate") for o in ops)}


def floor_job(spark, lake: str, out: str):  # noqa: ANN001, ANN201 - SparkSession, (DataFrame, int)
    """The floor's work in a session: read the Parquet, group by hour, target, queue and metric (count, min,
    mean, max, percentile_approx 0.95), then count and write the result -- two actions. Returns the
    aggregation and its number of groups."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(f"{lake}/snapshots")
    agg = (df.groupBy(F.date_trunc("hour", "ts").alias("hour"), "target", "queue", "metric")
           .agg(F.count("value").alias("samples"), F.min("value").alias("min"), F.avg("value").alias("mean"),
                F.max("value").alias("max"), F.percentile_approx("value", 0.95, 1000).alias("p95")))
    groups = agg.count()
    agg.write.mode("overwrite").parquet(out)
    return agg, groups


def floor_worker(lake: str, out: str, master: str, driver_memory: str) -> dict:
    """Spark's own floor on this lake: read the Parquet, group by hour, target, queue and metric (count, min,
    mean, max, percentile_approx 0.95), then count and write the result -- two actions, same session settings."""

    from pipeline.spark import get_session

    t0 = time.perf_counter()
    spark = get_session(master, driver_memory=driver_memory)
    started = time.perf_counter() - t0
    t1 = time.perf_counter()
    agg, groups = floor_job(spark, lake, out)
    job = time.perf_counter() - t1
    res = {"startup_s": round(started, 2), "job_s": round(job, 2), "groups": groups, **_jobs_and_stages(spark),
           "plan": plan_shape(agg)}
    spark.stop()
    return res


class _Steps:
    """A stand-in for the pipeline's progress bar that times each step of the run."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def step(self, name: str):  # noqa: ANN201 - a context manager
        from contextlib import contextmanager

        @contextmanager
        def timed():  # noqa: ANN202
            t = time.perf_counter()
            try:
                yield
            finally:
                self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - t, 2)
        return timed()


def pipeline_worker(lake: str, out: str, master: str, driver_memory: str) -> dict:
    """The pipeline's whole job (``pipeline.run.run``, full): rollups, findings, days, forecasts, fleet."""
    from pipeline import rollups as ru
    from pipeline import run as job
    from pipeline.params import Params
    from pipeline.spark import get_session
    from pipeline.storage import LocalStorage

    t0 = time.perf_counter()
    spark = get_session(master, driver_memory=driver_memory)
    started = time.perf_counter() - t0
    steps = _Steps()
    t1 = time.perf_counter()
    summary = job.run(spark, lake, out, full=True, progress=steps)
    wall = time.perf_counter() - t1
    res = {"startup_s": round(started, 2), "job_s": round(wall, 2), "steps_s": steps.seconds,
           "findings": len(summary["findings"]), "forecasts_ok": summary["forecasts"], **_jobs_and_stages(spark)}
    # The rollups' plan as the run builds it (the persisted aggregation, then the gold write's shuffle).
    files = [f for p in LocalStorage().list_partitions(f"{lake}/snapshots") for f in p.files]
    rolled = ru.rollups_and_signals(ru.prepare(ru.read_lake(spark, files)), Params())
    res["rollups_plan"] = plan_shape(rolled.select(*ru.ROLLUP_COLUMNS).repartition("window", "date", "hour"))
    spark.stop()
    return res


def pandas_worker(lake: str, max_gap_s: float = 600.0) -> dict:
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    files = sorted(str(p) for p in Path(lake).rglob("*.parquet"))
    df = pd.concat([pq.read_table(f, columns=["ts", "target", "database", "queue", "metric", "value"])
                    .to_pandas(categories=["target", "database", "queue", "metric"]) for f in files],
                   ignore_index=True)
    for c in ("target", "database", "queue", "metric"):
        df[c] = df[c].astype("category")
    keys = ["target", "database", "queue", "metric"]
    df["hour"] = df["ts"].dt.floor("h")
    counters = df["metric"].astype(str).str.endswith("_total") & (df["metric"] != "rows_total")
    c = df[counters].sort_values([*keys, "ts"])
    same = (c[keys].shift() == c[keys]).all(axis=1)
    dt = (c["ts"] - c["ts"].shift()).dt.total_seconds()
    prev = c["value"].shift()
    valid = same & (dt > 0) & (dt <= max_gap_s)
    reset = valid & (c["value"] < prev)
    df["delta"] = np.nan
    df.loc[c.index, "delta"] = np.where(valid, np.where(reset, c["value"], c["value"] - prev), np.nan)
    df["covered_s"] = np.nan
    df.loc[c.index, "covered_s"] = np.where(valid, dt, np.nan)
    df["reset"] = np.nan
    df.loc[c.index, "reset"] = np.where(valid, reset.astype(float), np.nan)
    g = df.groupby([*keys, "hour"], observed=True, sort=False)
    out = g.agg(samples=("value", "count"), min=("value", "min"), mean=("value", "mean"), max=("value", "max"),
                first=("value", "first"), last=("value", "last"), delta=("delta", "sum"),
                covered_s=("covered_s", "sum"), resets=("reset", "sum"))
    out["p95"] = g["value"].quantile(0.95, interpolation="higher")
    out["rate_per_s"] = out["delta"] / out["covered_s"]
    return {"job_s": round(time.perf_counter() - t0, 2), "groups": len(out)}


# ---- measuring a child process tree -------------------------------------------------------------

def _tree_rss_kb(pid: int, cpu_ticks: dict[int, int] | None = None, jvm_hwm_kb: dict[int, int] | None = None) -> int:
    """RSS of a process and all its descendants (the JVM is a child of the Python driver); records each
    one's CPU time so far (user + system, clock ticks) in ``cpu_ticks``, and each JVM's peak RSS so far
    (the kernel's ``VmHWM``: exact, unlike the sampled tree total) in ``jvm_hwm_kb``."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    cpu: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            ppid = int(stat[1])
            rss[int(entry)] = int(stat[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
            cpu[int(entry)] = int(stat[11]) + int(stat[12])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        if cpu_ticks is not None and p in cpu:
            cpu_ticks[p] = max(cpu_ticks.get(p, 0), cpu[p])
        if jvm_hwm_kb is not None and (hwm := _jvm_hwm_kb(p)) is not None:
            jvm_hwm_kb[p] = max(jvm_hwm_kb.get(p, 0), hwm)
        todo += children.get(p, [])
    return total


def _jvm_hwm_kb(pid: int) -> int | None:
    """The peak RSS (``VmHWM``, kB) of a process if it is a JVM, else None."""
    try:
        if open(f"/proc/{pid}/comm").read().strip() != "java":
            return None
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def measure(args: list[str], cap_mb: int | None = None, timeout: float = 3600, *,
            command: list[str] | None = None) -> dict:
    """Run a worker of this file (or ``command``) in a child process: its wall, peak tree RSS, its JSON."""
    def limit() -> None:
        if cap_mb:
            resource.setrlimit(resource.RLIMIT_AS, (cap_mb * 2**20, cap_mb * 2**20))

    t0 = time.perf_counter()
    proc = subprocess.Popen(command or [sys.executable, __file__, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=limit if cap_mb else None,
                            cwd=ROOT)  # noqa: PLW1509
    peak, ticks, jvm = 0, {}, {}
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid, ticks, jvm))
        time.sleep(0.1)
        if time.perf_counter() - t0 > timeout:
            proc.kill()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    # CPU seconds of the tree (sampled every 0.1 s, so the last moments are missed): steadier than wall
    # time when something else runs on the machine.
    cpu_s = sum(ticks.values()) / os.sysconf("SC_CLK_TCK")
    res: dict = {"ok": proc.returncode == 0, "process_wall_s": round(wall, 2), "peak_rss_mb": round(peak / 1024),
                 "cpu_s": round(cpu_s, 1),
                 # The JVM's high-water mark, read last at most 0.1 s before it exited (None: no JVM).
                 "jvm_peak_rss_mb": round(max(jvm.values()) / 1024) if jvm else None}
    if proc.returncode == 0:
        res.update(json.loads(out.strip().splitlines()[-1]))
    else:
        tail = (err or out).strip().splitlines()
        # The cause, not a stack frame: the first line that names an exception or error and is not
        # an "at ..." frame (a JVM trace ends in frames whose class names contain "Error").
        causes = [ln.strip() for ln in tail if re.search(r"(Exception|Error)\b", ln)
                  and not ln.lstrip().startswith(("at ", "..."))]
        res["error"] = causes[0] if causes else (tail[-1] if tail else "")
        res["error_tail"] = tail[-40:]
    return res


def engine_result(r: dict, rows: int) -> dict:
    if not r.get("ok"):
        return r
    wall = r["job_s"]
    return {**r, "wall_s": wall, "rows_per_s": round(rows / wall) if wall else None}


def floor_and_pipeline(lake: Path, out: Path, master: str, driver_memory: str, rows: int) -> dict:
    """The floor and the pipeline's job on the same lake, one after the other, each in a fresh process."""
    common = ["--lake", str(lake), "--master", master, "--driver-memory", driver_memory]
    entry: dict = {"load_avg_before_floor": round(os.getloadavg()[0], 2)}
    entry["floor"] = engine_result(measure(["--worker", "floor", "--out", str(out / "floor"), *common]), rows)
    entry["load_avg_before_pipeline"] = round(os.getloadavg()[0], 2)
    entry["pipeline"] = engine_result(measure(["--worker", "pipeline", "--out", str(out / "gold"), *common]), rows)
    shutil.rmtree(out, ignore_errors=True)
    fl, pl = entry["floor"], entry["pipeline"]
    if fl.get("ok") and pl.get("ok"):
        entry["pipeline_over_floor"] = {"rollups_step": round(pl["steps_s"]["rollups"] / fl["job_s"], 2),
                                        "job": round(pl["job_s"] / fl["job_s"], 2),
                                        "process_wall": round(pl["process_wall_s"] / fl["process_wall_s"], 2),
                                        "cpu": round(pl["cpu_s"] / fl["cpu_s"], 2) if fl["cpu_s"] else None}
    return entry


def incremental(lake: Path, out: Path, history: int, driver_memory: str) -> dict:
    """The hourly ``after_export`` run: ``history`` hours already in gold, then one more closed hour of
    100 queues (240,000 rows); timed as the service runs it (``python -m queueops.cli pipeline run --quiet
    --json``, a fresh process, JVM start included).

    Run twice from the same gold: the first run of an environment also writes the JVM's class-data
    archive (``pipeline.classcache``; ``first_run.class_archive`` says whether it did), every later
    one maps it. The second run is the hourly steady state reported at the top level."""
    from pipeline import classcache
    from pipeline.spark import SMALL_RUN_JVM_OPTIONS

    info = make_lake(lake, (history + 1) * ROWS_PER_HOUR)
    last = T0 + timedelta(hours=history)
    folder = lake / "snapshots" / f"date={last:%Y-%m-%d}" / f"hour={last:%H}"
    aside = lake.parent / "held-back-hour"
    shutil.move(folder, aside)
    setup = measure(["--worker", "pipeline", "--lake", str(lake), "--out", str(out), "--master", "local[*]",
                     "--driver-memory", driver_memory])
    shutil.move(aside, folder)
    before = out.parent / (out.name + "-before-the-hour")
    shutil.copytree(out, before)
    command = [sys.executable, "-m", "queueops.cli", "pipeline", "run", "--lake", str(lake), "--out", str(out),
               "--quiet", "--json"]
    runs = []
    for _ in range(2):
        archive = classcache.plan(SMALL_RUN_JVM_OPTIONS)
        load = round(os.getloadavg()[0], 2)
        run = measure([], command=command)
        run["class_archive"] = "none" if not archive.options else ("written" if archive.writing else "mapped")
        run["load_avg_before"] = load
        runs.append(run)
        shutil.rmtree(out)
        shutil.copytree(before, out)
    resident = resident_runs(command[command.index("--lake"):], out, before)
    first, run = runs
    summary = {k: run.get(k) for k in ("mode", "recomputed_hours", "read_hours", "wall_s")}
    for path in (lake, out, before):
        shutil.rmtree(path, ignore_errors=True)
    return {"history_hours": history, "lake": info, "setup_full_run_job_s": setup.get("job_s"),
            "load_avg_before": run["load_avg_before"], "ok": run["ok"], "process_wall_s": run["process_wall_s"],
            "peak_rss_mb": run["peak_rss_mb"], "cpu_s": run["cpu_s"], "job_wall_s": summary.pop("wall_s"), **summary,
            "class_archive": run["class_archive"], "resident": resident,
            "first_run": {k: first.get(k) for k in ("ok", "process_wall_s", "cpu_s", "class_archive", "load_avg_before")},
            **({"error": run["error"]} if not run["ok"] else {})}


def resident_runs(argv: list[str], out: Path, before: Path) -> dict:
    """The same hour twice through the service's resident worker (``python -m pipeline.worker``, as
    ``[pipeline] after_export`` runs it): the first request starts the worker's JVM, the second reuses
    it. Each is timed from sending the request to its reply; the worker's process tree RSS after."""
    from pipeline.worker import MARKER

    proc = subprocess.Popen([sys.executable, "-m", "pipeline.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    res: dict = {}
    try:
        for name in ("first_s", "reused_s"):
            shutil.rmtree(out)
            shutil.copytree(before, out)
            res[f"load_avg_before_{name.removesuffix('_s')}"] = round(os.getloadavg()[0], 2)
            t = time.perf_counter()
            proc.stdin.write(json.dumps(argv) + "\n")
            proc.stdin.flush()
            for line in proc.stdout:
                if line.startswith(MARKER):
                    reply = json.loads(line[len(MARKER):])
                    break
            else:
                return {**res, "ok": False, "error": "the worker exited"}
            res[name] = round(time.perf_counter() - t, 2)
            res["ok"] = reply.get("code") == 0
            if not res["ok"]:
                return {**res, "error": reply.get("err", "")[-500:] or reply}
        res["worker_rss_mb"] = round(_tree_rss_kb(proc.pid) / 1024)
    finally:
        proc.stdin.close()
        proc.wait(60)
    return res


def big_lake(base: Path, rows: int) -> dict:
    """The pipeline's job on a large lake on ``local[2]`` with a 1 GB driver: time and peak RSS. The lake
    is written hour by hour (memory bounded by one hour of rows); skipped when the disk cannot hold it."""
    need = int(rows * 12 * 1.5)  # ~9 bytes per row in the lake's Parquet, plus room for the gold tables
    free = shutil.disk_usage(base).free
    if free < need:
        return {"rows": rows, "skipped": f"needs about {need / 2**30:.1f} GB free under {base}, "
                                         f"{free / 2**30:.1f} GB available"}
    lake = base / f"lake-{rows}"
    t = time.perf_counter()
    info = make_lake(lake, rows)
    info["generate_s"] = round(time.perf_counter() - t, 1)
    load = round(os.getloadavg()[0], 2)
    r = engine_result(measure(["--worker", "pipeline", "--lake", str(lake), "--out", str(base / "out-big"),
                               "--master", "local[2]", "--driver-memory", "1g"], timeout=7200), rows)
    shutil.rmtree(lake, ignore_errors=True)
    shutil.rmtree(base / "out-big", ignore_errors=True)
    return {"rows": rows, "master": "local[2]", "driver_memory": "1g", "lake": info, "load_avg_before": load,
            "pipeline": r}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000", help="comma-separated row counts")
    ap.add_argument("--dir", help="where to build the lakes (default: a temporary folder, removed after)")
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--cap-mb", type=int, default=0,
                    help="also run pandas at the largest size under this address-space cap (0: Spark's peak RSS "
                         "at that size)")
    ap.add_argument("--no-compare", action="store_true",
                    help="only the floor and the pipeline's job (skip the rollup-only Spark and pandas runs)")
    ap.add_argument("--master", default="local[*]", help="Spark master of the floor and the pipeline runs")
    ap.add_argument("--incremental-history", type=int, default=6,
                    help="hours already processed before the timed incremental run of one more hour (0: skip)")
    ap.add_argument("--big", type=int, default=0,
                    help="also run the pipeline's job on a lake of this many rows on local[2] with a 1 GB driver "
                         "(e.g. 100000000; skipped with a message when the disk cannot hold the lake)")
    ap.add_argument("--worker", choices=["spark", "pandas", "floor", "pipeline"], help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--lake", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker == "spark":
        print(json.dumps(spark_worker(a.lake, a.driver_memory)))
        return
    if a.worker == "pandas":
        print(json.dumps(pandas_worker(a.lake)))
        return
    if a.worker in ("floor", "pipeline"):
        fn = floor_worker if a.worker == "floor" else pipeline_worker
        print(json.dumps(fn(a.lake, a.out, a.master, a.driver_memory)))
        return

    sizes = [int(float(s)) for s in a.sizes.split(",") if s.strip()]  # --sizes "": none (e.g. --big only)
    base = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="qo-bench-pipeline-"))
    result: dict = {"machine": {"cpus": os.cpu_count(), "load_avg_at_start": [round(x, 2) for x in os.getloadavg()]},
                    "layout": f"{QUEUES} queues x {METRICS} metrics every {STEP_S} s = {ROWS_PER_HOUR:,} rows/hour",
                    "driver_memory": a.driver_memory, "sizes": {}}
    try:
        for n in sizes:
            lake = base / f"lake-{n}"
            t = time.perf_counter()
            info = make_lake(lake, n)
            info["generate_s"] = round(time.perf_counter() - t, 1)
            entry = floor_and_pipeline(lake, base / f"out-{n}", a.master, a.driver_memory, n)
            entry["lake"] = info
            result["sizes"][str(n)] = entry
            if a.no_compare:
                shutil.rmtree(lake, ignore_errors=True)
                continue
            spark = engine_result(measure(["--worker", "spark", "--lake", str(lake), "--driver-memory", a.driver_memory]), n)
            pandas = engine_result(measure(["--worker", "pandas", "--lake", str(lake)]), n)
            entry.update({"spark_rollup_only": spark, "pandas": pandas})
            if spark.get("ok") and pandas.get("ok"):
                entry["spark_rollup_over_pandas_wall"] = round(spark["wall_s"] / pandas["wall_s"], 2)
            result["sizes"][str(n)] = entry
        if a.incremental_history > 0:
            result["incremental"] = incremental(base / "lake-incremental", base / "out-incremental",
                                                a.incremental_history, a.driver_memory)
        if a.big:
            result["big"] = big_lake(base, a.big)
        if len(sizes) > 1 and not a.no_compare:
            lo, hi = result["sizes"][str(sizes[0])], result["sizes"][str(sizes[-1])]
            result["growth"] = {"rows": round(sizes[-1] / sizes[0], 1)}
            for eng in ("spark_rollup_only", "pandas"):
                if lo[eng].get("ok") and hi[eng].get("ok"):
                    result["growth"][eng] = {"wall": round(hi[eng]["wall_s"] / lo[eng]["wall_s"], 2),
                                             "peak_rss": round(hi[eng]["peak_rss_mb"] / lo[eng]["peak_rss_mb"], 2)}
            big = str(sizes[-1])
            cap = a.cap_mb or result["sizes"][big]["spark_rollup_only"].get("peak_rss_mb")
            if cap:
                capped = measure(["--worker", "pandas", "--lake", str(base / f"lake-{big}")], cap_mb=int(cap))
                result["bounded_memory"] = {
                    "cap_mb": int(cap), "rows": int(big),
                    "pandas_under_cap": engine_result(capped, int(big)),
                    "spark_peak_rss_mb": result["sizes"][big]["spark_rollup_only"].get("peak_rss_mb"),
                    "note": "pandas given the memory Spark used at this size (address-space cap)"}
    finally:
        if not a.dir:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
