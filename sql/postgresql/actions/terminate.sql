-- terminate: the sessions that are a queue's root cause, and ending one of them.
-- Every block returns a session in the same neutral shape (session_id, login, application,
-- client_addr, process_type, user_process, state, session_start, xact_start, xact_age_s,
-- state_change, wait_event, query, xid_age) so the guards (queueops.actions.decide) read both
-- dialects alike. session_start (backend_start) and xact_start identify *this* session in
-- *this* transaction: a pid reused by a new backend, or a new transaction, is not what the
-- preview showed. Reads pg_stat_activity, pg_locks and pg_blocking_pids only.
-- @block candidates
-- Root causes of the queue table now: (1) head blockers of sessions waiting for a lock that
-- involves the table (pg_blocking_pids, followed to the session that waits for nobody), and
-- sessions holding a table lock that blocks every change (SHARE and stronger: the collector's
-- lock_blockers); (2) the backend of this database holding the oldest xmin / xid (the
-- oldest_snapshot collector's holder), which pins the dead tuples of every table. This
-- session is left out. Blockers first (most sessions blocked first), then the snapshot holder.
-- The table's relations: itself, and for a partitioned table every relation under it (a lock on
-- one partition stalls the dequeues through the parent; lock_waits.sql matches the same), read by
-- fragments/tree.sql: pg_partition_tree would lock every partition and wait behind the holder it is for.
WITH RECURSIVE rel AS (
    SELECT {{tree.relations(to_regclass(:qualified_table))}} AS relids
), waiting AS (
    SELECT a.pid, pg_blocking_pids(a.pid) AS blockers
    FROM pg_stat_activity AS a
    WHERE a.wait_event_type = 'Lock' AND a.pid <> pg_backend_pid() AND a.datname = current_database()
), edges AS (
    SELECT w.pid AS waiter, b.pid AS blocker FROM waiting AS w CROSS JOIN LATERAL unnest(w.blockers) AS b (pid)
), on_table AS (
    SELECT w.pid FROM waiting AS w CROSS JOIN rel
    WHERE EXISTS (SELECT 1 FROM pg_locks AS l WHERE l.pid = w.pid AND l.relation = ANY (rel.relids))
), chain AS (
    SELECT e.blocker AS pid, e.waiter AS origin, 1 AS depth FROM edges AS e JOIN on_table AS t ON t.pid = e.waiter
    UNION
    SELECT e.blocker, c.origin, c.depth + 1 FROM chain AS c JOIN edges AS e ON e.waiter = c.pid WHERE c.depth < 20
), heads AS (
    SELECT c.pid, count(DISTINCT c.origin) AS blocked FROM chain AS c
    WHERE NOT EXISTS (SELECT 1 FROM edges AS e WHERE e.waiter = c.pid)
    GROUP BY c.pid
), holders AS (
    SELECT DISTINCT l.pid FROM pg_locks AS l CROSS JOIN rel
    WHERE l.relation = ANY (rel.relids) AND l.granted AND l.pid <> pg_backend_pid()
      AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
), blockers AS (
    SELECT coalesce(h.pid, o.pid) AS pid, coalesce(h.blocked, 0) AS blocked
    FROM heads AS h FULL JOIN holders AS o ON o.pid = h.pid
), snap AS (
    SELECT a.pid FROM pg_stat_activity AS a
    WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL) AND a.pid <> pg_backend_pid()
      AND (a.datname = current_database() OR a.datname IS NULL)
    ORDER BY greatest(age(a.backend_xmin), age(a.backend_xid)) DESC NULLS LAST, a.xact_start NULLS LAST
    LIMIT 1
), causes AS (
    SELECT b.pid, 'blocker' AS cause, b.blocked FROM blockers AS b
    UNION ALL
    SELECT s.pid, 'snapshot', 0 FROM snap AS s
)
SELECT c.cause, c.blocked::int AS blocked, a.pid AS session_id, a.usename::text AS login,
       a.application_name AS application, a.client_addr::text AS client_addr, a.backend_type AS process_type,
       a.backend_type = 'client backend' AS user_process, a.state, a.backend_start AS session_start, a.xact_start,
       extract(epoch FROM now() - a.xact_start)::float8 AS xact_age_s, a.state_change,
       a.wait_event_type || ':' || a.wait_event AS wait_event, left(a.query, 1000) AS query,
       greatest(age(a.backend_xmin), age(a.backend_xid)) AS xid_age
FROM causes AS c JOIN pg_stat_activity AS a ON a.pid = c.pid
ORDER BY c.cause = 'snapshot', c.blocked DESC, a.xact_start NULLS LAST, a.pid
-- @block session
-- One session by id, whatever it is (the guards decide), and whether it is this very session.
SELECT a.pid AS session_id, a.usename::text AS login, a.application_name AS application,
       a.client_addr::text AS client_addr, a.backend_type AS process_type,
       a.backend_type = 'client backend' AS user_process, a.state, a.backend_start AS session_start, a.xact_start,
       extract(epoch FROM now() - a.xact_start)::float8 AS xact_age_s, a.state_change,
       a.wait_event_type || ':' || a.wait_event AS wait_event, left(a.query, 1000) AS query,
       greatest(age(a.backend_xmin), age(a.backend_xid)) AS xid_age, a.pid = pg_backend_pid() AS is_self
FROM pg_stat_activity AS a
WHERE a.pid = :session_id
-- @block terminate
-- End the session: its open transaction rolls back, its locks and its snapshot go. Compare-and-set:
-- only the backend the preview showed (same pid, same backend start, same transaction start), only
-- a client backend, never this session. Returns no row when any of that changed.
SELECT pg_terminate_backend(a.pid) AS signalled
FROM pg_stat_activity AS a
WHERE a.pid = :session_id AND a.backend_start = :session_start
  AND a.xact_start IS NOT DISTINCT FROM :xact_start
  AND a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()
-- @block cancel
-- Cancel the statement the session runs now (it stays connected; an open transaction is aborted
-- only if the statement ran in it). Same compare-and-set as terminate.
SELECT pg_cancel_backend(a.pid) AS signalled
FROM pg_stat_activity AS a
WHERE a.pid = :session_id AND a.backend_start = :session_start
  AND a.xact_start IS NOT DISTINCT FROM :xact_start
  AND a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()
-- @block gone
-- Whether the ended session is still there (the signal is asynchronous), or, after a cancel,
-- what it does now.
SELECT count(*)::int AS present, max(a.state) AS state, max(a.xact_start) AS xact_start
FROM pg_stat_activity AS a
WHERE a.pid = :session_id AND a.backend_start = :session_start
