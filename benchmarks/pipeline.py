"""Benchmark: the pipeline's rollup on Spark versus the same rollup in pandas, at 1M and 10M rows.

Generates lakes in the contract's layout (``<lake>/snapshots/date=/hour=/part-0.parquet``: 100
queues x 10 metrics sampled every 15 s, one of them a cumulative counter with restarts), then, each
in a fresh child process so that memory is measured per engine:

* **spark**: the pipeline's own code (``pipeline.rollups``: counter deltas with resets and gaps,
  then min / mean / max / p95 / count / first / last / slope per key and hour), on ``local[*]``
  with 1 GB of driver memory, forced with the ``noop`` sink;
* **pandas**: the same numbers with categorical keys, a sorted ``diff`` for the counter, and
  ``groupby().agg`` / ``quantile(0.95)`` (nearest-rank is not one of pandas' interpolations:
  ``higher`` is used; see docs/benchmarks.md).

Peak RSS is the whole process tree's (Spark: the Python driver plus its JVM), sampled every 0.1 s.
Also measured at 1M rows: what ``percentile_approx`` costs (accuracy 10000 / 1000 / 100 / none),
and pandas under a memory cap equal to what Spark needed at 10M rows (``--cap-mb``): the "lake
larger than memory" case. Prints one JSON object.

    .venv/bin/python benchmarks/pipeline.py                 # 1M and 10M (about 5 minutes here)
    .venv/bin/python benchmarks/pipeline.py --sizes 1000000 # 1M only
"""

from __future__ import annotations

import argparse
import json
import os
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
        pq.write_table(table, folder / "part-0.parquet")
        written += n
    size = sum(p.stat().st_size for p in root.rglob("*.parquet"))
    return {"rows": written, "hours": hours, "files": hours, "parquet_mb": round(size / 2**20, 1)}


# ---- the two engines (run in child processes) ---------------------------------------------------

def spark_worker(lake: str, accuracy: int, mode: str, driver_memory: str) -> dict:
    from pipeline import rollups as ru
    from pipeline.params import Params
    from pipeline.spark import get_session
    from pipeline.storage import LocalStorage

    t0 = time.perf_counter()
    spark = get_session(driver_memory=driver_memory)
    started = time.perf_counter() - t0
    files = [f for p in LocalStorage().list_partitions(f"{lake}/snapshots") for f in p.files]
    p = Params(p95_accuracy=max(accuracy, 1))
    t1 = time.perf_counter()
    d = ru.with_deltas(ru.prepare(ru.read_lake(spark, files)), p)
    if mode == "no_p95":
        from pyspark.sql import functions as F

        out = (d.groupBy(*ru.KEYS, F.expr(ru.floor_sql("ts", 3600)).alias("w"))
               .agg(*[F.expr(e) for e in ("count(value)", "min(value)", "avg(value)", "max(value)", "sum(delta)",
                                          "sum(covered_s)", "sum(reset)")]))
    elif mode == "5m+1h":
        out = ru.rollups(ru.prepare(ru.read_lake(spark, files)), p)
    else:
        out = ru.rollup(d, "1h", p, sketch=False)
    out.write.format("noop").mode("overwrite").save()
    job = time.perf_counter() - t1
    spark.stop()
    return {"startup_s": round(started, 2), "job_s": round(job, 2)}


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

def _tree_rss_kb(pid: int) -> int:
    """RSS of a process and all its descendants (the JVM is a child of the Python driver)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            ppid = int(stat[1])
            rss[int(entry)] = int(stat[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total


def measure(args: list[str], cap_mb: int | None = None, timeout: float = 3600) -> dict:
    def limit() -> None:
        if cap_mb:
            resource.setrlimit(resource.RLIMIT_AS, (cap_mb * 2**20, cap_mb * 2**20))

    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=limit if cap_mb else None, cwd=ROOT)  # noqa: PLW1509
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss_kb(proc.pid))
        time.sleep(0.1)
        if time.perf_counter() - t0 > timeout:
            proc.kill()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    res: dict = {"ok": proc.returncode == 0, "process_wall_s": round(wall, 2), "peak_rss_mb": round(peak / 1024)}
    if proc.returncode == 0:
        res.update(json.loads(out.strip().splitlines()[-1]))
    else:
        tail = (err or out).strip().splitlines()
        res["error"] = next((ln for ln in reversed(tail) if "Error" in ln or "error" in ln), tail[-1] if tail else "")
    return res


def engine_result(r: dict, rows: int) -> dict:
    if not r.get("ok"):
        return r
    wall = r["job_s"]
    return {**r, "wall_s": wall, "rows_per_s": round(rows / wall) if wall else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,10000000", help="comma-separated row counts")
    ap.add_argument("--dir", help="where to build the lakes (default: a temporary folder, removed after)")
    ap.add_argument("--driver-memory", default="1g")
    ap.add_argument("--cap-mb", type=int, default=0,
                    help="also run pandas at the largest size under this address-space cap (0: Spark's peak RSS "
                         "at that size)")
    ap.add_argument("--no-accuracy", action="store_true", help="skip the percentile_approx cost runs")
    ap.add_argument("--worker", choices=["spark", "pandas"], help=argparse.SUPPRESS)
    ap.add_argument("--lake", help=argparse.SUPPRESS)
    ap.add_argument("--accuracy", type=int, default=1000, help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="1h", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker == "spark":
        print(json.dumps(spark_worker(a.lake, a.accuracy, a.mode, a.driver_memory)))
        return
    if a.worker == "pandas":
        print(json.dumps(pandas_worker(a.lake)))
        return

    sizes = [int(float(s)) for s in a.sizes.split(",")]
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
            spark = engine_result(measure(["--worker", "spark", "--lake", str(lake), "--accuracy", "1000",
                                           "--driver-memory", a.driver_memory]), n)
            pandas = engine_result(measure(["--worker", "pandas", "--lake", str(lake)]), n)
            entry = {"lake": info, "spark": spark, "pandas": pandas}
            if spark.get("ok") and pandas.get("ok"):
                entry["spark_over_pandas_wall"] = round(spark["wall_s"] / pandas["wall_s"], 2)
            if n == sizes[0] and not a.no_accuracy:
                entry["percentile_approx_cost"] = {
                    label: engine_result(measure(["--worker", "spark", "--lake", str(lake), "--accuracy", acc,
                                                  "--mode", mode, "--driver-memory", a.driver_memory]), n)
                    for label, acc, mode in [("accuracy_10000", "10000", "1h"), ("accuracy_100", "100", "1h"),
                                             ("no_p95", "1", "no_p95"), ("5m_and_1h_accuracy_1000", "1000", "5m+1h")]}
            result["sizes"][str(n)] = entry
        if len(sizes) > 1:
            lo, hi = result["sizes"][str(sizes[0])], result["sizes"][str(sizes[-1])]
            result["growth"] = {"rows": round(sizes[-1] / sizes[0], 1)}
            for eng in ("spark", "pandas"):
                if lo[eng].get("ok") and hi[eng].get("ok"):
                    result["growth"][eng] = {"wall": round(hi[eng]["wall_s"] / lo[eng]["wall_s"], 2),
                                             "peak_rss": round(hi[eng]["peak_rss_mb"] / lo[eng]["peak_rss_mb"], 2)}
            big = str(sizes[-1])
            cap = a.cap_mb or result["sizes"][big]["spark"].get("peak_rss_mb")
            if cap:
                capped = measure(["--worker", "pandas", "--lake", str(base / f"lake-{big}")], cap_mb=int(cap))
                result["bounded_memory"] = {
                    "cap_mb": int(cap), "rows": int(big),
                    "pandas_under_cap": engine_result(capped, int(big)),
                    "spark_peak_rss_mb": result["sizes"][big]["spark"].get("peak_rss_mb"),
                    "note": "pandas given the memory Spark used at this size (address-space cap)"}
    finally:
        if not a.dir:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
