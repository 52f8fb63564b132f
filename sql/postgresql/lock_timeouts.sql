-- lock_timeouts (target): PostgreSQL keeps no lock-timeout counter. What it has, stored raw:
--   deadlocks_total      pg_stat_database.deadlocks, cumulative (rate by delta in collectors/counters.py)
--   stats_reset          epoch seconds of the statistics' last reset: a change marks a restart of the totals
--   lock_waiters_total   sessions of this database waiting for any lock right now: from
--                        pg_stat_activity (wait_event_type 'Lock'), which reads without locks. The
--                        same count from pg_locks would take every lock-manager partition lock each
--                        cycle, holding up sessions that take or release a lock meanwhile.
-- The runner adds probe_lock_timeouts: how many of its own collector statements were cancelled
-- by lock_timeout / statement_timeout in the cycle (the console's probes, as docs/metrics.md says).
-- @block main
SELECT '' AS queue, v.metric, v.value, v.note
FROM (SELECT d.deadlocks, d.stats_reset FROM pg_stat_database AS d WHERE d.datname = current_database()) AS s
CROSS JOIN (SELECT count(*) AS n FROM pg_stat_activity AS a
            WHERE a.wait_event_type = 'Lock' AND a.pid <> pg_backend_pid() AND a.datname = current_database()) AS w
CROSS JOIN LATERAL (VALUES
    ('deadlocks_total', s.deadlocks::float8, 'pg_stat_database.deadlocks (cumulative)'),
    ('stats_reset', coalesce(extract(epoch FROM s.stats_reset), 0)::float8, 'epoch seconds; a change resets the totals'),
    ('lock_waiters_total', w.n::float8, 'sessions of this database waiting for a lock now')
) AS v (metric, value, note)
