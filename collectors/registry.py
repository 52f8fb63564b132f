"""Which collectors exist, their cadence, and what they apply to.

A collector is one SQL file per dialect, ``sql/<dialect>/<name>.sql``; ``Collector.name`` is the
file name. ``cadence`` is ``fast`` (cheap: index seeks, bounded counts, statistics and lock
views; every few seconds) or ``slow`` (reads pages: ghosts, fragmentation; minutes). The
scheduler reads it from here.

``scope`` is ``queue`` (a block per queue kind, all queues of a target joined into one statement
with UNION ALL, or one ``all`` block that takes every queue of the target as bound lists) or
``target`` (one statement per target: root causes, server counters; rows have ``queue = ''``).

``metrics`` lists what the collector may emit (kind- and dialect-dependent; see docs/metrics.md).
Metrics ending in ``_total`` are cumulative counters stored raw; :mod:`collectors.counters` turns
them into ``*_per_s`` rates by delta.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Collector:
    name: str
    cadence: Literal["fast", "slow"]
    scope: Literal["queue", "target"] = "queue"
    description: str = ""
    metrics: tuple[str, ...] = ()


COLLECTORS: tuple[Collector, ...] = (
    Collector("depth", "fast", description="items ready now, rows in total and per status",
              metrics=("depth", "rows_total", "count_processing", "count_done", "count_other",
                       "count_leased", "count_failed", "count_not_due")),
    Collector("oldest_age_s", "fast", description="how long the oldest ready item has waited",
              metrics=("oldest_age_s",)),
    Collector("stuck_leases", "fast", description="leased / processing items older than the lease timeout",
              metrics=("stuck_leases", "oldest_lease_age_s", "missing_index")),
    Collector("watermark_drift", "fast", description="lowest ready key minus the watermark; stranded items",
              metrics=("watermark_drift", "stranded_count", "watermark")),
    Collector("ring_occupancy", "fast", description="ring buffer occupancy, free slots, pop ahead of push",
              metrics=("occupancy", "occupancy_pct", "free_slots", "pop_ahead_of_push", "slots_in_use")),
    Collector("lock_waits", "fast", description="sessions waiting on the queue table's locks; per-table "
              "lock and latch wait totals where the engine keeps them",
              metrics=("lock_waiters", "lock_wait_max_s", "lock_blockers", "row_lock_waits_total", "row_lock_wait_ms_total",
                       "page_lock_waits_total", "page_latch_waits_total", "page_latch_wait_ms_total",
                       "lock_escalations_total", "page_splits_total", "leaf_ghosts")),
    Collector("lock_timeouts", "fast", "target", description="server lock-timeout / deadlock counters (raw totals)",
              metrics=("lock_timeouts_total", "lock_timeouts_gt0_total", "lock_waits_total", "deadlocks_total",
                       "page_splits_total", "skipped_ghosted_records_total", "sqlserver_start_time",
                       "stats_reset", "lock_waiters_total", "probe_lock_timeouts")),
    Collector("oldest_snapshot", "fast", "target", description="the oldest open snapshot / xmin-holding "
              "transaction: age, session, what it runs",
              metrics=("oldest_snapshot_age_s", "oldest_xmin_age_xids", "snapshot_transactions",
                       "version_store_kb")),
    Collector("blocking_chains", "fast", "target", description="blocked sessions, their longest wait, "
              "and the head blockers (idle ones included)",
              metrics=("blocked_sessions", "blocking_max_wait_s", "head_blockers")),
    Collector("ghost_records", "slow", description="ghost / dead rows left by dequeues",
              metrics=("ghost_records", "version_ghost_records", "dead_tuples", "dead_tuple_pct",
                       "vacuum_age_s")),
    Collector("fragmentation_pct", "slow", description="leaf fragmentation, page count and density; bloat",
              metrics=("fragmentation_pct", "page_count", "page_density_pct", "index_fragmentation_max_pct",
                       "table_bloat_pct", "table_pages")),
)

FAST: tuple[Collector, ...] = tuple(c for c in COLLECTORS if c.cadence == "fast")
SLOW: tuple[Collector, ...] = tuple(c for c in COLLECTORS if c.cadence == "slow")


def by_name(name: str) -> Collector:
    for c in COLLECTORS:
        if c.name == name:
            return c
    known = ", ".join(c.name for c in COLLECTORS)
    raise KeyError(f"unknown collector {name!r} (known: {known})")


def by_cadence(cadence: str) -> tuple[Collector, ...]:
    """The collectors the scheduler runs on the ``fast`` or ``slow`` interval."""
    if cadence not in ("fast", "slow"):
        raise ValueError(f"cadence must be 'fast' or 'slow', not {cadence!r}")
    return FAST if cadence == "fast" else SLOW
