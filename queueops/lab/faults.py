"""The lab's fault switches: each one a worker that makes its failure happen for real.

Faults are rows of ``lab.faults`` (``queueops lab fault NAME on|off``); the workload polls them
every second and each worker below acts on its own switch. A fault worker holds a connection only
while its fault is on.

============== ================================================ ==================================
fault          while on                                         after off
============== ================================================ ==================================
dead-consumer  claims lease items (lease queue) and sets status No new claims. The claimed items
               items to processing, never finishes them: they  stay stuck (lease and status 1)
               are stuck leases once older than the queue's     until ``act requeue``; lease
               ``lease_timeout_s`` (20-30 s in lab.toml).       items are also reclaimed by the
                                                                consumers after
                                                                ``lease_reclaim_s`` (600 s).
snapshot-hold  a REPEATABLE READ transaction, snapshot taken,   ROLLBACK: vacuum can remove the
               left idle in transaction: ``backend_xmin`` pins  dead tuples again. Ended from
               the horizon, dead tuples pile up in every queue. outside (``act terminate``): the
                                                                same, until switched off and on.
watermark-jump moves the delete queue's watermark past every    No more jumps. Stranded items
               row at or above it (once rows exist), and again  stay below the watermark until
               every ``watermark_jump_every_s``: stranded items ``act watermark-reset``.
               (lowest ready key < watermark) pile up.
lock-hold      a transaction holding ``LOCK TABLE ... IN         ROLLBACK: the lock is released,
               EXCLUSIVE MODE`` on a queue table (setting       producers and consumers resume.
               ``lock_hold_queue``, default lease): plain
               SELECTs pass, producers and dequeuers wait
               ``lock_timeout`` and fail (lock timeouts).
churn          every ``churn_every_s``: inserts ``churn_rows``  No more churn. Dead tuples go
               rows (status 9, random negative keys) into the   with the next vacuum; the few
               status queue's table and deletes most of them:   surviving churn rows (~220 with
               dead tuples, page splits mid-index, falling leaf the defaults) keep the index
               density, rising leaf fragmentation.              sparse and fragmented until
                                                                ``act rebuild`` (REINDEX).
============== ================================================ ==================================
"""

from __future__ import annotations

import time

import psycopg

from queueops.lab.queues import IDLE_POLL_S
from queueops.lab.runtime import ConnectionLost, Context, Worker, check_alive, log, run


class FaultWorker(Worker):
    """A fault switch: ``engage`` while on (repeatedly), ``release`` once when switched off."""

    fault = ""
    poll_s = 1.0

    def __init__(self, ctx: Context):
        super().__init__(ctx, self.fault)
        self.counter_scope = self.fault
        self.active = False

    def wants_connection(self) -> bool:
        return self.ctx.fault(self.fault) or self.active

    def step(self, conn: psycopg.Connection | None) -> float:
        if self.ctx.fault(self.fault):
            if conn is None:
                return self.poll_s
            if not self.active:
                log.info("fault %s: on", self.fault)
            self.active = True
            return self.engage(conn)
        if self.active:
            self.active = False
            if conn is not None:
                self.release(conn)
            log.info("fault %s: off%s", self.fault, self.after_off)
            self.drop_connection()
        return self.poll_s

    def engage(self, conn: psycopg.Connection) -> float:
        raise NotImplementedError

    def release(self, conn: psycopg.Connection) -> None:
        """Undo what must be undone when the fault goes off (nothing by default)."""

    after_off = ""

    def on_exit(self, conn: psycopg.Connection | None) -> None:
        if self.active and conn is not None and not conn.closed:
            self.release(conn)


class DeadConsumer(FaultWorker):
    """Takes items like a consumer that then dies: the leases are never finished.

    It polls an empty queue as often as the real consumers do (so it gets its share even when they
    keep the queue near empty) and takes at most ``dead_consumer_per_s`` items per queue.
    """

    fault = "dead-consumer"
    after_off = " (items it took stay stuck until 'act requeue')"
    CLAIMS = (("lease", "lease_claim"), ("status", "status_claim"))

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.next_try = {queue: 0.0 for queue, _ in self.CLAIMS}

    def engage(self, conn: psycopg.Connection) -> float:
        for queue, block in self.CLAIMS:
            now = time.monotonic()
            if now < self.next_try[queue]:
                continue
            self.next_try[queue] = now + IDLE_POLL_S
            try:
                if run(conn, "consume", block):
                    self.ctx.counters.add(f"dead_consumer.{queue}")
                    self.next_try[queue] = now + 1.0 / self.ctx.settings.get("dead_consumer_per_s")
            except psycopg.errors.LockNotAvailable:
                self.ctx.counters.add(f"lock_timeouts.{self.fault}")
        return max(0.0, min(self.next_try.values()) - time.monotonic())


class _HeldTransaction(FaultWorker):
    """A session that opens a transaction, takes something, and sits idle in it until off.

    If the server ends the holding session (an operator's ``act terminate``), the fault counts as
    fixed: it holds nothing again until it is switched off and on, like an application whose
    stuck session was killed and that does not repeat the mistake by itself.
    """

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.holding = False
        self.ended_outside = False

    def wants_connection(self) -> bool:
        return super().wants_connection() and not self.ended_outside

    def step(self, conn: psycopg.Connection | None) -> float:
        if not self.ctx.fault(self.fault):
            self.ended_outside = False
        return super().step(conn)

    def engage(self, conn: psycopg.Connection) -> float:
        if self.ended_outside:
            return self.poll_s
        if self.holding:
            try:
                check_alive(conn)  # no query: the session must stay 'idle in transaction'
            except ConnectionLost:
                self.ended_outside = True
                log.info("fault %s: its session was ended from outside; holding nothing until the fault is "
                         "switched off and on again", self.fault)
                raise
            return self.poll_s
        try:
            self.open(conn)
        except Exception:
            if not conn.closed and not conn.broken:
                run(conn, "faults", "rollback")
            raise
        self.holding = True
        return self.poll_s

    def open(self, conn: psycopg.Connection) -> None:
        raise NotImplementedError

    def release(self, conn: psycopg.Connection) -> None:
        if self.holding:
            self.holding = False
            run(conn, "faults", "rollback")

    def drop_connection(self) -> None:
        self.holding = False  # a new connection holds nothing yet
        super().drop_connection()


class SnapshotHold(_HeldTransaction):
    fault = "snapshot-hold"
    after_off = " (snapshot released; vacuum can remove dead tuples again)"

    def open(self, conn: psycopg.Connection) -> None:
        run(conn, "faults", "begin_repeatable_read")
        snap = run(conn, "faults", "take_snapshot")[0]["snapshot"]
        log.info("snapshot-hold: holding snapshot %s in an idle REPEATABLE READ transaction", snap)


class LockHold(_HeldTransaction):
    fault = "lock-hold"
    after_off = " (lock released)"

    def open(self, conn: psycopg.Connection) -> None:
        queue = self.ctx.settings.lock_hold_queue
        run(conn, "faults", "begin")
        run(conn, "faults", f"lock_{queue}")
        log.info("lock-hold: holding an EXCLUSIVE lock on the %s queue's table", queue)


class WatermarkJump(FaultWorker):
    fault = "watermark-jump"
    after_off = " (stranded items stay below the watermark until 'act watermark-reset')"

    def __init__(self, ctx: Context):
        super().__init__(ctx)
        self.last_jump: float | None = None

    def engage(self, conn: psycopg.Connection) -> float:
        every = self.ctx.settings.get("watermark_jump_every_s")
        if self.last_jump is not None and time.monotonic() - self.last_jump < every:
            return min(self.poll_s, every)
        rows = run(conn, "faults", "watermark_jump")
        if not rows:
            return 0.1  # nothing at or above the watermark right now: look again soon
        self.last_jump = time.monotonic()
        self.ctx.counters.add("watermark_jump.stranded", int(rows[0]["stranded"]))
        log.info("watermark-jump: watermark moved to %s, stranding %s items", rows[0]["low_key"],
                 rows[0]["stranded"])
        return self.poll_s

    def release(self, conn: psycopg.Connection) -> None:
        self.last_jump = None


class Churn(FaultWorker):
    fault = "churn"
    after_off = " (dead tuples go with the next vacuum; the sparse, fragmented index stays until 'act rebuild')"

    def engage(self, conn: psycopg.Connection) -> float:
        s = self.ctx.settings
        rows = s.integer("churn_rows")
        run(conn, "faults", "churn_insert", rows=rows)
        run(conn, "faults", "churn_delete", fraction=s.get("churn_delete_pct") / 100.0)
        self.ctx.counters.add("churn.rows", rows)
        return s.get("churn_every_s")


FAULT_WORKERS: tuple[type[FaultWorker], ...] = (DeadConsumer, SnapshotHold, WatermarkJump, LockHold, Churn)
