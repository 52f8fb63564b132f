-- What decides readiness beyond the mapping (issue 31), for requeue and 'config check --live'
-- (see sql/postgresql/catalog_readiness.sql). Names are bound as values; an unknown table yields
-- no rows. Catalog views only, no lock on the queue table.
-- @block columns
SELECT c.name AS column_name, CAST(CASE WHEN c.is_nullable = 0 THEN 1 ELSE 0 END AS bit) AS not_null,
       CAST(COALESCE(ep.value, N'') AS nvarchar(4000)) AS comment
FROM sys.columns AS c
LEFT JOIN sys.extended_properties AS ep
       ON ep.class = 1 AND ep.major_id = c.object_id AND ep.minor_id = c.column_id AND ep.name = N'MS_Description'
WHERE c.object_id = OBJECT_ID(:qualified_table)
-- @block side_locks
-- Every column of the tables the queue table references by a foreign key, with the referencing
-- column: queueops.readiness keeps the lock-like ones (lock, locked_at, LockedBy, lease..., worker...).
SELECT DISTINCT CONCAT(QUOTENAME(OBJECT_SCHEMA_NAME(fkc.referenced_object_id)), N'.',
                       QUOTENAME(OBJECT_NAME(fkc.referenced_object_id))) AS side_table,
       c.name AS side_column, pc.name AS via
FROM sys.foreign_key_columns AS fkc
JOIN sys.columns AS pc ON pc.object_id = fkc.parent_object_id AND pc.column_id = fkc.parent_column_id
JOIN sys.columns AS c ON c.object_id = fkc.referenced_object_id
WHERE fkc.parent_object_id = OBJECT_ID(:qualified_table) AND fkc.referenced_object_id <> fkc.parent_object_id
-- @block lease_ahead
-- How far ahead of the UTC clock the furthest lease lies (see sql/postgresql/catalog_readiness.sql):
-- TOP (1) from the far end of an index that leads with the lease column; NOLOCK, as the previews.
SELECT CAST(DATEDIFF_BIG(SECOND, SYSUTCDATETIME(),
                         (SELECT TOP (1) {lease} FROM {table} WITH (NOLOCK) WHERE {lease} IS NOT NULL{open_and}
                          ORDER BY {lease} DESC)) AS float) AS ahead_s
