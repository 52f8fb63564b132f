-- fragmentation_pct (slow): logical fragmentation, page count and page density of the queue
-- table's clustered index (or heap), from sys.dm_db_index_physical_stats at the leaf level, and
-- the worst fragmentation among its other indexes.
-- The mode is the cheapest that answers, by size (sys.dm_db_partition_stats.used_page_count:
-- every allocation unit, since the function also reads LOB and row-overflow pages, e.g. the
-- varbinary(max) bodies of a transport table; metadata, no scan; docs/reference/mssql-system-views.toml).
-- Only its IN_ROW_DATA rows are reported:
--   < 10,000 pages      DETAILED (SAMPLED reads every page below 10,000 anyway; density exact)
--   < 1,000,000 pages   SAMPLED  (reads 1 % of the pages; density is an estimate)
--   larger              LIMITED  (reads only the pages above the leaf; page_density_pct NULL)
-- The SAMPLED / DETAILED read is asked for the clustered index or heap only (its index_id, 0 or 1,
-- from sys.indexes; issue 33, item 11: index_id NULL read every nonclustered index in that mode too,
-- to keep one row); the other indexes are read in LIMITED mode only.
-- note names the mode (fragmentation_pct also the index_id). Fragmentation is NULL for a heap
-- in SAMPLED mode (reference). Every mode takes only an IS table lock.
--   fragmentation_pct            avg_fragmentation_in_percent, clustered index / heap (index_id 0 or 1)
--   page_count                   its leaf pages
--   page_density_pct             avg_page_space_used_in_percent
--   index_fragmentation_max_pct  the most fragmented other index (note: its index_id, pages)
-- @block any
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT x.oid, CASE WHEN x.pages < 10000 THEN 'DETAILED' WHEN x.pages < 1000000 THEN 'SAMPLED'
                         ELSE 'LIMITED' END AS mode,
             (SELECT MIN(ix.index_id) FROM sys.indexes AS ix WHERE ix.object_id = x.oid AND ix.index_id IN (0, 1)) AS base_id
      FROM (SELECT OBJECT_ID(:qualified_table) AS oid,
                   (SELECT SUM(p.used_page_count) FROM sys.dm_db_partition_stats AS p
                    WHERE p.object_id = OBJECT_ID(:qualified_table)) AS pages) AS x
      WHERE x.oid IS NOT NULL) AS o
OUTER APPLY (SELECT TOP (1) ps.index_id, ps.avg_fragmentation_in_percent AS frag, ps.page_count,
                    ps.avg_page_space_used_in_percent AS density
             FROM sys.dm_db_index_physical_stats(DB_ID(), o.oid, o.base_id, NULL, o.mode) AS ps
             WHERE ps.alloc_unit_type_desc = N'IN_ROW_DATA' AND ps.index_level = 0 AND ps.index_id IN (0, 1)
             ORDER BY ps.page_count DESC) AS c
OUTER APPLY (SELECT TOP (1) ps.index_id, ps.avg_fragmentation_in_percent AS frag, ps.page_count
             FROM sys.dm_db_index_physical_stats(DB_ID(), o.oid, NULL, NULL, 'LIMITED') AS ps
             WHERE ps.alloc_unit_type_desc = N'IN_ROW_DATA' AND ps.index_level = 0 AND ps.index_id > 1
             ORDER BY ps.avg_fragmentation_in_percent DESC) AS i
CROSS APPLY (VALUES
    -- A heap (index_id 0) has no logical order to fragment that act rebuild could restore (it rebuilds
    -- indexes, never a heap): no value, so no rebuild advice for a heap (NServiceBus's queue tables).
    ('fragmentation_pct', CAST(CASE WHEN c.index_id = 0 THEN NULL ELSE c.frag END AS float),
     CASE WHEN c.index_id = 0 THEN N'heap: not judged (act rebuild rebuilds indexes, not a heap: ALTER TABLE ... REBUILD by hand)'
          ELSE CONCAT(o.mode, N' index_id ', c.index_id) END),
    ('page_count', CAST(c.page_count AS float), o.mode),
    ('page_density_pct', CAST(c.density AS float),
     CASE WHEN o.mode = 'LIMITED' THEN N'LIMITED: page density not measured above 1,000,000 pages' ELSE o.mode END),
    ('index_fragmentation_max_pct', CAST(i.frag AS float),
     CASE WHEN i.index_id IS NULL THEN N'no other index'
          ELSE CONCAT(N'LIMITED index_id ', i.index_id, N' pages ', i.page_count) END)
) AS v (metric, value, note)
