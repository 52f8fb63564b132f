-- fragmentation_pct (slow): the key index's leaf fragmentation and page density, and the
-- table's bloat. The key index is the valid btree index that leads with the queue's key column
-- (the primary key first).
-- With the pgstattuple extension (looked up in pg_extension, its functions by name only in a
-- schema this login may use -- to_regprocedure raises 'permission denied for schema' on pg_toast
-- for a pg_monitor login, and the planner applies the filter to every pg_namespace row; see
-- ghost_records.sql -- called through query_to_xml so the file runs without it; note names the
-- function):
--   fragmentation_pct  pgstatindex().leaf_fragmentation: leaf pages out of logical order
--   page_density_pct   pgstatindex().avg_leaf_density
--   page_count         pgstatindex().leaf_pages
--   table_bloat_pct    pgstattuple_approx(): approx_free_percent + dead_tuple_percent
-- Without it, estimates from pg_class and pg_stats (no page is read; note 'estimate ...'):
--   fragmentation_pct  index bloat: share of the index's pages beyond what its rows need at 90% fill
--   page_density_pct   bytes the index rows need / bytes of its pages
--   page_count         pg_class.relpages of the index
--   table_bloat_pct    share of the table's pages beyond what reltuples x average row width needs
-- table_pages is pg_class.relpages of the table (as of the last VACUUM / ANALYZE).
-- pgstatindex reads the whole index and pgstattuple_approx the not-all-visible table pages:
-- this collector runs on the slow cadence.
-- @block any
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT c.oid, c.relpages, c.reltuples, ix.indexrelid AS idx, ic.relname AS idx_name, ic.relpages AS idx_pages,
             (SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
              WHERE e.extname = 'pgstattuple'
                AND CASE WHEN has_schema_privilege(n.oid, 'USAGE') THEN
                    has_function_privilege(to_regprocedure(format('%I.pgstatindex(regclass)', n.nspname)), 'EXECUTE')
                    AND has_function_privilege(
                        to_regprocedure(format('%I.pgstattuple_approx(regclass)', n.nspname)), 'EXECUTE') END) AS ext,
             (SELECT sum(s.avg_width) FROM pg_stats AS s
              WHERE s.schemaname = :schema_name AND s.tablename = :table_name AND NOT s.inherited) AS row_width,
             (SELECT s.avg_width FROM pg_stats AS s
              WHERE s.schemaname = :schema_name AND s.tablename = :table_name AND s.attname = :key_name
              ORDER BY s.inherited LIMIT 1) AS key_width
      FROM pg_class AS c
      LEFT JOIN LATERAL (SELECT i.indexrelid FROM pg_index AS i
                         JOIN pg_class AS ci ON ci.oid = i.indexrelid
                         JOIN pg_am AS am ON am.oid = ci.relam AND am.amname = 'btree'
                         JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                         WHERE i.indrelid = c.oid AND a.attname = :key_name AND i.indisvalid AND i.indpred IS NULL
                         ORDER BY i.indisprimary DESC, i.indnatts, i.indexrelid LIMIT 1) AS ix ON true
      LEFT JOIN pg_class AS ic ON ic.oid = ix.indexrelid
      WHERE c.oid = to_regclass(:qualified_table) OFFSET 0) AS s
CROSS JOIN LATERAL (SELECT
    CASE WHEN s.ext IS NOT NULL AND s.idx IS NOT NULL THEN query_to_xml(format(
        'SELECT avg_leaf_density, leaf_fragmentation, leaf_pages, deleted_pages FROM %I.pgstatindex(%s::oid::regclass)',
        s.ext, s.idx), false, true, '') END AS xi,
    CASE WHEN s.ext IS NOT NULL THEN query_to_xml(format(
        'SELECT approx_free_percent, dead_tuple_percent FROM %I.pgstattuple_approx(%s::oid::regclass)',
        s.ext, s.oid), false, true, '') END AS xt OFFSET 0) AS px
CROSS JOIN LATERAL (SELECT
    (xpath('/row/leaf_fragmentation/text()', px.xi))[1]::text::float8 AS frag,
    (xpath('/row/avg_leaf_density/text()', px.xi))[1]::text::float8 AS density,
    (xpath('/row/leaf_pages/text()', px.xi))[1]::text::float8 AS leaf_pages,
    (xpath('/row/approx_free_percent/text()', px.xt))[1]::text::float8
      + (xpath('/row/dead_tuple_percent/text()', px.xt))[1]::text::float8 AS bloat) AS m
CROSS JOIN LATERAL (SELECT
    -- btree leaf tuple: 8-byte header + 4-byte line pointer + the key, at the default 90% fill
    greatest(s.reltuples, 0) * (12 + coalesce(s.key_width, 8)) AS idx_need_bytes,
    -- heap tuple: 24-byte header + 4-byte line pointer + the average row width
    greatest(s.reltuples, 0) * (28 + s.row_width) AS tbl_need_bytes) AS need
CROSS JOIN LATERAL (SELECT
    CASE WHEN s.idx_pages > 1 AND s.reltuples >= 0
         THEN least(100, 100 * need.idx_need_bytes / (s.idx_pages * 8192.0)) END AS idx_density,
    CASE WHEN s.idx_pages > 1 AND s.reltuples >= 0
         THEN greatest(0, 100 - 100 * need.idx_need_bytes / 0.9 / (s.idx_pages * 8192.0)) END AS idx_bloat,
    CASE WHEN s.relpages > 0 AND s.reltuples >= 0 AND s.row_width IS NOT NULL
         THEN greatest(0, 100 - 100 * need.tbl_need_bytes / (s.relpages * 8168.0)) END AS tbl_bloat) AS est
CROSS JOIN LATERAL (SELECT json_build_object('source', 'pgstatindex', 'index', s.idx_name)::text AS idx_note,
                           json_build_object('source', 'estimate (pg_class, pg_stats)', 'index', s.idx_name)::text
                               AS est_note) AS n
CROSS JOIN LATERAL (VALUES
    ('fragmentation_pct', CASE WHEN m.frag IS NOT NULL THEN CASE WHEN m.frag = 'NaN'::float8 THEN 0 ELSE m.frag END
                               ELSE est.idx_bloat END::float8,
     CASE WHEN s.idx IS NULL THEN 'no btree index leads with the key column'
          WHEN m.frag IS NOT NULL THEN n.idx_note ELSE n.est_note END),
    ('page_density_pct', CASE WHEN m.density IS NOT NULL THEN CASE WHEN m.density = 'NaN'::float8 THEN NULL ELSE m.density END
                              ELSE est.idx_density END::float8,
     CASE WHEN m.density IS NOT NULL THEN n.idx_note ELSE n.est_note END),
    ('page_count', coalesce(m.leaf_pages, s.idx_pages)::float8,
     CASE WHEN m.leaf_pages IS NOT NULL THEN n.idx_note ELSE 'pg_class.relpages of the key index' END),
    ('table_bloat_pct', coalesce(m.bloat, est.tbl_bloat)::float8,
     CASE WHEN m.bloat IS NOT NULL THEN 'pgstattuple_approx' ELSE 'estimate (pg_class, pg_stats)' END),
    ('table_pages', s.relpages::float8, 'pg_class.relpages')
) AS v (metric, value, note)
