-- rebuild: REINDEX INDEX CONCURRENTLY per index that needs it, then VACUUM (ANALYZE) of the table.
-- Both run outside a transaction (the engine requires it; action sessions are autocommit) under the
-- session's lock_timeout. Neither blocks the queue's INSERT/UPDATE/DELETE: they take SHARE UPDATE
-- EXCLUSIVE on the table, which row writers do not conflict with. A failed or interrupted REINDEX
-- CONCURRENTLY leaves an invalid index named <index>_ccnew (or _ccold); the preview lists such
-- leftovers and the action drops them first (DROP INDEX CONCURRENTLY), but never one that another
-- session is building or dropping (block leftovers).
-- A partitioned table (pg-boss's job table, PGMQ's partitioned queues) has no index pages of its
-- own: its indexes are partitioned indexes, which pgstatindex refuses ('is not a btree index'), so
-- every figure was unknown and nothing was reindexed. Its indexes here are its partitions' (the
-- leaves of fragments/tree.sql; a plain table is its own one), each measured and reindexed on its
-- own, with its own table's rows and dead tuples; VACUUM of the parent vacuums every partition.
-- @block indexes
-- index_oid: what the execution binds each previewed index by (a name may be another index by then).
-- table_*: the figures of the table (the partition) the index is on.
SELECT i.indexrelid::bigint AS index_oid, ic.relname AS index_name, n.nspname AS index_schema, am.amname AS method,
       tc.relname AS table_name, tc.reltuples AS table_reltuples,
       pg_stat_get_live_tuples(i.indrelid) AS table_live_tuples,
       pg_stat_get_dead_tuples(i.indrelid) AS table_dead_tuples,
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
JOIN pg_class AS tc ON tc.oid = i.indrelid
WHERE i.indrelid IN (SELECT unnest({{tree.leaves(r.oid)}}) FROM (SELECT to_regclass(:qualified_table) AS oid) AS r)
ORDER BY ic.relname
-- @block table
-- relkind: r table, p partitioned table; anything else (a view) is refused: VACUUM would skip it
-- with a mere warning and it has no indexes of its own. A partitioned table's figures are its
-- partitions' summed (its own are zeros); its last vacuum that of the least recently vacuumed one,
-- none when one never was (as ghost_records reads 'never vacuumed'; min() alone skipped it).
SELECT c.oid IS NOT NULL AS table_exists, c.relkind::text AS relkind,
       coalesce(st.live, 0) AS live_tuples, coalesce(st.dead, 0) AS dead_tuples,
       c.reltuples AS reltuples, st.last_vacuum, st.last_autovacuum, st.bytes AS table_bytes,
       current_setting('server_version_num')::int AS server_version,
       to_regprocedure('pgstatindex(regclass)') IS NOT NULL AS has_pgstatindex,
       (SELECT string_agg(p.pid::text, ', ') FROM pg_stat_progress_create_index AS p
        WHERE p.relid = ANY (lv.rels || c.oid) AND p.pid <> pg_backend_pid()) AS other_builds
FROM (SELECT to_regclass(:qualified_table) AS oid) AS r
LEFT JOIN pg_class AS c ON c.oid = r.oid
LEFT JOIN LATERAL (SELECT coalesce({{tree.leaves(c.oid)}}, ARRAY[c.oid]) AS rels) AS lv ON c.oid IS NOT NULL
LEFT JOIN LATERAL (SELECT sum(pg_stat_get_live_tuples(l.rel)) AS live, sum(pg_stat_get_dead_tuples(l.rel)) AS dead,
                          CASE WHEN bool_and(l.vac IS NOT NULL) THEN min(l.vac) END AS last_vacuum,
                          CASE WHEN bool_and(l.autovac IS NOT NULL) THEN min(l.autovac) END AS last_autovacuum,
                          sum(pg_table_size(l.rel)) AS bytes
                   FROM unnest(lv.rels) AS u (rel)
                   CROSS JOIN LATERAL (SELECT u.rel, pg_stat_get_last_vacuum_time(u.rel) AS vac,
                                              pg_stat_get_last_autovacuum_time(u.rel) AS autovac) AS l) AS st
       ON c.oid IS NOT NULL
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
-- @block leftovers
-- The invalid leftovers on the table now, and who else works on each: a backend building it
-- (during CREATE INDEX CONCURRENTLY and REINDEX CONCURRENTLY pg_stat_progress_create_index names
-- the new index, <index>_ccnew, as index_relid) or holding a lock on it stronger than a writer's
-- (REINDEX CONCURRENTLY holds SHARE UPDATE EXCLUSIVE on its indexes to its end, as does DROP INDEX
-- CONCURRENTLY). Such a leftover is another session's work in progress: never dropped by queueops.
SELECT i.indexrelid::bigint AS index_oid, ic.relname AS index_name, n.nspname AS index_schema,
       (SELECT min(p.pid) FROM pg_stat_progress_create_index AS p
        WHERE p.index_relid = i.indexrelid AND p.pid <> pg_backend_pid()) AS building_pid,
       (SELECT min(l.pid) FROM pg_locks AS l
        WHERE l.locktype = 'relation' AND l.relation = i.indexrelid AND l.granted AND l.pid <> pg_backend_pid()
          AND l.database = (SELECT d.oid FROM pg_database AS d WHERE d.datname = current_database())
          AND l.mode IN ('ShareUpdateExclusiveLock', 'ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock',
                         'AccessExclusiveLock')) AS holding_pid
FROM pg_index AS i
JOIN pg_class AS ic ON ic.oid = i.indexrelid
JOIN pg_namespace AS n ON n.oid = ic.relnamespace
WHERE i.indrelid IN (SELECT unnest({{tree.leaves(r.oid)}}) FROM (SELECT to_regclass(:qualified_table) AS oid) AS r)
  AND NOT i.indisvalid AND ic.relname ~ '_cc(new|old)[0-9]*$'
ORDER BY ic.relname
-- @block drop_leftover
-- No IF EXISTS: a leftover another session dropped meanwhile fails here ("does not exist") and is
-- reported as gone, not as dropped by this action.
DROP INDEX CONCURRENTLY {index}
-- @block vacuum
VACUUM (ANALYZE) {table}
