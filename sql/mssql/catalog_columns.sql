-- The columns of one table, for 'config check --live'. An unknown table yields no rows
-- (OBJECT_ID returns NULL, and object_id = NULL matches nothing).
SELECT c.name AS column_name
FROM sys.columns AS c
WHERE c.object_id = OBJECT_ID(:qualified_table)
