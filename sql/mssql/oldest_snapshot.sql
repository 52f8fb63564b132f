-- oldest_snapshot (target): the root cause of version ghosts that cleanup cannot remove: the
-- oldest transaction that generates or may read row versions
-- (sys.dm_tran_active_snapshot_database_transactions, docs/reference/mssql-system-views.toml).
--   oldest_snapshot_age_s  its elapsed_time_seconds (0: none open); note: JSON with session_id,
--                          is_snapshot, max_version_chain_traversed, and what the session runs
--                          now (sys.dm_exec_requests + sys.dm_exec_sql_text; empty when idle)
--   snapshot_transactions  how many such transactions are open
--   version_store_kb       counter 'Version Store Size (KB)' (SQLServer:Transactions; a level): tempdb's
--                          version store, the instance's
--   persistent_version_store_kb  (block main_pvs, on SQL Server 2019+, Azure SQL Database and Managed
--                          Instance: collectors/runner.py picks it by the version the session read)
--                          the off-row persistent version store of accelerated database recovery
--                          of THIS database (sys.dm_tran_persistent_version_store_stats), where
--                          row versions live instead of tempdb when ADR is on (always on in Azure
--                          SQL Database). The view does not exist before 2019: the block main
--                          never names it. The snapshot transactions read here are the instance's
--                          (tempdb's version store is shared); terminate's candidate is this
--                          database's only (sql/mssql/actions/terminate.sql).
-- @block main
SELECT '' AS queue, v.metric, v.value, v.note
FROM (SELECT COUNT(*) AS n FROM sys.dm_tran_active_snapshot_database_transactions AS t) AS c
LEFT JOIN (SELECT TOP (1) t.session_id, t.elapsed_time_seconds, t.is_snapshot, t.max_version_chain_traversed
           FROM sys.dm_tran_active_snapshot_database_transactions AS t
           ORDER BY t.elapsed_time_seconds DESC) AS o ON 1 = 1
OUTER APPLY (SELECT TOP (1) r.wait_type, r.wait_time, LEFT(st.text, 300) AS sql_text
             FROM sys.dm_exec_requests AS r
             OUTER APPLY sys.dm_exec_sql_text(r.sql_handle) AS st
             WHERE r.session_id = o.session_id) AS q
OUTER APPLY (SELECT TOP (1) CAST(pc.cntr_value AS float) AS kb
             FROM sys.dm_os_performance_counters AS pc
             WHERE pc.object_name LIKE N'%:Transactions%' AND RTRIM(pc.counter_name) = N'Version Store Size (KB)') AS vs
CROSS APPLY (SELECT (SELECT o.session_id AS session_id, o.elapsed_time_seconds AS elapsed_time_seconds,
                            o.is_snapshot AS is_snapshot, o.max_version_chain_traversed AS max_version_chain_traversed,
                            CASE WHEN q.sql_text IS NULL THEN 'idle (no running request)' ELSE 'running' END AS state,
                            q.wait_type AS wait_type, q.sql_text AS query
                     FOR JSON PATH, WITHOUT_ARRAY_WRAPPER) AS detail) AS j
CROSS APPLY (VALUES
    ('oldest_snapshot_age_s', CAST(COALESCE(o.elapsed_time_seconds, 0) AS float),
     CASE WHEN o.session_id IS NULL THEN N'{}' ELSE j.detail END),
    ('snapshot_transactions', CAST(c.n AS float), N'sys.dm_tran_active_snapshot_database_transactions'),
    ('version_store_kb', vs.kb, N'counter Version Store Size (KB)')
) AS v (metric, value, note)
-- @block main_pvs
SELECT '' AS queue, v.metric, v.value, v.note
FROM (SELECT COUNT(*) AS n FROM sys.dm_tran_active_snapshot_database_transactions AS t) AS c
LEFT JOIN (SELECT TOP (1) t.session_id, t.elapsed_time_seconds, t.is_snapshot, t.max_version_chain_traversed
           FROM sys.dm_tran_active_snapshot_database_transactions AS t
           ORDER BY t.elapsed_time_seconds DESC) AS o ON 1 = 1
OUTER APPLY (SELECT TOP (1) r.wait_type, r.wait_time, LEFT(st.text, 300) AS sql_text
             FROM sys.dm_exec_requests AS r
             OUTER APPLY sys.dm_exec_sql_text(r.sql_handle) AS st
             WHERE r.session_id = o.session_id) AS q
OUTER APPLY (SELECT TOP (1) CAST(pc.cntr_value AS float) AS kb
             FROM sys.dm_os_performance_counters AS pc
             WHERE pc.object_name LIKE N'%:Transactions%' AND RTRIM(pc.counter_name) = N'Version Store Size (KB)') AS vs
OUTER APPLY (SELECT CAST(SUM(pvs.persistent_version_store_size_kb) AS float) AS kb
             FROM sys.dm_tran_persistent_version_store_stats AS pvs WHERE pvs.database_id = DB_ID()) AS pv
CROSS APPLY (SELECT (SELECT o.session_id AS session_id, o.elapsed_time_seconds AS elapsed_time_seconds,
                            o.is_snapshot AS is_snapshot, o.max_version_chain_traversed AS max_version_chain_traversed,
                            CASE WHEN q.sql_text IS NULL THEN 'idle (no running request)' ELSE 'running' END AS state,
                            q.wait_type AS wait_type, q.sql_text AS query
                     FOR JSON PATH, WITHOUT_ARRAY_WRAPPER) AS detail) AS j
CROSS APPLY (VALUES
    ('oldest_snapshot_age_s', CAST(COALESCE(o.elapsed_time_seconds, 0) AS float),
     CASE WHEN o.session_id IS NULL THEN N'{}' ELSE j.detail END),
    ('snapshot_transactions', CAST(c.n AS float), N'sys.dm_tran_active_snapshot_database_transactions'),
    ('version_store_kb', vs.kb, N'counter Version Store Size (KB)'),
    ('persistent_version_store_kb', pv.kb,
     CASE WHEN pv.kb IS NULL THEN N'sys.dm_tran_persistent_version_store_stats: no row for this database'
          ELSE N'sys.dm_tran_persistent_version_store_stats: this database (accelerated database recovery)' END)
) AS v (metric, value, note)
