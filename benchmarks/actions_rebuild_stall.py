"""Longest dequeue stall while an index rebuild runs: none, queueops' rebuild action (REINDEX
CONCURRENTLY + VACUUM (ANALYZE)), and the offline alternative (REINDEX TABLE + VACUUM FULL) that
the action refuses to choose silently.

    python benchmarks/actions_rebuild_stall.py [--rows 600000] [--dequeuers 2] [--window 3]

Builds its own embedded PostgreSQL in a temporary folder (removed afterwards) with one FIFO delete
queue (bigint key, a secondary index), churns it before each phase (fill, delete 90 %: the index
is mostly garbage), and keeps a producer and N dequeuers running (``DELETE ... WHERE id = (SELECT
... FOR UPDATE SKIP LOCKED LIMIT 1)``, lock_timeout 10 s so a blocked dequeuer waits instead of
failing). For each phase: the longest time without any completed dequeue, the slowest single
dequeue, and dequeues per second, over the maintenance (or a window of the same length for the
baseline). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

from queueops import actions  # noqa: E402
from queueops import config as config_mod  # noqa: E402
from queueops.lab.pgserver import EmbeddedPostgres  # noqa: E402

# Fixed statements on a fixed benchmark table (no input reaches them).
SETUP = [
    "CREATE EXTENSION IF NOT EXISTS pgstattuple",
    "CREATE SCHEMA IF NOT EXISTS bench",
    "CREATE TABLE bench.q (id bigint PRIMARY KEY, enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
    "payload text NOT NULL DEFAULT '') WITH (autovacuum_enabled = off)",
    "CREATE INDEX q_enq ON bench.q (enqueued_at, id)",
    "CREATE SEQUENCE bench.q_seq START 100000000",
]
CHURN = [
    "TRUNCATE bench.q",
    "INSERT INTO bench.q (id, payload) SELECT g, 'p' FROM generate_series(1, %(rows)s) AS g",
    "DELETE FROM bench.q WHERE id %% 10 <> 0",
]
DEQUEUE = ("DELETE FROM bench.q WHERE id = (SELECT id FROM bench.q ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) "
           "RETURNING id")
PRODUCE = "INSERT INTO bench.q (id) VALUES (nextval('bench.q_seq'))"
OFFLINE = ["REINDEX TABLE bench.q", "VACUUM (FULL, ANALYZE) bench.q"]


class Load:
    """A producer and N dequeuers; every completed dequeue's end time and duration is recorded."""

    def __init__(self, url: str, password: str, dequeuers: int):
        self.url, self.password = url, password
        self.done: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._dequeue, daemon=True) for _ in range(dequeuers)]
        self.threads.append(threading.Thread(target=self._produce, daemon=True))

    def _conn(self) -> psycopg.Connection:
        conn = psycopg.connect(self.url, password=self.password, autocommit=True)
        conn.execute("SET lock_timeout = '10s'")
        return conn

    def _dequeue(self) -> None:
        with self._conn() as conn:
            while not self.stop.is_set():
                t0 = time.monotonic()
                try:
                    conn.execute(DEQUEUE).fetchone()
                except psycopg.Error as exc:
                    self.errors.append(type(exc).__name__)
                    continue
                t1 = time.monotonic()
                with self.lock:
                    self.done.append((t1, t1 - t0))

    def _produce(self) -> None:
        with self._conn() as conn:
            while not self.stop.is_set():
                try:
                    conn.execute(PRODUCE)
                except psycopg.Error as exc:
                    self.errors.append(type(exc).__name__)
                time.sleep(0.002)

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def window(self, start: float, end: float) -> dict[str, Any]:
        with self.lock:
            inside = [(t, d) for t, d in self.done if start <= t <= end]
        ends = [start, *[t for t, _ in inside], end]
        gaps = [b - a for a, b in zip(ends, ends[1:], strict=False)]
        durations = sorted(d for _, d in inside)
        return {
            "seconds": round(end - start, 3),
            "dequeues": len(inside),
            "dequeues_per_s": round(len(inside) / (end - start), 1) if end > start else None,
            "longest_stall_ms": round(max(gaps) * 1000, 1),
            "slowest_dequeue_ms": round(durations[-1] * 1000, 1) if durations else None,
            "p99_dequeue_ms": round(durations[int(0.99 * (len(durations) - 1))] * 1000, 2) if durations else None,
            "median_dequeue_ms": round(statistics.median(durations) * 1000, 2) if durations else None,
        }


def index_bytes(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT pg_indexes_size('bench.q')").fetchone()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=600_000)
    ap.add_argument("--dequeuers", type=int, default=2)
    ap.add_argument("--window", type=float, default=3.0, help="baseline window, seconds")
    args = ap.parse_args()

    base = Path(tempfile.mkdtemp(prefix="queueops-bench-rebuild-"))
    base.chmod(0o755)
    srv = EmbeddedPostgres(base / "state", fast=True, port=None)
    try:
        info = srv.start()
        url, password = info.url(), srv.password()
        os.environ["QUEUEOPS_BENCH_PG_PASSWORD"] = password
        cfg = config_mod.parse({
            "targets": [{"name": "bench", "dialect": "postgresql", "url": url,
                         "password": "env:QUEUEOPS_BENCH_PG_PASSWORD", "lock_timeout_ms": 500}],
            "queues": [{"name": "q", "target": "bench", "kind": "delete", "schema": "bench", "table": "q",
                        "key": "id", "enqueued_at": "enqueued_at"}],
            "store": {"url": f"sqlite:///{base}/store.db"},
            "identity": {"user": "bench", "default_role": "operator"},
        })
        admin = psycopg.connect(url, password=password, autocommit=True)
        for stmt in SETUP:
            admin.execute(stmt)

        def churn() -> int:
            for stmt in CHURN:
                admin.execute(stmt, {"rows": args.rows})
            admin.execute("ANALYZE bench.q")
            time.sleep(2.0)  # sessions flush their row counters to pg_stat at most once a second
            return index_bytes(admin)

        results: dict[str, Any] = {"rows": args.rows, "dequeuers": args.dequeuers}
        phases: dict[str, Any] = {}

        # 1. baseline: the same load, no maintenance
        bloated = churn()
        load = Load(url, password, args.dequeuers)
        load.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        time.sleep(args.window)
        phases["none"] = load.window(t0, time.monotonic())
        load.finish()

        # 2. queueops' rebuild action (preview, then execute), same load
        churn()
        plan = actions.plan(cfg, "rebuild", "q")
        ops = {r["index"]: r["operation"] for r in plan.preview.rows}
        load = Load(url, password, args.dequeuers)
        load.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        result = actions.execute(cfg, plan)
        t1 = time.monotonic()
        time.sleep(0.5)
        phases["queueops_rebuild"] = {**load.window(t0, t1), "outcome": result.outcome, "operations": ops,
                                      "index_bytes_before": bloated, "index_bytes_after": index_bytes(admin)}
        load.finish()
        phases["queueops_rebuild"]["dequeue_errors"] = len(load.errors)

        # 3. the offline alternative, same load
        churn()
        load = Load(url, password, args.dequeuers)
        load.start()
        time.sleep(1.0)
        t0 = time.monotonic()
        for stmt in OFFLINE:
            admin.execute(stmt)
        t1 = time.monotonic()
        time.sleep(0.5)
        phases["offline_reindex_vacuum_full"] = {**load.window(t0, t1), "index_bytes_after": index_bytes(admin)}
        load.finish()
        phases["offline_reindex_vacuum_full"]["dequeue_errors"] = len(load.errors)

        results["phases"] = phases
        base_stall = phases["none"]["longest_stall_ms"] or 1
        results["ratios"] = {
            "stall_rebuild_vs_none": round(phases["queueops_rebuild"]["longest_stall_ms"] / base_stall, 2),
            "stall_offline_vs_rebuild": round(phases["offline_reindex_vacuum_full"]["longest_stall_ms"]
                                              / max(phases["queueops_rebuild"]["longest_stall_ms"], 0.1), 2),
            "throughput_rebuild_vs_none": round((phases["queueops_rebuild"]["dequeues_per_s"] or 0)
                                                / max(phases["none"]["dequeues_per_s"] or 1, 0.1), 2),
        }
        admin.close()
        print(json.dumps(results))
    finally:
        srv.destroy()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
