-- depth: items ready to dequeue now, per queue kind; also rows_total and per-status counts.
-- Counting is bounded: every count reads at most :cap entries in index order (ORDER BY ... LIMIT,
-- so the planner walks an index and stops; a bitmap scan would read every match first), so a count
-- is exact below the cap. A status count's read follows the table's indexes (issue 29), chosen where
-- the column types are read (coltypes.status_read_fragments, from catalog_types' leads_index):
-- `FROM {ready_rows} ... WHERE {status} {ready_match} ORDER BY {status_order}` is one read of
-- `= ANY (ARRAY[typed constants]) ORDER BY {status}` when a btree index leads with the status
-- column (Oban, River: their fetch index; the per-value read below walked their primary key,
-- ~9,000 buffers at 200,000 rows), and each value on its own from unnest, `= u.s ORDER BY {status},
-- {key}`, when none does (procrastinate: the ANY read was a sequential scan and a sort of the whole
-- table there), walked along the key and stopping at the cap. At the cap the value is
-- an estimate from the planner's statistics and the note says which:
--   'estimate (pg_class.reltuples)'      rows in the table
--   'estimate (pg_stats MCV)'            reltuples x the share of the status values
--   'estimate (partial index of the ready rows: reltuples)'  closed_when_true: the library's index
--                                        on exactly the waiting rows (prelude, lateral ri)
--   'estimate (pg_stats null_frac)'      reltuples x the share of NULL leases
--   'estimate (pg_stats histogram)'      due: rows x the share due (most common values and histogram)
--   'estimate (open rows: ...)'          due with open_when_null: see block due
-- count_failed (lease kind) is always that estimate: rows whose error column is set have no index
-- to count them by, and counting without one would read the table.
--   'at least (cap reached; no statistics)' when the table was never analyzed.
--   'at least (cap reached; the statistics estimate no more)' when the estimate is not above
--   what the cap's read counted (status blocks).
-- A count of all rows (rows_total; a delete queue's depth) is not even started when the live-row
-- counter pg_stat_user_tables.n_live_tup (kept current by every commit, unlike reltuples) is at
-- least :skip_above (10 x the cap): it would only reach the cap to report an estimate anyway.
--   'estimate (pg_stat_user_tables.n_live_tup; not counted: far above the cap)'
-- The count sits in the CASE branch not taken, which PostgreSQL never executes. :skip_above is
-- NULL (never skip) for a queue with open_when_null: its counter includes the finished rows.
-- The ready / processing / done counts are always counted: a drained backlog must not show the
-- share of the last ANALYZE.
-- pg_class, pg_stats and the live-row counter are read without locking the queue table, once for
-- every queue of the target (block 'prelude', a WITH clause the runner puts before the per-queue
-- blocks).
-- OFFSET 0 keeps each count a single subquery: without it the planner would inline it into
-- every expression that uses it and run it several times.
-- @block prelude
WITH queueops_q AS MATERIALIZED (
    -- pg_stat_get_live_tuples is how pg_stat_user_tables defines n_live_tup; joined as the view it
    -- would aggregate the view over every table of the database, every cycle.
    -- A partitioned table's pages and live rows are its partitions' (its own relpages and counter
    -- are 0: pg-boss's job table was read as a small one, its rows counted by sorting it; issue 29),
    -- and so are its rows and statistics: autovacuum never analyzes a partitioned table, so its own
    -- reltuples stays -1 and it has no pg_stats rows unless someone ran ANALYZE on it by hand. Every
    -- estimate of pg-boss's and PGMQ's partitioned tables read "at least" the cap (pg-boss 12 depth
    -- 1,250 for 5,250; count_done absent). Its rows are the sum of its analyzed partitions'
    -- reltuples, and each statistic below their average weighted by those rows (src).
    SELECT t.queue, rt.reltuples,
           coalesce(pt.n_live_tup, pg_stat_get_live_tuples(c.oid)) AS n_live_tup,
           coalesce(pt.pages, c.relpages, 0) AS pages,
           -- open_when_null (issue 29): the open rows as the library's partial index on them counts
           -- them (its reltuples, set by ANALYZE and VACUUM); NULL without such an index.
           o.open_tuples,
           ps.lease_null_frac, ps.error_null_frac, ps.due_share,
           -- A status queue's values' shares of the rows (the status column's most common values):
           -- ready less the share of rows a closed_when_true flag marks (pg-boss 12's blocked
           -- jobs: in a ready status, never ready; the flagged share is of every row, so a flagged
           -- row in another status, pg-boss's cancelled flow child, is taken off too), processing,
           -- done. NULL where no value of the list is a most common value.
           sh.ready_share, sh.processing_share, sh.done_share,
           -- The ready rows above the cap, for every status block: with closed_when_true, the
           -- library's partial index on exactly them where every leaf has one (pg-boss 12's
           -- job_i11; lateral ri), else the ready share of the rows; and what the note says they
           -- are from.
           CASE WHEN ri.ready_tuples IS NOT NULL THEN ri.ready_tuples
                WHEN rt.reltuples >= 0 THEN rt.reltuples * sh.ready_share END AS ready_rows,
           CASE WHEN ri.ready_tuples IS NOT NULL THEN 'partial index of the ready rows: reltuples'
                ELSE 'pg_stats MCV' END AS ready_src,
           -- A lease queue's free share (lease_follow_runnable's estimate above the cap): the
           -- lease's null_frac, and with a ready_flag the smaller of that and the flag's true share
           -- (graphile-worker's is_available implies locked_at IS NULL: the flag's rows are free
           -- rows); NULL for a lock-until lease (lease_ready "past") or without statistics.
           CASE WHEN t.lease_free = 'null' THEN
                CASE WHEN t.flag_col = '' THEN ps.lease_null_frac ELSE least(ps.lease_null_frac, ps.flag_share) END
           END AS free_share
    FROM unnest(ARRAY[:queue_names]::text[], ARRAY[:queue_tables]::text[], ARRAY[:schema_names]::text[],
                ARRAY[:table_names]::text[], ARRAY[:status_names]::text[], ARRAY[:lease_names]::text[],
                ARRAY[:due_names]::text[], ARRAY[:error_names]::text[], ARRAY[:naive_zones]::text[],
                ARRAY[:open_indexes]::text[], ARRAY[:closed_names]::text[], ARRAY[:flag_names]::text[],
                ARRAY[:lease_free]::text[], ARRAY[:ready_indexes]::text[], ARRAY[:ready_predicates]::text[],
                ARRAY[:ready_texts]::text[], ARRAY[:processing_texts]::text[], ARRAY[:done_texts]::text[])
         AS t (queue, qualified, sch, tbl, status_col, lease_col, due_col, error_col, naive_zone, open_indexes, closed_cols,
               flag_col, lease_free, ready_indexes, ready_pred, ready_vals, processing_vals, done_vals)
    LEFT JOIN pg_class AS c ON c.oid = to_regclass(t.qualified)
    LEFT JOIN LATERAL (SELECT sum(pc.relpages) AS pages, sum(pg_stat_get_live_tuples(pc.oid)) AS n_live_tup,
                              sum(pc.reltuples) FILTER (WHERE pc.reltuples >= 0) AS tuples,
                              array_agg(pn.nspname::text) FILTER (WHERE pc.reltuples >= 0) AS schs,
                              array_agg(pc.relname::text) FILTER (WHERE pc.reltuples >= 0) AS tbls,
                              array_agg(pc.reltuples::float8) FILTER (WHERE pc.reltuples >= 0) AS ws
                       FROM unnest({{tree.leaves(c.oid)}}) AS p (relid) JOIN pg_class AS pc ON pc.oid = p.relid
                       JOIN pg_namespace AS pn ON pn.oid = pc.relnamespace
                       WHERE c.relkind = 'p') AS pt ON true
    CROSS JOIN LATERAL (SELECT CASE WHEN c.relkind = 'p' THEN coalesce(pt.tuples, -1) ELSE c.reltuples END AS reltuples) AS rt
    -- Where the statistics are read (each source's pg_stats row of a column, the non-inherited one
    -- first): the table itself, weight 1; a partitioned table's analyzed partitions, weighted by
    -- their rows. A source without a row for the column is left out of that column's average.
    CROSS JOIN LATERAL (SELECT CASE WHEN c.relkind = 'p' THEN pt.schs ELSE ARRAY[t.sch] END AS schs,
                               CASE WHEN c.relkind = 'p' THEN pt.tbls ELSE ARRAY[t.tbl] END AS tbls,
                               CASE WHEN c.relkind = 'p' THEN pt.ws ELSE ARRAY[1::float8] END AS ws) AS src
    -- Every statistic the queue's figures use, from one read of pg_stats per source: the row of
    -- each of the queue's columns (status, lease, error, ready_flag, due, closed_when_true flags),
    -- the non-inherited one first. Per column (cols), each source's figure weighted by its rows
    -- over the sources that have a row for that column:
    --   null_frac    the lease's and the error column's share of NULLs
    --   true_share   a boolean's share of true (its most common value 't'; 0 when true is not one)
    --   due_share    the due column's share of rows that are due: the most common values that are
    --                (their frequencies), plus the rest of the non-NULL rows times the share of
    --                histogram bounds that are (the histogram leaves the most common values out: a
    --                batch sharing one PGMQ vt is an MCV, and the histogram alone read it as absent,
    --                -22 %; issue 29). Each value as its queue's {clock} reads it (issue 29): naive
    --                UTC times (naive_times = "utc") against the UTC wall clock, any other as
    --                timestamptz (a naive value in the session's zone, as a comparison with now()
    --                reads it). NULL when never analyzed.
    -- and the status column's most common values with their weighted frequencies (status_vals,
    -- status_freqs; a value a source does not list counts 0 there).
    LEFT JOIN LATERAL (
        WITH rows AS (
            SELECT r.w, st.attname, st.null_frac, st.vals, st.freqs,
                   (SELECT m.f FROM unnest(st.vals, st.freqs) AS m (v, f) WHERE m.v IN ('t', 'true')) AS true_f,
                   CASE WHEN st.attname = t.due_col AND (st.bounds IS NOT NULL OR st.vals IS NOT NULL) THEN
                       coalesce((SELECT sum(m.f) FROM unnest(st.vals, st.freqs) AS m (v, f)
                                 WHERE CASE WHEN t.naive_zone = 'UTC' THEN m.v::timestamp <= (now() AT TIME ZONE 'UTC')
                                            ELSE m.v::timestamptz <= now() END), 0)
                       + greatest(1 - coalesce((SELECT sum(m.f) FROM unnest(st.freqs) AS m (f)), 0)
                                    - coalesce(st.null_frac, 0), 0)
                         * coalesce((SELECT avg((CASE WHEN t.naive_zone = 'UTC'
                                                      THEN b.v::timestamp <= (now() AT TIME ZONE 'UTC')
                                                      ELSE b.v::timestamptz <= now() END)::int)
                                     FROM unnest(st.bounds) AS b (v)), 0)
                   END AS due_share
            FROM unnest(src.schs, src.tbls, src.ws) AS r (sch, tbl, w)
            CROSS JOIN LATERAL (SELECT DISTINCT ON (st.attname) st.attname, st.null_frac,
                                       st.most_common_vals::text::text[] AS vals, st.most_common_freqs AS freqs,
                                       st.histogram_bounds::text::text[] AS bounds
                                FROM pg_stats AS st
                                WHERE st.schemaname = r.sch AND st.tablename = r.tbl
                                  AND st.attname = ANY (ARRAY[t.status_col, t.lease_col, t.error_col, t.flag_col, t.due_col]
                                                        || string_to_array(t.closed_cols, E'\n'))
                                ORDER BY st.attname, st.inherited) AS st),
        cols AS (
            SELECT x.attname, sum(x.w * x.null_frac) / nullif(sum(x.w), 0) AS null_frac,
                   sum(x.w * coalesce(x.true_f, 0)) / nullif(sum(x.w), 0) AS true_share,
                   sum(x.w * x.due_share) FILTER (WHERE x.due_share IS NOT NULL)
                       / nullif(sum(x.w) FILTER (WHERE x.due_share IS NOT NULL), 0) AS due_share
            FROM rows AS x GROUP BY x.attname)
        SELECT (SELECT k.null_frac FROM cols AS k WHERE k.attname = t.lease_col) AS lease_null_frac,
               (SELECT k.null_frac FROM cols AS k WHERE k.attname = t.error_col) AS error_null_frac,
               (SELECT k.true_share FROM cols AS k WHERE k.attname = t.flag_col) AS flag_share,
               (SELECT sum(k.true_share) FROM cols AS k
                WHERE k.attname = ANY (string_to_array(t.closed_cols, E'\n'))) AS closed_share,
               (SELECT k.due_share FROM cols AS k WHERE k.attname = t.due_col) AS due_share,
               mv.status_vals, mv.status_freqs
        FROM (SELECT array_agg(v.v ORDER BY v.v) AS status_vals, array_agg(v.f ORDER BY v.v) AS status_freqs
              FROM (SELECT m.v, sum(x.w * m.f) / min(tot.w) AS f
                    FROM (SELECT sum(y.w) AS w FROM rows AS y WHERE y.attname = t.status_col) AS tot
                    CROSS JOIN rows AS x CROSS JOIN LATERAL unnest(x.vals, x.freqs) AS m (v, f)
                    WHERE x.attname = t.status_col AND tot.w > 0
                    GROUP BY m.v) AS v) AS mv) AS ps ON true
    -- Each status list is a JSON array of the values as text (any text a status value may hold).
    CROSS JOIN LATERAL (
        SELECT (SELECT sum(m.f) FROM unnest(ps.status_vals, ps.status_freqs) AS m (v, f)
                WHERE m.v IN (SELECT json_array_elements_text(t.ready_vals::json))) - coalesce(ps.closed_share, 0) AS ready_share,
               (SELECT sum(m.f) FROM unnest(ps.status_vals, ps.status_freqs) AS m (v, f)
                WHERE m.v IN (SELECT json_array_elements_text(t.processing_vals::json))) AS processing_share,
               (SELECT sum(m.f) FROM unnest(ps.status_vals, ps.status_freqs) AS m (v, f)
                WHERE m.v IN (SELECT json_array_elements_text(t.done_vals::json))) AS done_share) AS sh
    -- open_when_null (issue 29): the library's partial index on exactly the open rows (GoodJob's
    -- index_good_jobs_on_priority_scheduled_at_unfinished_unlocked, Que's que_poll_idx), as the
    -- catalog types found it (catalog_types' null_partials; mapping.CompiledQueue.open_index): its
    -- copies' reltuples (set by ANALYZE and VACUUM) summed over the leaves; NULL unless every leaf
    -- has an analyzed one.
    LEFT JOIN LATERAL (
        SELECT CASE WHEN count(*) > 0 AND count(*) = count(lx.tuples) THEN sum(lx.tuples) END AS open_tuples
        FROM (SELECT ARRAY(SELECT to_regclass(x.n) FROM unnest(string_to_array(t.open_indexes, E'\n')) AS x (n))
                     AS oids) AS k
        CROSS JOIN unnest(CASE WHEN t.open_indexes <> '' THEN {{tree.leaves(c.oid)}} END) AS lf (relid)
        CROSS JOIN LATERAL (SELECT max(ic.reltuples) FILTER (WHERE ic.reltuples >= 0) AS tuples
                            FROM pg_index AS i JOIN pg_class AS ic ON ic.oid = i.indexrelid
                            WHERE i.indrelid = lf.relid AND i.indisvalid AND i.indexrelid = ANY (k.oids)) AS lx
    ) AS o ON true
    -- closed_when_true: pg_stats has no joint figure of the status and the flags, so the status
    -- blocks took the flagged share off the ready share as if every flagged row were waiting; but
    -- pg-boss's cancelJobs leaves blocked set on a cancelled flow child, and 50,000 of them on a
    -- 200,000-row table read depth 1,000 'at least' for 5,000 waiting jobs. The joint figure is in
    -- the library's partial index on exactly the waiting rows (pg-boss 12's job_i11, WHERE state <
    -- 'active' AND NOT blocked, on every partition), which the catalog types found (catalog_types'
    -- partials with flags; mapping.CompiledQueue.ready_index): its copies (t.ready_indexes), and on
    -- a leaf made since, an index with the same predicate text (t.ready_pred; pg_get_expr only
    -- there). Its reltuples (set by ANALYZE from the sample, and by VACUUM), summed over the
    -- leaves; a leaf never analyzed counts 0 when it has no pages. NULL unless every leaf has one
    -- (config check --live then says so, with the index to create).
    LEFT JOIN LATERAL (
        SELECT CASE WHEN count(*) > 0 AND count(*) = count(lx.tuples) THEN sum(lx.tuples) END AS ready_tuples
        FROM (SELECT ARRAY(SELECT to_regclass(x.n) FROM unnest(string_to_array(t.ready_indexes, E'\n')) AS x (n))
                     AS oids) AS k
        CROSS JOIN unnest(CASE WHEN t.ready_indexes <> '' THEN {{tree.leaves(c.oid)}} END) AS lf (relid)
        JOIN pg_class AS lc ON lc.oid = lf.relid
        CROSS JOIN LATERAL (
            SELECT coalesce(
                (SELECT max(CASE WHEN ic.reltuples >= 0 THEN ic.reltuples WHEN lc.relpages = 0 THEN 0 END)
                 FROM pg_index AS i JOIN pg_class AS ic ON ic.oid = i.indexrelid
                 WHERE i.indrelid = lf.relid AND i.indisvalid
                   AND i.indexrelid = ANY (k.oids)),
                (SELECT max(CASE WHEN ic.reltuples >= 0 THEN ic.reltuples WHEN lc.relpages = 0 THEN 0 END)
                 FROM pg_index AS i JOIN pg_class AS ic ON ic.oid = i.indexrelid
                 WHERE i.indrelid = lf.relid AND i.indisvalid AND i.indpred IS NOT NULL
                   AND pg_get_expr(i.indpred, i.indrelid) = t.ready_pred)) AS tuples
        ) AS lx
    ) AS ri ON true
)
-- @block delete
SELECT :queue AS queue, v.metric, v.value, v.note
FROM queueops_q AS c
CROSS JOIN LATERAL (SELECT CASE WHEN c.n_live_tup >= :skip_above THEN NULL
                                ELSE (SELECT count(*) FROM (SELECT 1 FROM {table}{open_where} ORDER BY {key} LIMIT :cap) AS l)
                           END AS n
                    OFFSET 0) AS s
CROSS JOIN LATERAL (SELECT CASE WHEN s.n < :cap THEN s.n WHEN s.n IS NULL THEN c.n_live_tup
                                ELSE greatest(s.n, c.reltuples) END::float8 AS value,
                           CASE WHEN s.n < :cap THEN 'exact'
                                WHEN s.n IS NULL THEN 'estimate (pg_stat_user_tables.n_live_tup; not counted: far above the cap)'
                                WHEN c.reltuples >= 0 THEN 'estimate (pg_class.reltuples)'
                                ELSE 'at least (cap reached; no statistics)' END AS note) AS e
CROSS JOIN LATERAL (VALUES ('depth', e.value, e.note), ('rows_total', e.value, e.note)) AS v (metric, value, note)
WHERE c.queue = :queue
-- @block status
SELECT :queue AS queue, v.metric, v.value, v.note
FROM queueops_q AS c
CROSS JOIN LATERAL (SELECT (SELECT sum(x.n) FROM {ready_rows}
              CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT 1 FROM {table} WHERE {status} {ready_match}{open_and}
                                                             ORDER BY {status_order} LIMIT :cap) AS l) AS x) AS ready,
             (SELECT sum(x.n) FROM {processing_rows}
              CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT 1 FROM {table} WHERE {status} {processing_match}{open_and}
                                                             ORDER BY {status_order} LIMIT :cap) AS l) AS x) AS processing,
             (SELECT sum(x.n) FROM {done_rows}
              CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT 1 FROM {table} WHERE {status} {done_match}{open_and}
                                                             ORDER BY {status_order} LIMIT :cap) AS l) AS x) AS done,
             CASE WHEN c.n_live_tup >= :skip_above THEN NULL
                  ELSE (SELECT count(*) FROM (SELECT 1 FROM {table}{open_where} ORDER BY {key} LIMIT :cap) AS l) END AS total
      OFFSET 0) AS n
CROSS JOIN LATERAL (SELECT n.total < :cap AND n.ready < :cap AND n.processing < :cap AND n.done < :cap AS all_exact) AS t
-- Above the cap: the ready rows (c.ready_rows, the prelude: the library's partial index on exactly
-- them, else the ready values' share), processing and done from their values' share.
CROSS JOIN LATERAL (VALUES
    -- An estimate at or below what the cap's read already found says nothing more than it (as
    -- block status_follow_runnable): statistics older than the rows, or flagged rows
    -- (closed_when_true) taken off the ready share that lie in other statuses (pg-boss's cancelled
    -- flow children keep blocked set: 1,000 'estimate' for 5,000 waiting jobs where the table has
    -- no partial index on its ready rows).
    ('depth', CASE WHEN n.ready < :cap THEN n.ready ELSE greatest(n.ready, coalesce(c.ready_rows, 0)) END::float8,
     CASE WHEN n.ready < :cap THEN 'exact'
          WHEN c.ready_rows > n.ready THEN 'estimate (' || c.ready_src || ')'
          WHEN c.ready_rows IS NOT NULL THEN 'at least (cap reached; the statistics estimate no more)'
          ELSE 'at least (cap reached; no statistics)' END),
    ('count_processing', CASE WHEN n.processing < :cap THEN n.processing
                              ELSE greatest(n.processing, c.reltuples * coalesce(c.processing_share, 0)) END::float8,
     CASE WHEN n.processing < :cap THEN 'exact' WHEN c.processing_share IS NOT NULL AND c.reltuples >= 0
          THEN 'estimate (pg_stats MCV)' ELSE 'at least (cap reached; no statistics)' END),
    ('count_done', CASE WHEN n.done < :cap THEN n.done ELSE greatest(n.done, c.reltuples * coalesce(c.done_share, 0)) END::float8,
     CASE WHEN n.done < :cap THEN 'exact' WHEN c.done_share IS NOT NULL AND c.reltuples >= 0 THEN 'estimate (pg_stats MCV)'
          ELSE 'at least (cap reached; no statistics)' END),
    ('count_other', CASE WHEN t.all_exact THEN n.total - n.ready - n.processing - n.done END::float8,
     CASE WHEN t.all_exact THEN 'exact (statuses not in ready, processing or done values)'
          ELSE 'unknown above the cap' END),
    ('rows_total', CASE WHEN n.total < :cap THEN n.total WHEN n.total IS NULL THEN c.n_live_tup
                        ELSE greatest(n.total, c.reltuples) END::float8,
     CASE WHEN n.total < :cap THEN 'exact'
          WHEN n.total IS NULL THEN 'estimate (pg_stat_user_tables.n_live_tup; not counted: far above the cap)'
          WHEN c.reltuples >= 0 THEN 'estimate (pg_class.reltuples)'
          ELSE 'at least (cap reached; no statistics)' END)
) AS v (metric, value, note)
WHERE c.queue = :queue
-- @block lease
SELECT :queue AS queue, v.metric, v.value, v.note
FROM queueops_q AS c
CROSS JOIN LATERAL (SELECT (SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {lease} IS NULL{open_and} ORDER BY {key} LIMIT :cap) AS l) AS ready,
             CASE WHEN c.n_live_tup >= :skip_above THEN NULL
                  ELSE (SELECT count(*) FROM (SELECT 1 FROM {table}{open_where} ORDER BY {key} LIMIT :cap) AS l) END AS total
      OFFSET 0) AS n
CROSS JOIN LATERAL (SELECT c.lease_null_frac AS null_frac) AS f
CROSS JOIN LATERAL (SELECT CASE WHEN n.ready < :cap THEN n.ready
                                ELSE greatest(n.ready, c.reltuples * coalesce(f.null_frac, 0)) END AS ready,
                           CASE WHEN n.total < :cap THEN n.total WHEN n.total IS NULL THEN c.n_live_tup
                                ELSE greatest(n.total, c.reltuples) END AS total) AS e
CROSS JOIN LATERAL (VALUES
    ('depth', e.ready::float8,
     CASE WHEN n.ready < :cap THEN 'exact' WHEN f.null_frac IS NOT NULL AND c.reltuples >= 0
          THEN 'estimate (pg_stats null_frac)' ELSE 'at least (cap reached; no statistics)' END),
    ('count_leased', CASE WHEN n.ready < :cap AND n.total < :cap THEN n.total - n.ready
                          ELSE greatest(e.total - e.ready, 0) END::float8,
     CASE WHEN n.ready < :cap AND n.total < :cap THEN 'exact' ELSE 'estimate (rows_total - depth)' END),
    ('count_failed', (greatest(c.reltuples, 0) * (1 - c.error_null_frac))::float8,
     CASE WHEN c.error_null_frac IS NULL THEN 'no error column or no statistics'
          ELSE 'estimate (pg_stats null_frac of the error column)' END),
    ('rows_total', e.total::float8,
     CASE WHEN n.total < :cap THEN 'exact'
          WHEN n.total IS NULL THEN 'estimate (pg_stat_user_tables.n_live_tup; not counted: far above the cap)'
          WHEN c.reltuples >= 0 THEN 'estimate (pg_class.reltuples)'
          ELSE 'at least (cap reached; no statistics)' END)
) AS v (metric, value, note)
WHERE c.queue = :queue
-- @block due
-- {count_order} is the key, or for order = "heap" (the key is a GUID: GoodJob's id) the due column,
-- whose index the ready count already reads: no index orders the open rows by such a key.
-- {unlocked_and} (advisory_lock, Que): an item whose key a worker holds as an advisory lock is
-- running, not waiting (Que's job_stats: count_working): not in depth; {locked_open}, the open
-- items locked now (0 without advisory_lock), is taken off the total (rows_total: waiting items).
-- Above the cap with open_when_null (issue 29: GoodJob and Que keep finished rows and index only
-- the open ones): the whole-table estimate counted the finished rows (198,218 for 5,002). Instead
-- the open rows as the library's partial index on them counts them (c.open_tuples), less the open
-- rows not yet due (counted, up to the cap, from the other end of the same due index; past it the
-- histogram's share of rows not due: finished rows are due long ago) and less the locked ones.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM queueops_q AS c
CROSS JOIN LATERAL (SELECT (SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {due} <= {clock}{open_and}{unlocked_and}
                                                 ORDER BY {due} LIMIT :cap) AS l) AS ready,
             CASE WHEN c.n_live_tup >= :skip_above THEN NULL
                  ELSE (SELECT count(*) FROM (SELECT 1 FROM {table}{open_where} ORDER BY {count_order} LIMIT :cap) AS l) END AS total,
             {locked_open} AS locked
      OFFSET 0) AS n
-- Read only when an open-rows estimate is needed (a CASE branch not taken is never executed).
CROSS JOIN LATERAL (SELECT CASE WHEN (n.ready >= :cap OR n.total >= :cap) AND c.open_tuples IS NOT NULL THEN
                                (SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {due} > {clock}{open_and}
                                                       ORDER BY {due} LIMIT :cap) AS l) END AS not_due
                    OFFSET 0) AS o
CROSS JOIN LATERAL (SELECT c.due_share AS share) AS f
CROSS JOIN LATERAL (SELECT CASE WHEN o.not_due < :cap THEN o.not_due
                                ELSE greatest(o.not_due, c.reltuples * (1 - f.share)) END AS not_due) AS od
CROSS JOIN LATERAL (SELECT CASE WHEN n.total < :cap THEN n.total - n.locked WHEN n.total IS NULL THEN c.n_live_tup
                                WHEN c.open_tuples IS NOT NULL THEN greatest(n.total - n.locked, c.open_tuples - n.locked)
                                ELSE greatest(n.total, c.reltuples) END AS total,
                           CASE WHEN c.open_tuples IS NOT NULL
                                THEN greatest(n.ready, c.open_tuples - n.locked - od.not_due) END AS open_ready) AS e
CROSS JOIN LATERAL (VALUES
    -- Never analyzed (no histogram, reltuples -1): the count itself, 'at least'; the total would
    -- put every row of the table in that lower bound, due or not.
    ('depth', CASE WHEN n.ready < :cap THEN n.ready
                   WHEN e.open_ready IS NOT NULL THEN e.open_ready
                   WHEN f.share IS NULL AND c.reltuples < 0 THEN n.ready
                   ELSE greatest(n.ready, e.total * coalesce(f.share, 1)) END::float8,
     CASE WHEN n.ready < :cap THEN 'exact'
          WHEN e.open_ready IS NOT NULL AND o.not_due < :cap
          THEN 'estimate (open rows: partial index reltuples - not due, counted)'
          WHEN e.open_ready IS NOT NULL THEN 'estimate (open rows: partial index reltuples - not due, pg_stats)'
          WHEN f.share IS NOT NULL THEN 'estimate (pg_stats histogram)'
          WHEN c.reltuples >= 0 THEN 'estimate (upper bound: pg_class.reltuples)'
          ELSE 'at least (cap reached; no statistics)' END),
    -- Above the cap the open-rows estimate has counted the rows not yet due (o.not_due, from the
    -- due index): below the cap that count is exact (issue 29: it was 'unknown' with ~5,000 waiting).
    -- A table of open rows only (PGMQ: done messages are deleted or archived; issue 29, 'unknown'
    -- for 190,330 in flight or delayed): the total less the exact depth, or past the cap the
    -- total's share not due (the same pg_stats share depth's estimate reads, so the two add up).
    ('count_not_due', CASE WHEN n.ready < :cap AND n.total < :cap THEN n.total - n.locked - n.ready
                           WHEN o.not_due < :cap THEN o.not_due
                           WHEN c.open_tuples IS NULL AND n.ready < :cap THEN greatest(e.total - n.locked - n.ready, 0)
                           WHEN c.open_tuples IS NULL AND f.share IS NOT NULL THEN e.total * (1 - f.share) END::float8,
     CASE WHEN n.ready < :cap AND n.total < :cap THEN 'exact'
          WHEN o.not_due < :cap THEN 'exact (counted from the due index)'
          WHEN c.open_tuples IS NULL AND n.ready < :cap AND e.total IS NOT NULL THEN 'estimate (rows_total - depth)'
          WHEN c.open_tuples IS NULL AND f.share IS NOT NULL AND e.total IS NOT NULL
          THEN 'estimate (rows_total x the share not due, pg_stats)'
          ELSE 'unknown above the cap' END),
    ('rows_total', e.total::float8,
     CASE WHEN n.total < :cap THEN 'exact'
          WHEN n.total IS NULL THEN 'estimate (pg_stat_user_tables.n_live_tup; not counted: far above the cap)'
          WHEN c.open_tuples IS NOT NULL THEN 'estimate (open rows: partial index reltuples)'
          WHEN c.reltuples >= 0 THEN 'estimate (pg_class.reltuples)'
          ELSE 'at least (cap reached; no statistics)' END)
) AS v (metric, value, note)
WHERE c.queue = :queue
-- @block ring
SELECT :queue AS queue, v.metric, v.value, 'exact' AS note
FROM {seq_table} AS s
CROSS JOIN LATERAL (VALUES ('depth', greatest(s.{push} - s.{pop}, 0)::float8),
                           ('rows_total', greatest(s.{push} - s.{pop}, 0)::float8)) AS v (metric, value)
-- @block lease_follow
-- A lease queue whose mapping says more about readiness (issue 31): {free} is an item no consumer
-- holds that the library may take (lease_ready "past": a lock in the past is free; ready_flag: the
-- flag must be true). At most :cap free items are read in key order (the primary key serves it,
-- and reads past the held ones, at most the items in flight); among them, those whose attempts
-- reached max_attempts ({exhausted}) are count_exhausted, the others depth. Reading :cap free
-- items means the figures are lower bounds ('at least').
SELECT :queue AS queue, v.metric, v.value, v.note
FROM queueops_q AS c
CROSS JOIN LATERAL (
    SELECT r.ready, r.exhausted, r.seen,
           CASE WHEN c.n_live_tup >= :skip_above THEN NULL
                ELSE (SELECT count(*) FROM (SELECT 1 FROM {table}{open_where} ORDER BY {key} LIMIT :cap) AS l) END AS total
    FROM (SELECT count(*) FILTER (WHERE NOT l.exhausted) AS ready, count(*) FILTER (WHERE l.exhausted) AS exhausted,
                 count(*) AS seen
          FROM (SELECT {exhausted} AS exhausted FROM {table} WHERE {free}{open_and} ORDER BY {key} LIMIT :cap) AS l) AS r
    OFFSET 0) AS n
CROSS JOIN LATERAL (VALUES
    ('depth', n.ready::float8, CASE WHEN n.seen < :cap THEN 'exact' ELSE 'at least (cap of free items read)' END),
    ('count_exhausted', n.exhausted::float8,
     CASE WHEN n.seen < :cap THEN 'exact (free items at max_attempts)' ELSE 'at least (cap of free items read)' END),
    ('count_leased', CASE WHEN n.seen < :cap AND n.total < :cap THEN n.total - n.seen END::float8,
     CASE WHEN n.seen < :cap AND n.total < :cap THEN 'exact' ELSE 'unknown above the cap' END),
    ('count_failed', (greatest(c.reltuples, 0) * (1 - c.error_null_frac))::float8,
     CASE WHEN c.error_null_frac IS NULL THEN 'no error column or no statistics'
          ELSE 'estimate (pg_stats null_frac of the error column)' END),
    ('rows_total', CASE WHEN n.total < :cap THEN n.total WHEN n.total IS NULL THEN c.n_live_tup
                        ELSE greatest(n.total, c.reltuples) END::float8,
     CASE WHEN n.total < :cap THEN 'exact'
          WHEN n.total IS NULL THEN 'estimate (pg_stat_user_tables.n_live_tup; not counted: far above the cap)'
          WHEN c.reltuples >= 0 THEN 'estimate (pg_class.reltuples)'
          ELSE 'at least (cap reached; no statistics)' END)
) AS v (metric, value, note)
WHERE c.queue = :queue
-- @block lease_follow_runnable
-- With runnable_at: a free item is ready when runnable_at is NULL or has passed, scheduled when it
-- is still ahead. Three reads of at most :cap free items each, in runnable_at order, so that an
-- index that leads with runnable_at (best partial on the free items, e.g.
-- CREATE INDEX ON jobs (run_at) WHERE locked_at IS NULL) seeks each range and stops: 30,000 jobs
-- scheduled ahead cost the ready count nothing, and their own count stops at the cap. NULLs sort
-- last in that index; IS NULL is an index condition too. Among the ready reads, {exhausted}
-- items (attempts at max_attempts) are count_exhausted, not depth.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM queueops_q AS c
CROSS JOIN LATERAL (
    SELECT d.ready + z.ready AS ready, d.exhausted + z.exhausted AS exhausted, d.seen < :cap AND z.seen < :cap AS exact,
           d.seen + z.seen AS seen,
           (SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {free} AND {runnable} > {clock}{open_and}
                                  ORDER BY {runnable} LIMIT :cap) AS l) AS scheduled,
           CASE WHEN c.n_live_tup >= :skip_above THEN NULL
                ELSE (SELECT count(*) FROM (SELECT 1 FROM {table}{open_where} ORDER BY {key} LIMIT :cap) AS l) END AS total
    FROM (SELECT count(*) FILTER (WHERE NOT l.exhausted) AS ready, count(*) FILTER (WHERE l.exhausted) AS exhausted,
                 count(*) AS seen
          FROM (SELECT {exhausted} AS exhausted FROM {table} WHERE {free} AND {runnable} <= {clock}{open_and}
                ORDER BY {runnable} LIMIT :cap) AS l) AS d,
         (SELECT count(*) FILTER (WHERE NOT l.exhausted) AS ready, count(*) FILTER (WHERE l.exhausted) AS exhausted,
                 count(*) AS seen
          FROM (SELECT {exhausted} AS exhausted FROM {table} WHERE {free} AND {runnable} IS NULL{open_and}
                ORDER BY {runnable} LIMIT :cap) AS l) AS z
    OFFSET 0) AS n
-- Above the cap, depth is estimated when the statistics can say it: the free rows (reltuples x the
-- free share, see the prelude) less the scheduled ones, counted (below the cap), when the cap of
-- runnable free items read held none at its limit (kept failed rows are free rows too where no
-- flag keeps them out, and their old run times put them first in this read: then no estimate).
CROSS JOIN LATERAL (SELECT CASE WHEN NOT n.exact AND n.exhausted = 0 AND n.scheduled < :cap AND c.reltuples >= 0
                                     AND c.free_share IS NOT NULL AND c.reltuples * c.free_share - n.scheduled > n.ready
                                THEN c.reltuples * c.free_share - n.scheduled END AS ready_rows) AS r
CROSS JOIN LATERAL (VALUES
    ('depth', coalesce(r.ready_rows, n.ready)::float8,
     CASE WHEN n.exact THEN 'exact' WHEN r.ready_rows IS NOT NULL THEN 'estimate (pg_stats: the free share less the scheduled counted)'
          ELSE 'at least (cap of runnable items read)' END),
    ('count_exhausted', n.exhausted::float8,
     CASE WHEN n.exact THEN 'exact (runnable free items at max_attempts)' ELSE 'at least (cap of runnable items read)' END),
    ('count_scheduled', n.scheduled::float8, CASE WHEN n.scheduled < :cap THEN 'exact' ELSE 'at least (cap reached)' END),
    ('count_leased', CASE WHEN n.exact AND n.scheduled < :cap AND n.total < :cap
                          THEN n.total - n.seen - n.scheduled END::float8,
     CASE WHEN n.exact AND n.scheduled < :cap AND n.total < :cap THEN 'exact' ELSE 'unknown above the cap' END),
    ('count_failed', (greatest(c.reltuples, 0) * (1 - c.error_null_frac))::float8,
     CASE WHEN c.error_null_frac IS NULL THEN 'no error column or no statistics'
          ELSE 'estimate (pg_stats null_frac of the error column)' END),
    ('rows_total', CASE WHEN n.total < :cap THEN n.total WHEN n.total IS NULL THEN c.n_live_tup
                        ELSE greatest(n.total, c.reltuples) END::float8,
     CASE WHEN n.total < :cap THEN 'exact'
          WHEN n.total IS NULL THEN 'estimate (pg_stat_user_tables.n_live_tup; not counted: far above the cap)'
          WHEN c.reltuples >= 0 THEN 'estimate (pg_class.reltuples)'
          ELSE 'at least (cap reached; no statistics)' END)
) AS v (metric, value, note)
WHERE c.queue = :queue
-- @block status_follow
-- A status queue whose mapping says more about readiness (issue 31): of the items in a ready
-- status, those whose attempts reached max_attempts ({exhausted}) are count_exhausted, not depth.
-- The same bounded read per ready value as block status, through (status, key).
SELECT :queue AS queue, v.metric, v.value, v.note
FROM queueops_q AS c
CROSS JOIN LATERAL (SELECT r.ready, r.exhausted, r.seen, r.capped,
             (SELECT sum(x.n) FROM {processing_rows}
              CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT 1 FROM {table} WHERE {status} {processing_match}{open_and}
                                                             ORDER BY {status_order} LIMIT :cap) AS l) AS x) AS processing,
             (SELECT sum(x.n) FROM {done_rows}
              CROSS JOIN LATERAL (SELECT count(*) AS n FROM (SELECT 1 FROM {table} WHERE {status} {done_match}{open_and}
                                                             ORDER BY {status_order} LIMIT :cap) AS l) AS x) AS done,
             CASE WHEN c.n_live_tup >= :skip_above THEN NULL
                  ELSE (SELECT count(*) FROM (SELECT 1 FROM {table}{open_where} ORDER BY {key} LIMIT :cap) AS l) END AS total
      FROM (SELECT sum(x.ready) AS ready, sum(x.exhausted) AS exhausted, sum(x.seen) AS seen,
                   bool_or(x.seen >= :cap) AS capped
            FROM {ready_rows}
            CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE NOT l.exhausted) AS ready,
                                       count(*) FILTER (WHERE l.exhausted) AS exhausted, count(*) AS seen
                                FROM (SELECT {exhausted} AS exhausted FROM {table} WHERE {status} {ready_match}{open_and}
                                      ORDER BY {status_order} LIMIT :cap) AS l) AS x) AS r
      OFFSET 0) AS n
CROSS JOIN LATERAL (SELECT NOT n.capped AND n.total < :cap AND n.processing < :cap AND n.done < :cap AS all_exact) AS t
-- Above the cap (issue 29: a lower bound of 1,000 for 5,000 waiting Oban jobs): the ready rows
-- (c.ready_rows, the prelude, as block status), of which the share the cap's read found below
-- max_attempts; processing and done from their values' share.
CROSS JOIN LATERAL (VALUES
    ('depth', CASE WHEN NOT n.capped OR c.ready_rows IS NULL THEN n.ready
                   ELSE greatest(n.ready, c.ready_rows * n.ready / greatest(n.seen, 1)) END::float8,
     CASE WHEN NOT n.capped THEN 'exact'
          WHEN c.ready_rows * n.ready / greatest(n.seen, 1) > n.ready
          THEN 'estimate (' || c.ready_src || ' x the share below max_attempts in the cap read)'
          WHEN c.ready_rows IS NOT NULL
          THEN 'at least (cap of ready items read; the statistics estimate no more)'
          ELSE 'at least (cap of ready items read)' END),
    ('count_exhausted', CASE WHEN NOT n.capped OR c.ready_rows IS NULL THEN n.exhausted
                             ELSE greatest(n.exhausted, c.ready_rows * n.exhausted / greatest(n.seen, 1)) END::float8,
     CASE WHEN NOT n.capped THEN 'exact (ready items at max_attempts)' WHEN c.ready_rows IS NOT NULL
          THEN 'estimate (' || c.ready_src || ' x the share at max_attempts in the cap read)'
          ELSE 'at least (cap of ready items read)' END),
    ('count_processing', CASE WHEN n.processing < :cap OR c.processing_share IS NULL OR c.reltuples < 0 THEN n.processing
                              ELSE greatest(n.processing, c.reltuples * c.processing_share) END::float8,
     CASE WHEN n.processing < :cap THEN 'exact' WHEN c.processing_share IS NOT NULL AND c.reltuples >= 0
          THEN 'estimate (pg_stats MCV)' ELSE 'at least (cap reached)' END),
    ('count_done', CASE WHEN n.done < :cap OR c.done_share IS NULL OR c.reltuples < 0 THEN n.done
                        ELSE greatest(n.done, c.reltuples * c.done_share) END::float8,
     CASE WHEN n.done < :cap THEN 'exact' WHEN c.done_share IS NOT NULL AND c.reltuples >= 0
          THEN 'estimate (pg_stats MCV)' ELSE 'at least (cap reached)' END),
    ('count_other', CASE WHEN t.all_exact THEN n.total - n.seen - n.processing - n.done END::float8,
     CASE WHEN t.all_exact THEN 'exact (statuses not in ready, processing or done values)' ELSE 'unknown above the cap' END),
    ('rows_total', CASE WHEN n.total < :cap THEN n.total WHEN n.total IS NULL THEN c.n_live_tup
                        ELSE greatest(n.total, c.reltuples) END::float8,
     CASE WHEN n.total < :cap THEN 'exact'
          WHEN n.total IS NULL THEN 'estimate (pg_stat_user_tables.n_live_tup; not counted: far above the cap)'
          WHEN c.reltuples >= 0 THEN 'estimate (pg_class.reltuples)'
          ELSE 'at least (cap reached; no statistics)' END)
) AS v (metric, value, note)
WHERE c.queue = :queue
-- @block status_follow_runnable
-- With runnable_at: an item in a ready status is ready when runnable_at is NULL or has passed,
-- scheduled when it is ahead (procrastinate's scheduled_at, pgqueuer's execute_after). Each status
-- value is read through the index that serves it, at most :cap rows whatever their runnable time
-- (issue 29, item 5: rows read, not only rows matched, are bounded; pgqueuer's 155,000 jobs
-- enqueued for later were read by three whole-table scans), and classified after the read
-- (coltypes.follow_runnable_reads renders {ready_reads}, {processing_count}, {done_count}): one
-- read of all values where an index leads with the status column; else each value through the
-- library's partial index on it (procrastinate's WHERE status = 'todo', pgqueuer's WHERE status =
-- 'queued'), in that index's order; a value no index serves is read only on a small table
-- (c.pages under the small-table limit) and otherwise not counted at all: its figure is the
-- statistics' estimate, labelled 'not counted: no index serves ...' (walking the primary key for
-- it read the whole table: 24,739 buffers for procrastinate at 200,000 rows). Exhausted items
-- (max_attempts) among the runnable rows read are count_exhausted.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM queueops_q AS c
CROSS JOIN LATERAL (SELECT r.ready, r.exhausted, r.seen, r.capped, r.scheduled, r.scheduled_capped, r.uncounted,
             {processing_count} AS processing,
             {done_count} AS done,
             CASE WHEN c.n_live_tup >= :skip_above THEN NULL
                  ELSE (SELECT count(*) FROM (SELECT 1 FROM {table}{open_where} ORDER BY {key} LIMIT :cap) AS l) END AS total
      FROM (SELECT sum(x.ready) AS ready, sum(x.exhausted) AS exhausted, sum(x.ready + x.exhausted) AS seen,
                   bool_or(x.n >= :cap) OR NOT bool_and(x.counted) AS capped, sum(x.ahead) AS scheduled,
                   bool_or(x.ahead >= :cap) OR NOT bool_and(x.counted) AS scheduled_capped,
                   NOT bool_and(x.counted) AS uncounted
            FROM ({ready_reads}) AS x (ready, exhausted, n, counted, ahead)) AS r
      OFFSET 0) AS n
CROSS JOIN LATERAL (SELECT NOT n.capped AND NOT n.scheduled_capped AND n.total < :cap AND n.processing < :cap
                           AND n.done < :cap AS all_exact) AS t
-- Above the cap (issue 29: pg-boss with 5,260 runnable jobs read 'at least 1,000'): the ready
-- values' rows (pg_stats MCV share x reltuples, as block status_follow) less the scheduled ones,
-- counted exactly while they are under the cap, of which the share the cap's read found below
-- max_attempts. Past the cap too (pgqueuer with 155,000 jobs enqueued for later: the MCV share
-- alone read 160,023 for 5,265), the scheduled ones are the rows whose runnable_at is ahead of the
-- clock, from runnable_at's pg_stats (most common values, then the histogram's share, as the
-- prelude's due_share): a job is never taken before its runnable time, so only waiting rows have
-- one ahead. Its resolution is the histogram's: one bucket is 1/statistics_target of the rows.
-- processing and done from their values' share.
CROSS JOIN LATERAL (
    -- A timestamptz value as text carries its offset; a naive one is read as {clock} reads the column.
    SELECT CASE WHEN st.histogram_bounds IS NOT NULL OR st.most_common_vals IS NOT NULL THEN
               coalesce((SELECT sum(m.f) FROM unnest(st.most_common_vals::text::text[], st.most_common_freqs) AS m (v, f)
                         WHERE CASE WHEN st.tz THEN m.v::timestamptz > now() ELSE m.v::timestamp > {clock} END), 0)
               + greatest(1 - coalesce((SELECT sum(m.f) FROM unnest(st.most_common_freqs) AS m (f)), 0)
                            - coalesce(st.null_frac, 0), 0)
                 -- The histogram's share ahead, interpolated in the bucket the clock falls in (as the
                 -- planner's own inequality estimate does): counting whole buckets, one bucket was
                 -- 1/statistics_target of the rows (pg-boss's 300 jobs sent for later read 399).
                 * coalesce((SELECT CASE WHEN h.hi IS NULL THEN 0 WHEN h.lo IS NULL OR h.m < 2 THEN 1
                                         ELSE (h.k - 1 + (h.hi - h.now_e) / greatest(h.hi - h.lo, 1e-9)) / (h.m - 1) END
                             FROM (SELECT count(*) AS m, count(*) FILTER (WHERE b.e > b.now_e) AS k,
                                          min(b.e) FILTER (WHERE b.e > b.now_e) AS hi,
                                          max(b.e) FILTER (WHERE b.e <= b.now_e) AS lo, max(b.now_e) AS now_e
                                   FROM (SELECT CASE WHEN st.tz THEN extract(epoch FROM x.v::timestamptz)
                                                     ELSE extract(epoch FROM x.v::timestamp) END AS e,
                                                CASE WHEN st.tz THEN extract(epoch FROM now())
                                                     ELSE extract(epoch FROM {clock}) END AS now_e
                                         FROM unnest(st.histogram_bounds::text::text[]) AS x (v)) AS b) AS h), 0)
           END AS share
    FROM (SELECT 1) AS one
    LEFT JOIN LATERAL (SELECT s.histogram_bounds, s.most_common_vals, s.most_common_freqs, s.null_frac,
                              a.atttypid = 'timestamptz'::regtype AS tz
                       FROM pg_stats AS s JOIN pg_attribute AS a ON a.attrelid = to_regclass(:qualified_table)
                                                                 AND a.attname = s.attname
                       WHERE s.schemaname = :schema_name AND s.tablename = :table_name AND s.attname = :runnable_name
                       ORDER BY s.inherited LIMIT 1) AS st ON true
    OFFSET 0
) AS ahead
CROSS JOIN LATERAL (SELECT CASE WHEN NOT n.scheduled_capped THEN n.scheduled
                                WHEN ahead.share IS NOT NULL AND c.reltuples >= 0
                                THEN greatest(n.scheduled, c.reltuples * ahead.share) END AS scheduled) AS sc
-- Statistics older than the rows (ANALYZE not run since a burst): an estimate at or below what the
-- cap's read already found says nothing more than it: 'at least' then.
-- The ready rows, scheduled or not (c.ready_rows, the prelude: pg-boss 12's job_i11 where the
-- queue has closed_when_true and the table the index, else the ready values' share).
CROSS JOIN LATERAL (SELECT CASE WHEN n.capped AND sc.scheduled IS NOT NULL AND c.ready_rows - sc.scheduled > n.seen
                                THEN c.ready_rows - sc.scheduled END AS runnable_rows) AS r
CROSS JOIN LATERAL (VALUES
    ('depth', CASE WHEN r.runnable_rows IS NULL THEN n.ready
                   ELSE greatest(n.ready, r.runnable_rows * CASE WHEN n.seen > 0 THEN n.ready / n.seen ELSE 1 END) END::float8,
     CASE WHEN NOT n.capped THEN 'exact'
          WHEN r.runnable_rows IS NOT NULL AND n.uncounted
          THEN 'estimate (' || c.ready_src || ' less the share of runnable_at ahead; not counted: no index serves a ready value)'
          WHEN n.uncounted THEN 'not counted: no index serves a ready value, and no statistics'
          WHEN r.runnable_rows IS NOT NULL AND NOT n.scheduled_capped
          THEN 'estimate (' || c.ready_src || ' less the scheduled counted)'
          WHEN r.runnable_rows IS NOT NULL
          THEN 'estimate (' || c.ready_src || ' less the share of runnable_at ahead)'
          ELSE 'at least (cap of runnable items read)' END),
    ('count_exhausted', CASE WHEN r.runnable_rows IS NULL THEN n.exhausted
                             ELSE greatest(n.exhausted, r.runnable_rows * CASE WHEN n.seen > 0 THEN n.exhausted / n.seen ELSE 0 END) END::float8,
     CASE WHEN NOT n.capped THEN 'exact (runnable ready items at max_attempts)'
          WHEN n.uncounted THEN 'unknown: no index serves a ready value (none read)'
          WHEN r.runnable_rows IS NOT NULL THEN 'estimate (' || c.ready_src || ' less the scheduled x the share at max_attempts in the cap read)'
          ELSE 'at least (cap of runnable items read)' END),
    ('count_scheduled', coalesce(sc.scheduled, n.scheduled)::float8,
     CASE WHEN NOT n.scheduled_capped THEN 'exact' WHEN sc.scheduled IS NOT NULL AND n.uncounted
          THEN 'estimate (pg_stats of runnable_at: the share ahead of the clock; not counted: no index serves a ready value)'
          WHEN sc.scheduled IS NOT NULL
          THEN 'estimate (pg_stats of runnable_at: the share ahead of the clock)' ELSE 'at least (cap reached)' END),
    ('count_processing', CASE WHEN n.processing < :cap OR c.processing_share IS NULL OR c.reltuples < 0 THEN n.processing
                              ELSE greatest(n.processing, c.reltuples * c.processing_share) END::float8,
     CASE WHEN n.processing < :cap THEN 'exact'
          WHEN n.processing IS NULL AND c.processing_share IS NOT NULL AND c.reltuples >= 0
          THEN 'estimate (pg_stats MCV; not counted: no index serves these status values)'
          WHEN n.processing IS NULL THEN 'not counted: no index serves these status values, and no statistics'
          WHEN c.processing_share IS NOT NULL AND c.reltuples >= 0
          THEN 'estimate (pg_stats MCV)' ELSE 'at least (cap reached)' END),
    ('count_done', CASE WHEN n.done < :cap OR c.done_share IS NULL OR c.reltuples < 0 THEN n.done
                        ELSE greatest(n.done, c.reltuples * c.done_share) END::float8,
     CASE WHEN n.done < :cap THEN 'exact'
          WHEN n.done IS NULL AND c.done_share IS NOT NULL AND c.reltuples >= 0
          THEN 'estimate (pg_stats MCV; not counted: no index serves these status values)'
          WHEN n.done IS NULL THEN 'not counted: no index serves these status values, and no statistics'
          WHEN c.done_share IS NOT NULL AND c.reltuples >= 0
          THEN 'estimate (pg_stats MCV)' ELSE 'at least (cap reached)' END),
    ('count_other', CASE WHEN t.all_exact THEN n.total - n.seen - n.scheduled - n.processing - n.done END::float8,
     CASE WHEN t.all_exact THEN 'exact (statuses not in ready, processing or done values)' ELSE 'unknown above the cap' END),
    ('rows_total', CASE WHEN n.total < :cap THEN n.total WHEN n.total IS NULL THEN c.n_live_tup
                        ELSE greatest(n.total, c.reltuples) END::float8,
     CASE WHEN n.total < :cap THEN 'exact'
          WHEN n.total IS NULL THEN 'estimate (pg_stat_user_tables.n_live_tup; not counted: far above the cap)'
          WHEN c.reltuples >= 0 THEN 'estimate (pg_class.reltuples)'
          ELSE 'at least (cap reached; no statistics)' END)
) AS v (metric, value, note)
WHERE c.queue = :queue
-- @block due_follow
-- A due queue with max_attempts (issue 33; see sql/mssql/depth.sql): of at most :cap due items
-- read in due order, those at max_attempts are count_exhausted, never depth.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT count(*) FILTER (WHERE NOT l.exhausted) AS ready, count(*) FILTER (WHERE l.exhausted) AS exhausted,
             count(*) AS seen
      FROM (SELECT {exhausted} AS exhausted FROM {table} WHERE {due} <= {clock}{open_and} ORDER BY {due} LIMIT :cap) AS l) AS n
CROSS JOIN (SELECT count(*) AS total FROM (SELECT 1 FROM {table}{open_where} ORDER BY {count_order} LIMIT :cap) AS l) AS t
CROSS JOIN LATERAL (VALUES
    ('depth', n.ready::float8, CASE WHEN n.seen < :cap THEN 'exact' ELSE 'at least (cap of due items read)' END),
    ('count_exhausted', n.exhausted::float8,
     CASE WHEN n.seen < :cap THEN 'exact (due items at max_attempts)' ELSE 'at least (cap of due items read)' END),
    ('count_not_due', CASE WHEN n.seen < :cap AND t.total < :cap THEN (t.total - n.seen)::float8 END,
     CASE WHEN n.seen < :cap AND t.total < :cap THEN 'exact' ELSE 'unknown above the cap' END),
    ('rows_total', CASE WHEN t.total < :cap THEN t.total::float8 END,
     CASE WHEN t.total < :cap THEN 'exact' ELSE 'unknown above the cap' END)
) AS v (metric, value, note)
