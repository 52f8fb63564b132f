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
-- waiter; the holder is there in every sample. Its note names each holder ("held": pid:mode, and
-- "holders": up to 5 sessions with pid, backend_start, user, application, state, transaction
-- start and age, the statement), so the console can name and end it whether or not a waiter is
-- caught waiting at the sampling instant.
-- lock_wait_max_s counts, while such a lock is held, from its holder's transaction start (a table
-- lock lasts to the end of its transaction, so this is at most how long it has been held): a
-- dequeuer with a 200 ms lock_timeout waits 200 ms at a time and retries, but the queue waits as
-- long as the lock is held.
-- pg_locks is read once for every queue of the target (block 'all': the queue names and tables
-- are bound lists); nothing here touches the queue tables, so it answers even while a table is
-- locked. Without pg_read_all_stats (pg_monitor) another login's holder shows no transaction start
-- in pg_stat_activity: how long it has held the lock reads 0 s. Then, while a holder is seen,
-- lock_wait_max_s's note says 'not visible: the collector login lacks pg_read_all_stats' and
-- lock_blockers' JSON carries it as "not_visible". PostgreSQL keeps no per-table lock/latch wait totals: see docs/metrics.md.
-- @block all
WITH q AS (
    -- The table, and for a partitioned table (pg-boss's job table, PGMQ's partitioned queues) every
    -- relation under it. A VACUUM FULL or a LOCK of one partition, or pg_partman's maintenance
    -- detaching one, stalls every dequeue through the parent while holding nothing on the parent
    -- itself: matched on the parent alone, no blocker was named. fragments/tree.sql reads them
    -- from pg_inherits; pg_partition_tree would lock every partition and wait behind that very
    -- holder until the lock timeout.
    SELECT t.queue, to_regclass(t.tbl) AS relid, {{tree.relations(to_regclass(t.tbl))}} AS relids
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
    LEFT JOIN waiting AS w ON EXISTS (SELECT 1 FROM l WHERE l.pid = w.pid AND l.relation = ANY (q.relids))
    GROUP BY q.queue
), held AS (
    SELECT q.queue, h.pid, string_agg(DISTINCT h.mode, ',') AS mode,
           row_number() OVER (PARTITION BY q.queue ORDER BY h.pid) AS rn
    FROM q
    JOIN l AS h ON h.relation = ANY (q.relids) AND h.granted
               AND h.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
    GROUP BY q.queue, h.pid
), holders AS (
    SELECT q.queue, count(hd.pid) AS n,
           array_agg(hd.pid::text || ':' || hd.mode ORDER BY hd.pid) FILTER (WHERE hd.pid IS NOT NULL) AS who,
           max(extract(epoch FROM clock_timestamp() - a.xact_start)) AS held_s,
           json_agg(json_build_object(
               'pid', hd.pid, 'mode', hd.mode, 'usename', a.usename, 'application_name', a.application_name,
               'client_addr', a.client_addr::text, 'state', a.state, 'backend_start', a.backend_start,
               'xact_start', a.xact_start,
               'xact_age_s', round(greatest(0, extract(epoch FROM clock_timestamp() - a.xact_start))::numeric, 1),
               'query', left(a.query, 300)) ORDER BY a.xact_start NULLS LAST, hd.pid)
               FILTER (WHERE hd.pid IS NOT NULL AND hd.rn <= 5) AS items
    FROM q
    LEFT JOIN held AS hd ON hd.queue = q.queue
    LEFT JOIN pg_stat_activity AS a ON a.pid = hd.pid
    GROUP BY q.queue
)
SELECT p.queue, v.metric, v.value, v.note
FROM per_queue AS p
JOIN holders AS hq ON hq.queue = p.queue
CROSS JOIN (SELECT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS all_stats,
                   'not visible: the collector login lacks pg_read_all_stats (another login''s lock holder '
                   'shows no transaction start in pg_stat_activity, so how long it has held the lock reads 0 s)'
                   AS why) AS vis
CROSS JOIN LATERAL (VALUES
    ('lock_waiters', p.n::float8,
     CASE WHEN p.n = 0 THEN 'exact (pg_locks now)' ELSE json_build_object('pids', p.pids[1:20])::text END),
    ('lock_wait_max_s', greatest(coalesce(p.longest_s, 0), coalesce(hq.held_s, 0))::float8,
     CASE WHEN hq.n = 0 THEN 'pg_locks.waitstart'
          WHEN NOT vis.all_stats THEN vis.why || '; pg_locks.waitstart'
          ELSE 'the blocking lock''s transaction start (pg_stat_activity.xact_start)' END),
    ('lock_blockers', hq.n::float8,
     CASE WHEN hq.n = 0 THEN 'exact (pg_locks now)'
          WHEN vis.all_stats THEN json_build_object('held', hq.who[1:20], 'holders', hq.items)::text
          ELSE json_build_object('held', hq.who[1:20], 'holders', hq.items, 'not_visible', vis.why)::text END)
) AS v (metric, value, note)
