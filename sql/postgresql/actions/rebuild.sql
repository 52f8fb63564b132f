-- rebuild: REINDEX INDEX CONCURRENTLY per index that needs it, then VACUUM (ANALYZE) of the table.
-- Both run outside a transaction (the engine requires it; action sessions are autocommit) under the
-- session's lock_timeout. Neither blocks the queue's INSERT/UPDATE/DELETE: they take SHARE UPDATE
-- EXCLUSIVE on the table, which row writers do not conflict with. A failed or interrupted REINDEX
-- CONCURRENTLY leaves an invalid index named <index>_ccnew (or _ccold); the preview lists such
-- leftovers and the action drops them first (DROP INDEX CONCURRENTLY).
-- @block indexes
SELECT ic.relname AS index_name, n.nspname AS index_schema, am.amname AS method,
       i.indisvalid AS valid, i.indisprimary AS is_primary, i.indisunique AS is_unique,
       pg_relation_size(i.indexrelid) AS bytes,
       pg_relation_size(i.indexrelid) / current_setting('block_size')::int AS pages,
       coalesce((SELECT o.option_value::int FROM pg_options_to_table(ic.reloptions) AS o
                 WHERE o.option_name = 'fillfactor'), 90) AS fillfactor,
       (NOT i.indisvalid AND ic.relname ~ '_cc(new|old)[0-9]*$') AS leftover
FROM pg_index AS i
JOIN pg_class AS ic ON ic.oid = i.indexrelid
JOIN pg_namespace AS n ON n.oid = ic.relnamespace
JOIN pg_am AS am ON am.oid = ic.relam
WHERE i.indrelid = to_regclass(:qualified_table)
ORDER BY ic.relname
-- @block table
SELECT c.oid IS NOT NULL AS table_exists,
       coalesce(s.n_live_tup, 0) AS live_tuples, coalesce(s.n_dead_tup, 0) AS dead_tuples,
       c.reltuples AS reltuples,
       s.last_vacuum, s.last_autovacuum, pg_table_size(c.oid) AS table_bytes,
       current_setting('server_version_num')::int AS server_version,
       to_regprocedure('pgstatindex(regclass)') IS NOT NULL AS has_pgstatindex,
       (SELECT string_agg(p.pid::text, ', ') FROM pg_stat_progress_create_index AS p
        WHERE p.relid = c.oid AND p.pid <> pg_backend_pid()) AS other_builds
FROM (SELECT to_regclass(:qualified_table) AS oid) AS r
LEFT JOIN pg_class AS c ON c.oid = r.oid
LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid
-- @block index_stats
-- pgstatindex (extension pgstattuple) reads the whole index: exact leaf density and leaf
-- fragmentation, bounded by the statement timeout.
SELECT s.index_size, s.internal_pages, s.leaf_pages, s.empty_pages, s.deleted_pages,
       s.avg_leaf_density, s.leaf_fragmentation
FROM pgstatindex(to_regclass(:qualified_index)) AS s
-- @block reindex_concurrently
REINDEX INDEX CONCURRENTLY {index}
-- @block reindex_offline
REINDEX INDEX {index}
-- @block drop_leftover
DROP INDEX CONCURRENTLY IF EXISTS {index}
-- @block vacuum
VACUUM (ANALYZE) {table}
