"""Producers and consumers of the five lab queues, one thread (and one connection) each.

* ``delete``: the consumer deletes the lowest key at or above the watermark (``DELETE ... WHERE id =
  (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING``) and moves the watermark forward every
  ``watermark_every``-th key, ``watermark_buffer`` behind it. Its producers (``producers``, one by
  default) take a transaction advisory lock before drawing a key, so keys commit in key order and
  the watermark never passes a row that is still to come.
* ``status``: QueueMeta/QueueData; 0 ready -> 1 processing -> 2 done (done rows stay); a failure
  goes back to 0 (or to 3 failed after ``max_attempts``).
* ``lease``: the claim stamps ``processing_started_at``; success deletes, a failure writes
  ``errors`` and clears the lease; a lease older than ``lease_reclaim_s`` may be claimed again.
* ``due``: items are due up to ``due_delay_s`` after production; consumers take due rows only.
* ``ring``: LMAX-style preallocated slots; push/pop sequences in ``lab.q_ring_seq``.

Finishing a claimed item is a ``pending`` step of the worker: it is retried after a lock timeout
or a reconnect, and its ``WHERE`` repeats the lease stamp, so it finishes at most once.
"""

from __future__ import annotations

import random
import time

import psycopg

from queueops.lab.runtime import Context, Worker, run
from queueops.lab.settings import production_rate, queue_phase

IDLE_POLL_S = 0.25  # an empty queue is polled this often per consumer
RING_FULL_PAUSE_S = 0.1  # the ring-buffer article's pusher sleeps 100 ms when the ring is full
MAX_GAP_S = 5.0
RECLAIM_CHECK_S = 5.0


def _payload() -> str:
    return random.randbytes(24).hex()


class Producer(Worker):
    """Poisson arrivals at the queue's current point on the production wave; with several
    producers each makes its share (``produce_per_s / producers``)."""

    def __init__(self, ctx: Context, queue: str, index: int = 0):
        super().__init__(ctx, f"{queue}-producer" + (f"-{index + 1}" if index else ""))
        self.queue = queue
        self.index = index
        self.counter_scope = queue

    def retired(self) -> bool:
        return self.index >= self.ctx.settings.integer("producers", self.queue)

    def rate(self) -> float:
        s = self.ctx.settings
        share = s.get("produce_per_s", self.queue) / max(1, s.integer("producers", self.queue))
        return production_rate(time.monotonic() - self.ctx.started, share,
                               s.get("wave", self.queue), s.get("wave_period_s"), queue_phase(self.queue))

    def step(self, conn: psycopg.Connection | None) -> float:
        assert conn is not None
        rate = self.rate()
        if rate <= 0:
            return 1.0
        values: dict[str, object] = {"worker": self.name, "payload": _payload()}
        if self.queue == "due":
            values["delay_s"] = random.uniform(0, self.ctx.settings.get("due_delay_s"))
        if self.queue == "ring":
            values["capacity"] = self.ctx.ring_capacity
        if run(conn, "produce", self.queue, **values):
            self.ctx.counters.add(f"produced.{self.queue}")
        else:  # only the ring can refuse an item: it is full
            self.ctx.counters.add(f"full_stalls.{self.queue}")
            return RING_FULL_PAUSE_S
        return min(random.expovariate(rate), MAX_GAP_S)


class Consumer(Worker):
    """Takes items at up to ``consume_per_s / consumers`` per second; polls an empty queue."""

    def __init__(self, ctx: Context, queue: str, index: int):
        super().__init__(ctx, f"{queue}-consumer-{index + 1}")
        self.queue = queue
        self.index = index
        self.counter_scope = queue
        self._last_reclaim = time.monotonic()

    def retired(self) -> bool:
        return self.index >= self.ctx.settings.integer("consumers", self.queue)

    def step(self, conn: psycopg.Connection | None) -> float:
        assert conn is not None
        s = self.ctx.settings
        per_consumer = s.get("consume_per_s", self.queue) / max(1, s.integer("consumers", self.queue))
        if per_consumer <= 0:
            return 1.0
        began = time.monotonic()
        if not getattr(self, f"_take_{self.queue}")(conn):
            return IDLE_POLL_S
        return max(0.0, 1.0 / per_consumer - (time.monotonic() - began))

    # -- one item per kind -----------------------------------------------------------------
    def _take_delete(self, conn: psycopg.Connection) -> bool:
        rows = run(conn, "consume", "delete", worker=self.name)
        if not rows:
            return False
        self.ctx.counters.add("processed.delete")
        key = rows[0]["item"]
        s = self.ctx.settings
        if key % s.integer("watermark_every") == 0:
            run(conn, "consume", "watermark_advance", key=key, buffer=s.integer("watermark_buffer"))
        return True

    def _take_due(self, conn: psycopg.Connection) -> bool:
        if not run(conn, "consume", "due", worker=self.name):
            return False
        self.ctx.counters.add("processed.due")
        return True

    def _take_ring(self, conn: psycopg.Connection) -> bool:
        if not run(conn, "consume", "ring", worker=self.name, capacity=self.ctx.ring_capacity):
            return False
        self.ctx.counters.add("processed.ring")
        return True

    def _take_lease(self, conn: psycopg.Connection) -> bool:
        rows: list[dict[str, object]] = []
        reclaim_s = self.ctx.settings.get("lease_reclaim_s")
        if reclaim_s > 0 and time.monotonic() - self._last_reclaim >= RECLAIM_CHECK_S:
            self._last_reclaim = time.monotonic()
            rows = run(conn, "consume", "lease_reclaim", reclaim_s=reclaim_s)
            if rows:
                self.ctx.counters.add("reclaimed.lease")
        if not rows:
            rows = run(conn, "consume", "lease_claim")
        if not rows:
            return False
        self._work_then_finish("lease", rows[0])
        return True

    def _take_status(self, conn: psycopg.Connection) -> bool:
        rows = run(conn, "consume", "status_claim")
        if not rows:
            return False
        self._work_then_finish("status", rows[0], max_attempts=self.ctx.settings.integer("max_attempts"))
        return True

    def _work_then_finish(self, kind: str, row: dict[str, object], **extra: object) -> None:
        s = self.ctx.settings
        # The item's "work": it finishes even when SIGTERM arrives meanwhile.
        time.sleep(random.uniform(0, s.get("work_ms", self.queue)) / 1000.0)
        values: dict[str, object] = {"id": row["id"], "lease": row["lease"], "worker": self.name}
        if random.uniform(0, 100) < s.get("fail_pct", self.queue):
            if kind == "status":
                values.update(extra)
            else:
                values["error"] = f"simulated failure in {self.name} at {time.strftime('%H:%M:%S')}"
            self.pending = ("consume", f"{kind}_fail", values, f"failed.{kind}")
        else:
            self.pending = ("consume", f"{kind}_done", values, f"processed.{kind}")
        self.finish_pending(self.conn)
