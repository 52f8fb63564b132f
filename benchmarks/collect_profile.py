"""Where a cycle of the fast collectors spends its time on PostgreSQL: per collector, planning
versus execution and the buffers read, from ``EXPLAIN (ANALYZE, SUMMARY, BUFFERS)`` of the exact
batched statement the runner sends (the same tables and config as ``collect_cycle.py``).

    python benchmarks/collect_profile.py [--queues 100] [--rows 100000] [--repeat 5]

Prints one JSON object: per collector the median planning and execution milliseconds over
``--repeat`` runs, shared buffers hit / read, and the statement's length; then the totals.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.collect_cycle import bench_server, config_for  # noqa: E402
from collectors import registry, runner  # noqa: E402
from queueops import engine, sessions, sqlfiles  # noqa: E402


def _plan(conn: engine.Connection, stmt: sqlfiles.Statement) -> dict[str, Any]:
    explain = sqlfiles.Statement("EXPLAIN (ANALYZE, SUMMARY, BUFFERS, FORMAT JSON) " + stmt.sql, stmt.params)
    row = conn.execute(explain)[0]
    doc = next(iter(row.values()))[0]
    top = doc["Plan"]
    return {"planning_ms": doc["Planning Time"], "execution_ms": doc["Execution Time"],
            "hit": top.get("Shared Hit Blocks", 0), "read": top.get("Shared Read Blocks", 0)}


def profile(url: str, password: str, queues: int, repeat: int) -> dict[str, Any]:
    cfg = config_for(url, password, queues)
    target = cfg.targets[0]
    conn = engine.connect(target, "collect", cfg.base_dir)
    conn.execute(sessions.reading(target))
    out: dict[str, Any] = {}
    try:
        runner.run_collectors(cfg, target, list(registry.by_cadence("fast")), conn=conn)  # warm caches
        queues = cfg.queues_of(target.name)
        types = runner._catalog_types(target, queues, conn, runner.CycleResult())  # as the runner binds
        for c in registry.by_cadence("fast"):
            stmts = runner.build_statements(c, target, queues, types)
            stmts = [s for s in stmts if s is not None]
            if not stmts:
                continue
            runs = [[_plan(conn, s) for s in stmts] for _ in range(repeat)]
            plan = [sum(r["planning_ms"] for r in run) for run in runs]
            exe = [sum(r["execution_ms"] for r in run) for run in runs]
            out[c.name] = {"statements": len(stmts), "planning_ms": round(statistics.median(plan), 2),
                           "execution_ms": round(statistics.median(exe), 2),
                           "buffers_hit": sum(r["hit"] for r in runs[-1]),
                           "buffers_read": sum(r["read"] for r in runs[-1]),
                           "sql_chars": sum(len(s.sql) for s in stmts)}
    finally:
        conn.close()
    out["total"] = {k: round(sum(v[k] for v in out.values()), 2) for k in ("planning_ms", "execution_ms")}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    with bench_server(args.queues, args.rows) as (url, password, build_s, _size):
        result = profile(url, password, args.queues, args.repeat)
    print(json.dumps({"benchmark": "collect_profile", "queues": args.queues, "rows_per_queue": args.rows,
                      "count_cap": runner.COUNT_CAP, "build_s": round(build_s, 1), "collectors": result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
