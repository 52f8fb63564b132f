-- plan_rows: the rows (live and dead) of every table the collector service's kept plans read,
-- from the statistics counters: no lock on any table, current at each commit. The runner makes
-- its plans again when a table has grown or shrunk a lot since they were made
-- (collectors/runner.py, check_plans): a generic plan made on an empty table would go on reading
-- it whole once it fills. A partitioned table (pg-boss's job table) has no rows of its own: its
-- partitions' are summed (fragments/tree.sql: a catalog read, no lock on them). A table that is
-- gone reads 0.
-- @block main
SELECT t.relation,
       coalesce((SELECT sum(pg_stat_get_live_tuples(r.oid) + pg_stat_get_dead_tuples(r.oid))
                 FROM unnest({{tree.relations(c.oid)}}) AS r (oid)), 0)::float8 AS tuples
FROM unnest(ARRAY[:relations]::text[]) AS t (relation)
LEFT JOIN pg_class AS c ON c.oid = to_regclass(t.relation)
