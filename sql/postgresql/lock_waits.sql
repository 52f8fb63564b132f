-- lock_waits: sessions waiting for a lock that involves the queue table, and the longest wait.
-- A session counts when it waits for a lock (pg_locks.granted = false, any lock type) and holds
-- or requests a lock on the table: a dequeuer blocked by LOCK TABLE waits on the relation
-- itself; one blocked by a row lock waits on the holder's transaction id while holding its own
-- lock on the table. The wait is measured from pg_locks.waitstart (PostgreSQL 14+) to the clock
-- after pg_locks was read (clock_timestamp(), not now(): a wait that began after this statement
-- started would read negative).
-- lock_blockers: sessions holding a table lock that blocks every insert, update and delete
-- (SHARE and stronger: LOCK TABLE, VACUUM FULL, an offline REINDEX, CREATE INDEX). Dequeuers with a
-- short lock_timeout wait briefly and retry, so a sample can fall between their waits and see no
-- waiter; the holder is there in every sample.
-- pg_locks is read once for every queue of the target (block 'all': the queue names and tables
-- are bound lists); nothing here touches the queue tables, so it answers even while a table is
-- locked. PostgreSQL keeps no per-table lock/latch wait totals: see docs/metrics.md.
-- @block all
WITH q AS (
    SELECT t.queue, to_regclass(t.tbl) AS relid
    FROM unnest(ARRAY[:queue_names]::text[], ARRAY[:queue_tables]::text[]) AS t (queue, tbl)
), l AS MATERIALIZED (
    SELECT pk.pid, pk.relation, pk.granted, pk.waitstart, pk.mode
    FROM pg_locks AS pk
    WHERE pk.pid <> pg_backend_pid()
      AND (pk.database IS NULL OR pk.database = (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database()))
), waiting AS (
    SELECT w.pid, min(w.waitstart) AS waitstart FROM l AS w WHERE NOT w.granted GROUP BY w.pid
), per_queue AS (
    SELECT q.queue, count(DISTINCT w.pid) AS n, max(extract(epoch FROM clock_timestamp() - w.waitstart)) AS longest_s,
           array_agg(DISTINCT w.pid ORDER BY w.pid) FILTER (WHERE w.pid IS NOT NULL) AS pids
    FROM q
    LEFT JOIN waiting AS w ON EXISTS (SELECT 1 FROM l WHERE l.pid = w.pid AND l.relation = q.relid)
    GROUP BY q.queue
), holders AS (
    SELECT q.queue, count(DISTINCT h.pid) AS n,
           array_agg(DISTINCT h.pid::text || ':' || h.mode) FILTER (WHERE h.pid IS NOT NULL) AS who
    FROM q
    LEFT JOIN l AS h ON h.relation = q.relid AND h.granted
                    AND h.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
    GROUP BY q.queue
)
SELECT p.queue, v.metric, v.value, v.note
FROM per_queue AS p
JOIN holders AS hq ON hq.queue = p.queue
CROSS JOIN LATERAL (VALUES
    ('lock_waiters', p.n::float8,
     CASE WHEN p.n = 0 THEN 'exact (pg_locks now)' ELSE json_build_object('pids', p.pids[1:20])::text END),
    ('lock_wait_max_s', coalesce(p.longest_s, 0)::float8, 'pg_locks.waitstart'),
    ('lock_blockers', hq.n::float8,
     CASE WHEN hq.n = 0 THEN 'exact (pg_locks now)' ELSE json_build_object('held', hq.who[1:20])::text END)
) AS v (metric, value, note)
