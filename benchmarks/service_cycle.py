"""CPU of one fast cycle of the collector service, client and server, by stage, against a floor.

    python benchmarks/service_cycle.py [--queues 5,100] [--rows 10000] [--cycles 300]

Why this exists: the overhead benchmark's CPU controls (``overhead.py --parts cpu``) showed that on
its saturated two-core machine any process waking every second costs the workload several per
cent, whatever it runs, so that benchmark cannot tell a cheaper cycle from a dearer one. The CPU a
cycle spends, on both sides of the connection, is what the console controls; this measures it
steadily (CPU time, not wall time: the machine's load moves it little).

One run, on a throw-away embedded PostgreSQL with ``collect_cycle.py``'s tables (20 items in flight
per status and lease queue): the real :class:`queueops.service.app.Service` (SQLite store, alert
rules, Prometheus families; no scheduler, no lake) runs its fast job ``--cycles`` times per queue
count, called directly in this thread, as APScheduler's worker would. Per cycle:

* ``collect``: :meth:`CollectJob.cycle` (the statements, rows made from their results);
* ``store``: the store writer's insert of the snapshot and status rows;
* ``rest``: the rest of the sink (alerts, Prometheus families, health);
* ``server``: the collector session's backend CPU (``/proc/<pid>/stat``; a process per session).

``floor``, interleaved cycle by cycle on its own kept-plans session: the very statements the
collect stage sends (``runner.build_statements``), prepared, executed by psycopg and their rows
fetched, nothing else. Its server CPU is the same work; its client CPU is the least a client can
spend to get these values. ``client_over_floor`` is the service's whole client CPU per cycle over
the floor's.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.collect_cycle import bench_server, queue_config  # noqa: E402
from benchmarks.labharness import loadavg, proc_cpu_s  # noqa: E402
from collectors import registry, runner  # noqa: E402
from queueops import config as config_mod  # noqa: E402
from queueops.rows import utcnow  # noqa: E402


def backend_cpu_s(pid: int) -> float:
    cpu = proc_cpu_s(pid)
    if cpu is None:
        raise RuntimeError(f"backend {pid} is gone: its CPU cannot be read")
    return cpu


def service_config(url: str, password: str, queues: int, work: Path) -> config_mod.Config:
    return config_mod.parse({
        "targets": [{"name": "bench", "dialect": "postgresql", "url": url, "password": password,
                     "statement_timeout_ms": 60_000, "lock_timeout_ms": 1000}],
        "queues": [queue_config(i) for i in range(queues)],
        "store": {"url": f"sqlite:///{work / 'store.db'}"},
        "lake": {"path": str(work / "lake")},
        "schedule": {"fast_s": 1, "slow_s": 300},
    })


class Floor:
    """The collect stage's statements, prepared on a psycopg session of their own, rows fetched."""

    def __init__(self, cfg: config_mod.Config):
        import psycopg

        from queueops import engine

        target = cfg.targets[0]
        # The runner's own session set-up and types, so the statements are the ones it sends.
        self.conn = engine.connect(target, "collect", cfg.base_dir, application="queueops-bench-floor")
        runner.keep_plans(self.conn)
        queues = cfg.queues_of(target.name)
        types = runner._catalog_types(target, queues, self.conn, runner.CycleResult())
        statements = [s for c in registry.by_cadence("fast")
                      for s in runner.build_statements(c, target, queues, types) if s is not None]
        # In the server's own '$n' form, as the runner sends a kept-plans session's statements.
        self.texts = [(engine.dollar_params(s.sql), s.params) for s in statements]
        self.cur = psycopg.RawCursor(self.conn.raw)
        self.pid = int(self.conn.raw.execute("SELECT pg_backend_pid()", prepare=False).fetchone()[0])

    def cycle(self) -> int:
        n = 0
        for sql, params in self.texts:
            self.cur.execute(sql, params, prepare=True)
            n += len(self.cur.fetchall())
        return n

    def close(self) -> None:
        self.conn.close()


def measure(url: str, password: str, queues: int, cycles: int) -> dict[str, Any]:
    from queueops.alerts.rules import effective_rules
    from queueops.service.app import Service
    from queueops.service.plan import plan_jobs

    with tempfile.TemporaryDirectory(prefix="queueops-svc-") as tmp:
        cfg = service_config(url, password, queues, Path(tmp))
        plans = plan_jobs(cfg, list(registry.by_cadence("fast")), known=registry.COLLECTORS)
        svc = Service(cfg, plans, effective_rules(cfg), lake=False)
        job = svc.jobs[0]
        floor = Floor(cfg)
        stage: dict[str, list[float]] = {k: [] for k in ("collect", "store", "rest", "floor")}
        server = {"service": 0.0, "floor": 0.0}
        write = svc.writer.write
        store_cpu = [0.0]

        def timed_write(*a: Any, **kw: Any) -> Any:
            t = time.thread_time()
            try:
                return write(*a, **kw)
            finally:
                store_cpu[0] += time.thread_time() - t

        svc.writer.write = timed_write  # type: ignore[method-assign]
        rows = 0
        try:
            for _ in range(5):  # first cycles prepare the statements and create the store: not counted
                svc._on_cycle(job, job.cycle(utcnow()))
                floor.cycle()
            assert job.conn is not None
            pid = int(job.conn.raw.execute("SELECT pg_backend_pid()", prepare=False).fetchone()[0])
            for _ in range(cycles):
                s0, f0 = backend_cpu_s(pid), backend_cpu_s(floor.pid)
                t0 = time.thread_time()
                result = job.cycle(utcnow())
                t1 = time.thread_time()
                store_cpu[0] = 0.0
                svc._on_cycle(job, result)
                t2 = time.thread_time()
                s1 = backend_cpu_s(pid)
                floor_rows = floor.cycle()
                t3 = time.thread_time()
                server["service"] += s1 - s0
                server["floor"] += backend_cpu_s(floor.pid) - f0
                stage["collect"].append(t1 - t0)
                stage["store"].append(store_cpu[0])
                stage["rest"].append(t2 - t1 - store_cpu[0])
                stage["floor"].append(t3 - t2)
                rows = len(result.rows)
                if not all(s.ok for s in result.status):
                    raise RuntimeError(f"a collector failed: {[s.error for s in result.status if not s.ok]}")
        finally:
            floor.close()
            svc.writer.write = write  # type: ignore[method-assign]
            for j in svc.jobs:
                j.close()
            svc.alerts.close()

    def ms(values: list[float]) -> float:
        return round(1000 * statistics.median(values), 3)

    client = [c + s + r for c, s, r in zip(stage["collect"], stage["store"], stage["rest"], strict=True)]
    return {
        "queues": queues,
        "cycles": cycles,
        "rows_per_cycle": rows,
        "floor_rows_per_cycle": floor_rows,
        "statements_per_cycle": len(floor.texts),
        "client_cpu_ms": {"collect": ms(stage["collect"]), "store": ms(stage["store"]), "rest": ms(stage["rest"]),
                          "total": ms(client)},
        "floor_client_cpu_ms": ms(stage["floor"]),
        "client_over_floor": round(statistics.median(client) / statistics.median(stage["floor"]), 2),
        # Backend CPU is read in 1/CLK_TCK ticks: only the mean over many cycles is meaningful.
        "server_cpu_ms_mean": {k: round(1000 * v / cycles, 2) for k, v in server.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queues", default="5,100", help="queue counts, comma-separated (default 5,100: the "
                                                      "overhead lab's five, and goal 1's hundred)")
    ap.add_argument("--rows", type=int, default=10_000, help="rows per queue table (default 10,000)")
    ap.add_argument("--cycles", type=int, default=300, help="measured cycles per queue count (default 300)")
    args = ap.parse_args(argv)
    try:
        sizes = sorted({int(x) for x in args.queues.split(",") if x.strip()})
    except ValueError:
        ap.error(f"--queues: expected numbers separated by commas, got {args.queues!r}")
    if not sizes or sizes[0] < 1:
        ap.error(f"--queues: at least one queue, got {args.queues!r}")
    load_start = loadavg()
    with bench_server(max(sizes), args.rows, in_flight=20) as (url, password, _build_s, _size):
        results = []
        for n in sizes:
            print(f"service_cycle: {n} queues, {args.cycles} cycles", file=sys.stderr)
            results.append(measure(url, password, n, args.cycles))
    print(json.dumps({"benchmark": "service_cycle", "rows_per_queue": args.rows, "in_flight": 20,
                      "results": results,
                      "machine": {"cpus": os.cpu_count(), "loadavg_start": load_start, "loadavg_end": loadavg()}},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
