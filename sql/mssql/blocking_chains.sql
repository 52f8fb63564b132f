-- blocking_chains (target): who waits behind whom, from sys.dm_exec_requests.blocking_session_id
-- (docs/reference/mssql-system-views.toml; values <= 0 are "not blocked / unknown / orphaned" and ignored).
--   blocked_sessions     requests blocked by another session
--   blocking_max_wait_s  the longest of those waits (wait_time)
--   head_blockers        sessions that block others and are not blocked themselves; note: JSON
--                        list of up to 5, most blocked first: session_id, how many sessions wait
--                        behind it (whole chain), chain depth, and either what it runs or
--                        'idle' -- an idle head blocker (open transaction, no request) has no row
--                        in sys.dm_exec_requests (it would appear only in sys.dm_exec_sessions,
--                        whose columns the reference does not document).
-- @block main
WITH edges AS (
    SELECT r.session_id AS waiter, r.blocking_session_id AS blocker, r.wait_time
    FROM sys.dm_exec_requests AS r
    WHERE r.blocking_session_id > 0
), heads AS (
    SELECT DISTINCT e.blocker AS head FROM edges AS e
    WHERE NOT EXISTS (SELECT 1 FROM edges AS e2 WHERE e2.waiter = e.blocker)
), chain AS (
    SELECT h.head, e.waiter, 1 AS depth FROM heads AS h JOIN edges AS e ON e.blocker = h.head
    UNION ALL
    SELECT c.head, e.waiter, c.depth + 1 FROM chain AS c JOIN edges AS e ON e.blocker = c.waiter WHERE c.depth < 20
), per_head AS (
    SELECT c.head, COUNT(DISTINCT c.waiter) AS blocked, MAX(c.depth) AS depth FROM chain AS c GROUP BY c.head
)
SELECT '' AS queue, v.metric, v.value, v.note
FROM (SELECT COUNT(*) AS n, MAX(e.wait_time) AS max_wait_ms FROM edges AS e) AS b
CROSS JOIN (SELECT COUNT(*) AS n FROM heads) AS h
CROSS APPLY (SELECT (SELECT TOP (5) p.head AS session_id, p.blocked AS blocked, p.depth AS depth,
                            CASE WHEN q.sql_text IS NULL THEN 'idle (no running request)' ELSE 'running' END AS state,
                            q.wait_type AS wait_type, q.sql_text AS query
                     FROM per_head AS p
                     OUTER APPLY (SELECT TOP (1) r.wait_type, LEFT(st.text, 300) AS sql_text
                                  FROM sys.dm_exec_requests AS r
                                  OUTER APPLY sys.dm_exec_sql_text(r.sql_handle) AS st
                                  WHERE r.session_id = p.head) AS q
                     ORDER BY p.blocked DESC, p.head
                     FOR JSON PATH) AS heads) AS j
CROSS APPLY (VALUES
    ('blocked_sessions', CAST(b.n AS float), N'sys.dm_exec_requests.blocking_session_id'),
    ('blocking_max_wait_s', CAST(COALESCE(b.max_wait_ms, 0) / 1000.0 AS float), N'sys.dm_exec_requests.wait_time'),
    ('head_blockers', CAST(h.n AS float), COALESCE(j.heads, N'[]'))
) AS v (metric, value, note)
OPTION (MAXRECURSION 100)
