-- stuck_leases: leased (lease kind) or processing (status kind) items whose lease is older than
-- the queue's lease_timeout_s, plus oldest_lease_age_s. Lease and status times are UTC
-- (SYSUTCDATETIME), as the reference recommends. Counts are bounded by TOP (:cap).
-- The count seeks an index that leads with the lease column (status kind: the status column);
-- without one it scans the table. The documented DMVs do not describe index columns, so this
-- file cannot check for the index as the PostgreSQL one does: missing_index is reported NULL
-- ('not checked') and docs/metrics.md says which index to create.
-- @block lease
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table}
                                     WHERE {lease} < DATEADD(SECOND, -CAST(:lease_timeout_s AS int), SYSUTCDATETIME())) AS l) AS n,
             (SELECT TOP (1) {lease} FROM {table} WHERE {lease} IS NOT NULL ORDER BY {lease}) AS oldest) AS s
CROSS APPLY (VALUES
    ('stuck_leases', CAST(s.n AS float), CASE WHEN s.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('oldest_lease_age_s', CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, s.oldest, SYSUTCDATETIME()), 0) / 1000.0 AS float),
     CASE WHEN s.oldest IS NULL THEN 'no leased item' ELSE 'exact' END),
    ('missing_index', CAST(NULL AS float), 'not checked on SQL Server')
) AS v (metric, value, note)
-- @block status
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT COUNT(*) FROM (SELECT TOP (:cap) 1 AS x FROM {table}
                                     WHERE {status} IN (:processing_values)
                                       AND {status_changed_at} < DATEADD(SECOND, -CAST(:lease_timeout_s AS int), SYSUTCDATETIME())) AS l) AS n,
             (SELECT MIN(p.changed) FROM (SELECT TOP (:cap) {status_changed_at} AS changed FROM {table}
                                          WHERE {status} IN (:processing_values)) AS p) AS oldest) AS s
CROSS APPLY (VALUES
    ('stuck_leases', CAST(s.n AS float), CASE WHEN s.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('oldest_lease_age_s', CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, s.oldest, SYSUTCDATETIME()), 0) / 1000.0 AS float),
     CASE WHEN s.oldest IS NULL THEN 'no processing item' ELSE 'exact (oldest of at most the cap of processing items)' END),
    ('missing_index', CAST(NULL AS float), 'not checked on SQL Server')
) AS v (metric, value, note)
