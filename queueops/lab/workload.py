"""The lab's live workload: ``python -m queueops.lab.workload --config .queueops/lab.toml``.

Started in the background by ``queueops lab start`` (see :func:`queueops.lab.control.start_workload`)
and stopped with SIGTERM by ``queueops lab stop``. One process, one thread per worker, one
autocommit connection per thread:

* ``producers`` producers and ``consumers`` consumers for each of the five lab queues (:mod:`queueops.lab.queues`);
* one worker per fault switch (:mod:`queueops.lab.faults`);
* the main thread: polls ``lab.faults`` and ``lab.settings`` every second, keeps the number of
  consumer threads as configured, flushes counters to ``lab.counters``, trims what would grow
  forever, and logs a one-line summary every minute.

Every item produced and processed is recorded in ``lab.ledger`` by the same statement that
produces or finishes it (see ``sql/postgresql/lab/ledger_check.sql`` for the audit). SIGTERM or
SIGINT: workers finish their current item, fault sessions roll back, connections close, exit 0.
When the database goes away the workers reconnect with back-off and the log says so.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from pathlib import Path

import psycopg

from queueops import config as config_mod
from queueops.lab.faults import FAULT_WORKERS
from queueops.lab.queues import Consumer, Producer
from queueops.lab.runtime import Context, Worker, log, run
from queueops.lab.settings import QUEUES, Settings, capacity_warnings

POLL_S = 1.0
FLUSH_S = 2.0
SUMMARY_S = 60.0
TRIM_STATUS_S = 60.0
TRIM_LEDGER_S = 600.0
TRIM_BATCH = 5000
JOIN_TIMEOUT_S = 8.0  # control.stop_workload sends SIGKILL after 10 s


class Controller(Worker):
    """The main loop: polls switches and settings, supervises consumers, flushes counters."""

    counter_scope = "controller"

    def __init__(self, ctx: Context):
        super().__init__(ctx, "controller")
        self.workers: list[Worker] = []
        self.producers: dict[str, list[Producer]] = {q: [] for q in QUEUES}
        self.consumers: dict[str, list[Consumer]] = {q: [] for q in QUEUES}
        self.next_flush = self.next_summary = 0.0
        self.next_trim_status = self.next_trim_ledger = 0.0
        self.last_totals: dict[str, int] = {}
        self.seen_warnings: set[str] = set()
        self._polled = False

    # -- polling ----------------------------------------------------------------------------
    def poll(self, conn: psycopg.Connection) -> None:
        settings = Settings({r["name"]: r["value"] for r in run(conn, "control", "settings")})
        for w in settings.warnings + capacity_warnings(settings):
            if w not in self.seen_warnings:
                self.seen_warnings.add(w)
                log.warning("lab.settings: %s", w)
        old = self.ctx.settings
        if self.conn is not None and self._polled and (settings.values != old.values
                                                       or settings.lock_hold_queue != old.lock_hold_queue):
            changed = sorted(k for k in settings.values.keys() | old.values.keys()
                             if settings.values.get(k) != old.values.get(k))
            log.info("lab.settings changed: %s", ", ".join(
                f"{k}={settings.values[k]:g}" if k in settings.values else f"{k} (default)" for k in changed)
                or f"lock_hold_queue={settings.lock_hold_queue}")
        self._polled = True
        self.ctx.settings = settings
        faults = {r["name"]: bool(r["enabled"]) for r in run(conn, "control", "faults")}
        self.ctx.faults = faults

    def load(self) -> bool:
        """First contact: settings, faults and the ring's capacity before any worker starts."""
        conn = self.ctx.connect(self.name)
        self.conn = conn
        self.poll(conn)
        self.ctx.ring_capacity = int(run(conn, "control", "ring_capacity")[0]["capacity"])
        return True

    def start_workers(self) -> None:
        for cls in FAULT_WORKERS:
            worker = cls(self.ctx)
            self.workers.append(worker)
            worker.start()
        self.supervise()

    def supervise(self) -> None:
        """Start producers and consumers up to the configured counts (extra ones retire by themselves)."""
        if self.ctx.stop.is_set():
            return
        for queue in QUEUES:
            for pool, knob, cls in ((self.producers, "producers", Producer), (self.consumers, "consumers", Consumer)):
                wanted = self.ctx.settings.integer(knob, queue)
                alive = [w for w in pool[queue] if w.is_alive()]
                have = {w.index for w in alive}
                for index in range(wanted):
                    if index not in have:
                        worker = cls(self.ctx, queue, index)
                        alive.append(worker)
                        worker.start()
                pool[queue] = alive

    def all_threads(self) -> list[Worker]:
        pools = (*self.producers.values(), *self.consumers.values())
        return self.workers + [w for ws in pools for w in ws]

    # -- the loop -----------------------------------------------------------------------------
    def step(self, conn: psycopg.Connection | None) -> float:
        assert conn is not None
        self.poll(conn)
        self.supervise()
        now = time.monotonic()
        if now >= self.next_flush:
            self.next_flush = now + FLUSH_S
            self.flush(conn)
        if now >= self.next_summary:
            if self.next_summary:
                self.summary()
            self.next_summary = now + SUMMARY_S
        if now >= self.next_trim_status:
            self.next_trim_status = now + TRIM_STATUS_S
            keep = self.ctx.settings.integer("status_done_keep")
            if keep > 0:
                run(conn, "control", "trim_status_done", keep=keep, batch=TRIM_BATCH)
        if now >= self.next_trim_ledger:
            self.next_trim_ledger = now + TRIM_LEDGER_S
            keep_h = self.ctx.settings.get("ledger_keep_h")
            if keep_h > 0:
                run(conn, "control", "trim_ledger", keep_h=keep_h)
        return POLL_S

    def flush(self, conn: psycopg.Connection | None) -> None:
        deltas = self.ctx.counters.take()
        if conn is None:
            self.ctx.counters.give_back(deltas)
            return
        try:
            if deltas:
                names = sorted(deltas)
                run(conn, "control", "counters_add", names=names, deltas=[deltas[n] for n in names])
            run(conn, "control", "heartbeat")
        except Exception:
            self.ctx.counters.give_back(deltas)
            raise

    def summary(self) -> None:
        totals = self.ctx.counters.snapshot()
        last, self.last_totals = self.last_totals, totals

        def delta(name: str) -> int:
            return totals.get(name, 0) - last.get(name, 0)

        flow = ", ".join(f"{q} {delta(f'produced.{q}')}/{delta(f'processed.{q}')}" for q in QUEUES)
        extra = {name: delta(name) for name in totals if not name.startswith(("produced.", "processed."))}
        notes = ", ".join(f"{k} {v}" for k, v in sorted(extra.items()) if v)
        on = [name for name, enabled in self.ctx.faults.items() if enabled]
        log.info("last %.0fs produced/processed: %s%s; faults on: %s", SUMMARY_S, flow,
                 f"; {notes}" if notes else "", ", ".join(on) or "none")


def _install_signals(ctx: Context) -> None:
    def _stop(signum: int, _frame: object) -> None:
        log.info("%s: stopping (workers finish their current item)", signal.Signals(signum).name)
        ctx.request_stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)


def serve(config_path: Path) -> int:
    cfg = config_mod.load(config_path)
    try:
        target = cfg.target(cfg.queue("delete").target)
    except KeyError:
        log.error("%s: no queue named 'delete' (or its target): the workload needs the lab's own config, "
                  "lab.toml, written by 'queueops lab start'", config_path)
        return 2
    ctx = Context(target=target, base_dir=cfg.base_dir, config_path=config_path)
    _install_signals(ctx)
    controller = Controller(ctx)
    log.info("workload starting (config %s, target %s)", config_path, target.name)
    backoff = 0.5
    while not ctx.stop.is_set():
        try:
            controller.load()
            break
        except Exception as exc:  # noqa: BLE001 - the database may still be starting: wait, retry
            controller.drop_connection()
            ctx.outage.still_down(controller.name, exc)
            ctx.refresh_target()
            ctx.stop.wait(backoff)
            backoff = min(backoff * 2, 10.0)
    if ctx.stop.is_set():
        log.info("workload stopped before it started")
        return 0
    ctx.outage.back(controller.name, reconnect=False)
    s = ctx.settings
    log.info("workload running: %s producers and %s consumers per queue, %.3g items/s produced per queue on "
             "average (wave +-%.0f%% over %.0fs), consumers take up to %.3g/s; ring capacity %d",
             s.integer("producers"), s.integer("consumers"), s.get("produce_per_s"), 100 * s.get("wave"), s.get("wave_period_s"),
             s.get("consume_per_s"), ctx.ring_capacity)
    if s.values:
        log.info("lab.settings: %s", ", ".join(f"{k}={v:g}" for k, v in sorted(s.values.items())))
    controller.start_workers()
    controller.run()  # returns once SIGTERM/SIGINT set ctx.stop
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    for worker in controller.all_threads():
        worker.join(max(0.1, deadline - time.monotonic()))
    stuck = [w.name for w in controller.all_threads() if w.is_alive()]
    try:
        controller.conn = controller.conn or ctx.connect(controller.name)
        controller.flush(controller.conn)
    except Exception as exc:  # noqa: BLE001 - the last counters are lost, nothing else
        log.warning("could not flush the last counters: %s", exc)
    controller.drop_connection()
    if stuck:
        log.warning("workers still busy at exit: %s", ", ".join(stuck))
    log.info("workload stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m queueops.lab.workload",
                                     description="The lab's producers, consumers and fault switches.")
    parser.add_argument("--config", required=True, type=Path, help="the lab's config (lab.toml)")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    try:
        return serve(args.config)
    except config_mod.ConfigError as exc:
        log.error("%s", exc)
        return 2


if __name__ == "__main__":
    threading.current_thread().name = "main"
    sys.exit(main())
