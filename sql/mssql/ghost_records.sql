-- ghost_records (slow): ghost and version-ghost records of the queue table's indexes, from
-- sys.dm_db_index_physical_stats at the leaf level (IN_ROW_DATA), summed over every index.
-- The ghost columns are NULL in LIMITED mode (docs/reference/mssql-system-views.toml), so the mode is SAMPLED or
-- DETAILED, chosen by the table's size (sys.dm_db_partition_stats.used_page_count, metadata,
-- no scan): below 10,000 pages SAMPLED reads every page anyway, so DETAILED is asked for (same
-- cost, exact counts); above, SAMPLED reads 1 % of the pages (counts are estimates). The size is
-- every allocation unit's (used_page_count), not the in-row pages only: the function reads the
-- LOB and row-overflow units too (a varbinary(max) body store can dwarf the in-row pages), while
-- only the IN_ROW_DATA rows it returns are summed.
-- note names the mode. Both modes take only an IS table lock.
--   ghost_records          ghost_record_count: deleted rows waiting for the cleanup task
--   version_ghost_records  version_ghost_record_count: kept for an open snapshot transaction
--                          (the oldest_snapshot collector names it)
-- OBJECT_ID() of an unknown table is NULL, which would mean "every object" to the DMF: the
-- derived table o yields no row then, so the DMF is never called with NULL.
-- @block any
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT o.mode, SUM(ps.ghost_record_count) AS ghosts, SUM(ps.version_ghost_record_count) AS version_ghosts,
             SUM(ps.record_count) AS records
      FROM (SELECT x.oid, CASE WHEN x.pages < 10000 THEN 'DETAILED' ELSE 'SAMPLED' END AS mode
            FROM (SELECT OBJECT_ID(:qualified_table) AS oid,
                         (SELECT SUM(p.used_page_count) FROM sys.dm_db_partition_stats AS p
                          WHERE p.object_id = OBJECT_ID(:qualified_table)) AS pages) AS x
            WHERE x.oid IS NOT NULL) AS o
      CROSS APPLY sys.dm_db_index_physical_stats(DB_ID(), o.oid, NULL, NULL, o.mode) AS ps
      WHERE ps.alloc_unit_type_desc = N'IN_ROW_DATA' AND ps.index_level = 0
      GROUP BY o.mode) AS s
CROSS APPLY (VALUES
    ('ghost_records', CAST(s.ghosts AS float), s.mode),
    ('version_ghost_records', CAST(s.version_ghosts AS float), s.mode),
    ('dead_tuple_pct', CAST(100.0 * s.ghosts / NULLIF(s.ghosts + s.records, 0) AS float),
     CONCAT(s.mode, ': ghosts / (ghosts + records)'))
) AS v (metric, value, note)
