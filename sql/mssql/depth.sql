-- depth: items ready to dequeue now, per queue kind; also rows_total and per-status counts.
-- Counting is bounded: every count reads at most :cap rows (TOP stops the seek or scan), so a
-- count is exact below the cap. Above it, rows_total is the row count of
-- sys.dm_db_partition_stats (approximate, from metadata, no scan; note 'estimate'), and the
-- filtered counts say 'at least (cap reached)': the documented DMVs give no per-value estimate.
-- Collectors run under READ UNCOMMITTED (queueops.engine): no shared row locks (Sch-S only, for
-- the statement's run); a figure may be off by the rows in flight, which is fine for monitoring.
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
-- @block lease_error
-- A lease queue with an error column (the seeds' SimpleQueue: a failure writes Errors and keeps the
-- row, leased): a failed row is not a running lease (issue 33, item 11: it was counted leased). Ready
-- is what the library takes (lease IS NULL, read through its index as before); count_failed, the
-- leased rows whose error is set, is read within the same bounded read as the total (at most :cap
-- rows, no index on the error column needed): exact below the cap, unknown above it; count_leased
-- excludes it.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {lease} IS NULL{open_and}) AS l) AS ready,
             t.total, t.failed
      FROM (SELECT COUNT(*) AS total, SUM(l.failed) AS failed
            FROM (SELECT TOP (:cap) CASE WHEN {error} IS NOT NULL AND {lease} IS NOT NULL THEN 1 ELSE 0 END AS failed
                  FROM {table}{open_where}) AS l) AS t) AS n
CROSS JOIN (SELECT SUM(ps.row_count) AS row_count FROM sys.dm_db_partition_stats AS ps
            WHERE ps.object_id = OBJECT_ID(:qualified_table) AND ps.index_id IN (0, 1)) AS p
CROSS APPLY (VALUES
    ('depth', CAST(n.ready AS float), CASE WHEN n.ready < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_failed', CAST(CASE WHEN n.total < :cap THEN n.failed END AS float),
     CASE WHEN n.total < :cap THEN 'exact (error column set)' ELSE 'unknown above the cap' END),
    ('count_leased', CAST(CASE WHEN n.total < :cap THEN n.total - n.ready - n.failed END AS float),
     CASE WHEN n.total < :cap THEN 'exact (failed rows not counted)' ELSE 'unknown above the cap' END),
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
-- @block lease_follow
-- A lease queue whose mapping says more about readiness (issue 31; see sql/postgresql/depth.sql):
-- {free} is an item no consumer holds that the library may take (lease_ready "past": a lock that
-- has passed; ready_flag: the flag = 1). At most :cap free items are read (the seek of an index
-- that leads with the lease column, or filtered WHERE lease IS NULL; held items are filtered on the
-- way, at most the ones in flight); those at max_attempts ({exhausted}) are count_exhausted.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT COUNT(CASE WHEN l.exhausted = 0 THEN 1 END) AS ready, COUNT(CASE WHEN l.exhausted = 1 THEN 1 END) AS exhausted,
             COUNT(*) AS seen
      FROM (SELECT TOP (:cap) CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
            FROM {table} WHERE {free}{open_and}) AS l) AS n
CROSS JOIN (SELECT COUNT(*) AS total FROM (SELECT TOP (:cap) 1 AS x FROM {table}{open_where}) AS l) AS t
CROSS JOIN (SELECT SUM(ps.row_count) AS row_count FROM sys.dm_db_partition_stats AS ps
            WHERE ps.object_id = OBJECT_ID(:qualified_table) AND ps.index_id IN (0, 1)) AS p
CROSS APPLY (VALUES
    ('depth', CAST(n.ready AS float), CASE WHEN n.seen < :cap THEN 'exact' ELSE 'at least (cap of free items read)' END),
    ('count_exhausted', CAST(n.exhausted AS float),
     CASE WHEN n.seen < :cap THEN 'exact (free items at max_attempts)' ELSE 'at least (cap of free items read)' END),
    ('count_leased', CAST(CASE WHEN n.seen < :cap AND t.total < :cap THEN t.total - n.seen END AS float),
     CASE WHEN n.seen < :cap AND t.total < :cap THEN 'exact' ELSE 'unknown above the cap' END),
    ('rows_total', CAST(CASE WHEN t.total < :cap THEN t.total ELSE COALESCE(p.row_count, t.total) END AS float),
     CASE WHEN t.total < :cap THEN 'exact' ELSE 'estimate (sys.dm_db_partition_stats)' END)
) AS v (metric, value, note)
-- @block lease_follow_runnable
-- With runnable_at: ready when runnable_at IS NULL or <= SYSUTCDATETIME(), scheduled when ahead.
-- Each range is a sargable predicate on runnable_at (SYSUTCDATETIME() is a runtime constant), read
-- TOP (:cap): an index that leads with runnable_at, best filtered on the free items
-- (CREATE INDEX ... ON jobs (run_at) WHERE locked_at IS NULL), seeks each range and stops, so jobs
-- scheduled ahead cost the ready count nothing. Read under READ UNCOMMITTED like every collector.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT COUNT(CASE WHEN l.exhausted = 0 THEN 1 END) AS ready, COUNT(CASE WHEN l.exhausted = 1 THEN 1 END) AS exhausted,
             COUNT(*) AS seen
      FROM (SELECT TOP (:cap) CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
            FROM {table} WHERE {free} AND {runnable} <= SYSUTCDATETIME(){open_and}) AS l) AS d
CROSS JOIN (SELECT COUNT(CASE WHEN l.exhausted = 0 THEN 1 END) AS ready, COUNT(CASE WHEN l.exhausted = 1 THEN 1 END) AS exhausted,
                   COUNT(*) AS seen
            FROM (SELECT TOP (:cap) CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
                  FROM {table} WHERE {free} AND {runnable} IS NULL{open_and}) AS l) AS z
CROSS JOIN (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table}
                                       WHERE {free} AND {runnable} > SYSUTCDATETIME(){open_and}) AS l) AS sch
CROSS JOIN (SELECT COUNT(*) AS total FROM (SELECT TOP (:cap) 1 AS x FROM {table}{open_where}) AS l) AS t
CROSS JOIN (SELECT SUM(ps.row_count) AS row_count FROM sys.dm_db_partition_stats AS ps
            WHERE ps.object_id = OBJECT_ID(:qualified_table) AND ps.index_id IN (0, 1)) AS p
CROSS APPLY (VALUES
    ('depth', CAST(d.ready + z.ready AS float),
     CASE WHEN d.seen < :cap AND z.seen < :cap THEN 'exact' ELSE 'at least (cap of runnable items read)' END),
    ('count_exhausted', CAST(d.exhausted + z.exhausted AS float),
     CASE WHEN d.seen < :cap AND z.seen < :cap THEN 'exact (runnable free items at max_attempts)'
          ELSE 'at least (cap of runnable items read)' END),
    ('count_scheduled', CAST(sch.n AS float), CASE WHEN sch.n < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_leased', CAST(CASE WHEN d.seen < :cap AND z.seen < :cap AND sch.n < :cap AND t.total < :cap
                               THEN t.total - d.seen - z.seen - sch.n END AS float),
     CASE WHEN d.seen < :cap AND z.seen < :cap AND sch.n < :cap AND t.total < :cap THEN 'exact' ELSE 'unknown above the cap' END),
    ('rows_total', CAST(CASE WHEN t.total < :cap THEN t.total ELSE COALESCE(p.row_count, t.total) END AS float),
     CASE WHEN t.total < :cap THEN 'exact' ELSE 'estimate (sys.dm_db_partition_stats)' END)
) AS v (metric, value, note)
-- @block status_follow
-- A status queue whose mapping says more about readiness (issue 31; see sql/postgresql/depth.sql):
-- of at most :cap items in a ready status (an index on (status, key) seeks them), those at
-- max_attempts ({exhausted}) are count_exhausted, not depth.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT COUNT(CASE WHEN l.exhausted = 0 THEN 1 END) AS ready, COUNT(CASE WHEN l.exhausted = 1 THEN 1 END) AS exhausted,
             COUNT(*) AS seen
      FROM (SELECT TOP (:cap) CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
            FROM {table} WHERE {status} IN (:ready_values){open_and}) AS l) AS r
CROSS JOIN (SELECT (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {status} IN (:processing_values){open_and}) AS l) AS processing,
                   (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {status} IN (:done_values){open_and}) AS l) AS done,
                   (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table}{open_where}) AS l) AS total) AS n
CROSS JOIN (SELECT SUM(ps.row_count) AS row_count FROM sys.dm_db_partition_stats AS ps
            WHERE ps.object_id = OBJECT_ID(:qualified_table) AND ps.index_id IN (0, 1)) AS p
CROSS APPLY (VALUES
    ('depth', CAST(r.ready AS float), CASE WHEN r.seen < :cap THEN 'exact' ELSE 'at least (cap of ready items read)' END),
    ('count_exhausted', CAST(r.exhausted AS float),
     CASE WHEN r.seen < :cap THEN 'exact (ready items at max_attempts)' ELSE 'at least (cap of ready items read)' END),
    ('count_processing', CAST(n.processing AS float),
     CASE WHEN n.processing < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_done', CAST(n.done AS float), CASE WHEN n.done < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_other', CAST(CASE WHEN n.total < :cap AND r.seen < :cap AND n.processing < :cap AND n.done < :cap
                              THEN n.total - r.seen - n.processing - n.done END AS float),
     CASE WHEN n.total < :cap THEN 'exact (statuses not in ready, processing or done values)'
          ELSE 'unknown above the cap' END),
    ('rows_total', CAST(CASE WHEN n.total < :cap THEN n.total ELSE COALESCE(p.row_count, n.total) END AS float),
     CASE WHEN n.total < :cap THEN 'exact' ELSE 'estimate (sys.dm_db_partition_stats)' END)
) AS v (metric, value, note)
-- @block status_follow_runnable
-- With runnable_at: an item in a ready status is ready when runnable_at is NULL or has passed,
-- scheduled when ahead. Each range is sargable on (status, runnable_at) (SYSUTCDATETIME() is a
-- runtime constant): an index on those columns seeks it and TOP (:cap) stops the read.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT COUNT(CASE WHEN l.exhausted = 0 THEN 1 END) AS ready, COUNT(CASE WHEN l.exhausted = 1 THEN 1 END) AS exhausted,
             COUNT(*) AS seen
      FROM (SELECT TOP (:cap) CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
            FROM {table} WHERE {status} IN (:ready_values) AND {runnable} <= SYSUTCDATETIME(){open_and}) AS l) AS d
CROSS JOIN (SELECT COUNT(CASE WHEN l.exhausted = 0 THEN 1 END) AS ready, COUNT(CASE WHEN l.exhausted = 1 THEN 1 END) AS exhausted,
                   COUNT(*) AS seen
            FROM (SELECT TOP (:cap) CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
                  FROM {table} WHERE {status} IN (:ready_values) AND {runnable} IS NULL{open_and}) AS l) AS z
CROSS JOIN (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table}
                                       WHERE {status} IN (:ready_values) AND {runnable} > SYSUTCDATETIME(){open_and}) AS l) AS sch
CROSS JOIN (SELECT (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {status} IN (:processing_values){open_and}) AS l) AS processing,
                   (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {status} IN (:done_values){open_and}) AS l) AS done,
                   (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table}{open_where}) AS l) AS total) AS n
CROSS JOIN (SELECT SUM(ps.row_count) AS row_count FROM sys.dm_db_partition_stats AS ps
            WHERE ps.object_id = OBJECT_ID(:qualified_table) AND ps.index_id IN (0, 1)) AS p
CROSS APPLY (VALUES
    ('depth', CAST(d.ready + z.ready AS float),
     CASE WHEN d.seen < :cap AND z.seen < :cap THEN 'exact' ELSE 'at least (cap of runnable items read)' END),
    ('count_exhausted', CAST(d.exhausted + z.exhausted AS float),
     CASE WHEN d.seen < :cap AND z.seen < :cap THEN 'exact (runnable ready items at max_attempts)'
          ELSE 'at least (cap of runnable items read)' END),
    ('count_scheduled', CAST(sch.n AS float), CASE WHEN sch.n < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_processing', CAST(n.processing AS float),
     CASE WHEN n.processing < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_done', CAST(n.done AS float), CASE WHEN n.done < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_other', CAST(CASE WHEN n.total < :cap AND d.seen < :cap AND z.seen < :cap AND sch.n < :cap
                                   AND n.processing < :cap AND n.done < :cap
                              THEN n.total - d.seen - z.seen - sch.n - n.processing - n.done END AS float),
     CASE WHEN n.total < :cap THEN 'exact (statuses not in ready, processing or done values)'
          ELSE 'unknown above the cap' END),
    ('rows_total', CAST(CASE WHEN n.total < :cap THEN n.total ELSE COALESCE(p.row_count, n.total) END AS float),
     CASE WHEN n.total < :cap THEN 'exact' ELSE 'estimate (sys.dm_db_partition_stats)' END)
) AS v (metric, value, note)
-- @block due_follow
-- A due queue with max_attempts (issue 33: MassTransit's fetch takes EnqueueTime <= now AND
-- DeliveryCount < MaxDeliveryCount): of at most :cap due items (read in the due column's order
-- within {open_and}: a partition such as QueueId = 7 first), those at max_attempts are
-- count_exhausted, never depth; count_not_due is the rest (locked or scheduled ahead).
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT COUNT(CASE WHEN l.exhausted = 0 THEN 1 END) AS ready, COUNT(CASE WHEN l.exhausted = 1 THEN 1 END) AS exhausted,
             COUNT(*) AS seen
      FROM (SELECT TOP (:cap) CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
            FROM {table} WHERE {due} <= SYSUTCDATETIME(){open_and}) AS l) AS n
CROSS JOIN (SELECT COUNT(*) AS total FROM (SELECT TOP (:cap) 1 AS x FROM {table}{open_where}) AS l) AS t
CROSS JOIN (SELECT SUM(ps.row_count) AS row_count FROM sys.dm_db_partition_stats AS ps
            WHERE ps.object_id = OBJECT_ID(:qualified_table) AND ps.index_id IN (0, 1)) AS p
CROSS APPLY (VALUES
    ('depth', CAST(n.ready AS float), CASE WHEN n.seen < :cap THEN 'exact' ELSE 'at least (cap of due items read)' END),
    ('count_exhausted', CAST(n.exhausted AS float),
     CASE WHEN n.seen < :cap THEN 'exact (due items at max_attempts)' ELSE 'at least (cap of due items read)' END),
    ('count_not_due', CAST(CASE WHEN n.seen < :cap AND t.total < :cap THEN t.total - n.seen END AS float),
     CASE WHEN n.seen < :cap AND t.total < :cap THEN 'exact' ELSE 'unknown above the cap' END),
    ('rows_total', CAST(CASE WHEN t.total < :cap THEN t.total ELSE COALESCE(p.row_count, t.total) END AS float),
     CASE WHEN t.total < :cap THEN 'exact' ELSE 'estimate (sys.dm_db_partition_stats: the whole table)' END)
) AS v (metric, value, note)
