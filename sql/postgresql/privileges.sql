-- privileges: what the login of this session may do, for 'config check --live' (queueops/privileges.py).
-- Run once with the collector login and once with the action login. Only catalog functions are
-- called, never the tables: a login without a right learns that it lacks it, not an error.
-- @block login
-- The login and the predefined roles whose privileges it has (pg_has_role ... 'USAGE': inherited
-- membership, which is what a privilege check uses; a superuser has all of them):
--   read_all_stats     pg_read_all_stats (pg_monitor): other logins' sessions' state, query,
--                      transaction start in pg_stat_activity (hidden otherwise)
--   stat_scan_tables   pg_stat_scan_tables (pg_monitor): may run pgstattuple's functions
--   signal_backend     pg_signal_backend: may end other logins' sessions (not a superuser's)
--   pgstattuple        whether the extension is installed in this database at all
SELECT r.rolname::text AS login, r.rolsuper AS superuser,
       pg_has_role('pg_read_all_stats', 'USAGE') AS read_all_stats,
       pg_has_role('pg_stat_scan_tables', 'USAGE') AS stat_scan_tables,
       pg_has_role('pg_signal_backend', 'USAGE') AS signal_backend,
       current_setting('server_version_num')::int AS server_version,
       EXISTS (SELECT 1 FROM pg_extension AS e WHERE e.extname = 'pgstattuple') AS pgstattuple
FROM pg_roles AS r
WHERE r.rolname = current_user
-- @block relations
-- One row per requested (schema, table, column): the relation's kind and owner and this login's
-- rights on it; column_update is whether it may UPDATE that column (a table-wide or a column
-- grant; NULL when no column was asked). Names are bound values matched against the catalog by
-- name, never parsed (to_regclass would raise 'permission denied for schema' where this login
-- has no USAGE: that is one of the answers wanted here). A missing schema, table or column
-- yields false / NULL, never an error.
--   owner_rights  this login has the owner's privileges (is the owner or inherits its role):
--                 what REINDEX, VACUUM and DROP INDEX need up to PostgreSQL 16
--   maintain      PostgreSQL 17+: the MAINTAIN privilege (GRANT MAINTAIN, or pg_maintain), which
--                 is enough for REINDEX and VACUUM; false on older servers
--   partitions    a partitioned table's partitions (fragments/tree.sql's leaves; 0 for any other)
--   unread_*      those this login may not SELECT (schema and name, by name): SELECT on the parent
--                 reads their rows through it, but pg_stats shows a partition's statistics only to
--                 a login that may read that partition, and the estimates are made from them
SELECT t.i::int AS i, t.schema_name, t.table_name, t.column_name,
       n.oid IS NOT NULL AS schema_exists,
       coalesce(has_schema_privilege(n.oid, 'USAGE'), false) AS schema_usage,
       c.oid IS NOT NULL AS table_exists,
       c.relkind::text AS relkind,
       o.rolname::text AS owner,
       coalesce(o.rolsuper, false) AS owner_superuser,
       coalesce(has_table_privilege(c.oid, 'SELECT'), false) AS can_select,
       coalesce(has_table_privilege(c.oid, 'INSERT'), false) AS can_insert,
       coalesce(has_table_privilege(c.oid, 'DELETE'), false) AS can_delete,
       coalesce(pg_has_role(c.relowner, 'USAGE'), false) AS owner_rights,
       coalesce(CASE WHEN current_setting('server_version_num')::int >= 170000
                     THEN has_table_privilege(c.oid, 'MAINTAIN') END, false) AS maintain,
       CASE WHEN t.column_name IS NOT NULL
            THEN coalesce(has_column_privilege(c.oid, a.attnum, 'UPDATE'), false) END AS column_update,
       coalesce(pp.partitions, 0) AS partitions, pp.unread_schemas, pp.unread_tables
FROM unnest(ARRAY[:schemas]::text[], ARRAY[:tables]::text[], ARRAY[:columns]::text[])
     WITH ORDINALITY AS t (schema_name, table_name, column_name, i)
LEFT JOIN pg_namespace AS n ON n.nspname = t.schema_name
LEFT JOIN pg_class AS c ON c.relnamespace = n.oid AND c.relname = t.table_name
LEFT JOIN pg_roles AS o ON o.oid = c.relowner
LEFT JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = t.column_name AND a.attnum > 0
                           AND NOT a.attisdropped
-- The partitions by fragments/tree.sql (pg_partition_tree would lock each one, and wait behind a lock).
LEFT JOIN LATERAL (SELECT count(*)::int AS partitions,
                          array_agg(ln.nspname::text ORDER BY ln.nspname, l.relname)
                              FILTER (WHERE NOT has_table_privilege(l.oid, 'SELECT')) AS unread_schemas,
                          array_agg(l.relname::text ORDER BY ln.nspname, l.relname)
                              FILTER (WHERE NOT has_table_privilege(l.oid, 'SELECT')) AS unread_tables
                   FROM unnest(CASE WHEN c.relkind = 'p' AND t.column_name IS NULL THEN {{tree.leaves(c.oid)}} END)
                        AS tr (rel)
                   JOIN pg_class AS l ON l.oid = tr.rel
                   JOIN pg_namespace AS ln ON ln.oid = l.relnamespace) AS pp ON true
ORDER BY t.i
