-- terminate (T-SQL): the sessions that are a queue's root cause, and ending one with KILL.
-- Every block returns a session in the same neutral shape as the PostgreSQL file (session_id,
-- login, application, client_addr, process_type, user_process, state, session_start,
-- xact_id, xact_start, xact_age_s, query, log_bytes, log_reserved_bytes) so the guards read
-- both dialects alike. session_start (login_time) and xact_id (the session's open transaction
-- id, new for every transaction) identify this session in this transaction; xact_start is the
-- first log record's time (NULL for a transaction that wrote nothing, e.g. a snapshot reader,
-- whose age comes from elapsed_time_seconds instead). log_bytes is what a KILL
-- has to roll back: the log the session's transactions wrote in this database
-- (sys.dm_tran_database_transactions). Every system-view column read here is documented in
-- docs/reference/mssql-system-views.toml.
-- @block candidates
-- (1) head blockers of requests waiting for a lock on the queue table (wait_resource
-- 'OBJECT: <db>:<object>:...', as the lock_waits collector attributes them; row and page waits
-- name a hobt and are not attributed), followed up the chain to the session blocked by nobody;
-- (2) the session of the oldest transaction that generates or may read row versions
-- (sys.dm_tran_active_snapshot_database_transactions, the oldest_snapshot collector's holder) in
-- THIS database: the view has no database column and lists every database's (issue 33, item 6), so
-- a transaction counts only when it has a database transaction here
-- (sys.dm_tran_database_transactions.database_id = DB_ID()) or its session is in this database. A
-- true SNAPSHOT transaction (is_snapshot = 1) comes before a read-committed-snapshot one (RCSI:
-- every transaction of the database, e.g. a transport's receive transaction, which KILL rolls back).
WITH edges AS (
    SELECT r.session_id AS waiter, r.blocking_session_id AS blocker
    FROM sys.dm_exec_requests AS r
    WHERE r.blocking_session_id > 0
), on_table AS (
    SELECT r.session_id FROM sys.dm_exec_requests AS r
    WHERE r.blocking_session_id > 0 AND r.wait_type LIKE N'LCK[_]M[_]%'
      AND r.wait_resource LIKE CONCAT(N'OBJECT: ', DB_ID(), N':', OBJECT_ID(:qualified_table), N':%')
), chain AS (
    SELECT e.blocker AS head, e.waiter AS origin, 1 AS depth FROM edges AS e JOIN on_table AS t ON t.session_id = e.waiter
    UNION ALL
    SELECT e.blocker, c.origin, c.depth + 1 FROM chain AS c JOIN edges AS e ON e.waiter = c.head WHERE c.depth < 20
), heads AS (
    SELECT c.head AS session_id, COUNT(DISTINCT c.origin) AS blocked FROM chain AS c
    WHERE NOT EXISTS (SELECT 1 FROM edges AS e2 WHERE e2.waiter = c.head)
    GROUP BY c.head
), snap AS (
    SELECT TOP (1) sn.session_id FROM sys.dm_tran_active_snapshot_database_transactions AS sn
    WHERE sn.session_id <> @@SPID
      AND (EXISTS (SELECT 1 FROM sys.dm_tran_database_transactions AS dbt
                   WHERE dbt.transaction_id = sn.transaction_id AND dbt.database_id = DB_ID())
           OR EXISTS (SELECT 1 FROM sys.dm_exec_sessions AS ss
                      WHERE ss.session_id = sn.session_id AND ss.database_id = DB_ID()))
    ORDER BY sn.is_snapshot DESC, sn.elapsed_time_seconds DESC
), causes AS (
    SELECT h.session_id, 'blocker' AS cause, h.blocked FROM heads AS h
    UNION ALL
    SELECT sh.session_id, 'snapshot' AS cause, 0 AS blocked FROM snap AS sh
)
SELECT c.cause, c.blocked, s.session_id, s.login_name AS login, s.program_name AS application,
       s.host_name AS client_addr, CASE WHEN s.is_user_process = 1 THEN 'user' ELSE 'system' END AS process_type,
       s.is_user_process AS user_process, s.status AS state, s.login_time AS session_start, x.xact_id, x.xact_start,
       CAST(COALESCE(sv.snapshot_age_s, DATEDIFF(SECOND, x.xact_start, GETDATE())) AS float) AS xact_age_s, q.wait_type AS wait_event,
       q.sql_text AS query, x.log_bytes, x.log_reserved_bytes
FROM causes AS c
JOIN sys.dm_exec_sessions AS s ON s.session_id = c.session_id
OUTER APPLY (SELECT MIN(st.transaction_id) AS xact_id, MIN(dt.database_transaction_begin_time) AS xact_start,
                    SUM(dt.database_transaction_log_bytes_used) AS log_bytes,
                    SUM(dt.database_transaction_log_bytes_reserved) AS log_reserved_bytes
             FROM sys.dm_tran_session_transactions AS st
             LEFT JOIN sys.dm_tran_database_transactions AS dt
                    ON dt.transaction_id = st.transaction_id AND dt.database_id = DB_ID()
             WHERE st.session_id = s.session_id) AS x
OUTER APPLY (SELECT MAX(v.elapsed_time_seconds) AS snapshot_age_s
             FROM sys.dm_tran_active_snapshot_database_transactions AS v
             WHERE v.session_id = s.session_id) AS sv
OUTER APPLY (SELECT TOP (1) r.wait_type, LEFT(txt.text, 1000) AS sql_text
             FROM sys.dm_exec_requests AS r
             OUTER APPLY sys.dm_exec_sql_text(r.sql_handle) AS txt
             WHERE r.session_id = s.session_id) AS q
ORDER BY CASE WHEN c.cause = 'snapshot' THEN 1 ELSE 0 END, c.blocked DESC, x.xact_id, s.session_id
OPTION (MAXRECURSION 100)
-- @block session
-- One session by id, whatever it is (the guards decide), and whether it is this very session.
SELECT s.session_id, s.login_name AS login, s.program_name AS application, s.host_name AS client_addr,
       CASE WHEN s.is_user_process = 1 THEN 'user' ELSE 'system' END AS process_type,
       s.is_user_process AS user_process, s.status AS state, s.login_time AS session_start, x.xact_id, x.xact_start,
       CAST(COALESCE(sv.snapshot_age_s, DATEDIFF(SECOND, x.xact_start, GETDATE())) AS float) AS xact_age_s, x.log_bytes, x.log_reserved_bytes,
       CASE WHEN s.session_id = @@SPID THEN 1 ELSE 0 END AS is_self
FROM sys.dm_exec_sessions AS s
OUTER APPLY (SELECT MIN(st.transaction_id) AS xact_id, MIN(dt.database_transaction_begin_time) AS xact_start,
                    SUM(dt.database_transaction_log_bytes_used) AS log_bytes,
                    SUM(dt.database_transaction_log_bytes_reserved) AS log_reserved_bytes
             FROM sys.dm_tran_session_transactions AS st
             LEFT JOIN sys.dm_tran_database_transactions AS dt
                    ON dt.transaction_id = st.transaction_id AND dt.database_id = DB_ID()
             WHERE st.session_id = s.session_id) AS x
OUTER APPLY (SELECT MAX(v.elapsed_time_seconds) AS snapshot_age_s
             FROM sys.dm_tran_active_snapshot_database_transactions AS v
             WHERE v.session_id = s.session_id) AS sv
WHERE s.session_id = :session_id
-- @block kill
-- End the session: its open transaction rolls back (for as long as it ran: log_bytes tells), its
-- locks and row versions go. Compare-and-set in one batch, as on PostgreSQL: KILL runs only if
-- the session id still belongs to the session the preview showed (same login_time), is a user
-- session and is not this one; else no row comes back and the action is refused. KILL takes a
-- literal session id, never a variable: {session_n} is the validated integer the preview showed.
-- login_time is datetime (1/300 s ticks); the value read back travels as datetime2 (or text), and
-- datetime = datetime2 compares the datetime's exact fraction (.0033333) from compatibility level
-- 130 on, which never equals the .003 read (issue 33, item 10): the bound value is converted on
-- the server, to datetime2(7) and then datetime (rounded to the same tick), before comparing.
IF EXISTS (SELECT 1 FROM sys.dm_exec_sessions AS s
           WHERE s.session_id = :session_id
             AND s.login_time = CAST(CAST(:session_start AS datetime2(7)) AS datetime)
             AND s.is_user_process = 1 AND s.session_id <> @@SPID)
BEGIN
    KILL {session_n};
    SELECT 1 AS signalled;
END
-- @block rollback_progress
-- A killed session with a long transaction rolls back; its request reports percent_complete
-- meanwhile (what KILL ... WITH STATUSONLY prints as a message).
SELECT r.percent_complete AS percent_complete
FROM sys.dm_exec_requests AS r
WHERE r.session_id = :session_id
-- @block gone
SELECT COUNT(*) AS present, MAX(s.status) AS state
FROM sys.dm_exec_sessions AS s
WHERE s.session_id = :session_id AND s.login_time = CAST(CAST(:session_start AS datetime2(7)) AS datetime)
