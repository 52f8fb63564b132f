-- discover: what 'queueops discover' reads to find queue tables. Catalog and statistics only
-- (sys.tables, sys.columns, sys.types, sys.indexes, sys.index_columns, sys.foreign_key_columns,
-- sys.check_constraints, sys.dm_db_partition_stats, sys.dm_db_index_operational_stats): never a
-- queue table's rows.
-- Activity is the heap's or clustered index's leaf counters since the last restart: inserts,
-- updates, deletes (deleted rows first marked as ghosts included) and ghosts.
-- @block tables
SELECT s.name AS schema_name, t.name AS table_name, 'r' AS relkind,
       CAST(ISNULL(p.row_count, 0) AS float) AS reltuples,
       CAST(ISNULL(o.inserts, 0) AS float) AS inserts, CAST(ISNULL(o.updates, 0) AS float) AS updates,
       CAST(ISNULL(o.deletes, 0) AS float) AS deletes, CAST(ISNULL(p.row_count, 0) AS float) AS live_rows,
       CAST(ISNULL(o.ghosts, 0) AS float) AS dead_rows
FROM sys.tables AS t
JOIN sys.schemas AS s ON s.schema_id = t.schema_id
OUTER APPLY (SELECT SUM(ps.row_count) AS row_count FROM sys.dm_db_partition_stats AS ps
             WHERE ps.object_id = t.object_id AND ps.index_id IN (0, 1)) AS p
OUTER APPLY (SELECT SUM(os.leaf_insert_count) AS inserts, SUM(os.leaf_update_count) AS updates,
                    SUM(os.leaf_delete_count + os.leaf_ghost_count) AS deletes, SUM(os.leaf_ghost_count) AS ghosts
             FROM sys.dm_db_index_operational_stats(DB_ID(), t.object_id, NULL, NULL) AS os
             WHERE os.index_id IN (0, 1)) AS o
WHERE t.is_ms_shipped = 0
ORDER BY s.name, t.name
-- @block columns
SELECT s.name AS schema_name, t.name AS table_name, c.name AS column_name, ty.name AS data_type,
       ty.name AS udt_name, CAST(0 AS bit) AS is_enum, c.is_nullable AS is_nullable, c.is_identity AS is_identity
FROM sys.tables AS t
JOIN sys.schemas AS s ON s.schema_id = t.schema_id
JOIN sys.columns AS c ON c.object_id = t.object_id
JOIN sys.types AS ty ON ty.user_type_id = c.user_type_id
WHERE t.is_ms_shipped = 0
ORDER BY s.name, t.name, c.column_id
-- @block indexes
SELECT s.name AS schema_name, t.name AS table_name, i.name AS index_name, i.is_primary_key AS is_primary,
       i.has_filter AS is_partial, i.is_unique AS is_unique, c.name AS column_name, ic.key_ordinal AS key_ordinal
FROM sys.tables AS t
JOIN sys.schemas AS s ON s.schema_id = t.schema_id
JOIN sys.indexes AS i ON i.object_id = t.object_id AND i.index_id > 0
JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.key_ordinal > 0
JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
WHERE t.is_ms_shipped = 0
ORDER BY s.name, t.name, i.name, ic.key_ordinal
-- @block foreign_keys
SELECT s.name AS schema_name, t.name AS table_name, c.name AS column_name,
       rs.name AS ref_schema, rt.name AS ref_table, rc.name AS ref_column
FROM sys.foreign_key_columns AS f
JOIN sys.tables AS t ON t.object_id = f.parent_object_id
JOIN sys.schemas AS s ON s.schema_id = t.schema_id
JOIN sys.columns AS c ON c.object_id = f.parent_object_id AND c.column_id = f.parent_column_id
JOIN sys.tables AS rt ON rt.object_id = f.referenced_object_id
JOIN sys.schemas AS rs ON rs.schema_id = rt.schema_id
JOIN sys.columns AS rc ON rc.object_id = f.referenced_object_id AND rc.column_id = f.referenced_column_id
WHERE f.constraint_column_id = 1
  AND NOT EXISTS (SELECT 1 FROM sys.foreign_key_columns AS f2
                  WHERE f2.constraint_object_id = f.constraint_object_id AND f2.constraint_column_id = 2)
ORDER BY s.name, t.name, c.name
-- @block checks
-- Column CHECK constraints: a status column's values ([Status] = 'queued' OR [Status] = 'consumed' ...).
SELECT s.name AS schema_name, t.name AS table_name, c.name AS column_name, k.definition AS definition
FROM sys.check_constraints AS k
JOIN sys.tables AS t ON t.object_id = k.parent_object_id
JOIN sys.schemas AS s ON s.schema_id = t.schema_id
JOIN sys.columns AS c ON c.object_id = k.parent_object_id AND c.column_id = k.parent_column_id
WHERE t.is_ms_shipped = 0 AND k.is_disabled = 0
ORDER BY s.name, t.name, c.name, k.name
