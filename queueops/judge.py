"""The one judge: threshold semantics, guards, rule parameters and advice texts, by rule id.

The console (Overview, queue page, findings), the alert rules and the Spark pipeline's findings
all take their judgement from here, so a queue cannot be red on one screen and green on another,
nor alert where the console shows nothing. Pure Python: no Streamlit, no Spark, no I/O; the
metric facts (default levels, guards, samples required) come from the catalog
(``sql/metrics.toml``, :mod:`queueops.catalog`).

Decisions recorded here (each was written differently in several places before):

* ``above`` levels fire at or above the level, ``below`` levels strictly under it
  (``watermark_drift < 0`` means stranded items; a drift of exactly 0 is healthy).
* Fragmentation counts only on an index of at least :data:`MIN_PAGES` pages (the floor below
  which the rebuild action does nothing: Microsoft's guidance, Ola Hallengren's IndexOptimize) in
  a table of at least :data:`MIN_ROWS` rows. Otherwise a tiny index would be red forever with an
  advice that its own action refuses. A guard metric that was not sampled does not suppress.
* The old-snapshot rule is :data:`SNAPSHOT_WARN_S` = 60 s / :data:`SNAPSHOT_CRIT_S` = 600 s (the
  pipeline's levels; the console used 30 s / 120 s). A queue workload's transactions take
  milliseconds, so a minute-old snapshot is already abnormal and worth naming as a root cause,
  while 30 s flagged ordinary batch jobs and reports; ten minutes is where the ghosts it pins
  reach the hundreds of thousands in the lab and dequeues visibly slow down.
* Stuck leases are judged on :data:`STUCK_SAMPLES` = 1 sample (the console's rule; the pipeline
  required 3 consecutive ones). The metric already counts only leases older than the lease
  timeout -- that timeout is the patience -- and the requeue action releases exactly the leases
  one observation finds expired, so the advice and the action agree. The console, which samples
  every ``cache_s`` and starts with no history, could not count consecutive samples reliably
  anyway; three would only delay the page by two collection intervals.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, Protocol

from queueops import catalog

State = Literal["ok", "warn", "crit", "unknown"]
Guard = tuple[str, str, float]  # (other metric of the same queue and cycle, op, level)

OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
}


class Levels(Protocol):
    """Anything with warn / crit / direction (``queueops.config.Threshold``)."""

    warn: float | None
    crit: float | None
    direction: str


def _entry_int(metric: str, attr: str, default: float) -> int:
    m = catalog.get(metric)
    v = getattr(m, attr, None) if m is not None else None
    return int(v if v is not None else default)


FRAGMENTATION = "fragmentation_pct"
STUCK = "stuck_leases"
MIN_PAGES: int = _entry_int(FRAGMENTATION, "min_pages", 1000)
MIN_ROWS: int = _entry_int(FRAGMENTATION, "min_rows", 1000)
STUCK_SAMPLES: int = _entry_int(STUCK, "samples", 1)
SNAPSHOT_WARN_S = 60.0
SNAPSHOT_CRIT_S = 600.0


def judge(value: float | None, threshold: Levels | None) -> State:
    """The state of one value against one threshold (``ok`` when the metric has no threshold)."""
    if value is None:
        return "unknown"
    if threshold is None:
        return "ok"
    if threshold.direction == "below":
        if threshold.crit is not None and value < threshold.crit:
            return "crit"
        if threshold.warn is not None and value < threshold.warn:
            return "warn"
        return "ok"
    if threshold.crit is not None and value >= threshold.crit:
        return "crit"
    if threshold.warn is not None and value >= threshold.warn:
        return "warn"
    return "ok"


def op_for(direction: str) -> str:
    """The comparison an alert rule uses for a threshold direction."""
    return "<" if direction == "below" else ">="


def severity(value: float, threshold: Levels) -> float:
    """How far past its nearest level a value is (1.0 = exactly at it); orders equals worst first."""
    level = threshold.crit if threshold.crit is not None else threshold.warn
    if level is None:
        return 0.0
    if threshold.direction == "below":
        return float(level - value + 1)
    return float(value) / level if level > 0 else float(value) + 1


def guards(metric: str) -> tuple[Guard, ...]:
    """What else must hold for ``metric`` to count (from the catalog's min_pages / min_rows)."""
    m = catalog.get(metric)
    if m is None:
        return ()
    out: list[Guard] = []
    if m.min_pages is not None:
        out.append(("page_count", ">=", float(m.min_pages)))
    if m.min_rows is not None:
        out.append(("rows_total", ">=", float(m.min_rows)))
    return tuple(out)


def guards_hold(metric: str, values: Mapping[str, float | None]) -> bool:
    """Every guard of ``metric`` holds on ``values``; a guard metric not sampled does not suppress."""
    for other, op, level in guards(metric):
        v = values.get(other)
        if v is not None and not OPS[op](float(v), level):
            return False
    return True


def samples_required(metric: str) -> int:
    m = catalog.get(metric)
    return max(1, m.samples) if m is not None else 1


def metric_state(metric: str, values: Mapping[str, float | None], threshold: Levels | None,
                 streak: int | None = None) -> State:
    """The state of ``metric`` for one queue: its level, unless a guard fails or the breach is too
    recent. ``streak`` is how many consecutive latest samples were past the level (``None``: only
    this one is known); fewer than the catalog's ``samples`` is not a breach yet."""
    value = values.get(metric)
    state = judge(value, threshold)
    if state in ("ok", "unknown"):
        return state
    if not guards_hold(metric, values):
        return "ok"
    if (streak if streak is not None else 1) < samples_required(metric):
        return "ok"
    return state


def streak(recent: Sequence[float | None], threshold: Levels | None) -> int:
    """Consecutive samples, newest last in ``recent``, whose value is past ``threshold``'s lowest level."""
    n = 0
    for v in reversed(recent):
        if v is None or judge(v, threshold) not in ("warn", "crit"):
            break
        n += 1
    return n


def snapshot_state(age_s: float | None) -> State:
    """The old-snapshot rule: warn from :data:`SNAPSHOT_WARN_S`, critical from :data:`SNAPSHOT_CRIT_S`."""
    if age_s is None:
        return "unknown"
    return "crit" if age_s >= SNAPSHOT_CRIT_S else "warn" if age_s >= SNAPSHOT_WARN_S else "ok"


# Advice by rule id (the pipeline's findings and their recommended actions, from the queue-kind
# articles and the design's actions); ``{q}`` is the queue's name.
ADVICE: dict[str, str] = {
    "ghosts_held_by_snapshot":
        "End the transaction holding the oldest snapshot (root-cause panel: its session). While it is open, "
        "ghost cleanup / VACUUM cannot remove deleted rows and every dequeue scans through them. Then let "
        "cleanup run (PostgreSQL: VACUUM). For a delete queue, the watermark pattern keeps dequeues off the "
        "ghosts (watermark-queue).",
    "stuck_leases":
        "Requeue the stuck items: `queueops act requeue --queue {q}` (leases older than the lease timeout, "
        "in batches, each row only if its lease is unchanged). Then find why the consumer died (lease-queue).",
    "stranded_items":
        "Reset the watermark: `queueops act watermark-reset --queue {q}` (lowest ready key minus the buffer). "
        "Items below the watermark are never dequeued (watermark-queue).",
    "fragmentation":
        "Rebuild or reorganize the index: `queueops act rebuild --queue {q}` (SQL Server REORGANIZE, or "
        "REBUILD WITH (ONLINE = ON) where the edition allows; PostgreSQL REINDEX INDEX CONCURRENTLY). Keep "
        "payloads in a side table so the queue index can be rebuilt online (high-performance-queue).",
    "lock_timeout_burst":
        "Find the blocker (root-cause panel: blocking chains). Dequeue with READPAST / SKIP LOCKED and ROWLOCK "
        "in short transactions; split metadata from payload (QueueMeta / QueueData) to cut lock contention "
        "(tables-as-queues, high-performance-queue).",
    "lock_waits":
        "Find the session holding the lock on the queue table (root-cause panel: blocking chains) and end "
        "it; dequeuers should use SKIP LOCKED / READPAST and keep transactions short (tables-as-queues).",
    "consumers_stalled":
        "Consumers are not taking the oldest item while depth stays flat: check that consumers run and are "
        "not failing on the head item (a poison message); requeue expired items "
        "(`queueops act requeue --queue {q}`) or move the failing one aside.",
}


def counter_increase(prev: float, cur: float, restarted: bool) -> float:
    """The increase of a cumulative counter over one interval: the difference, or, when the total
    dropped or its epoch changed (the server restarted, the statistics were reset), the new value
    counted from zero -- never a negative rate. The collectors' rates (collectors/counters.py) and
    the pipeline's deltas (pipeline/rollups.py, the same rule in Spark SQL) both follow it; a
    restart mid-interval makes it a lower bound of the true increase."""
    return cur if restarted or cur < prev else cur - prev


def advice(rule: str, queue: str = "") -> str:
    """The advice text of a rule, with the queue's name filled in ('' for a rule without one)."""
    text = ADVICE.get(rule, "")
    return text.replace("{q}", queue)
