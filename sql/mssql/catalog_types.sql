-- The type of every mapped column of a target's queues, in one statement: read by
-- 'config check --live' and when a target is first collected (see sql/postgresql/catalog_types.sql).
-- The (table, column) pairs travel as ONE XML parameter (<p t="[schema].[table]" c="column"/>...),
-- whatever their number: SQL Server allows at most 2,100 parameters per statement. XML, not
-- OPENJSON: OPENJSON needs database compatibility level 130 or more, and on an older level this
-- read failed the whole target's live check (issue 33, item 7); the xml type's nodes() and value()
-- methods work at every level. OBJECT_ID yields NULL for a missing table, so a missing
-- table or column is simply absent from the result. A user-defined alias type is reported as the
-- system type it is based on.
--   category   integer | timestamp | text | uuid | boolean | other
--   relkind    r table, v view (as on PostgreSQL)
SELECT t.qualified AS qualified_table, t.col AS column_name, N'sys' AS type_schema, st.name AS type_name,
       st.name AS type_text,
       CASE WHEN st.name IN (N'tinyint', N'smallint', N'int', N'bigint') THEN N'integer'
            WHEN st.name IN (N'datetime', N'datetime2', N'datetimeoffset', N'smalldatetime') THEN N'timestamp'
            WHEN st.name IN (N'char', N'varchar', N'nchar', N'nvarchar') THEN N'text'
            WHEN st.name = N'uniqueidentifier' THEN N'uuid'
            WHEN st.name = N'bit' THEN N'boolean'
            ELSE N'other' END AS category,
       CAST(NULL AS nvarchar(max)) AS labels,
       CASE WHEN OBJECTPROPERTY(c.object_id, 'IsView') = 1 THEN N'v' ELSE N'r' END AS relkind
FROM (SELECT p.n.value('@t', 'nvarchar(600)') AS qualified, p.n.value('@c', 'nvarchar(128)') AS col
      FROM (SELECT CAST(:pairs_xml AS xml) AS x) AS d
      CROSS APPLY d.x.nodes('/p') AS p(n)) AS t
JOIN sys.columns AS c ON c.object_id = OBJECT_ID(t.qualified) AND c.name = t.col
JOIN sys.types AS st ON st.user_type_id = c.system_type_id
