-- The type of every mapped column of a target's queues, in one statement: read by
-- 'config check --live' and when a target is first collected, so that status values are bound in
-- the column's own type (an enum stays an enum: its index is used) and time columns, watermark
-- keys and status values are checked against what the table really holds.
-- Tables and columns are bound as values (aligned lists); to_regclass yields NULL for a missing
-- table instead of raising, so a missing table or column is simply absent from the result.
--   type_schema, type_name  the column's type (a domain's base type), for a cast fragment
--   type_text               format_type(): how psql shows it (varchar(20), timestamp with time zone)
--   category                integer | timestamp | text | enum | uuid | boolean | other
--   labels                  an enum's labels in their sort order (NULL for other types)
--   relkind                 r table, p partitioned table, v view, m materialized view, f foreign table
--   leads_index             a valid btree index, not partial, leads with the column (issue 29: a
--                           status count reads such an index in status order, one read for all its
--                           values; without one, each value alone along the key)
SELECT t.qualified AS qualified_table, t.col AS column_name, n.nspname AS type_schema, ty.typname AS type_name,
       format_type(a.atttypid, a.atttypmod) AS type_text,
       CASE WHEN ty.typname IN ('int2', 'int4', 'int8') THEN 'integer'
            WHEN ty.typname IN ('timestamptz', 'timestamp') THEN 'timestamp'
            WHEN ty.typtype = 'e' THEN 'enum'
            WHEN ty.typcategory = 'S' THEN 'text'
            WHEN ty.typname = 'uuid' THEN 'uuid'
            WHEN ty.typname = 'bool' THEN 'boolean'
            ELSE 'other' END AS category,
       CASE WHEN ty.typtype = 'e' THEN
            (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum AS e
             WHERE e.enumtypid = ty.oid) END AS labels,
       c.relkind::text AS relkind,
       EXISTS (SELECT 1 FROM pg_index AS i
               JOIN pg_class AS ic ON ic.oid = i.indexrelid
               JOIN pg_am AS am ON am.oid = ic.relam AND am.amname = 'btree'
               WHERE i.indrelid = c.oid AND i.indkey[0] = a.attnum AND i.indisvalid AND i.indpred IS NULL) AS leads_index
FROM unnest(ARRAY[:tables]::text[], ARRAY[:columns]::text[]) AS t (qualified, col)
JOIN pg_class AS c ON c.oid = to_regclass(t.qualified)
JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = t.col AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_type AS d ON d.oid = a.atttypid
JOIN pg_type AS ty ON ty.oid = CASE WHEN d.typtype = 'd' THEN d.typbasetype ELSE d.oid END
JOIN pg_namespace AS n ON n.oid = ty.typnamespace
