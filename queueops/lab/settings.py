"""The lab workload's knobs: defaults, parsing of ``lab.settings`` rows, and the production curve.

Settings are rows ``(name, value)`` in ``lab.settings`` (``queueops lab start --rate NAME=VALUE``
writes them); the workload reads them at start and polls them every second, so a change applies
while it runs. A name may be global (``produce_per_s``) or per queue (``delete.produce_per_s``);
the per-queue row wins. A value that does not parse, or is out of range, is ignored with a
warning: a typo must not stop the lab.

The defaults make depth move visibly between two console refreshes without ever growing without
bound: each producer follows a slow wave around ``produce_per_s`` (Poisson arrivals), and the
consumers together can take ``consume_per_s``, a little above the average, so backlogs build up
at the crest of the wave and drain in the trough.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

QUEUES = ("delete", "status", "lease", "due", "ring")


@dataclass(frozen=True)
class Knob:
    default: float
    low: float
    high: float
    per_queue: bool = False
    integer: bool = False
    doc: str = ""


KNOBS: dict[str, Knob] = {
    "produce_per_s": Knob(4, 0, 5000, True, doc="average items produced per second"),
    "consume_per_s": Knob(5, 0, 5000, True, doc="items the consumers of a queue take per second, at most "
                          "(default: 1.25 x produce_per_s, so backlogs always drain)"),
    "consumers": Knob(2, 0, 16, True, True, "consumer threads (connections) per queue"),
    "producers": Knob(1, 1, 16, True, True, "producer threads (connections) per queue; together they produce "
                      "produce_per_s"),
    "wave": Knob(0.8, 0, 1, True, doc="amplitude of the production wave, as a fraction of the rate"),
    "wave_period_s": Knob(120, 5, 86400, doc="period of the production wave"),
    "work_ms": Knob(150, 0, 60000, True, doc="simulated processing time of one item, at most"),
    "fail_pct": Knob(3, 0, 100, True, doc="lease/status items whose processing fails (and retries)"),
    "max_attempts": Knob(3, 1, 100, integer=True, doc="status items go to 3 (failed) after this many"),
    "due_delay_s": Knob(10, 0, 3600, doc="due items are due up to this many seconds after production"),
    "lock_timeout_ms": Knob(200, 1, 60000, integer=True, doc="lock_timeout of every worker (at connect)"),
    "lease_reclaim_s": Knob(600, 0, 86400 * 7, doc="a lease older than this may be taken again (0: never)"),
    "watermark_every": Knob(10, 1, 100000, integer=True, doc="advance the watermark every N-th dequeue"),
    "watermark_buffer": Knob(20, 0, 1000000, integer=True, doc="... to the key taken minus this buffer"),
    "dead_consumer_per_s": Knob(0.5, 0.01, 100, doc="items the dead consumer takes per second (each queue)"),
    "watermark_jump_every_s": Knob(15, 1, 86400, doc="while watermark-jump is on, jump again this often"),
    "churn_rows": Knob(2000, 10, 100000, integer=True, doc="rows inserted per churn round"),
    "churn_delete_pct": Knob(90, 1, 100, doc="churn rows deleted (at random) per round"),
    "churn_every_s": Knob(1, 0.1, 3600, doc="seconds between churn rounds"),
    "status_done_keep": Knob(100000, 0, 10**9, integer=True, doc="done status rows kept (0: keep all)"),
    "ledger_keep_h": Knob(24, 0, 24 * 365, doc="ledger rows kept this many hours (0: keep all)"),
}
LOCK_HOLD_DEFAULT = "lease"
CONSUME_HEADROOM = 1.25  # consumers can take this much more than the average production
STATEMENT_MS = 5.0  # rough cost of one claim or finish statement, for the capacity estimate


class Settings:
    """A parsed view of ``lab.settings``; unknown names and bad values become warnings."""

    def __init__(self, rows: Mapping[str, str] | None = None):
        self.values: dict[str, float] = {}
        self.lock_hold_queue = LOCK_HOLD_DEFAULT
        self.warnings: list[str] = []
        for name, raw in (rows or {}).items():
            self._take(name, raw)

    def _take(self, name: str, raw: str) -> None:
        if name == "lock_hold_queue":
            if raw in QUEUES:
                self.lock_hold_queue = raw
            else:
                self.warnings.append(f"lock_hold_queue={raw!r}: not one of {', '.join(QUEUES)}; using "
                                     f"{LOCK_HOLD_DEFAULT!r}")
            return
        queue, _, knob_name = name.rpartition(".")
        knob = KNOBS.get(knob_name)
        if knob is None or (queue and (queue not in QUEUES or not knob.per_queue)):
            self.warnings.append(f"unknown setting {name!r} ignored")
            return
        try:
            value = float(raw)
        except ValueError:
            self.warnings.append(f"setting {name}={raw!r} is not a number; using the default")
            return
        if not (knob.low <= value <= knob.high) or math.isnan(value):
            self.warnings.append(f"setting {name}={raw!r} is outside {knob.low:g}..{knob.high:g}; "
                                 "using the default")
            return
        self.values[name] = value

    def get(self, name: str, queue: str | None = None) -> float:
        knob = KNOBS[name]
        value = knob.default
        if name == "consume_per_s":
            value = CONSUME_HEADROOM * self.get("produce_per_s", queue)
        if name in self.values:
            value = self.values[name]
        if queue and f"{queue}.{name}" in self.values:
            value = self.values[f"{queue}.{name}"]
        return float(int(value)) if knob.integer else value

    def integer(self, name: str, queue: str | None = None) -> int:
        return int(self.get(name, queue))


def production_rate(t: float, base: float, wave: float, period_s: float, phase: float) -> float:
    """Items per second at time ``t``: ``base`` swinging by ``wave`` over ``period_s``.

    The average over a period is ``base``. Each queue has its own ``phase``, so the queues do not
    crest together.
    """
    return max(0.0, base * (1.0 + wave * math.sin(2 * math.pi * t / period_s + phase)))


def queue_phase(queue: str) -> float:
    """A fixed, distinct phase per queue (0, 2/5, 4/5, ... of a turn)."""
    return 2 * math.pi * QUEUES.index(queue) / len(QUEUES)


def capacity_warnings(settings: Settings) -> list[str]:
    """Queues whose consumers cannot keep up with what they are asked to take: the backlog grows.

    A lease or status consumer spends ``work_ms / 2`` on average per item plus two statements;
    the others spend one statement.
    """
    out = []
    for queue in QUEUES:
        consumers = settings.integer("consumers", queue)
        wanted = max(settings.get("consume_per_s", queue), settings.get("produce_per_s", queue))
        per_item_ms = STATEMENT_MS
        if queue in ("lease", "status"):
            per_item_ms = settings.get("work_ms", queue) / 2 + 2 * STATEMENT_MS
        can = consumers * 1000.0 / per_item_ms
        if wanted > 0 and can < wanted:
            out.append(f"{queue}: {consumers} consumers can take about {can:.0f} items/s, less than the "
                       f"{wanted:g}/s asked for; the backlog will grow (raise {queue}.consumers or lower work_ms)")
    return out
