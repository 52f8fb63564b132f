"""What the console costs a busy queue: throughput and dequeue stalls with and without it.

    python benchmarks/overhead.py [--rounds 6] [--seconds 20] [--producers 3] [--consumers 4]

One run, on a private embedded PostgreSQL (a temporary folder, any free port):

* the lab workload at its highest setting: ``--producers`` producers per queue as fast as they can go
  (``produce_per_s`` at its maximum, no production wave), ``--consumers`` consumers per queue with
  no simulated work, so the machine is saturated and throughput is capacity, not offered load;
* the ``dead-consumer`` fault on throughout, so stuck leases keep appearing in both conditions;
* **console** condition: the real collector service (``queueops collect``) with every fast
  collector every second (``[schedule] fast_s = 1``, the slow ones every ``--slow-s``), writing
  its SQLite store and lake, plus the real action layer requeueing the lease and status queues
  every ``--requeue-every`` seconds (one long-lived process, see ``labharness.actions-loop``);
* **baseline** condition: the same workload, fault and probe, the console processes paused.

The console processes start once, after the warm-up; the windows begin when the service has
stored its first cycle and the action loop finished its first requeue (start-up is not the steady
state). Then the two conditions alternate (ABBA order, ``--rounds`` pairs): for a baseline window
the console is paused (the service stopped with SIGSTOP, the action loop paused between actions,
none of their sessions active or in a transaction), for a console window resumed; each window
opens ``--settle`` seconds after the switch and lasts ``--seconds``. Throughput is counted afterwards from ``lab.ledger`` (items the
workload's consumers finished, by database time, per window). A probe (a thread of this
script with its own connections) enqueues and dequeues lease items and attempts delete-queue
dequeues all along, timing every dequeue statement: ``max_stall_ms`` is the longest one in the
console windows, beside the same figure for the baseline windows.

Prints one JSON object: ``throughput_ratio`` (console / baseline items per second over all
windows), ``cost_pct``, per-round ratios, per-condition throughput and probe latencies, and
what the console itself used (CPU of the service, of the action loop and of the collector's
database session, cycles run, requeues and their rows), and per condition the index entries
read per scan of each queue's dequeue index. The machine's load average is recorded at the start
and the end: the figures are only as quiet as the machine was.

``--parts snapshot`` is a control: no console at all, only a session of this script holding a
snapshot throughout the "console" windows (``SELECT pg_sleep(--hold-s)`` back to back). Every
collector statement holds a snapshot while it runs, and dequeues cannot mark the index entries of
items taken since as dead while it is open; the control shows what that alone costs.

``--parts cpu`` is the other control: no console, a process (``labharness cpu-control``) that
wakes every second and spends ``--control-ms CLIENT,DB`` milliseconds of CPU, its own and its
database session's, over ``--control-trips`` statements (default 8) that read no table. It
answers whether the service costs more than any process with its CPU and cadence would;
``--control-ms 0,0`` is the null control (the same process and switching, no CPU to spend), and
``--control-nice 19`` runs the control and its backend at the lowest scheduling priority.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.labharness import (  # noqa: E402
    Child,
    PrivateLab,
    actions_loop,
    console_config,
    cpu_control,
    loadavg,
    proc_cpu_s,
    read_jsonl,
    service,
)

QUEUES = ("delete", "status", "lease", "due", "ring")
# The index each lab queue's dequeue scans (sql/postgresql/lab/schema.sql); the ring pops by key.
DEQUEUE_INDEXES = {"delete": "q_delete_pkey", "status": "q_status_meta_ready", "lease": "q_lease_pop", "due": "q_due_due"}
PROBE_WORKER = "probe"


def rates(consumers: int, producers: int = 3) -> dict[str, float]:
    """The highest workload the lab's knobs give (queueops/lab/settings.py)."""
    return {"produce_per_s": 5000, "consume_per_s": 5000, "producers": producers, "consumers": consumers, "wave": 0, "work_ms": 0,
            # Stuck leases stay stuck until a requeue: the consumers never reclaim them.
            "lease_reclaim_s": 0}


# ---------------------------------------------------------------------------------------------
# The probe


@dataclass
class Probe:
    """Enqueue + dequeue on the lease queue and dequeue attempts on the delete queue, timed."""

    lab: PrivateLab
    pause_s: float = 0.05
    samples: list[tuple[float, str, float]] = field(default_factory=list)  # (monotonic, what, ms)
    errors: list[tuple[float, str]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self.run, name="probe", daemon=True)
        t.start()
        return t

    def _connect(self):  # noqa: ANN202
        from psycopg.rows import dict_row

        from queueops.lab.runtime import run

        conn = self.lab.connect()
        conn.row_factory = dict_row  # type: ignore[assignment]
        # Long enough that a lock wait shows as a stall rather than an error.
        run(conn, "control", "session", lock_timeout="10000", statement_timeout="30000")
        return conn

    def run(self) -> None:
        from queueops.lab.runtime import run

        conn = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = self._connect()
                run(conn, "produce", "lease", worker=PROBE_WORKER, payload="probe")
                t0 = time.perf_counter()
                rows = run(conn, "consume", "lease_claim")
                if rows:
                    run(conn, "consume", "lease_done", id=rows[0]["id"], lease=rows[0]["lease"], worker=PROBE_WORKER)
                t1 = time.perf_counter()
                run(conn, "consume", "delete", worker=PROBE_WORKER)
                t2 = time.perf_counter()
                now = time.monotonic()
                self.samples.append((now, "lease", (t1 - t0) * 1000))
                self.samples.append((now, "delete", (t2 - t1) * 1000))
            except Exception as exc:  # noqa: BLE001 - counted; reconnect and go on
                self.errors.append((time.monotonic(), f"{type(exc).__name__}: {exc}"[:200]))
                if conn is not None:
                    conn.close()
                conn = None
                self.stop.wait(0.5)
                continue
            self.stop.wait(self.pause_s)
        if conn is not None:
            conn.close()


@dataclass
class SnapshotHolder:
    """A session that holds a snapshot and does nothing else: ``SELECT pg_sleep(hold_s)`` back to back.

    The control for ``--parts snapshot``: what an open snapshot alone costs the workload, with no
    CPU spent. Every statement a collector runs holds one for as long as it runs, and on a
    saturated machine a statement of a few milliseconds of CPU runs for hundreds (it waits its turn
    for a core), so this separates that cost from the console's CPU.
    """

    lab: PrivateLab
    hold_s: float
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="snapshot-holder", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with self.lab.connect() as conn:
            while not self.stop.is_set():
                conn.execute("SELECT pg_sleep(%s)", (self.hold_s,))

    def close(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()


# ---------------------------------------------------------------------------------------------
# Windows


@dataclass
class Window:
    round: int
    condition: str
    t0: float = 0.0
    t1: float = 0.0
    db_t0: datetime | None = None
    db_t1: datetime | None = None
    wall_t0: float = 0.0
    wall_t1: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    items: int = 0
    per_queue: dict[str, int] = field(default_factory=dict)
    index_reads: dict[str, tuple[int, int]] = field(default_factory=dict)  # index: (scans, entries read)

    @property
    def seconds(self) -> float:
        return (self.db_t1 - self.db_t0).total_seconds() if self.db_t0 and self.db_t1 else self.t1 - self.t0

    @property
    def per_s(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else 0.0


def backend_pids(lab: PrivateLab, app_like: str) -> list[int]:
    with lab.connect() as conn:
        return [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s",
                                           (app_like,))]


def cpu_snapshot(lab: PrivateLab, workload_pid: int, children: list[Child]) -> dict[str, float]:
    """CPU seconds so far of: the workload, its database sessions, the console processes and the
    collector's database session (a process each on PostgreSQL, readable in /proc)."""
    out: dict[str, float] = {}
    out["workload"] = proc_cpu_s(workload_pid) or 0.0
    out["workload_db"] = sum(proc_cpu_s(p) or 0.0 for p in backend_pids(lab, "queueops-lab-%"))
    out["collector_db"] = sum(proc_cpu_s(p) or 0.0 for p in backend_pids(lab, "queueops-collect%"))
    for c in children:
        out[c.name] = c.cpu_s() or 0.0
    return out


def index_reads(lab: PrivateLab) -> dict[str, tuple[int, int]]:
    """Scans and index entries read so far on each queue's dequeue index (pg_stat_user_indexes).

    Entries read per scan is what a dequeue walks to find its item: dead entries at the head of the
    index count until a scan may mark them dead, which it may not while any snapshot older than the
    deleting transaction is open. The collectors' own scans of these indexes are included (a few per
    cycle against hundreds of dequeues a second).
    """
    with lab.connect() as conn:
        rows = conn.execute("SELECT indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes "
                            "WHERE schemaname = 'lab' AND indexrelname = ANY(%s)",
                            (list(DEQUEUE_INDEXES.values()),)).fetchall()
    return {str(name): (int(scans or 0), int(read or 0)) for name, scans, read in rows}


def status_rows(store: Path) -> int:
    import sqlite3

    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store, timeout=5) as db:
            return int(db.execute("SELECT count(*) FROM collector_status").fetchone()[0])
    except sqlite3.Error:
        return 0


def export_ran_since(store: Path, since: datetime) -> bool:
    """Whether the service's lake exporter finished a pass after ``since`` (its scan marks moved)."""
    import sqlite3
    from datetime import UTC

    if not store.exists():
        return False
    try:
        with sqlite3.connect(store, timeout=5) as db:
            row = db.execute("SELECT updated_at FROM service_state WHERE name = 'lake.scan_marks'").fetchone()
    except sqlite3.Error:
        return False
    return bool(row) and datetime.fromisoformat(str(row[0])).replace(tzinfo=UTC) >= since


@dataclass
class Console:
    """The console processes, started once and switched on and off between windows.

    Off: the service is stopped (SIGSTOP to its process group) and the action loop pauses after the
    action in progress (SIGUSR1); then this waits until none of their database sessions is running a
    statement or inside a transaction, so no snapshot or lock of theirs reaches into a baseline
    window. On: SIGCONT and SIGUSR2. Pausing instead of restarting keeps the start-up (a fresh
    interpreter, imports, the exporter's catch-up pass) out of the run, and lets windows alternate
    often at no cost.
    """

    lab: PrivateLab
    children: list[Child]
    holder: SnapshotHolder | None = None

    def switch(self, on: bool, timeout: float = 60) -> None:
        for c in self.children:
            if c.name in ("service", "cpu"):
                c.signal_group(signal.SIGCONT if on else signal.SIGSTOP)
            else:
                c.signal_group(signal.SIGUSR2 if on else signal.SIGUSR1)
        if self.holder is not None and on:
            self.holder.start()
        elif self.holder is not None:
            self.holder.close()
        if on:
            return
        deadline = time.monotonic() + timeout
        with self.lab.connect() as conn:  # one session for the whole wait, not one per look
            while busy := busy_sessions(conn):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the console's sessions still busy {timeout:.0f}s after pausing it: {busy}")
                time.sleep(0.1)


def busy_sessions(conn: Any) -> list[tuple[str, str]]:
    """queueops' own sessions (the names terminate refuses to end) that are not idle."""
    from queueops.actions.decide import QUEUEOPS_APPLICATIONS

    return [(str(a), str(s)) for a, s in conn.execute(
        "SELECT application_name, state FROM pg_stat_activity "
        "WHERE application_name LIKE ANY(%s) AND state <> 'idle'",
        ([f"{prefix}%" for prefix in QUEUEOPS_APPLICATIONS],))]


def wait_ready(children: list[Child], ready: Any, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        for c in children:
            if not c.alive():
                raise RuntimeError(f"the {c.name} process exited at start (code {c.proc.returncode}); see {c.log}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the console processes were not ready after {timeout:.0f}s")
        time.sleep(0.2)


def count_items(lab: PrivateLab, windows: list[Window]) -> None:
    """Items the workload's consumers finished in each window, by database time (one scan)."""
    bounds = [(i, w.db_t0, w.db_t1) for i, w in enumerate(windows)]
    with lab.connect() as conn:
        rows = conn.execute(
            "SELECT w.i, l.queue, count(*) FROM lab.ledger AS l "
            "JOIN unnest(%s::int[], %s::timestamptz[], %s::timestamptz[]) AS w (i, t0, t1) "
            "  ON l.ts >= w.t0 AND l.ts < w.t1 "
            "WHERE l.event = 'processed' AND l.worker <> %s GROUP BY 1, 2",
            ([b[0] for b in bounds], [b[1] for b in bounds], [b[2] for b in bounds], PROBE_WORKER)).fetchall()
    for i, queue, n in rows:
        windows[i].per_queue[queue] = int(n)
        windows[i].items += int(n)


def latency_stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    v = sorted(values)

    def pct(p: float) -> float:
        return round(v[min(len(v) - 1, int(p * len(v)))], 1)

    return {"n": len(v), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "p999_ms": pct(0.999), "max_ms": round(v[-1], 1)}


def collector_cycles(store: Path, windows: list[Window]) -> dict[str, Any]:
    """Fast cycles the service ran from start to end inside the console windows, and how long they took.

    A cycle still running when the service is paused for a baseline window would count the pause
    as its own time, so only cycles that ended inside the window they began in are counted. The
    store keeps ``ts`` (the cycle's start) as naive UTC; the windows are bounded by the database's
    clock (UTC).
    """
    import sqlite3
    from datetime import UTC, timedelta

    if not store.exists():
        return {}
    slow = ("ghost_records", "fragmentation_pct")
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT ts, sum(duration_ms), sum(1 - ok) FROM collector_status "
                          "WHERE collector NOT IN (?, ?) AND target <> '(service)' AND collector <> '(outage)' "
                          "GROUP BY ts", slow).fetchall()
    ms, errors = [], 0
    for ts, took, failed in rows:
        when = datetime.fromisoformat(str(ts)).replace(tzinfo=UTC)
        end = when + timedelta(milliseconds=float(took or 0))
        if any(w.condition == "console" and w.db_t0 <= when and end < w.db_t1  # type: ignore[operator]
               for w in windows):
            ms.append(float(took or 0))
            errors += int(failed or 0)
    out: dict[str, Any] = {"cycles": len(ms), "collector_errors": errors}
    if ms:
        out["cycle_ms_mean"] = round(statistics.fmean(ms), 1)
        out["cycle_ms_max"] = round(max(ms), 1)
    return out


# ---------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_start = loadavg()
    print(f"overhead: starting a private lab (load average {load_start})", file=sys.stderr)
    lab = PrivateLab.start(rates(args.consumers, args.producers), fsync=args.fsync, prefix="queueops-overhead-")
    work = lab.base / "console"
    work.mkdir()
    store, lake = work / "store.db", work / "lake"
    hourly = "".join(f"{name} = 3600\n" for name in args.hourly)
    cfg_path = console_config(lab, work / "console.toml", fast_s=1, slow_s=args.slow_s, lease_timeout_s=3,
                              store=store, lake=lake, extra=f"\n[schedule.collectors]\n{hourly}" if hourly else "")
    actions_out = work / "actions.jsonl"
    parts = set(args.parts.split(","))
    acts: list[dict[str, Any]] = []
    probe = Probe(lab)
    windows: list[Window] = []
    children: list[Child] = []
    skipped_runs = 0
    try:
        workload_pid = lab.start_workload()
        lab.set_fault("dead-consumer", True)
        probe.start()
        print(f"overhead: warming up {args.warmup:g}s", file=sys.stderr)
        t0 = lab.db_now()
        time.sleep(args.warmup)
        if "service" in parts:
            children.append(service(cfg_path, work / "service.log"))
        if "cpu" in parts:
            client_ms, db_ms = args.control_ms
            children.append(cpu_control(lab, work / "cpu.log", client_ms, db_ms, round_trips=args.control_trips,
                                        nice=args.control_nice))
        if "actions" in parts:
            children.append(actions_loop(cfg_path, work / "actions.log", args.requeue_every,
                                         ["requeue:lease", "requeue:status"], actions_out))
        # Start-up (imports, first connection) is not the steady state: the windows begin once the
        # first cycle is stored, the service's start-up jobs are done (the lake exporter's catch-up
        # run, two seconds after start; hourly afterwards) and the first requeue is done.
        wait_ready(children, lambda: ("service" not in parts or (status_rows(store) > 0 and export_ran_since(store, t0)))
                   and ("actions" not in parts or len(read_jsonl(actions_out)) > 0)
                   and all(c.name != "cpu" or time.monotonic() > c.started + 15 for c in children))  # steered by then
        console = Console(lab, children, SnapshotHolder(lab, args.hold_s) if "snapshot" in parts else None)
        for r in range(args.rounds):
            order = ("baseline", "console") if r % 2 == 0 else ("console", "baseline")
            for condition in order:
                console.switch(condition == "console")
                time.sleep(args.settle)
                w = Window(r, condition)
                w.cpu = cpu_snapshot(lab, workload_pid, children)
                reads0 = index_reads(lab)
                w.db_t0, w.t0, w.wall_t0 = lab.db_now(), time.monotonic(), time.time()
                time.sleep(args.seconds)
                w.db_t1, w.t1, w.wall_t1 = lab.db_now(), time.monotonic(), time.time()
                after = cpu_snapshot(lab, workload_pid, children)
                reads1 = index_reads(lab)
                w.index_reads = {k: (reads1[k][0] - v[0], reads1[k][1] - v[1]) for k, v in reads0.items() if k in reads1}
                w.cpu = {k: round(after.get(k, 0.0) - w.cpu.get(k, 0.0), 2) for k in after}
                for c in children:
                    if not c.alive():
                        raise RuntimeError(f"the {c.name} process exited early (code {c.proc.returncode}); "
                                           f"see {c.log}")
                windows.append(w)
                print(f"  round {r + 1} {condition:8}: {w.seconds:.0f}s, cpu {w.cpu}", file=sys.stderr)
        console.switch(True)
        for c in children:
            c.stop()
        probe.stop.set()
        lab.stop_workload()
        count_items(lab, windows)
        log = work / "service.log"
        if log.exists():
            skipped_runs = log.read_text(errors="replace").count("maximum number of running instances")
        cycles = collector_cycles(store, windows)
        acts = read_jsonl(actions_out)
    finally:
        probe.stop.set()
        for c in children:  # after an error: continued first (a stopped process keeps SIGTERM pending)
            c.signal_group(signal.SIGCONT)
            c.stop()
        load_end = loadavg()
        lab.destroy(keep=args.keep)
    return summarize(args, windows, probe, acts, cycles, skipped_runs, load_start, load_end,
                     lab.base if args.keep else None)


def entries_per_scan(ws: list[Window]) -> dict[str, float | None]:
    """Index entries read per scan of each queue's dequeue index, over the windows ``ws``."""
    out: dict[str, float | None] = {}
    for queue, index in DEQUEUE_INDEXES.items():
        scans = sum(w.index_reads.get(index, (0, 0))[0] for w in ws)
        read = sum(w.index_reads.get(index, (0, 0))[1] for w in ws)
        out[queue] = round(read / scans, 1) if scans else None
    return out


def summarize(args: argparse.Namespace, windows: list[Window], probe: Probe, acts: list[dict[str, Any]],
              cycles: dict[str, Any], skipped_runs: int, load_start: list[float], load_end: list[float],
              kept: Path | None) -> dict[str, Any]:
    def cond(name: str) -> list[Window]:
        return [w for w in windows if w.condition == name]

    def per_s(ws: list[Window]) -> float:
        secs = sum(w.seconds for w in ws)
        return sum(w.items for w in ws) / secs if secs else 0.0

    def in_windows(ws: list[Window], what: str) -> list[float]:
        return [ms for t, kind, ms in probe.samples if kind == what and any(w.t0 <= t < w.t1 for w in ws)]

    def cpu_per_s(ws: list[Window], key: str) -> float:
        secs = sum(w.seconds for w in ws)
        return round(100 * sum(w.cpu.get(key, 0.0) for w in ws) / secs, 1) if secs else 0.0

    base, cons = cond("baseline"), cond("console")
    ratio = per_s(cons) / per_s(base) if per_s(base) else None
    rounds = []
    for r in range(args.rounds):
        b = [w for w in base if w.round == r]
        c = [w for w in cons if w.round == r]
        if b and c and b[0].per_s:
            rounds.append(round(c[0].per_s / b[0].per_s, 4))
    probe_by = {}
    for name, ws in (("baseline", base), ("console", cons)):
        probe_by[name] = {"lease_claim_and_finish": latency_stats(in_windows(ws, "lease")),
                          "delete_dequeue": latency_stats(in_windows(ws, "delete")),
                          "errors": sum(1 for t, _ in probe.errors if any(w.t0 <= t < w.t1 for w in ws))}
    stalls = {name: max((s.get("max_ms", 0.0) for k, s in v.items() if isinstance(s, dict)), default=0.0)
              for name, v in probe_by.items()}
    in_console = [a for a in acts if any(w.wall_t0 <= a["t"] < w.wall_t1 for w in cons)]
    outcomes: dict[str, int] = {}
    for a in in_console:
        outcomes[a.get("outcome", "?")] = outcomes.get(a.get("outcome", "?"), 0) + 1
    console_cpu = sum(w.cpu.get(k, 0.0) for w in cons for k in ("service", "actions", "cpu", "collector_db"))
    cons_secs = sum(w.seconds for w in cons)
    result = {
        "benchmark": "overhead",
        "throughput_ratio": round(ratio, 4) if ratio else None,
        "cost_pct": round(100 * (1 - ratio), 2) if ratio else None,
        "acceptance": "cost_pct < 5",
        "max_stall_ms": stalls["console"],
        "baseline_max_stall_ms": stalls["baseline"],
        # What the console itself burned, as a share of the whole machine: on a machine the workload
        # saturates, the throughput it can take away by CPU alone (a steadier figure than the ratio
        # on a noisy machine).
        "console_cpu_pct_of_machine": round(100 * console_cpu / (cons_secs * (os.cpu_count() or 1)), 2)
        if cons_secs else None,
        "round_ratios": rounds,
        "round_ratio_median": round(statistics.median(rounds), 4) if rounds else None,
        "conditions": {
            name: {
                "items_per_s": round(per_s(ws), 1),
                "windows": len(ws),
                "seconds": round(sum(w.seconds for w in ws), 1),
                "per_window_items_per_s": [round(w.per_s, 1) for w in ws],
                "per_queue_items_per_s": {q: round(sum(w.per_queue.get(q, 0) for w in ws)
                                                   / max(sum(w.seconds for w in ws), 1e-9), 1) for q in QUEUES},
                "dequeue_index_entries_per_scan": entries_per_scan(ws),
                "probe": probe_by[name],
                "cpu_pct_of_one_core": {k: cpu_per_s(ws, k) for k in sorted({k for w in ws for k in w.cpu})},
            } for name, ws in (("baseline", base), ("console", cons))
        },
        "console": {
            "collectors": (f"queueops collect: fast_s=1 (9 fast collectors), slow_s={args.slow_s:g} "
                           "(ghost_records, fragmentation_pct)") if "service" in args.parts.split(",") else None,
            **cycles,
            "cycles_per_s": round(cycles.get("cycles", 0) / max(sum(w.seconds for w in cons), 1e-9), 2),
            "scheduler_skipped_runs_whole_run": skipped_runs,
            "requeue_every_s": args.requeue_every,
            "requeues": len(in_console),
            "requeue_outcomes": outcomes,
            "requeued_rows": sum(int(a.get("rows") or 0) for a in in_console),
            "requeue_seconds_max": max((a.get("seconds", 0) for a in in_console), default=None),
        },
        "workload": {**rates(args.consumers, args.producers), "fault": "dead-consumer on throughout",
                     "fsync": args.fsync},
        "settings": {"console_parts": args.parts, "rounds": args.rounds, "seconds": args.seconds, "settle_s": args.settle,
                     "hold_s": args.hold_s if args.parts == "snapshot" else None,
                     "control_ms": {"client": args.control_ms[0], "db": args.control_ms[1],
                                    "statements_per_s": args.control_trips,
                                    "nice": args.control_nice} if args.parts == "cpu" else None,
                     "hourly_collectors": args.hourly,
                     "warmup_s": args.warmup, "order": "ABBA (baseline first in even rounds)"},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "loadavg_start": load_start, "loadavg_end": load_end},
    }
    if kept:
        result["kept"] = str(kept)
    return result


def control_ms(text: str) -> tuple[float, float]:
    """``--control-ms``'s value: two non-negative numbers, ``CLIENT,DB``."""
    try:
        client, db = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected CLIENT,DB milliseconds (two numbers), got {text!r}") from None
    if client < 0 or db < 0:
        raise argparse.ArgumentTypeError(f"milliseconds cannot be negative: {text!r}")
    return client, db


def collector_names(text: str) -> list[str]:
    """``--hourly``'s value: known collector names, comma-separated."""
    from collectors import registry

    names = [n.strip() for n in text.split(",") if n.strip()]
    known = {c.name for c in registry.COLLECTORS}
    unknown = sorted(set(names) - known)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown collector(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return names


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6, help="baseline/console pairs (default 6)")
    ap.add_argument("--seconds", type=float, default=20, help="length of each measured window (default 20)")
    ap.add_argument("--settle", type=float, default=3,
                    help="seconds between a condition being ready (console: first cycle stored, first requeue "
                         "done) and its window (default 3)")
    ap.add_argument("--warmup", type=float, default=20, help="workload warm-up before the first window")
    ap.add_argument("--producers", type=int, default=3, help="producers per queue (default 3)")
    ap.add_argument("--consumers", type=int, default=4, help="consumers per queue (default 4)")
    ap.add_argument("--slow-s", type=float, default=10, help="interval of the slow collectors (default 10)")
    ap.add_argument("--requeue-every", type=float, default=5, help="seconds between requeues (default 5)")
    ap.add_argument("--parts", default="service,actions", choices=("service,actions", "service", "actions", "snapshot", "cpu"),
                    metavar="{service,actions | service | actions | snapshot | cpu}",
                    help="what runs in the console condition (default both; one alone to find a cost's source; "
                         "'snapshot': no console, a session holding a snapshot all along, see --hold-s; "
                         "'cpu': no console, a process spending its CPU, see --control-ms)")
    ap.add_argument("--hold-s", type=float, default=0.3,
                    help="with --parts snapshot: how long each of the holder's back-to-back statements holds its "
                         "snapshot (default 0.3, about a fast cycle's length on the saturated machine)")
    ap.add_argument("--control-ms", type=control_ms, default=(8.0, 13.0), metavar="CLIENT,DB",
                    help="with --parts cpu: CPU milliseconds a second the control spends itself and in its database "
                         "session (default 8,13: the service's, 0.8 %% and 1.3 %% of a core, in the 2026-11-26 runs)")
    ap.add_argument("--control-trips", type=int, choices=range(1, 101), default=8, metavar="N",
                    help="with --parts cpu: statements a second the control spreads its CPU over (default 8, about "
                         "the service's round trips a cycle)")
    ap.add_argument("--control-nice", type=int, choices=range(0, 20), default=0, metavar="0..19",
                    help="with --parts cpu: the niceness of the control and of its database session's backend "
                         "(default 0; 19 asks whether the cost is the scheduler's: the same CPU at the lowest priority)")
    ap.add_argument("--hourly", type=collector_names, default=[], metavar="NAME[,NAME...]",
                    help="collectors the service runs hourly instead (to find which one a cost follows)")
    ap.add_argument("--fsync", action="store_true", help="run PostgreSQL with fsync on (default off: CPU-bound)")
    ap.add_argument("--keep", action="store_true", help="keep the lab folder (logs, store) and print its path")
    args = ap.parse_args()
    print(json.dumps(run(args), indent=2, default=str))


if __name__ == "__main__":
    main()
