"""Cost of one cycle of the fast collectors: batched (one statement per collector per target)
versus a naive loop (one statement per queue per collector), on N real queues of M rows each.

    python benchmarks/collect_cycle.py [--queues 100] [--rows 100000] [--cycles 15]

Builds its own embedded PostgreSQL in a temporary state folder (removed afterwards), N queue
tables cycling through the kinds delete (with a watermark), status, lease and due, each with the
indexes its dequeue uses and M rows (INSERT ... SELECT generate_series; VACUUM ANALYZE), then
alternates batched and naive cycles on one collector session each, as the scheduler does.
Also runs the same on the first N/10 queues in the same run, to show that the batched round
trips per cycle do not grow with the number of queues. Prints one JSON object.

"before" is the batched cycle as it was before issue 17's first lever, measured in the same run
on the same tables and interleaved with the others: every count of all rows is run, however far
the live-row counter puts the table above the cap (runner.COUNT_SKIP_ABOVE out of reach).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collectors import registry, runner  # noqa: E402
from queueops import config as config_mod  # noqa: E402
from queueops import engine, sqlfiles  # noqa: E402
from queueops.lab.pgserver import EmbeddedPostgres  # noqa: E402

KINDS = ("delete", "status", "lease", "due")

# One template per kind; {t} is a generated, fixed identifier (bench.q_00042), never input.
DDL = {
    "delete": [
        "CREATE TABLE {t} (id bigint PRIMARY KEY, enqueued_at timestamptz NOT NULL)",
        "INSERT INTO {t} SELECT g, now() - make_interval(secs => %(m)s - g) FROM generate_series(1, %(m)s) AS g",
        "CREATE TABLE {t}_wm (id int PRIMARY KEY, low_key bigint NOT NULL)",
        "INSERT INTO {t}_wm VALUES (1, 1)",
    ],
    "status": [
        "CREATE TABLE {t} (id bigint PRIMARY KEY, status smallint NOT NULL, enqueued_at timestamptz NOT NULL, "
        "status_changed_at timestamptz NOT NULL)",
        "INSERT INTO {t} SELECT g, CASE WHEN g %% 100 < 10 THEN 0 WHEN g %% 100 = 10 THEN 1 ELSE 2 END, "
        "now() - make_interval(secs => %(m)s - g), now() - make_interval(secs => (%(m)s - g) / 2) "
        "FROM generate_series(1, %(m)s) AS g",
        "CREATE INDEX ON {t} (status, id)",
    ],
    "lease": [
        "CREATE TABLE {t} (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, leased_at timestamptz)",
        "INSERT INTO {t} SELECT g, now() - make_interval(secs => %(m)s - g), "
        "CASE WHEN g %% 50 = 0 THEN now() - make_interval(secs => g %% 600) END FROM generate_series(1, %(m)s) AS g",
        "CREATE INDEX ON {t} (created_at, id) WHERE leased_at IS NULL",
        "CREATE INDEX ON {t} (leased_at) WHERE leased_at IS NOT NULL",
    ],
    "due": [
        "CREATE TABLE {t} (id bigint PRIMARY KEY, due_at timestamptz NOT NULL, enqueued_at timestamptz NOT NULL)",
        "INSERT INTO {t} SELECT g, now() + make_interval(secs => g - %(m)s / 2), now() FROM generate_series(1, %(m)s) AS g",
        "CREATE INDEX ON {t} (due_at, id)",
    ],
}


def queue_config(i: int) -> dict[str, Any]:
    kind = KINDS[i % len(KINDS)]
    q: dict[str, Any] = {"name": f"q{i:05d}", "target": "bench", "kind": kind, "schema": "bench",
                         "table": f"q_{i:05d}", "key": "id", "lease_timeout_s": 300}
    if kind == "delete":
        q |= {"enqueued_at": "enqueued_at", "watermark": {"table": f"q_{i:05d}_wm", "column": "low_key"}}
    elif kind == "status":
        q |= {"enqueued_at": "enqueued_at", "status_column": "status", "status_changed_at": "status_changed_at"}
    elif kind == "lease":
        q |= {"enqueued_at": "created_at", "lease_column": "leased_at"}
    else:
        q |= {"enqueued_at": "enqueued_at", "due_column": "due_at"}
    return q


def build(conn: Any, queues: int, rows: int) -> None:
    conn.execute("CREATE SCHEMA IF NOT EXISTS bench")
    for i in range(queues):
        table = f"bench.q_{i:05d}"
        for stmt in DDL[KINDS[i % len(KINDS)]]:
            conn.execute(stmt.format(t=table), {"m": rows})
        conn.execute(f"VACUUM ANALYZE {table}")


def naive_statements(cfg: config_mod.Config, target: config_mod.Target,
                     collectors: list[registry.Collector]) -> list[sqlfiles.Statement]:
    """One statement per queue per collector (target-scope collectors once), as a simple script would."""
    out = []
    for c in collectors:
        if c.scope == "target":
            out.append(runner.build_statement(c, target, []))
            continue
        for q in cfg.queues_of(target.name):
            stmt = runner.build_statement(c, target, [q])
            if stmt is not None:
                out.append(stmt)
    return [s for s in out if s is not None]


# A live-row count no table reaches: every count of all rows runs, as before the skip.
NEVER_SKIP = 2**62


def before_cycle(cfg: config_mod.Config, target: config_mod.Target, fast: list[registry.Collector],
                 conn: engine.Connection) -> runner.CycleResult:
    """One batched cycle with the counts the skip leaves out run again (the cycle before the lever)."""
    skip = runner.COUNT_SKIP_ABOVE
    runner.COUNT_SKIP_ABOVE = NEVER_SKIP
    try:
        return runner.run_collectors(cfg, target, fast, conn=conn)
    finally:
        runner.COUNT_SKIP_ABOVE = skip


def measure(cfg: config_mod.Config, cycles: int) -> dict[str, Any]:
    target = cfg.targets[0]
    fast = list(registry.by_cadence("fast"))
    batched_conn = engine.connect(target, "collect", cfg.base_dir)
    before_conn = engine.connect(target, "collect", cfg.base_dir)
    naive_conn = engine.connect(target, "collect", cfg.base_dir)
    for conn in (batched_conn, before_conn, naive_conn):
        conn.execute(runner.session_setup(target))
    naive = naive_statements(cfg, target, fast)
    rtt = []
    for _ in range(50):
        t0 = time.perf_counter()
        naive_conn.execute(sqlfiles.Statement("SELECT 1 AS one"))
        rtt.append((time.perf_counter() - t0) * 1000)
    batched_ms: list[float] = []
    before_ms: list[float] = []
    naive_ms: list[float] = []
    trips = set()
    errors: list[str] = []
    try:
        for i in range(cycles + 1):  # the first round warms caches and is not counted
            t0 = time.perf_counter()
            res = runner.run_collectors(cfg, target, fast, conn=batched_conn)
            b = (time.perf_counter() - t0) * 1000
            errors += [f"{s.collector}: {s.error}" for s in res.status if not s.ok]
            t0 = time.perf_counter()
            old = before_cycle(cfg, target, fast, before_conn)
            o = (time.perf_counter() - t0) * 1000
            errors += [f"{s.collector} (before): {s.error}" for s in old.status if not s.ok]
            t0 = time.perf_counter()
            for stmt in naive:
                naive_conn.execute(stmt)
            n = (time.perf_counter() - t0) * 1000
            if i:
                batched_ms.append(b)
                before_ms.append(o)
                naive_ms.append(n)
                trips.add(res.round_trips)
    finally:
        for conn in (batched_conn, before_conn, naive_conn):
            conn.close()
    if errors:
        raise SystemExit(f"collector errors: {sorted(set(errors))[:5]}")
    return {
        "queues": len(cfg.queues),
        "median_ms": round(statistics.median(batched_ms), 1),
        "p95_ms": round(percentile(batched_ms, 95), 1),
        "round_trips": max(trips),
        "before_median_ms": round(statistics.median(before_ms), 1),
        "before_p95_ms": round(percentile(before_ms, 95), 1),
        "before_over_batched": round(statistics.median(before_ms) / statistics.median(batched_ms), 2),
        "naive_median_ms": round(statistics.median(naive_ms), 1),
        "naive_p95_ms": round(percentile(naive_ms, 95), 1),
        "naive_round_trips": len(naive),
        "naive_over_batched": round(statistics.median(naive_ms) / statistics.median(batched_ms), 2),
        # What one extra round trip costs here (loopback); across a network multiply by the RTT.
        "round_trip_ms": round(statistics.median(rtt), 3),
    }


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1))))
    return ordered[k]


def config_for(url: str, password: str, queues: int) -> config_mod.Config:
    return config_mod.parse({
        "targets": [{"name": "bench", "dialect": "postgresql", "url": url, "password": password,
                     "statement_timeout_ms": 60_000, "lock_timeout_ms": 1000}],
        "queues": [queue_config(i) for i in range(queues)],
    })


@contextlib.contextmanager
def bench_server(queues: int, rows: int) -> Iterator[tuple[str, str, float, int]]:
    """A throw-away embedded PostgreSQL with the benchmark's tables built: (url, password, build
    seconds, database bytes); removed on exit."""
    base = Path(tempfile.mkdtemp(prefix="queueops-bench-"))
    base.chmod(0o755)
    srv = EmbeddedPostgres(base / "state", fast=True, database="bench")
    try:
        info = srv.start()
        import psycopg

        t0 = time.perf_counter()
        with psycopg.connect(info.url(), password=srv.password(), autocommit=True) as conn:
            build(conn, queues, rows)
            size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        yield info.url(), srv.password(), time.perf_counter() - t0, size
    finally:
        srv.destroy()
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--cycles", type=int, default=15)
    ap.add_argument("--small-queues", type=int, default=None, help="the smaller N (default: N/10, at least one queue of each kind)")
    ap.add_argument("--cap", type=int, default=runner.COUNT_CAP,
                    help=f"count cap (default {runner.COUNT_CAP}; to compare what a larger exact range costs)")
    args = ap.parse_args(argv)
    if args.queues < 1 or args.rows < 1 or args.cycles < 1:
        ap.error("--queues, --rows and --cycles must be positive")
    runner.COUNT_SKIP_ABOVE = runner.COUNT_SKIP_ABOVE // runner.COUNT_CAP * args.cap  # the same multiple of the cap
    runner.COUNT_CAP = args.cap
    small = args.small_queues or min(args.queues, max(len(KINDS), args.queues // 10))

    with bench_server(args.queues, args.rows) as (url, password, build_s, size):
        big = measure(config_for(url, password, args.queues), args.cycles)
        little = measure(config_for(url, password, small), args.cycles)
    out = {
        "benchmark": "collect_cycle",
        "rows_per_queue": args.rows,
        "count_cap": runner.COUNT_CAP,
        "count_skip_above": runner.COUNT_SKIP_ABOVE,
        "cycles": args.cycles,
        "collectors": [c.name for c in registry.by_cadence("fast")],
        **big,
        "small": little,
        "round_trips_constant": big["round_trips"] == little["round_trips"],
        "build_s": round(build_s, 1),
        "database_mb": round(size / 2**20),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
