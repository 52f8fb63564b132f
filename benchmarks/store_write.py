"""How fast the store takes a day of snapshots from 100 queues: SQLite versus PostgreSQL.

Writes go through the service's own path (:class:`queueops.store.writer.StoreWriter`, one
transaction per collection cycle), with the store settings the service uses: SQLite in WAL mode
with ``synchronous=NORMAL``; PostgreSQL as an embedded server with durable defaults (fsync on).
A day is modelled on the default schedule: a fast cycle every 15 s with ``--fast-metrics`` rows
per queue, a slow cycle every 5 min with ``--slow-metrics``, and one status row per collector.
After the writes, the same run times what the service does with that day: a lake export of one
hour, then a retention prune of that hour (in batches).

Prints one JSON object (``python benchmarks/store_write.py --help`` for sizes). By default it
writes the first hour of the day (a few minutes here) and projects the whole day
(``seconds_per_day_of_rows``); ``--hours 24`` writes all of it (10-40 minutes here). Figures and what they mean are
in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import Engine, func, select, text  # noqa: E402

from queueops import config as config_mod  # noqa: E402
from queueops.lab.pgserver import EmbeddedPostgres  # noqa: E402
from queueops.lake.export import export_hours  # noqa: E402
from queueops.rows import SnapshotRow, StatusRow  # noqa: E402
from queueops.store import open_engine  # noqa: E402
from queueops.store.retention import prune  # noqa: E402
from queueops.store.schema import snapshots  # noqa: E402
from queueops.store.writer import StoreWriter  # noqa: E402

START = datetime(2026, 1, 1, tzinfo=UTC)
FAST_COLLECTORS, SLOW_COLLECTORS = 9, 2


def cycles(args: argparse.Namespace):  # noqa: ANN201 - generator of (rows, status)
    """The day's cycles in time order: every fast cycle, and a slow one every slow_s."""
    metrics_fast = [f"fast_metric_{i}" for i in range(args.fast_metrics)]
    metrics_slow = [f"slow_metric_{i}" for i in range(args.slow_metrics)]
    queues = [f"queue_{i:03d}" for i in range(args.queues)]
    end = START + timedelta(hours=args.hours)
    ts, k = START, 0
    while ts < end:
        rows = [SnapshotRow(ts, "bench", "app", q, m, float(k % 997), "exact") for q in queues for m in metrics_fast]
        status = [StatusRow(ts, "bench", f"fast_{c}", True, 1.5, len(rows) // FAST_COLLECTORS)
                  for c in range(FAST_COLLECTORS)]
        if k % int(args.slow_s // args.fast_s) == 0:
            rows += [SnapshotRow(ts, "bench", "app", q, m, 12.5, "pgstattuple_approx")
                     for q in queues for m in metrics_slow]
            status += [StatusRow(ts, "bench", f"slow_{c}", True, 40.0, args.queues) for c in range(SLOW_COLLECTORS)]
        yield rows, status
        k += 1
        ts += timedelta(seconds=args.fast_s)


def write_day(engine: Engine, args: argparse.Namespace) -> dict:
    w = StoreWriter(engine, bound=10_000_000)
    n_rows = n_status = n_cycles = 0
    worst = 0.0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for rows, status in cycles(args):
        c0 = time.perf_counter()
        rep = w.write(rows, status)
        worst = max(worst, time.perf_counter() - c0)
        if not rep.ok:
            raise RuntimeError(rep.error)
        n_rows += len(rows)
        n_status += len(status)
        n_cycles += 1
    wall = time.perf_counter() - t0
    return {"cycles": n_cycles, "snapshot_rows": n_rows, "status_rows": n_status, "wall_s": round(wall, 2),
            "rows_per_s": round((n_rows + n_status) / wall), "ms_per_cycle": round(wall / n_cycles * 1000, 2),
            "worst_cycle_ms": round(worst * 1000, 1), "client_cpu_s": round(time.process_time() - cpu0, 2),
            "seconds_per_day_of_rows": round(wall * 24 / args.hours, 1)}


def after_the_day(engine: Engine, args: argparse.Namespace, lake: Path) -> dict:
    """Export the day's first hour to the lake, then prune it (the 14-day retention passing it)."""
    # The exporter needs a config only for the lake path and the retention guard.
    cfg = config_mod.parse({"targets": [{"name": "bench", "dialect": "postgresql", "url": "postgresql://u@h/d"}],
                            "lake": {"path": str(lake)}, "store": {"retention_days": 30}})
    t0 = time.perf_counter()
    res = export_hours(cfg, engine, hours=[START], now=START + timedelta(days=1, hours=2))
    export_s = time.perf_counter() - t0
    exported = res.exported[0]["rows"] + res.exported[0]["status_rows"]
    t0 = time.perf_counter()
    pruned = prune(engine, 14, 5000, START + timedelta(days=14, hours=1))
    prune_s = time.perf_counter() - t0
    n = pruned["snapshots"] + pruned["collector_status"]
    return {"export_one_hour": {"rows": exported, "wall_s": round(export_s, 2), "rows_per_s": round(exported / export_s)},
            "prune_one_hour": {"rows": n, "batches": pruned["batches"], "wall_s": round(prune_s, 2),
                               "rows_per_s": round(n / prune_s)}}


def store_bytes(engine: Engine) -> int:
    if engine.url.get_backend_name() == "sqlite":
        db = Path(engine.url.database)
        with engine.connect() as conn:
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())


def run_backend(name: str, url: str, args: argparse.Namespace, work: Path) -> dict:
    engine = open_engine(url)
    out = {"backend": name, **write_day(engine, args)}
    with engine.connect() as conn:
        out["rows_in_store"] = conn.execute(select(func.count()).select_from(snapshots)).scalar_one()
    size = store_bytes(engine)
    out["store_mb"] = round(size / 2**20, 1)
    out["bytes_per_row"] = round(size / (out["snapshot_rows"] + out["status_rows"]), 1)
    out.update(after_the_day(engine, args, work / f"lake-{name}"))
    engine.dispose()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--hours", type=float, default=1,
                    help="hours of the day to write (default 1: a few minutes; 24 for the whole day)")
    ap.add_argument("--fast-s", type=float, default=15)
    ap.add_argument("--slow-s", type=float, default=300)
    # What the lab's collectors write per queue (rates and per-status counts included).
    ap.add_argument("--fast-metrics", type=int, default=13, help="rows per queue per fast cycle")
    ap.add_argument("--slow-metrics", type=int, default=9, help="rows per queue per slow cycle")
    ap.add_argument("--only", choices=["sqlite", "postgresql"])
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="queueops-bench-store-"))
    work.chmod(0o755)
    day_rows = (86400 / args.fast_s) * args.queues * args.fast_metrics + \
        (86400 / args.slow_s) * args.queues * args.slow_metrics
    result: dict = {"benchmark": "store_write", "snapshot_rows_per_day": round(day_rows), "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                    "model": {k: getattr(args, k) for k in ("queues", "hours", "fast_s", "slow_s", "fast_metrics",
                                                            "slow_metrics")}}
    srv = None
    try:
        if args.only in (None, "sqlite"):
            result["sqlite"] = run_backend("sqlite", f"sqlite:///{work / 'store.db'}", args, work)
        if args.only in (None, "postgresql"):
            srv = EmbeddedPostgres(work / "pg", fast=False)
            info = srv.start()
            url = f"postgresql+psycopg://queueops:{srv.password()}@127.0.0.1:{info.port}/{info.database}"
            result["postgresql"] = run_backend("postgresql", url, args, work)
        if "sqlite" in result and "postgresql" in result:
            s, p = result["sqlite"], result["postgresql"]
            result["ratio_postgresql_over_sqlite"] = {
                "write_rows_per_s": round(p["rows_per_s"] / s["rows_per_s"], 2),
                "prune_rows_per_s": round(p["prune_one_hour"]["rows_per_s"] / s["prune_one_hour"]["rows_per_s"], 2),
                "bytes_per_row": round(p["bytes_per_row"] / s["bytes_per_row"], 2),
            }
    finally:
        if srv is not None:
            srv.destroy()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
