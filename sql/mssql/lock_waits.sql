-- lock_waits: lock and latch waits on the queue table.
-- Now (from sys.dm_exec_requests): lock_waiters = requests waiting for a lock (wait_type LCK_M_*)
-- whose wait_resource is the table itself ('OBJECT: <db>:<object>:...'), lock_wait_max_s the
-- longest such wait. Row and page lock waits name a hobt, not the table, in wait_resource and
-- are not attributed here: they show in the cumulative figures below.
-- Cumulative, summed over the table's indexes and partitions (sys.dm_db_index_operational_stats,
-- docs/reference/mssql-system-views.toml), stored raw as *_total; collectors/counters.py turns them into rates and
-- treats a drop as a reset (the figures live only while the index metadata stays cached):
--   row_lock_waits_total, row_lock_wait_ms_total, page_lock_waits_total, page_latch_waits_total,
--   page_latch_wait_ms_total (hot last page: PAGELATCH_EX), lock_escalations_total,
--   page_splits_total (leaf_allocation_count); and leaf_ghosts_total (leaf_ghost_count: cumulative
--   like every column of the function, since the index's metadata entry was cached; issue 33, item 11).
-- OBJECT_ID() of an unknown table is NULL, which would mean "every object" to the DMF: the
-- derived table o yields no row then, so the DMF is never called with NULL.
-- @block any
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT SUM(os.row_lock_wait_count) AS row_waits, SUM(os.row_lock_wait_in_ms) AS row_wait_ms,
             SUM(os.page_lock_wait_count) AS page_waits, SUM(os.page_latch_wait_count) AS latch_waits,
             SUM(os.page_latch_wait_in_ms) AS latch_wait_ms, SUM(os.index_lock_promotion_count) AS escalations,
             SUM(os.leaf_allocation_count) AS splits, SUM(os.leaf_ghost_count) AS ghosts
      FROM (SELECT x.oid FROM (SELECT OBJECT_ID(:qualified_table) AS oid) AS x WHERE x.oid IS NOT NULL) AS o
      CROSS APPLY sys.dm_db_index_operational_stats(DB_ID(), o.oid, NULL, NULL) AS os) AS s
CROSS JOIN (SELECT COUNT(*) AS n, MAX(r.wait_time) AS max_wait_ms
            FROM sys.dm_exec_requests AS r
            WHERE r.wait_type LIKE N'LCK[_]M[_]%'
              AND r.wait_resource LIKE CONCAT(N'OBJECT: ', DB_ID(), N':', OBJECT_ID(:qualified_table), N':%')) AS w
CROSS APPLY (VALUES
    ('lock_waiters', CAST(w.n AS float), 'requests waiting for a lock on the table object now'),
    ('lock_wait_max_s', CAST(COALESCE(w.max_wait_ms, 0) / 1000.0 AS float), 'sys.dm_exec_requests.wait_time'),
    ('row_lock_waits_total', CAST(s.row_waits AS float), 'sys.dm_db_index_operational_stats (cumulative)'),
    ('row_lock_wait_ms_total', CAST(s.row_wait_ms AS float), 'sys.dm_db_index_operational_stats (cumulative)'),
    ('page_lock_waits_total', CAST(s.page_waits AS float), 'sys.dm_db_index_operational_stats (cumulative)'),
    ('page_latch_waits_total', CAST(s.latch_waits AS float), 'sys.dm_db_index_operational_stats (cumulative)'),
    ('page_latch_wait_ms_total', CAST(s.latch_wait_ms AS float), 'sys.dm_db_index_operational_stats (cumulative)'),
    ('lock_escalations_total', CAST(s.escalations AS float), 'sys.dm_db_index_operational_stats (cumulative)'),
    ('page_splits_total', CAST(s.splits AS float), 'leaf_allocation_count (cumulative)'),
    ('leaf_ghosts_total', CAST(s.ghosts AS float), 'sys.dm_db_index_operational_stats leaf_ghost_count (cumulative; excludes version ghosts)')
) AS v (metric, value, note)
