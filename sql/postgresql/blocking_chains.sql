-- blocking_chains (target): who waits behind whom, from pg_blocking_pids(). It is called only
-- for sessions that wait on a lock right now (it takes the lock manager's partition locks, so
-- never for every backend).
--   blocked_sessions     sessions of this database waiting behind another session
--   blocking_max_wait_s  the longest of those waits (pg_locks.waitstart to the clock after reading it)
--   head_blockers        sessions that block others and wait for nobody themselves (often an
--                        idle-in-transaction session); note: JSON list of up to 5, most blocked
--                        first, with pid, usename, application_name, state, transaction age, what
--                        it runs, how many sessions wait behind it (whole chain) and the depth.
-- @block main
WITH RECURSIVE waiters AS (
    SELECT a.pid, pg_blocking_pids(a.pid) AS blockers,
           (SELECT min(l.waitstart) FROM pg_locks AS l WHERE l.pid = a.pid AND NOT l.granted) AS waitstart
    FROM pg_stat_activity AS a
    WHERE a.wait_event_type = 'Lock' AND a.pid <> pg_backend_pid() AND a.datname = current_database()
), edges AS (
    SELECT w.pid AS waiter, b.pid AS blocker FROM waiters AS w CROSS JOIN LATERAL unnest(w.blockers) AS b (pid)
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
               'client_addr', a.client_addr::text, 'state', a.state,
               'xact_age_s', round(extract(epoch FROM clock_timestamp() - a.xact_start)::numeric, 1),
               'state_age_s', round(extract(epoch FROM clock_timestamp() - a.state_change)::numeric, 1),
               'wait_event', a.wait_event_type || ':' || a.wait_event, 'query', left(a.query, 300),
               'blocked', p.blocked, 'depth', p.depth) ORDER BY p.blocked DESC, p.head) AS heads,
           count(*) AS n
    FROM (SELECT * FROM per_head ORDER BY blocked DESC, head LIMIT 5) AS p
    LEFT JOIN pg_stat_activity AS a ON a.pid = p.head
), totals AS (
    SELECT count(*) FILTER (WHERE cardinality(w.blockers) > 0) AS blocked,
           coalesce(max(extract(epoch FROM clock_timestamp() - w.waitstart)) FILTER (WHERE cardinality(w.blockers) > 0), 0) AS max_wait_s
    FROM waiters AS w
)
SELECT '' AS queue, v.metric, v.value, v.note
FROM totals AS t CROSS JOIN detail AS d
CROSS JOIN (SELECT count(*) AS n FROM heads) AS h
CROSS JOIN LATERAL (VALUES
    ('blocked_sessions', t.blocked::float8, 'pg_blocking_pids'),
    ('blocking_max_wait_s', t.max_wait_s::float8, 'pg_locks.waitstart'),
    ('head_blockers', h.n::float8, coalesce(d.heads::text, '[]'))
) AS v (metric, value, note)
