-- stuck_leases: leased (lease kind) or processing (status kind) items whose lease is older than
-- the queue's lease_timeout_s, plus oldest_lease_age_s. Lease and status times are UTC
-- (SYSUTCDATETIME), as the reference recommends. Counts are bounded by TOP (:cap).
-- The count seeks an index that leads with the lease column (status kind: the status column);
-- without one it scans the table. missing_index says whether such an index exists, from
-- sys.indexes / sys.index_columns (an enabled index whose first key column is the lease column,
-- unfiltered or filtered exactly on lease IS NOT NULL: the seeds' SimpleQueue index WHERE
-- ProcessingStartedAt IS NULL cannot find leased rows; status kind: an unfiltered index leading
-- with the status column); when there is none its note holds the CREATE INDEX to run.
-- @block lease
-- The queue's compiled stuck rule (queueops.mapping.stuck_rule), which the drill-down reads too:
-- {stuck_held} the held items (with error_column not failed: an item whose lease AND error are set
-- failed, the seeds' SimpleQueue leaves it leased on purpose; it is never a stuck lease and never
-- released), {stuck_if} the stuck ones among them (the lease older than lease_timeout_s).
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table}
                                     WHERE {stuck_held} AND {stuck_if}{open_and}) AS l) AS n,
             (SELECT TOP (1) {lease} FROM {table} WHERE {stuck_held}{open_and} ORDER BY {lease}) AS oldest) AS s
CROSS JOIN (SELECT COUNT(*) AS n FROM sys.indexes AS i
            JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.key_ordinal = 1
            JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
            WHERE i.object_id = OBJECT_ID(:qualified_table) AND c.name = :lease_name AND i.is_disabled = 0
              AND (i.has_filter = 0 OR i.filter_definition = CONCAT(N'(', QUOTENAME(:lease_name), N' IS NOT NULL)'))) AS ix
CROSS APPLY (VALUES
    ('stuck_leases', CAST(s.n AS float), CASE WHEN s.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('oldest_lease_age_s', CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, s.oldest, SYSUTCDATETIME()), 0) / 1000.0 AS float),
     CASE WHEN s.oldest IS NULL THEN 'no leased item' ELSE 'exact' END),
    ('missing_index', CAST(CASE WHEN ix.n > 0 THEN 0 ELSE 1 END AS float),
     CASE WHEN ix.n > 0 THEN N'' ELSE CONCAT(N'CREATE INDEX ', QUOTENAME(LEFT(CONCAT(N'IX_queueops_', :table_name, N'_', :lease_name), 128)),
                                             N' ON ', :qualified_table, N' (', QUOTENAME(:lease_name), N') WHERE ',
                                             QUOTENAME(:lease_name), N' IS NOT NULL') END)
) AS v (metric, value, note)
-- @block status
-- One TOP (:cap) read of processing items gives the stuck count and the oldest change together:
-- status_changed_at is a key lookup per row unless the status index includes it, so the two
-- figures share the lookups. With :cap processing items or more the count is 'at least'.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT COALESCE(SUM(p.stuck), 0) AS n, MIN(p.changed) AS oldest, COUNT(*) AS seen
      FROM (SELECT TOP (:cap) {status_changed_at} AS changed, CASE WHEN {stuck_if} THEN 1 ELSE 0 END AS stuck FROM {table}
            WHERE {status} IN (:processing_values){open_and}) AS p) AS s
CROSS JOIN (SELECT COUNT(*) AS n FROM sys.indexes AS i
            JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.key_ordinal = 1
            JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
            WHERE i.object_id = OBJECT_ID(:qualified_table) AND c.name = :status_name AND i.is_disabled = 0
              AND i.has_filter = 0) AS ix
CROSS APPLY (VALUES
    ('stuck_leases', CAST(s.n AS float), CASE WHEN s.seen >= :cap THEN 'at least (cap of processing items read)' ELSE 'exact' END),
    ('oldest_lease_age_s', CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, s.oldest, SYSUTCDATETIME()), 0) / 1000.0 AS float),
     CASE WHEN s.oldest IS NULL THEN 'no processing item' ELSE 'exact (oldest of at most the cap of processing items)' END),
    ('missing_index', CAST(CASE WHEN ix.n > 0 THEN 0 ELSE 1 END AS float),
     CASE WHEN ix.n > 0 THEN N'' ELSE CONCAT(N'CREATE INDEX ', QUOTENAME(LEFT(CONCAT(N'IX_queueops_', :table_name, N'_', :status_name), 128)),
                                             N' ON ', :qualified_table, N' (', QUOTENAME(:status_name), N', ',
                                             QUOTENAME(:key_name), N')') END)
) AS v (metric, value, note)
-- @block lease_follow
-- A lease queue whose mapping says more about readiness (issue 31; see sql/postgresql): not stuck
-- when failed ({failed}: error set and, with error_at, not older than the lease) or exhausted (at
-- max_attempts). Same index as block lease.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table}
                                     WHERE {stuck_held} AND {stuck_if}{open_and}) AS l) AS n,
             (SELECT TOP (1) {lease} FROM {table} WHERE {stuck_held}{open_and} ORDER BY {lease}) AS oldest) AS s
CROSS JOIN (SELECT COUNT(*) AS n FROM sys.indexes AS i
            JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.key_ordinal = 1
            JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
            WHERE i.object_id = OBJECT_ID(:qualified_table) AND c.name = :lease_name AND i.is_disabled = 0
              AND (i.has_filter = 0 OR i.filter_definition = CONCAT(N'(', QUOTENAME(:lease_name), N' IS NOT NULL)'))) AS ix
CROSS APPLY (VALUES
    ('stuck_leases', CAST(s.n AS float), CASE WHEN s.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('oldest_lease_age_s', CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, s.oldest, SYSUTCDATETIME()), 0) / 1000.0 AS float),
     CASE WHEN s.oldest IS NULL THEN 'no leased item (failed and exhausted items excluded)' ELSE 'exact' END),
    ('missing_index', CAST(CASE WHEN ix.n > 0 THEN 0 ELSE 1 END AS float),
     CASE WHEN ix.n > 0 THEN N'' ELSE CONCAT(N'CREATE INDEX ', QUOTENAME(LEFT(CONCAT(N'IX_queueops_', :table_name, N'_', :lease_name), 128)),
                                             N' ON ', :qualified_table, N' (', QUOTENAME(:lease_name), N') WHERE ',
                                             QUOTENAME(:lease_name), N' IS NOT NULL') END)
) AS v (metric, value, note)
-- @block lease_follow_past
-- lease_ready = "past": an expired lock is taken again by the library itself; stuck counts locks
-- set further ahead than lease_timeout_s (see sql/postgresql/stuck_leases.sql).
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table}
                                  WHERE {stuck_held} AND {stuck_if}{open_and}) AS l) AS s
CROSS JOIN (SELECT COUNT(*) AS n FROM sys.indexes AS i
            JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.key_ordinal = 1
            JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
            WHERE i.object_id = OBJECT_ID(:qualified_table) AND c.name = :lease_name AND i.is_disabled = 0
              AND (i.has_filter = 0 OR i.filter_definition = CONCAT(N'(', QUOTENAME(:lease_name), N' IS NOT NULL)'))) AS ix
CROSS APPLY (VALUES
    ('stuck_leases', CAST(s.n AS float),
     CASE WHEN s.n >= :cap THEN 'at least (cap reached)'
          ELSE 'locks further ahead than lease_timeout_s (lease_ready = past: the library takes an expired lock again itself)' END),
    ('missing_index', CAST(CASE WHEN ix.n > 0 THEN 0 ELSE 1 END AS float),
     CASE WHEN ix.n > 0 THEN N'' ELSE CONCAT(N'CREATE INDEX ', QUOTENAME(LEFT(CONCAT(N'IX_queueops_', :table_name, N'_', :lease_name), 128)),
                                             N' ON ', :qualified_table, N' (', QUOTENAME(:lease_name), N') WHERE ',
                                             QUOTENAME(:lease_name), N' IS NOT NULL') END)
) AS v (metric, value, note)
-- @block status_follow
-- A status queue with max_attempts (issue 31): block status, except that a processing item at
-- max_attempts is not stuck (set back to ready, the library would never take it).
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT COALESCE(SUM(p.stuck), 0) AS n, MIN(p.changed) AS oldest, COUNT(*) AS seen
      FROM (SELECT TOP (:cap) {status_changed_at} AS changed, CASE WHEN {stuck_if} THEN 1 ELSE 0 END AS stuck
            FROM {table} WHERE {status} IN (:processing_values){open_and}) AS p) AS s
CROSS JOIN (SELECT COUNT(*) AS n FROM sys.indexes AS i
            JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.key_ordinal = 1
            JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
            WHERE i.object_id = OBJECT_ID(:qualified_table) AND c.name = :status_name AND i.is_disabled = 0
              AND i.has_filter = 0) AS ix
CROSS APPLY (VALUES
    ('stuck_leases', CAST(s.n AS float),
     CASE WHEN s.seen >= :cap THEN 'at least (cap of processing items read)' ELSE 'exact (items at max_attempts excluded)' END),
    ('oldest_lease_age_s', CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, s.oldest, SYSUTCDATETIME()), 0) / 1000.0 AS float),
     CASE WHEN s.oldest IS NULL THEN 'no processing item' ELSE 'exact (oldest of at most the cap of processing items)' END),
    ('missing_index', CAST(CASE WHEN ix.n > 0 THEN 0 ELSE 1 END AS float),
     CASE WHEN ix.n > 0 THEN N'' ELSE CONCAT(N'CREATE INDEX ', QUOTENAME(LEFT(CONCAT(N'IX_queueops_', :table_name, N'_', :status_name), 128)),
                                             N' ON ', :qualified_table, N' (', QUOTENAME(:status_name), N', ',
                                             QUOTENAME(:key_name), N')') END)
) AS v (metric, value, note)
