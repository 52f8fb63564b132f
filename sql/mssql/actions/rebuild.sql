-- rebuild: per index, ALTER INDEX ... REORGANIZE (always online, light) or REBUILD WITH
-- (ONLINE = ON ...) chosen by fragmentation and page count (5 / 30 %, 1000 pages: Microsoft's 2017
-- guidance and Ola Hallengren's defaults). An offline REBUILD blocks every dequeue for its whole
-- duration: it is only run when the operator asked for it (--allow-offline).
-- @block server
-- Online index operations: EngineEdition 3 (Enterprise, Developer, Evaluation), 5 (Azure SQL
-- Database), 8 (Managed Instance) -- the rule Ola Hallengren's IndexOptimize applies.
SELECT CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition,
       CAST(SERVERPROPERTY('ProductMajorVersion') AS int) AS major_version,
       CAST(SERVERPROPERTY('Edition') AS nvarchar(128)) AS edition,
       CASE WHEN OBJECT_ID(:qualified_table) IS NULL THEN 0 ELSE 1 END AS table_exists
-- @block indexes
-- LIMITED: reads only the pages above the leaf level (the cheapest mode); one row per partition.
-- legacy_lob_columns: image / text / ntext columns force an offline rebuild of the clustered index.
SELECT i.index_id, i.name AS index_name, i.type_desc, i.is_disabled, i.allow_page_locks,
       ps.partition_number, ps.page_count, ps.avg_fragmentation_in_percent,
       (SELECT COUNT(*) FROM sys.columns AS c
        WHERE c.object_id = i.object_id AND c.system_type_id IN (34, 35, 99)) AS legacy_lob_columns
FROM sys.indexes AS i
CROSS APPLY sys.dm_db_index_physical_stats(DB_ID(), i.object_id, i.index_id, NULL, 'LIMITED') AS ps
WHERE i.object_id = OBJECT_ID(:qualified_table) AND i.index_id > 0
  AND ps.alloc_unit_type_desc = N'IN_ROW_DATA' AND ps.index_level = 0
ORDER BY i.index_id, ps.partition_number
-- @block resumable
-- Paused resumable rebuilds of this table (re-running the same REBUILD resumes them).
SELECT o.index_id, o.percent_complete, o.state
FROM sys.index_resumable_operations AS o
WHERE o.object_id = OBJECT_ID(:qualified_table)
-- @block reorganize
ALTER INDEX {index} ON {table} REORGANIZE
-- @block rebuild_online_low_priority
ALTER INDEX {index} ON {table} REBUILD WITH (ONLINE = ON (WAIT_AT_LOW_PRIORITY (MAX_DURATION = {wait_minutes} MINUTES, ABORT_AFTER_WAIT = SELF)))
-- @block rebuild_online
ALTER INDEX {index} ON {table} REBUILD WITH (ONLINE = ON)
-- @block rebuild_resumable
ALTER INDEX {index} ON {table} REBUILD WITH (ONLINE = ON, RESUMABLE = ON, MAX_DURATION = {max_duration_minutes} MINUTES)
-- @block rebuild_offline
ALTER INDEX {index} ON {table} REBUILD
