-- ghost_records (slow): dead tuples, the PostgreSQL twin of SQL Server's ghost records.
--   ghost_records   dead tuples: pgstattuple_approx()'s dead_tuple_count when the pgstattuple
--                   extension is installed and this role may run it (note 'pgstattuple_approx':
--                   reads the pages the visibility map does not mark all-visible), otherwise
--                   the statistics' n_dead_tup (note 'estimate (pg_stat_user_tables)')
--   dead_tuples     n_dead_tup from pg_stat_user_tables, always (statistics, no page read)
--   dead_tuple_pct  dead / (live + dead), from the same source as ghost_records
--   vacuum_age_s    seconds since the last (auto)vacuum finished (NULL: never)
-- The extension is looked up in pg_extension (any schema); its function is called through
-- query_to_xml so that this file still runs where the extension is absent. The function's name is
-- looked up (to_regprocedure) only in a schema this login may use: the planner applies the filter
-- to every pg_namespace row, and to_regprocedure raises 'permission denied for schema' on pg_toast
-- or another session's pg_temp_N for a login that is not a superuser (a pg_monitor collector).
-- CASE is what orders the two checks (AND does not). Dead tuples that
-- stay high after a vacuum point at the oldest_snapshot collector's holder.
-- A partitioned table (pg-boss's pgboss.job, PGMQ's partitioned queues) holds no rows itself: its
-- own statistics are zeros, it is never vacuumed, and pgstattuple_approx refuses it. Its figures
-- are its partitions' (fragments/tree.sql's leaves; any other table is its own one): dead and
-- live tuples summed, and vacuum_age_s that of the least recently vacuumed partition holding dead
-- tuples (NULL, never vacuumed, if one of those never was; any partition's without dead tuples,
-- where vacuum has nothing to do; a plain table reads as before). Read from the
-- parent, pg-boss's ghost records were 0 and 'never vacuumed' whatever piled up, and with
-- pgstattuple installed the statement failed.
-- @block any
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT c.relkind, st.n_dead_tup, st.n_live_tup, st.vacuumed, st.parts, st.dirty,
             (SELECT 'SELECT sum(a.dead_tuple_count) AS dead_tuple_count, sum(a.approx_tuple_count) AS approx_tuple_count FROM ('
                     || string_agg(format('SELECT dead_tuple_count, approx_tuple_count FROM %I.pgstattuple_approx(%s::oid::regclass)',
                                          n.nspname, l.rel), ' UNION ALL ') || ') AS a'
              FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace
              CROSS JOIN unnest(lv.rels) AS l (rel)
              WHERE e.extname = 'pgstattuple'
                AND CASE WHEN has_schema_privilege(n.oid, 'USAGE') THEN has_function_privilege(
                        to_regprocedure(format('%I.pgstattuple_approx(regclass)', n.nspname)), 'EXECUTE') END
             ) AS probe
      FROM pg_class AS c
      CROSS JOIN LATERAL (SELECT {{tree.leaves(c.oid)}} AS rels) AS lv
      CROSS JOIN LATERAL (SELECT sum(d.dead) AS n_dead_tup, sum(d.live) AS n_live_tup,
                                 CASE WHEN bool_or(d.dead > 0 AND d.vac IS NULL) THEN NULL
                                      WHEN bool_or(d.dead > 0) THEN min(d.vac) FILTER (WHERE d.dead > 0)
                                      ELSE min(d.vac) END AS vacuumed,
                                 count(*) AS parts, count(*) FILTER (WHERE d.dead > 0) AS dirty
                          FROM unnest(lv.rels) AS l (rel)
                          CROSS JOIN LATERAL (SELECT pg_stat_get_dead_tuples(l.rel) AS dead, pg_stat_get_live_tuples(l.rel) AS live,
                                                     greatest(pg_stat_get_last_vacuum_time(l.rel),
                                                              pg_stat_get_last_autovacuum_time(l.rel)) AS vac) AS d) AS st
      WHERE c.oid = to_regclass(:qualified_table) OFFSET 0) AS s
CROSS JOIN LATERAL (SELECT CASE WHEN s.probe IS NOT NULL THEN query_to_xml(s.probe, false, true, '') END AS x OFFSET 0) AS px
CROSS JOIN LATERAL (SELECT (xpath('/row/dead_tuple_count/text()', px.x))[1]::text::float8 AS dead,
                           (xpath('/row/approx_tuple_count/text()', px.x))[1]::text::float8 AS live) AS a
CROSS JOIN LATERAL (VALUES
    ('ghost_records', coalesce(a.dead, s.n_dead_tup)::float8,
     CASE WHEN a.dead IS NOT NULL THEN 'pgstattuple_approx' ELSE 'estimate (pg_stat_user_tables)' END),
    ('dead_tuples', s.n_dead_tup::float8, 'estimate (pg_stat_user_tables)'),
    ('dead_tuple_pct', coalesce(CASE WHEN a.dead IS NOT NULL THEN 100 * a.dead / nullif(a.dead + a.live, 0)
                            ELSE 100.0 * s.n_dead_tup / nullif(s.n_dead_tup + s.n_live_tup, 0) END, 0)::float8,
     CASE WHEN a.dead IS NOT NULL THEN 'pgstattuple_approx' ELSE 'estimate (pg_stat_user_tables)' END),
    ('vacuum_age_s', extract(epoch FROM now() - s.vacuumed)::float8,
     CASE WHEN s.relkind <> 'p' THEN CASE WHEN s.vacuumed IS NULL THEN 'never vacuumed' ELSE 'pg_stat_user_tables' END
          WHEN s.vacuumed IS NULL AND s.dirty > 0
          THEN format('never vacuumed: a partition holding dead tuples (%s of %s partitions hold some)', s.dirty, s.parts)
          WHEN s.vacuumed IS NULL THEN format('never vacuumed (%s partitions)', s.parts)
          WHEN s.dirty > 0
          THEN format('pg_stat_user_tables: the least recently vacuumed of the %s partitions holding dead tuples (of %s)',
                      s.dirty, s.parts)
          ELSE format('pg_stat_user_tables: the least recently vacuumed of %s partitions', s.parts) END)
) AS v (metric, value, note)
