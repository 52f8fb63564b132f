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
-- A partitioned table (PGMQ's partitioned queues, pg-boss's job table) has no pages of its own,
-- and its key index is a partitioned index that pgstatindex refuses ('is not a btree index'), as
-- pgstattuple_approx refuses the parent: the statement failed where pgstattuple is installed. Its
-- figures are its partitions' (fragments/tree.sql's leaves; any other table is its own one leaf):
-- each leaf's key index read, fragmentation and density weighted by leaf pages, bloat by table
-- bytes, pages summed; the estimates sum the bytes needed and the pages held. The note names the
-- partitioned index and the number of partitions.
-- @block any
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT c.oid, c.relkind,
             CASE WHEN c.relkind = 'p'
                  THEN (SELECT array_agg(p.relid) FROM unnest({{tree.leaves(c.oid)}}) AS p (relid)
                        JOIN pg_class AS pc ON pc.oid = p.relid AND pc.relkind = 'r')
                  ELSE ARRAY[c.oid] END AS rels,
             (SELECT n.nspname FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
              WHERE e.extname = 'pgstattuple'
                AND CASE WHEN has_schema_privilege(n.oid, 'USAGE') THEN
                    has_function_privilege(to_regprocedure(format('%I.pgstatindex(regclass)', n.nspname)), 'EXECUTE')
                    AND has_function_privilege(
                        to_regprocedure(format('%I.pgstattuple_approx(regclass)', n.nspname)), 'EXECUTE') END) AS ext
      FROM pg_class AS c
      WHERE c.oid = to_regclass(:qualified_table) OFFSET 0) AS t
-- The leaves summed. An empty index's pgstatindex figures are NaN (no leaf page): fragmentation 0,
-- density unknown.
CROSS JOIN LATERAL (SELECT
    CASE WHEN count(x.frag) > 0 THEN coalesce(
        sum(x.frag * x.leaf_pages) FILTER (WHERE x.leaf_pages > 0 AND x.frag <> 'NaN')
        / nullif(sum(x.leaf_pages) FILTER (WHERE x.leaf_pages > 0 AND x.frag <> 'NaN'), 0), 0) END AS frag,
    sum(x.density * x.leaf_pages) FILTER (WHERE x.leaf_pages > 0 AND x.density <> 'NaN')
        / nullif(sum(x.leaf_pages) FILTER (WHERE x.leaf_pages > 0 AND x.density <> 'NaN'), 0) AS density,
    count(x.density) > 0 AS has_index_stats,
    sum(x.leaf_pages) AS leaf_pages,
    CASE WHEN count(x.bloat) > 0 THEN coalesce(
        sum(x.bloat * x.table_len) / nullif(sum(x.table_len) FILTER (WHERE x.bloat IS NOT NULL), 0), 0) END AS bloat,
    -- least and greatest skip a NULL: without a leaf to estimate from, the CASE keeps it NULL.
    CASE WHEN count(x.idx_bytes) > 0 THEN least(100, 100 * sum(x.idx_need_bytes) / sum(x.idx_bytes)) END
        AS idx_density,
    CASE WHEN count(x.idx_bytes) > 0 THEN greatest(0, 100 - 100 * sum(x.idx_need_bytes) / 0.9 / sum(x.idx_bytes)) END
        AS idx_bloat,
    CASE WHEN count(x.tbl_bytes) > 0 THEN greatest(0, 100 - 100 * sum(x.tbl_need_bytes) / sum(x.tbl_bytes)) END
        AS tbl_bloat,
    sum(x.idx_pages) AS idx_pages, sum(x.relpages) AS table_pages, count(x.idx) AS indexed, count(*) AS parts,
    min(x.idx) AS any_idx
FROM (SELECT s.relpages, s.idx, s.idx_pages, m.*, need.*
-- One row per leaf: its pages and rows, its key index, the widths its statistics give.
FROM (SELECT l.oid, l.relpages, l.reltuples, ix.indexrelid AS idx, ic.relpages AS idx_pages,
             (SELECT sum(s.avg_width) FROM pg_stats AS s
              WHERE s.schemaname = ln.nspname AND s.tablename = l.relname AND NOT s.inherited) AS row_width,
             (SELECT s.avg_width FROM pg_stats AS s
              WHERE s.schemaname = ln.nspname AND s.tablename = l.relname AND s.attname = :key_name
              AND NOT s.inherited) AS key_width
      FROM unnest(t.rels) AS r (rel)
      JOIN pg_class AS l ON l.oid = r.rel
      JOIN pg_namespace AS ln ON ln.oid = l.relnamespace
      LEFT JOIN LATERAL (SELECT i.indexrelid FROM pg_index AS i
                         JOIN pg_class AS ci ON ci.oid = i.indexrelid
                         JOIN pg_am AS am ON am.oid = ci.relam AND am.amname = 'btree'
                         JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                         WHERE i.indrelid = l.oid AND a.attname = :key_name AND i.indisvalid AND i.indpred IS NULL
                         ORDER BY i.indisprimary DESC, i.indnatts, i.indexrelid LIMIT 1) AS ix ON true
      LEFT JOIN pg_class AS ic ON ic.oid = ix.indexrelid
      OFFSET 0) AS s
CROSS JOIN LATERAL (SELECT
    CASE WHEN t.ext IS NOT NULL AND s.idx IS NOT NULL THEN query_to_xml(format(
        'SELECT avg_leaf_density, leaf_fragmentation, leaf_pages FROM %I.pgstatindex(%s::oid::regclass)',
        t.ext, s.idx), false, true, '') END AS xi,
    CASE WHEN t.ext IS NOT NULL THEN query_to_xml(format(
        'SELECT approx_free_percent, dead_tuple_percent, table_len FROM %I.pgstattuple_approx(%s::oid::regclass)',
        t.ext, s.oid), false, true, '') END AS xt OFFSET 0) AS px
CROSS JOIN LATERAL (SELECT
    (xpath('/row/leaf_fragmentation/text()', px.xi))[1]::text::float8 AS frag,
    (xpath('/row/avg_leaf_density/text()', px.xi))[1]::text::float8 AS density,
    (xpath('/row/leaf_pages/text()', px.xi))[1]::text::float8 AS leaf_pages,
    (xpath('/row/approx_free_percent/text()', px.xt))[1]::text::float8
      + (xpath('/row/dead_tuple_percent/text()', px.xt))[1]::text::float8 AS bloat,
    (xpath('/row/table_len/text()', px.xt))[1]::text::float8 AS table_len) AS m
-- What the leaf's rows need: a btree leaf tuple is an 8-byte header + a 4-byte line pointer + the
-- key, at the default 90% fill; a heap tuple a 24-byte header + a 4-byte line pointer + the row.
-- Counted only where the leaf was analyzed (reltuples >= 0) and the index is more than its metapage.
CROSS JOIN LATERAL (SELECT
    CASE WHEN s.idx_pages > 1 AND s.reltuples >= 0 THEN s.reltuples * (12 + coalesce(s.key_width, 8)) END
        AS idx_need_bytes,
    CASE WHEN s.idx_pages > 1 AND s.reltuples >= 0 THEN s.idx_pages * 8192.0 END AS idx_bytes,
    CASE WHEN s.relpages > 0 AND s.reltuples >= 0 AND s.row_width IS NOT NULL
         THEN s.reltuples * (28 + s.row_width) END AS tbl_need_bytes,
    CASE WHEN s.relpages > 0 AND s.reltuples >= 0 AND s.row_width IS NOT NULL
         THEN s.relpages * 8168.0 END AS tbl_bytes) AS need) AS x) AS a
CROSS JOIN LATERAL (SELECT (SELECT ir.relname FROM pg_class AS ir
                            WHERE ir.oid = coalesce(pg_partition_root(a.any_idx::regclass)::oid, a.any_idx)) AS idx_name) AS k
CROSS JOIN LATERAL (SELECT
    CASE WHEN t.relkind = 'p' THEN json_build_object('source', 'pgstatindex', 'index', k.idx_name, 'partitions', a.parts)
         ELSE json_build_object('source', 'pgstatindex', 'index', k.idx_name) END::text AS idx_note,
    CASE WHEN t.relkind = 'p' THEN json_build_object('source', 'estimate (pg_class, pg_stats)', 'index', k.idx_name,
                                                     'partitions', a.parts)
         ELSE json_build_object('source', 'estimate (pg_class, pg_stats)', 'index', k.idx_name) END::text AS est_note) AS n
CROSS JOIN LATERAL (VALUES
    ('fragmentation_pct', coalesce(a.frag, a.idx_bloat)::float8,
     CASE WHEN a.indexed = 0 THEN 'no btree index leads with the key column'
          WHEN a.frag IS NOT NULL THEN n.idx_note ELSE n.est_note END),
    ('page_density_pct', CASE WHEN a.has_index_stats THEN a.density ELSE a.idx_density END::float8,
     CASE WHEN a.has_index_stats THEN n.idx_note ELSE n.est_note END),
    ('page_count', coalesce(a.leaf_pages, a.idx_pages)::float8,
     CASE WHEN a.leaf_pages IS NOT NULL THEN n.idx_note ELSE 'pg_class.relpages of the key index' END),
    ('table_bloat_pct', coalesce(a.bloat, a.tbl_bloat)::float8,
     CASE WHEN a.bloat IS NOT NULL THEN 'pgstattuple_approx' ELSE 'estimate (pg_class, pg_stats)' END),
    ('table_pages', a.table_pages::float8, 'pg_class.relpages')
) AS v (metric, value, note)
