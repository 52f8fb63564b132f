-- lock_timeouts (target): the server's cumulative counters from sys.dm_os_performance_counters,
-- stored RAW (cntr_value is a running total for the /sec counters; docs/reference/mssql-system-views.toml) with
-- cntr_type, object and counter name in note as JSON. collectors/counters.py turns each
-- *_total into *_per_s by delta, branching on cntr_type, and treats a drop or a changed
-- sqlserver_start_time (also stored here) as a restart, never as a negative rate.
-- Names are matched as the reference says: object_name by suffix (LIKE '%:Locks%' covers
-- 'SQLServer:' and a named instance's 'MSSQL$NAME:' prefix), and every nchar column RTRIMmed.
--   lock_timeouts_total            Lock Timeouts/sec (includes NOWAIT requests)
--   lock_timeouts_gt0_total        Lock Timeouts (timeout > 0)/sec (SET LOCK_TIMEOUT n > 0)
--   lock_waits_total               Lock Waits/sec
--   deadlocks_total                Number of Deadlocks/sec
--   page_splits_total              Page Splits/sec (Access Methods)
--   skipped_ghosted_records_total  Skipped Ghosted Records/sec (Access Methods)
-- @block main
SELECT '' AS queue,
       CASE RTRIM(pc.counter_name)
            WHEN N'Lock Timeouts/sec' THEN 'lock_timeouts_total'
            WHEN N'Lock Timeouts (timeout > 0)/sec' THEN 'lock_timeouts_gt0_total'
            WHEN N'Lock Waits/sec' THEN 'lock_waits_total'
            WHEN N'Number of Deadlocks/sec' THEN 'deadlocks_total'
            WHEN N'Page Splits/sec' THEN 'page_splits_total'
            ELSE 'skipped_ghosted_records_total' END AS metric,
       CAST(pc.cntr_value AS float) AS value,
       CONCAT(N'{"cntr_type": ', pc.cntr_type, N', "object": "', STRING_ESCAPE(RTRIM(pc.object_name), 'json'),
              N'", "counter": "', STRING_ESCAPE(RTRIM(pc.counter_name), 'json'), N'"}') AS note
FROM sys.dm_os_performance_counters AS pc
WHERE (pc.object_name LIKE N'%:Locks%' AND RTRIM(pc.instance_name) = N'_Total'
       AND RTRIM(pc.counter_name) IN (N'Lock Timeouts/sec', N'Lock Timeouts (timeout > 0)/sec', N'Lock Waits/sec',
                                     N'Number of Deadlocks/sec'))
   OR (pc.object_name LIKE N'%:Access Methods%'
       AND RTRIM(pc.counter_name) IN (N'Page Splits/sec', N'Skipped Ghosted Records/sec'))
UNION ALL
SELECT '' AS queue, 'sqlserver_start_time' AS metric,
       CAST(DATEDIFF_BIG(SECOND, '19700101', si.sqlserver_start_time) AS float) AS value,
       N'seconds since 1970 of sys.dm_os_sys_info.sqlserver_start_time (server local time): a change marks a restart' AS note
FROM sys.dm_os_sys_info AS si
