-- blocking_chains (target): who waits behind whom, from one read of pg_locks. Only when a session
-- of this database waits on a lock (pg_stat_activity, which reads without locks) is pg_locks read,
-- once. Not pg_blocking_pids(): it takes the ProcArray lock and every lock-manager partition lock
-- on each call, one call per waiting session, which holds up commits and lock traffic
-- meanwhile (PostgreSQL's documentation warns against calling it often; docs/benchmarks.md,
-- overhead, has what sampling it every second measured).
-- A waiting request is blocked by every session holding a conflicting lock on the same object
-- (the documented conflict table of the eight table-lock modes, which row, transaction and
-- advisory locks share), and by every session queued before it (earlier waitstart) for a
-- conflicting mode: pg_blocking_pids' hard and soft blockers. pg_locks does not show the wait
-- queue, so its order is taken from waitstart (PostgreSQL may queue a request ahead of earlier
-- ones to avoid a deadlock). A prepared transaction holding a lock is pid 0, as there. Parallel
-- workers' lock groups are not merged (a worker is its own pid).
--   blocked_sessions     sessions of this database waiting behind another session
--   blocking_max_wait_s  the longest of those waits (pg_locks.waitstart to the clock after reading it)
--   head_blockers        sessions that block others and wait for nobody themselves (often an
--                        idle-in-transaction session); note: JSON list of up to 5, most blocked
--                        first, with pid, usename, application_name, state, transaction age, what
--                        it runs, how many sessions wait behind it (whole chain) and the depth,
--                        its backend_start (with the pid: the session, not a reused pid) and the
--                        pids waiting behind it (the console ties a head to the queues whose
--                        lock_waiters it holds up).
-- Without pg_read_all_stats (pg_monitor) other logins' sessions show no wait event in
-- pg_stat_activity: their waits and blockers read as none. The notes then begin 'not visible:
-- the collector login lacks pg_read_all_stats' (head_blockers: that text instead of an empty list).
-- @block main
WITH RECURSIVE lockwait AS (
    SELECT a.pid FROM pg_stat_activity AS a
    WHERE a.wait_event_type = 'Lock' AND a.pid <> pg_backend_pid() AND a.datname = current_database()
), l AS MATERIALIZED (
    -- Read only when someone waits: an uncorrelated condition is a one-time filter above the scan.
    SELECT pk.locktype, pk.database, pk.relation, pk.page, pk.tuple, pk.virtualxid, pk.transactionid,
           pk.classid, pk.objid, pk.objsubid, coalesce(pk.pid, 0) AS pid, pk.mode, pk.granted,
           coalesce(pk.waitstart, 'infinity'::timestamptz) AS queued
    FROM pg_locks AS pk
    WHERE EXISTS (SELECT 1 FROM lockwait) AND pk.pid IS DISTINCT FROM pg_backend_pid()
), conflicts (a, b) AS (
    SELECT m.a, x.b FROM (VALUES
        ('AccessShareLock', ARRAY['AccessExclusiveLock']),
        ('RowShareLock', ARRAY['ExclusiveLock', 'AccessExclusiveLock']),
        ('RowExclusiveLock', ARRAY['ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock']),
        ('ShareUpdateExclusiveLock', ARRAY['ShareUpdateExclusiveLock', 'ShareLock', 'ShareRowExclusiveLock',
                                           'ExclusiveLock', 'AccessExclusiveLock']),
        ('ShareLock', ARRAY['RowExclusiveLock', 'ShareUpdateExclusiveLock', 'ShareRowExclusiveLock',
                            'ExclusiveLock', 'AccessExclusiveLock']),
        ('ShareRowExclusiveLock', ARRAY['RowExclusiveLock', 'ShareUpdateExclusiveLock', 'ShareLock',
                                        'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock']),
        ('ExclusiveLock', ARRAY['RowShareLock', 'RowExclusiveLock', 'ShareUpdateExclusiveLock', 'ShareLock',
                                'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock']),
        ('AccessExclusiveLock', ARRAY['AccessShareLock', 'RowShareLock', 'RowExclusiveLock',
                                      'ShareUpdateExclusiveLock', 'ShareLock', 'ShareRowExclusiveLock',
                                      'ExclusiveLock', 'AccessExclusiveLock'])
    ) AS m (a, bs) CROSS JOIN LATERAL unnest(m.bs) AS x (b)
), edges AS (
    SELECT DISTINCT w.pid AS waiter, o.pid AS blocker
    FROM l AS w
    JOIN lockwait AS lw ON lw.pid = w.pid
    -- The same lockable object: pg_locks' tag columns, null where a lock type has no such part.
    JOIN l AS o ON o.pid <> w.pid AND o.locktype = w.locktype
        AND (o.database, o.relation, o.page, o.tuple, o.virtualxid, o.transactionid, o.classid, o.objid, o.objsubid)
            IS NOT DISTINCT FROM
            (w.database, w.relation, w.page, w.tuple, w.virtualxid, w.transactionid, w.classid, w.objid, w.objsubid)
        AND (o.granted OR o.queued < w.queued)
    JOIN conflicts AS c ON c.a = w.mode AND c.b = o.mode
    WHERE NOT w.granted
), waiters AS (
    SELECT lw.pid, (SELECT min(l.queued) FROM l WHERE l.pid = lw.pid AND NOT l.granted) AS waitstart,
           EXISTS (SELECT 1 FROM edges AS e WHERE e.waiter = lw.pid) AS blocked
    FROM lockwait AS lw
), heads AS (
    SELECT DISTINCT e.blocker AS pid FROM edges AS e
    WHERE NOT EXISTS (SELECT 1 FROM edges AS e2 WHERE e2.waiter = e.blocker)
), chain AS (
    SELECT h.pid AS head, e.waiter, 1 AS depth FROM heads AS h JOIN edges AS e ON e.blocker = h.pid
    UNION
    SELECT c.head, e.waiter, c.depth + 1 FROM chain AS c JOIN edges AS e ON e.blocker = c.waiter WHERE c.depth < 20
), per_head AS (
    SELECT c.head, count(DISTINCT c.waiter) AS blocked, max(c.depth) AS depth FROM chain AS c GROUP BY c.head
), detail AS (
    SELECT json_agg(json_build_object(
               'pid', p.head, 'usename', a.usename, 'application_name', a.application_name,
               'client_addr', a.client_addr::text, 'state', a.state, 'backend_start', a.backend_start,
               'xact_age_s', round(greatest(0, extract(epoch FROM clock_timestamp() - a.xact_start))::numeric, 1),
               'state_age_s', round(greatest(0, extract(epoch FROM clock_timestamp() - a.state_change))::numeric, 1),
               'waiters', (SELECT (array_agg(DISTINCT c.waiter ORDER BY c.waiter))[1:20] FROM chain AS c WHERE c.head = p.head),
               'wait_event', a.wait_event_type || ':' || a.wait_event, 'query', left(a.query, 300),
               'blocked', p.blocked, 'depth', p.depth) ORDER BY p.blocked DESC, p.head) AS heads,
           count(*) AS n
    FROM (SELECT * FROM per_head ORDER BY blocked DESC, head LIMIT 5) AS p
    LEFT JOIN pg_stat_activity AS a ON a.pid = p.head
), visible AS (
    SELECT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS all_stats,
           'not visible: the collector login lacks pg_read_all_stats (other logins'' waits show no wait '
           'event in pg_stat_activity, so their chains read as none)' AS why
), totals AS (
    SELECT count(*) FILTER (WHERE w.blocked) AS blocked,
           coalesce(max(extract(epoch FROM clock_timestamp() - w.waitstart))
                    FILTER (WHERE w.blocked AND w.waitstart < 'infinity'), 0) AS max_wait_s
    FROM waiters AS w
)
SELECT '' AS queue, v.metric, v.value, v.note
FROM totals AS t CROSS JOIN detail AS d CROSS JOIN visible AS vis
CROSS JOIN (SELECT count(*) AS n FROM heads) AS h
CROSS JOIN LATERAL (SELECT CASE WHEN vis.all_stats THEN '' ELSE vis.why || '; ' END AS pre) AS p
CROSS JOIN LATERAL (VALUES
    ('blocked_sessions', t.blocked::float8,
     p.pre || 'pg_locks (waiting requests against held and earlier queued conflicting ones)'),
    ('blocking_max_wait_s', t.max_wait_s::float8, p.pre || 'pg_locks.waitstart'),
    ('head_blockers', h.n::float8, coalesce(d.heads::text, CASE WHEN vis.all_stats THEN '[]' ELSE vis.why END))
) AS v (metric, value, note)
