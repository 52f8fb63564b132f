-- The columns of one table, for 'config check --live'. An unknown table yields no rows
-- (to_regclass returns NULL instead of raising).
SELECT a.attname AS column_name
FROM pg_attribute AS a
WHERE a.attrelid = to_regclass(:qualified_table) AND a.attnum > 0 AND NOT a.attisdropped
