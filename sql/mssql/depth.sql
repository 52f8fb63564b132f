-- depth: items ready to dequeue now, per queue kind.
-- Counting is bounded: at most :cap rows are read through the index the dequeue uses, so the
-- count is exact below the cap; at the cap the row count of sys.dm_db_partition_stats (an
-- approximate figure from metadata, no scan) is reported instead and the note says 'estimate'.
-- @block delete
SELECT :queue AS queue, 'depth' AS metric,
       CAST(CASE WHEN s.n < :cap THEN s.n ELSE COALESCE(p.row_count, s.n) END AS float) AS value,
       CASE WHEN s.n < :cap THEN 'exact' ELSE 'estimate' END AS note
FROM (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table}) AS l) AS s
CROSS JOIN (SELECT SUM(row_count) AS row_count FROM sys.dm_db_partition_stats
            WHERE object_id = OBJECT_ID(:qualified_table) AND index_id IN (0, 1)) AS p
-- @block status
SELECT :queue AS queue, 'depth' AS metric,
       CAST(CASE WHEN s.n < :cap THEN s.n ELSE COALESCE(p.row_count, s.n) END AS float) AS value,
       CASE WHEN s.n < :cap THEN 'exact' ELSE 'estimate' END AS note
FROM (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {status} IN (:ready_values)) AS l) AS s
CROSS JOIN (SELECT SUM(row_count) AS row_count FROM sys.dm_db_partition_stats
            WHERE object_id = OBJECT_ID(:qualified_table) AND index_id IN (0, 1)) AS p
-- @block lease
SELECT :queue AS queue, 'depth' AS metric,
       CAST(CASE WHEN s.n < :cap THEN s.n ELSE COALESCE(p.row_count, s.n) END AS float) AS value,
       CASE WHEN s.n < :cap THEN 'exact' ELSE 'estimate' END AS note
FROM (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {lease} IS NULL) AS l) AS s
CROSS JOIN (SELECT SUM(row_count) AS row_count FROM sys.dm_db_partition_stats
            WHERE object_id = OBJECT_ID(:qualified_table) AND index_id IN (0, 1)) AS p
-- @block due
SELECT :queue AS queue, 'depth' AS metric,
       CAST(CASE WHEN s.n < :cap THEN s.n ELSE COALESCE(p.row_count, s.n) END AS float) AS value,
       CASE WHEN s.n < :cap THEN 'exact' ELSE 'estimate' END AS note
FROM (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {due} <= SYSUTCDATETIME()) AS l) AS s
CROSS JOIN (SELECT SUM(row_count) AS row_count FROM sys.dm_db_partition_stats
            WHERE object_id = OBJECT_ID(:qualified_table) AND index_id IN (0, 1)) AS p
-- @block ring
SELECT :queue AS queue, 'depth' AS metric, CAST(s.{push} - s.{pop} AS float) AS value, 'exact' AS note
FROM {seq_table} AS s
