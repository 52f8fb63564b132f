"""Reproduce the seeds' headline results on the embedded PostgreSQL, side by side in one run.

1. watermark-queue.txt: a naive destructive dequeue versus the watermark pattern while a
   snapshot transaction holds dead tuples, at two sizes. The seed (SQL Server) reports the naive
   dequeue growing quadratically (30k: 2:50, 60k: 10:01) and the watermark one linearly.
   Also the naive dequeue with no snapshot held, to show the snapshot is the cause.
2. ring-buffer-queue.txt: a naive insert/delete queue versus a preallocated ring buffer with
   push / pop sequences, pushers and poppers running together. The seed reports about 15x.

Prints one JSON object; run with ``python benchmarks/seeds.py --help`` for sizes. Figures and what
they mean are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from queueops import sqlfiles  # noqa: E402
from queueops.lab.pgserver import EmbeddedPostgres  # noqa: E402

CAPACITY = 1024


def _stmt(block: str, **values: object) -> sqlfiles.Statement:
    return sqlfiles.load("postgresql", "bench/seeds").render(block, {"capacity": str(CAPACITY)}, values)


def _run(conn: psycopg.Connection, block: str, **values: object) -> psycopg.Cursor:
    s = _stmt(block, **values)
    return conn.execute(s.sql, s.params)  # always a tuple: the SQL escapes '%' as '%%'


# -- 1. dequeue: naive versus watermark ------------------------------------------------------------
def _dequeue_worker(url: str, password: str, pattern: str, out: mp.Queue) -> None:
    done = 0
    with psycopg.connect(url, password=password, autocommit=True, prepare_threshold=None) as conn:
        while True:
            row = _run(conn, f"dequeue_{pattern}").fetchone()
            if row is None:
                # Nothing visible past the watermark: the queue is empty (the watermark trails by 50).
                break
            done += 1
            if pattern == "watermark" and row[0] % 100 == 0:
                _run(conn, "advance_watermark", low=row[0] - 50)  # the seed's rule: every 100th id
    out.put(done)


def dequeue_seconds(url: str, password: str, n: int, pattern: str, workers: int, hold: bool) -> dict:
    with psycopg.connect(url, password=password, autocommit=True) as admin:
        _run(admin, "reset")
        _run(admin, "fill", n=n)
        _run(admin, "vacuum")
        holder = None
        if hold:
            holder = psycopg.connect(url, password=password)
            holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            s = _stmt("hold_snapshot")
            holder.execute(s.sql)
        out: mp.Queue = mp.Queue()
        procs = [mp.Process(target=_dequeue_worker, args=(url, password, pattern, out)) for _ in range(workers)]
        started = time.perf_counter()
        for p in procs:
            p.start()
        total = sum(out.get() for _ in procs)
        for p in procs:
            p.join()
        elapsed = time.perf_counter() - started
        if holder is not None:
            holder.rollback()
            holder.close()
        left = admin.execute("SELECT count(*) FROM bench_q").fetchone()[0]
    return {"seconds": round(elapsed, 3), "dequeued": total, "left": left, "per_item_ms": round(elapsed / max(total, 1) * 1000 * workers, 4)}


# -- 2. naive insert/delete queue versus the preallocated ring buffer -----------------------------
def _ring_worker(url: str, password: str, design: str, role: str, seconds: float, out: mp.Queue) -> None:
    payload = "x" * 300
    done = 0
    deadline = time.monotonic() + seconds
    with psycopg.connect(url, password=password, autocommit=True, prepare_threshold=None) as conn:
        pending: int | None = None
        while time.monotonic() < deadline:
            if design == "naive":
                if role == "push":
                    _run(conn, "naive_push", payload=payload)
                    done += 1
                elif _run(conn, "naive_pop").fetchone() is not None:
                    done += 1
                else:
                    time.sleep(0.0005)
                continue
            if pending is None:
                values = {"payload": payload} if role == "push" else {}
                n, filled = _run(conn, f"ring_take_{role}", **values).fetchone()
                ok = filled == 1
                pending = None if ok else n
            elif role == "push":
                ok = _run(conn, "ring_push", n=pending, payload=payload).rowcount == 1
            else:
                ok = _run(conn, "ring_pop", n=pending).rowcount == 1
            if ok:
                done += 1
                pending = None
            elif pending is not None:
                time.sleep(0.0005)  # ring full (push) or message not yet pushed (pop)
    out.put((role, done))


def ring_throughput(url: str, password: str, design: str, pushers: int, poppers: int, seconds: float) -> dict:
    with psycopg.connect(url, password=password, autocommit=True) as admin:
        _run(admin, "ring_init")
        _run(admin, "vacuum")
    out: mp.Queue = mp.Queue()
    procs = [mp.Process(target=_ring_worker, args=(url, password, design, "push", seconds, out)) for _ in range(pushers)]
    procs += [mp.Process(target=_ring_worker, args=(url, password, design, "pop", seconds, out)) for _ in range(poppers)]
    for p in procs:
        p.start()
    counts = {"push": 0, "pop": 0}
    for _ in procs:
        role, n = out.get()
        counts[role] += n
    for p in procs:
        p.join()
    return {"pushed": counts["push"], "popped": counts["pop"], "msgs_per_s": round(counts["pop"] / seconds, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,20000", help="two queue sizes for the dequeue test (default 10000,20000)")
    ap.add_argument("--workers", type=int, default=4, help="dequeuers (default 4, as in the seed's stress run)")
    ap.add_argument("--ring-seconds", type=float, default=10, help="seconds per ring/naive run (default 10)")
    ap.add_argument("--pushers", type=int, default=4)
    ap.add_argument("--poppers", type=int, default=4)
    args = ap.parse_args()
    small, large = (int(x) for x in args.sizes.split(","))

    state = Path(tempfile.mkdtemp(prefix="queueops-bench-"))
    state.chmod(0o755)
    srv = EmbeddedPostgres(state / "state", port=None)
    info = srv.start()
    url, pw = info.url(), srv.password()
    try:
        with psycopg.connect(url, password=pw, autocommit=True) as admin:
            admin.execute(sqlfiles.load("postgresql", "bench/seeds_schema").text)
        result: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                        "dequeue": {}, "ring": {}}
        print(f"dequeue: sizes {small}/{large}, {args.workers} workers", file=sys.stderr)
        for name, pattern, hold in (("naive_snapshot_held", "naive", True),
                                    ("watermark_snapshot_held", "watermark", True),
                                    ("naive_no_snapshot", "naive", False)):
            a = dequeue_seconds(url, pw, small, pattern, args.workers, hold)
            b = dequeue_seconds(url, pw, large, pattern, args.workers, hold)
            result["dequeue"][name] = {str(small): a, str(large): b,
                                       "growth": round(b["seconds"] / max(a["seconds"], 1e-9), 2)}
            print(f"  {name}: {a['seconds']}s -> {b['seconds']}s", file=sys.stderr)
        d = result["dequeue"]
        result["dequeue"]["naive_over_watermark_at_large"] = round(
            d["naive_snapshot_held"][str(large)]["seconds"] / d["watermark_snapshot_held"][str(large)]["seconds"], 2)
        print(f"ring: {args.pushers} pushers + {args.poppers} poppers, {args.ring_seconds}s each", file=sys.stderr)
        naive = ring_throughput(url, pw, "naive", args.pushers, args.poppers, args.ring_seconds)
        ring = ring_throughput(url, pw, "ring", args.pushers, args.poppers, args.ring_seconds)
        result["ring"] = {"naive": naive, "ring": ring,
                          "ring_over_naive": round(ring["msgs_per_s"] / max(naive["msgs_per_s"], 1e-9), 2),
                          "seed_reported": 15}
        print(json.dumps(result, indent=2))
    finally:
        srv.destroy()


if __name__ == "__main__":
    main()
