"""Cost of one cycle of the fast collectors: batched (one statement per collector per target)
versus a naive loop (one statement per queue per collector), on N real queues of M rows each.

    python benchmarks/collect_cycle.py [--queues 100] [--rows 100000] [--cycles 15]

Builds its own embedded PostgreSQL in a temporary state folder (removed afterwards), N queue
tables cycling through the kinds delete (with a watermark), status, lease and due, each with the
indexes its dequeue uses and M rows (INSERT ... SELECT generate_series; VACUUM ANALYZE), then
alternates batched and naive cycles on one collector session each, as the scheduler does.
Also runs the same on the first N/10 queues in the same run, to show that the batched round
trips per cycle do not grow with the number of queues. Prints one JSON object.

Every page of the tables is all-visible when the cycles are timed (``all_visible_pct``; autovacuum
is off on them, see :func:`build`), so index-only counts read the index alone. Then the visibility
map is cleared and everything is measured again on the same tables (``not_all_visible``): the
state of a table changed since its last vacuum, where every counted entry is also checked in the
heap. ``--no-cleared`` skips that second half.

"floor" (issue 17) is the least any collector giving the same exact values must read, measured in
the same run, interleaved: one statement with, per queue, only the bounded reads behind its exact
values (each count of at most the cap of entries per status / lease / due class, the stuck-lease
read of at most the cap, the oldest item, the watermark's stranded count), with no catalog or
statistics lookup, no estimate, no note; counts of all rows only where the runner still makes
them (the live-row counter below its skip threshold). ``batched_over_floor`` is the ratio.

"batched" is what the collector service runs: one statement per collector per target, on its
long-lived session whose statements are kept prepared with generic plans (runner.keep_plans; the
first round makes them and is not counted). "unplanned" is the same runner on a session that plans
every statement at each execution (the console's own one-cycle collection, and the service before
issue 17's second lever). "before" is the cycle as it was before issue 17: planned at every
execution and every count of all rows run, however far the live-row counter puts the table above
the cap (runner.COUNT_SKIP_ABOVE out of reach). The floor runs on a kept-plans session too. All
measured in the same run on the same tables, interleaved cycle by cycle.
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
from queueops import engine, sessions, sqlfiles  # noqa: E402
from queueops.lab.pgserver import EmbeddedPostgres  # noqa: E402

KINDS = ("delete", "status", "lease", "due")

# One template per kind; {t} is a generated, fixed identifier (bench.q_00042), never input. %(m)s is
# the rows per table; %(f)s the items in flight of a status (processing) or lease (leased) queue:
# the newest rows of every 100th (status) or 50th (lease), at most 1 % and 2 % of the rows.
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
        "INSERT INTO {t} SELECT g, CASE WHEN g %% 100 < 10 THEN 0 WHEN g %% 100 = 10 AND g > %(m)s - 100 * %(f)s "
        "THEN 1 ELSE 2 END, "
        "now() - make_interval(secs => %(m)s - g), now() - make_interval(secs => (%(m)s - g) / 2) "
        "FROM generate_series(1, %(m)s) AS g",
        "CREATE INDEX ON {t} (status, id)",
    ],
    "lease": [
        "CREATE TABLE {t} (id bigint PRIMARY KEY, created_at timestamptz NOT NULL, leased_at timestamptz)",
        "INSERT INTO {t} SELECT g, now() - make_interval(secs => %(m)s - g), "
        "CASE WHEN g %% 50 = 0 AND g > %(m)s - 50 * %(f)s THEN now() - make_interval(secs => g %% 600) END "
        "FROM generate_series(1, %(m)s) AS g",
        "CREATE INDEX ON {t} (created_at, id) WHERE leased_at IS NULL",
        "CREATE INDEX ON {t} (leased_at) WHERE leased_at IS NOT NULL",
    ],
    "due": [
        "CREATE TABLE {t} (id bigint PRIMARY KEY, due_at timestamptz NOT NULL, enqueued_at timestamptz NOT NULL)",
        "INSERT INTO {t} SELECT g, now() + make_interval(secs => g - %(m)s / 2), now() FROM generate_series(1, %(m)s) AS g",
        "CREATE INDEX ON {t} (due_at, id)",
    ],
}


# The floor's reads per kind ({t}: the generated table; {cap}, {timeout}: integers): one bounded
# read for each exact value the fast collectors report, in the cheapest order an index of the
# table offers; "count" lines only below the skip threshold, as the runner counts all rows.
FLOOR = {
    "delete": ["(SELECT extract(epoch FROM min(enqueued_at)) FROM (SELECT enqueued_at FROM {t} ORDER BY id LIMIT 1) AS x)",
               "(SELECT count(*) FROM (SELECT 1 FROM {t} WHERE id < (SELECT low_key FROM {t}_wm WHERE id = 1) "
               "ORDER BY id LIMIT {cap}) AS x)"],
    "status": ["(SELECT count(*) FROM (SELECT 1 FROM {t} WHERE status = 0 ORDER BY status, id LIMIT {cap}) AS x)",
               "(SELECT count(*) FROM (SELECT 1 FROM {t} WHERE status = 1 ORDER BY status, id LIMIT {cap}) AS x)",
               "(SELECT count(*) FROM (SELECT 1 FROM {t} WHERE status = 2 ORDER BY status, id LIMIT {cap}) AS x)",
               "(SELECT count(*) FILTER (WHERE c < now() - interval '{timeout} seconds') "
               "+ extract(epoch FROM min(c)) FROM (SELECT status_changed_at AS c FROM {t} WHERE status = 1 "
               "ORDER BY status, id LIMIT {cap}) AS x)",
               "(SELECT extract(epoch FROM min(e)) FROM (SELECT enqueued_at AS e FROM {t} WHERE status = 0 "
               "ORDER BY status, id LIMIT 1) AS x)"],
    "lease": ["(SELECT count(*) FROM (SELECT 1 FROM {t} WHERE leased_at IS NULL ORDER BY created_at, id LIMIT {cap}) AS x)",
              "(SELECT count(*) FILTER (WHERE l < now() - interval '{timeout} seconds') + extract(epoch FROM min(l)) "
              "FROM (SELECT leased_at AS l FROM {t} WHERE leased_at IS NOT NULL ORDER BY leased_at LIMIT {cap}) AS x)",
              "(SELECT extract(epoch FROM min(c)) FROM (SELECT created_at AS c FROM {t} WHERE leased_at IS NULL "
              "ORDER BY created_at, id LIMIT 1) AS x)"],
    "due": ["(SELECT count(*) FROM (SELECT 1 FROM {t} WHERE due_at <= now() ORDER BY due_at, id LIMIT {cap}) AS x)",
            "(SELECT extract(epoch FROM min(d)) FROM (SELECT due_at AS d FROM {t} WHERE due_at <= now() "
            "ORDER BY due_at, id LIMIT 1) AS x)"],
}
FLOOR_COUNT = "(SELECT count(*) FROM (SELECT 1 FROM {t} ORDER BY id LIMIT {cap}) AS x)"


def floor_statement(queues: int, rows: int) -> sqlfiles.Statement:
    """The floor's one statement for the first ``queues`` tables of ``rows`` rows each."""
    parts = []
    for i in range(queues):
        reads = list(FLOOR[KINDS[i % len(KINDS)]])
        if rows < runner.COUNT_SKIP_ABOVE:  # a delete queue's depth, every other kind's total
            reads.append(FLOOR_COUNT)
        parts += [r.format(t=f"bench.q_{i:05d}", cap=runner.COUNT_CAP, timeout=300) for r in reads]
    return sqlfiles.Statement("SELECT " + " + ".join(f"coalesce({p}, 0)" for p in parts) + " AS floor")


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


# The benchmark's tables as pg_class sees them: relation pages, and the pages VACUUM marked all-visible.
BENCH_PAGES = ("SELECT c.oid::regclass::text AS name, c.relpages AS pages, c.relallvisible AS visible FROM pg_class AS c "
               "WHERE c.relnamespace = 'bench'::regnamespace AND c.relkind = 'r'")


def build(conn: Any, queues: int, rows: int, in_flight: int | None = None) -> None:
    """The tables, vacuumed until every page is all-visible (``all_visible_pct``).

    ``in_flight``: processing items per status queue and leased items per lease queue; by default
    1 % and 2 % of the rows (1,000 and 2,000 of 100,000: far more than a queue's workers hold, and
    each processing item's ``status_changed_at`` is read from the heap every cycle).

    Autovacuum is off on them: an ANALYZE it runs on one table holds a snapshot, and a VACUUM of
    another table meanwhile cannot mark that table's pages all-visible. Such pages make every
    index-only count check each entry in the heap; it happened to about a third of the tables in
    earlier runs, a different third each time. :func:`clear_visibility` makes that state on purpose.
    """
    conn.execute("CREATE SCHEMA IF NOT EXISTS bench")
    for i in range(queues):
        table = f"bench.q_{i:05d}"
        for stmt in DDL[KINDS[i % len(KINDS)]]:
            conn.execute(stmt.format(t=table), {"m": rows, "f": rows if in_flight is None else in_flight})
            if stmt.startswith("CREATE TABLE"):
                name = stmt.split()[2].format(t=table)
                conn.execute(f"ALTER TABLE {name} SET (autovacuum_enabled = off)")
        conn.execute(f"VACUUM ANALYZE {table}")
    for _ in range(5):
        short = [r[0] for r in conn.execute(BENCH_PAGES).fetchall() if r[2] < r[1]]
        if not short:
            break
        for name in short:
            conn.execute(f"VACUUM {name}")


def all_visible_pct(conn: Any) -> float:
    """The share of the tables' pages marked all-visible in the visibility map itself (pg_class's
    relallvisible is only updated by VACUUM and ANALYZE)."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_visibility")
    rows = conn.execute(BENCH_PAGES).fetchall()
    pages = sum(r[1] for r in rows)
    visible = sum(conn.execute("SELECT all_visible FROM pg_visibility_map_summary(%s::regclass)",
                               (r[0],)).fetchone()[0] for r in rows)
    return round(100.0 * visible / pages, 1) if pages else 100.0


def clear_visibility(conn: Any) -> None:
    """Every page of the benchmark's tables not all-visible, as on tables changed since their last
    vacuum (a busy queue's recent rows): index-only counts then check every entry in the heap.
    ``pg_truncate_visibility_map`` (contrib's pg_visibility) clears the map; autovacuum is off on
    these tables, so nothing sets it again during the measurement."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_visibility")
    for name in [r[0] for r in conn.execute(BENCH_PAGES).fetchall()]:
        conn.execute("SELECT pg_truncate_visibility_map(%s::regclass)", (name,))


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


def measure(cfg: config_mod.Config, cycles: int, rows: int) -> dict[str, Any]:
    """Interleaved, cycle by cycle, each variant on a collector session of its own."""
    target = cfg.targets[0]
    fast = list(registry.by_cadence("fast"))
    conns = {name: engine.connect(target, "collect", cfg.base_dir)
             for name in ("batched", "unplanned", "before", "naive", "floor")}
    for name, conn in conns.items():
        if name in ("batched", "floor"):
            runner.keep_plans(conn)  # the service's session: statements kept prepared
        else:
            conn.execute(sessions.reading(target))  # planned at every execution
    naive = naive_statements(cfg, target, fast)
    floor = floor_statement(len(cfg.queues), rows)
    rtt = []
    for _ in range(50):
        t0 = time.perf_counter()
        conns["naive"].execute(sqlfiles.Statement("SELECT 1 AS one"))
        rtt.append((time.perf_counter() - t0) * 1000)

    def naive_cycle(conn: engine.Connection) -> None:
        for stmt in naive:
            conn.execute(stmt)

    runs: dict[str, Any] = {
        "batched": lambda conn: runner.run_collectors(cfg, target, fast, conn=conn),
        "unplanned": lambda conn: runner.run_collectors(cfg, target, fast, conn=conn),
        "before": lambda conn: before_cycle(cfg, target, fast, conn),
        "naive": naive_cycle,
        "floor": lambda conn: conn.execute(floor),
    }
    ms: dict[str, list[float]] = {name: [] for name in runs}
    trips = set()
    errors: list[str] = []
    try:
        for i in range(cycles + 1):  # the first round warms caches (and makes the kept plans): not counted
            for name, run in runs.items():
                t0 = time.perf_counter()
                res = run(conns[name])
                took = (time.perf_counter() - t0) * 1000
                if isinstance(res, runner.CycleResult):
                    errors += [f"{s.collector} ({name}): {s.error}" for s in res.status if not s.ok]
                    if name == "batched" and i:
                        trips.add(res.round_trips)
                if i:
                    ms[name].append(took)
    finally:
        for conn in conns.values():
            conn.close()
    if errors:
        raise SystemExit(f"collector errors: {sorted(set(errors))[:5]}")
    med = {name: statistics.median(v) for name, v in ms.items()}
    out: dict[str, Any] = {"queues": len(cfg.queues), "round_trips": max(trips), "naive_round_trips": len(naive)}
    for name in runs:
        prefix = "" if name == "batched" else f"{name}_"
        out[f"{prefix}median_ms"] = round(med[name], 1)
        out[f"{prefix}p95_ms"] = round(percentile(ms[name], 95), 1)
    out |= {
        "batched_over_floor": round(med["batched"] / med["floor"], 2),
        "unplanned_over_batched": round(med["unplanned"] / med["batched"], 2),
        "before_over_batched": round(med["before"] / med["batched"], 2),
        "naive_over_batched": round(med["naive"] / med["batched"], 2),
        # What one extra round trip costs here (loopback); across a network multiply by the RTT.
        "round_trip_ms": round(statistics.median(rtt), 3),
    }
    return out


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
def throwaway_server() -> Iterator[tuple[str, str]]:
    """A throw-away embedded PostgreSQL (fast settings, database ``bench``): (url, password);
    destroyed, with its directory, on exit."""
    base = Path(tempfile.mkdtemp(prefix="queueops-bench-"))
    base.chmod(0o755)
    srv = EmbeddedPostgres(base / "state", fast=True, database="bench")
    try:
        info = srv.start()
        yield info.url(), srv.password()
    finally:
        srv.destroy()
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def bench_server(queues: int, rows: int, in_flight: int | None = None) -> Iterator[tuple[str, str, float, int]]:
    """A throw-away embedded PostgreSQL with the benchmark's tables built: (url, password, build
    seconds, database bytes); removed on exit."""
    with throwaway_server() as (url, password):
        import psycopg

        t0 = time.perf_counter()
        with psycopg.connect(url, password=password, autocommit=True) as conn:
            build(conn, queues, rows, in_flight)
            size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
        yield url, password, time.perf_counter() - t0, size


def marginals(big: dict[str, Any], little: dict[str, Any]) -> dict[str, float | None]:
    """What one more queue costs a cycle, from the two sizes of the same run (issue 17: < 0.5 ms)."""
    n = big["queues"] - little["queues"]
    return {"marginal_ms_per_queue": round((big["median_ms"] - little["median_ms"]) / n, 2) if n > 0 else None,
            "floor_marginal_ms_per_queue": round((big["floor_median_ms"] - little["floor_median_ms"]) / n, 2)
            if n > 0 else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--cycles", type=int, default=15)
    ap.add_argument("--small-queues", type=int, default=None, help="the smaller N (default: N/10, at least one queue of each kind)")
    ap.add_argument("--cap", type=int, default=runner.COUNT_CAP,
                    help=f"count cap (default {runner.COUNT_CAP}; to compare what a larger exact range costs)")
    ap.add_argument("--in-flight", type=int, default=None, metavar="N",
                    help="items in flight per status queue (processing) and lease queue (leased); default 1 %% "
                         "and 2 %% of --rows, far more than a queue's workers hold (each is judged every cycle)")
    ap.add_argument("--no-cleared", action="store_true",
                    help="skip the second measurement with every page not all-visible (a table changed since its "
                         "last vacuum)")
    args = ap.parse_args(argv)
    if args.queues < 1 or args.rows < 1 or args.cycles < 1:
        ap.error("--queues, --rows and --cycles must be positive")
    if args.in_flight is not None and not 0 <= args.in_flight <= args.rows // 100:
        ap.error(f"--in-flight must be between 0 and 1 % of --rows ({args.rows // 100})")
    runner.COUNT_SKIP_ABOVE = runner.COUNT_SKIP_ABOVE // runner.COUNT_CAP * args.cap  # the same multiple of the cap
    runner.COUNT_CAP = args.cap
    small = args.small_queues or min(args.queues, max(len(KINDS), args.queues // 10))

    with bench_server(args.queues, args.rows, args.in_flight) as (url, password, build_s, size):
        import psycopg

        with psycopg.connect(url, password=password, autocommit=True) as admin:
            visible = all_visible_pct(admin)
            big = measure(config_for(url, password, args.queues), args.cycles, args.rows)
            little = measure(config_for(url, password, small), args.cycles, args.rows)
            cleared: dict[str, Any] | None = None
            if not args.no_cleared:
                clear_visibility(admin)
                cleared = {"all_visible_pct": all_visible_pct(admin)}
                cleared_big = measure(config_for(url, password, args.queues), args.cycles, args.rows)
                cleared_little = measure(config_for(url, password, small), args.cycles, args.rows)
                cleared |= {**cleared_big, "small": cleared_little, **marginals(cleared_big, cleared_little)}
    out = {
        "benchmark": "collect_cycle",
        "rows_per_queue": args.rows,
        # Processing items per status queue, leased per lease queue (null: 1 % and 2 % of the rows).
        "in_flight": args.in_flight,
        "count_cap": runner.COUNT_CAP,
        "count_skip_above": runner.COUNT_SKIP_ABOVE,
        "cycles": args.cycles,
        "collectors": [c.name for c in registry.by_cadence("fast")],
        "all_visible_pct": visible,
        **big,
        "small": little,
        "round_trips_constant": big["round_trips"] == little["round_trips"],
        **marginals(big, little),
        # The same tables with every page not all-visible (clear_visibility), measured right after.
        "not_all_visible": cleared,
        "build_s": round(build_s, 1),
        "database_mb": round(size / 2**20),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
