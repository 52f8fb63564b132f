-- The key columns of every rowstore index of one table, in key order, with its filter: lets
-- 'config check --live' say whether a collector's statement can seek (an index that leads with
-- the column it filters or orders by, and whose filter admits the rows it reads) or must scan.
-- Included (non-key) columns are left out: they do not order an index. Unknown table: no rows.
SELECT i.name AS index_name, i.index_id, i.filter_definition, i.is_disabled, c.name AS column_name,
       ic.key_ordinal, ic.is_descending_key
FROM sys.indexes AS i
JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.key_ordinal > 0
JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id
WHERE i.object_id = OBJECT_ID(:qualified_table) AND i.type IN (1, 2)
ORDER BY i.index_id, ic.key_ordinal
