-- depth: items ready to dequeue now, per queue kind; also rows_total and per-status counts.
-- Counting is bounded: every count reads at most :cap rows (TOP stops the seek or scan), so a
-- count is exact below the cap. Above it, rows_total is the row count of
-- sys.dm_db_partition_stats (approximate, from metadata, no scan; note 'estimate'), and the
-- filtered counts say 'at least (cap reached)': the documented DMVs give no per-value estimate.
-- Collectors run under READ UNCOMMITTED (queueops.engine): no shared locks, never blocking a
-- dequeuer; a figure may be off by the rows in flight, which is fine for monitoring.
-- @block delete
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table}{open_where}) AS l) AS s
CROSS JOIN (SELECT SUM(ps.row_count) AS row_count FROM sys.dm_db_partition_stats AS ps
            WHERE ps.object_id = OBJECT_ID(:qualified_table) AND ps.index_id IN (0, 1)) AS p
CROSS APPLY (VALUES
    ('depth', CAST(CASE WHEN s.n < :cap THEN s.n ELSE COALESCE(p.row_count, s.n) END AS float),
     CASE WHEN s.n < :cap THEN 'exact' ELSE 'estimate (sys.dm_db_partition_stats)' END),
    ('rows_total', CAST(CASE WHEN s.n < :cap THEN s.n ELSE COALESCE(p.row_count, s.n) END AS float),
     CASE WHEN s.n < :cap THEN 'exact' ELSE 'estimate (sys.dm_db_partition_stats)' END)
) AS v (metric, value, note)
-- @block status
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {status} IN (:ready_values){open_and}) AS l) AS ready,
             (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {status} IN (:processing_values){open_and}) AS l) AS processing,
             (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {status} IN (:done_values){open_and}) AS l) AS done,
             (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table}{open_where}) AS l) AS total) AS n
CROSS JOIN (SELECT SUM(ps.row_count) AS row_count FROM sys.dm_db_partition_stats AS ps
            WHERE ps.object_id = OBJECT_ID(:qualified_table) AND ps.index_id IN (0, 1)) AS p
CROSS APPLY (VALUES
    ('depth', CAST(n.ready AS float), CASE WHEN n.ready < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_processing', CAST(n.processing AS float),
     CASE WHEN n.processing < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_done', CAST(n.done AS float), CASE WHEN n.done < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_other', CAST(CASE WHEN n.total < :cap AND n.ready < :cap AND n.processing < :cap AND n.done < :cap
                              THEN n.total - n.ready - n.processing - n.done END AS float),
     CASE WHEN n.total < :cap THEN 'exact (statuses not in ready, processing or done values)'
          ELSE 'unknown above the cap' END),
    ('rows_total', CAST(CASE WHEN n.total < :cap THEN n.total ELSE COALESCE(p.row_count, n.total) END AS float),
     CASE WHEN n.total < :cap THEN 'exact' ELSE 'estimate (sys.dm_db_partition_stats)' END)
) AS v (metric, value, note)
-- @block lease
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {lease} IS NULL{open_and}) AS l) AS ready,
             (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table}{open_where}) AS l) AS total) AS n
CROSS JOIN (SELECT SUM(ps.row_count) AS row_count FROM sys.dm_db_partition_stats AS ps
            WHERE ps.object_id = OBJECT_ID(:qualified_table) AND ps.index_id IN (0, 1)) AS p
CROSS APPLY (VALUES
    ('depth', CAST(n.ready AS float), CASE WHEN n.ready < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_leased', CAST(CASE WHEN n.total < :cap THEN n.total - n.ready END AS float),
     CASE WHEN n.total < :cap THEN 'exact' ELSE 'unknown above the cap' END),
    ('rows_total', CAST(CASE WHEN n.total < :cap THEN n.total ELSE COALESCE(p.row_count, n.total) END AS float),
     CASE WHEN n.total < :cap THEN 'exact' ELSE 'estimate (sys.dm_db_partition_stats)' END)
) AS v (metric, value, note)
-- @block due
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {due} <= SYSUTCDATETIME(){open_and}) AS l) AS ready,
             (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table}{open_where}) AS l) AS total) AS n
CROSS JOIN (SELECT SUM(ps.row_count) AS row_count FROM sys.dm_db_partition_stats AS ps
            WHERE ps.object_id = OBJECT_ID(:qualified_table) AND ps.index_id IN (0, 1)) AS p
CROSS APPLY (VALUES
    ('depth', CAST(n.ready AS float), CASE WHEN n.ready < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_not_due', CAST(CASE WHEN n.total < :cap THEN n.total - n.ready END AS float),
     CASE WHEN n.total < :cap THEN 'exact' ELSE 'unknown above the cap' END),
    ('rows_total', CAST(CASE WHEN n.total < :cap THEN n.total ELSE COALESCE(p.row_count, n.total) END AS float),
     CASE WHEN n.total < :cap THEN 'exact' ELSE 'estimate (sys.dm_db_partition_stats)' END)
) AS v (metric, value, note)
-- @block ring
SELECT :queue AS queue, v.metric, v.value, 'exact' AS note
FROM {seq_table} AS s
CROSS APPLY (VALUES ('depth', CAST(CASE WHEN s.{push} > s.{pop} THEN s.{push} - s.{pop} ELSE 0 END AS float)),
                    ('rows_total', CAST(CASE WHEN s.{push} > s.{pop} THEN s.{push} - s.{pop} ELSE 0 END AS float))
            ) AS v (metric, value)
