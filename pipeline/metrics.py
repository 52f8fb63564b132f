"""The metric names the pipeline's rules, counters and forecasts depend on -- in one place.

The metric catalog (``sql/metrics.toml``, :mod:`queueops.catalog`) owns the names and kinds; the
counter, epoch and lock-timeout lists below are read from it. The pipeline refers
to them only through these constants, so a rename is a one-line change here. Any other metric in
the lake still flows through the rollups untouched.
"""

from __future__ import annotations

from queueops import catalog

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
ROWS_TOTAL = "rows_total"
STUCK_LEASES = "stuck_leases"
OLDEST_LEASE_AGE = "oldest_lease_age_s"
WATERMARK_DRIFT = "watermark_drift"
STRANDED = "stranded_count"
LOCK_WAITERS = "lock_waiters"          # sessions waiting on a lock on the queue table, now
LOCK_WAIT_S = "lock_wait_max_s"        # the longest of those waits
LOCK_BLOCKERS = "lock_blockers"        # sessions holding a table lock that blocks every change (PostgreSQL)

# Per target (queue ''): the root cause behind ghosts that cleanup cannot remove.
SNAPSHOT_AGE = ("oldest_snapshot_age_s",)

# Cumulative counters (catalog kind "counter") are stored raw; other names ending in _total
# (rows_total, lock_waiters_total) are levels. The catalog decides, as in collectors/counters.py.
COUNTERS = catalog.names("counter")
# A SQL Server counter whose note says one of these cntr_type values is an instant value too.
INSTANT_CNTR_TYPES = tuple(sorted(catalog.INSTANT_CNTR_TYPES))
# Target-wide metrics whose change means the counters restarted (server restart, stats reset).
EPOCHS = catalog.names("epoch")

# The lock-timeout burst rule's inputs: SQL Server counters (deltas) and PostgreSQL's timeouts
# seen in each cycle (sums).
LOCK_TIMEOUTS = tuple(n for n in COUNTERS if catalog.metrics()[n].finding == "lock_timeout_burst")
LOCK_TIMEOUT_EVENTS = tuple(n for n, x in catalog.metrics().items()
                            if x.finding == "lock_timeout_burst" and x.kind != "counter")

# Metrics worth a time-to-threshold forecast (each needs an "above" threshold to cross).
FORECAST = (DEPTH, *GHOSTS, FRAGMENTATION)

# Metrics whose note matters at their peak (the session holding a snapshot, the index's name):
# the rollups keep it as ``peak_note``.
NOTE_METRICS = (*SNAPSHOT_AGE, FRAGMENTATION)


def counter_sql(metric: str = "metric") -> str:
    """SQL predicate: the row's metric is a cumulative counter (per the catalog)."""
    names = ", ".join(f"'{n}'" for n in COUNTERS)
    return f"({metric} IN ({names}))"
