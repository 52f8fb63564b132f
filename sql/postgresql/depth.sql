-- depth: items ready to dequeue now, per queue kind.
-- Counting is bounded: at most :cap index entries are read (an index-only scan of the ready
-- items), so the count is exact below the cap; at the cap the planner's estimate
-- (pg_class.reltuples) is reported instead and the note says 'estimate'.
-- @block delete
SELECT :queue AS queue, 'depth' AS metric,
       CASE WHEN s.n < :cap THEN s.n ELSE greatest(s.n, c.reltuples) END::float8 AS value,
       CASE WHEN s.n < :cap THEN 'exact' ELSE 'estimate' END AS note
FROM (SELECT count(*) AS n FROM (SELECT 1 FROM {table} LIMIT :cap) AS l) AS s
LEFT JOIN pg_class AS c ON c.oid = to_regclass(:qualified_table)
-- @block status
SELECT :queue AS queue, 'depth' AS metric,
       CASE WHEN s.n < :cap THEN s.n ELSE greatest(s.n, c.reltuples) END::float8 AS value,
       CASE WHEN s.n < :cap THEN 'exact' ELSE 'estimate' END AS note
FROM (SELECT count(*) AS n FROM (SELECT 1 FROM {table} WHERE {status} IN (:ready_values) LIMIT :cap) AS l) AS s
LEFT JOIN pg_class AS c ON c.oid = to_regclass(:qualified_table)
-- @block lease
SELECT :queue AS queue, 'depth' AS metric,
       CASE WHEN s.n < :cap THEN s.n ELSE greatest(s.n, c.reltuples) END::float8 AS value,
       CASE WHEN s.n < :cap THEN 'exact' ELSE 'estimate' END AS note
FROM (SELECT count(*) AS n FROM (SELECT 1 FROM {table} WHERE {lease} IS NULL LIMIT :cap) AS l) AS s
LEFT JOIN pg_class AS c ON c.oid = to_regclass(:qualified_table)
-- @block due
SELECT :queue AS queue, 'depth' AS metric,
       CASE WHEN s.n < :cap THEN s.n ELSE greatest(s.n, c.reltuples) END::float8 AS value,
       CASE WHEN s.n < :cap THEN 'exact' ELSE 'estimate' END AS note
FROM (SELECT count(*) AS n FROM (SELECT 1 FROM {table} WHERE {due} <= now() LIMIT :cap) AS l) AS s
LEFT JOIN pg_class AS c ON c.oid = to_regclass(:qualified_table)
-- @block ring
SELECT :queue AS queue, 'depth' AS metric, (s.{push} - s.{pop})::float8 AS value, 'exact' AS note
FROM {seq_table} AS s
