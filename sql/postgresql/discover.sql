-- discover: what 'queueops discover' reads to find queue tables. Catalog and statistics only
-- (pg_class, pg_attribute, pg_index, pg_constraint, pg_stat_user_tables): never a queue table's
-- rows. Partitions are folded into their parent (pg-boss's pgboss.job is partitioned by queue):
-- the parent is listed once with its partitions' activity summed, at every level (fragments/tree.sql).
-- @block tables
SELECT n.nspname AS schema_name, c.relname AS table_name, c.relkind::text AS relkind,
       greatest(c.reltuples, 0)::float8 AS reltuples,
       coalesce(sum(s.n_tup_ins), 0)::float8 AS inserts, coalesce(sum(s.n_tup_upd), 0)::float8 AS updates,
       coalesce(sum(s.n_tup_del), 0)::float8 AS deletes, coalesce(sum(s.n_live_tup), 0)::float8 AS live_rows,
       coalesce(sum(s.n_dead_tup), 0)::float8 AS dead_rows
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN LATERAL unnest({{tree.relations(c.oid)}}) AS r (rel) ON true
LEFT JOIN pg_stat_user_tables AS s ON s.relid = r.rel
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%' ESCAPE '\'
GROUP BY n.nspname, c.relname, c.relkind, c.reltuples
ORDER BY 1, 2
-- @block columns
SELECT n.nspname AS schema_name, c.relname AS table_name, a.attname AS column_name,
       format_type(a.atttypid, a.atttypmod) AS data_type, t.typname AS udt_name, t.typtype = 'e' AS is_enum,
       NOT a.attnotnull AS is_nullable,
       (a.attidentity <> '' OR pg_get_serial_sequence(format('%I.%I', n.nspname, c.relname), a.attname) IS NOT NULL)
           AS is_identity,
       CASE WHEN t.typtype = 'e' THEN (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
                                       FROM pg_enum AS e WHERE e.enumtypid = t.oid) END AS enum_labels
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace
JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_type AS t ON t.oid = a.atttypid
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%' ESCAPE '\'
ORDER BY 1, 2, a.attnum
-- @block indexes
SELECT n.nspname AS schema_name, c.relname AS table_name, ic.relname AS index_name,
       i.indisprimary AS is_primary, i.indpred IS NOT NULL AS is_partial, i.indisunique AS is_unique,
       (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(i.indkey) WITH ORDINALITY AS k (attnum, ord)
        JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
        WHERE k.ord <= i.indnkeyatts) AS key_columns
FROM pg_index AS i
JOIN pg_class AS c ON c.oid = i.indrelid
JOIN pg_class AS ic ON ic.oid = i.indexrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%' ESCAPE '\'
ORDER BY 1, 2, 3
-- @block foreign_keys
SELECT n.nspname AS schema_name, c.relname AS table_name, a.attname AS column_name,
       rn.nspname AS ref_schema, rc.relname AS ref_table, ra.attname AS ref_column
FROM pg_constraint AS k
JOIN pg_class AS c ON c.oid = k.conrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
JOIN pg_class AS rc ON rc.oid = k.confrelid
JOIN pg_namespace AS rn ON rn.oid = rc.relnamespace
JOIN pg_attribute AS a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
JOIN pg_attribute AS ra ON ra.attrelid = k.confrelid AND ra.attnum = k.confkey[1]
WHERE k.contype = 'f' AND cardinality(k.conkey) = 1
ORDER BY 1, 2, 3
-- @block checks
-- One-column CHECK constraints: a text status column's values (status IN ('queued', 'consumed', ...)),
-- which discover reads as it reads an enum's labels; every table's (:relid NULL) or one table's.
-- pg_get_constraintdef takes ACCESS SHARE on the constraint's table: when one table is held by a
-- lock the read of every table's times out, and discovery reads them table by table (the tables
-- from check_tables), the locked one left out.
SELECT n.nspname AS schema_name, c.relname AS table_name, a.attname AS column_name,
       pg_get_constraintdef(k.oid) AS definition
FROM pg_constraint AS k
JOIN pg_class AS c ON c.oid = k.conrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
JOIN pg_attribute AS a ON a.attrelid = k.conrelid AND a.attnum = k.conkey[1]
WHERE k.contype = 'c' AND cardinality(k.conkey) = 1
  AND (CAST(:relid AS bigint) IS NULL OR k.conrelid = CAST(:relid AS bigint)::oid)
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%' ESCAPE '\'
ORDER BY 1, 2, 3, k.conname
-- @block check_tables
-- The tables that have one-column CHECK constraints, without printing any (no lock taken).
SELECT DISTINCT k.conrelid::bigint AS relid, n.nspname AS schema_name, c.relname AS table_name
FROM pg_constraint AS k
JOIN pg_class AS c ON c.oid = k.conrelid
JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE k.contype = 'c' AND cardinality(k.conkey) = 1
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%' ESCAPE '\'
ORDER BY 2, 3
