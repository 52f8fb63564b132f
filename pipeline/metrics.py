"""The metric names the pipeline's rules, counters and forecasts depend on -- in one place.

The collectors own the names (``collectors/registry.py``, docs/metrics.md); the pipeline refers
to them only through these constants, so a rename is a one-line change here. Any other metric in
the lake still flows through the rollups untouched.
"""

from __future__ import annotations

# The grouping of every rollup, finding and forecast row.
KEYS = ["target", "database", "queue", "metric"]

# Per queue (gauges).
DEPTH = "depth"
OLDEST_AGE = "oldest_age_s"
# SQL Server ghosts and version ghosts; on PostgreSQL ghost_records holds the dead tuples
# (pgstattuple_approx, else n_dead_tup). `dead_tuples` (n_dead_tup again) is left out so one
# cause does not make two findings.
GHOSTS = ("ghost_records", "version_ghost_records")
FRAGMENTATION = "fragmentation_pct"
PAGE_COUNT = "page_count"
STUCK_LEASES = "stuck_leases"
OLDEST_LEASE_AGE = "oldest_lease_age_s"
WATERMARK_DRIFT = "watermark_drift"
STRANDED = "stranded_count"
LOCK_WAITERS = "lock_waiters"          # sessions waiting on a lock on the queue table, now
LOCK_WAIT_S = "lock_wait_max_s"        # the longest of those waits
LOCK_BLOCKERS = "lock_blockers"        # sessions holding a table lock that blocks every change (PostgreSQL)

# Per target (queue ''): the root cause behind ghosts that cleanup cannot remove.
SNAPSHOT_AGE = ("oldest_snapshot_age_s",)

# Cumulative counters are stored raw and named *_total; these *_total names are levels instead.
NOT_COUNTERS = ("rows_total", "lock_waiters_total")
# A SQL Server counter whose note says one of these cntr_type values is an instant value too.
INSTANT_CNTR_TYPES = (65792, 537003264, 1073939712)
# Target-wide metrics whose change means the counters restarted (server restart, stats reset).
EPOCHS = ("sqlserver_start_time", "stats_reset")

LOCK_TIMEOUTS = ("lock_timeouts_total", "lock_timeouts_gt0_total")  # SQL Server counters (deltas)
LOCK_TIMEOUT_EVENTS = ("probe_lock_timeouts",)  # PostgreSQL: timeouts seen in each cycle (sums)

# Metrics worth a time-to-threshold forecast (each needs an "above" threshold to cross).
FORECAST = (DEPTH, *GHOSTS, FRAGMENTATION)

# Metrics whose note matters at their peak (the session holding a snapshot, the index's name):
# the rollups keep it as ``peak_note``.
NOTE_METRICS = (*SNAPSHOT_AGE, FRAGMENTATION)


def counter_sql(metric: str = "metric") -> str:
    """SQL predicate: the row's metric is a cumulative counter."""
    names = ", ".join(f"'{n}'" for n in NOT_COUNTERS)
    return f"(endswith({metric}, '_total') AND {metric} NOT IN ({names}))"

