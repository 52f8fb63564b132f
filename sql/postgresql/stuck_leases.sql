-- stuck_leases: leased (lease kind) or processing (status kind) items whose lease is older than
-- the queue's lease_timeout_s, plus oldest_lease_age_s and missing_index.
-- lease kind: the count needs an index that leads with the lease column and holds the leased
-- rows (the usual partial index WHERE lease IS NULL cannot answer it: it holds only the free rows). The
-- block looks for one in pg_index first; without it, a table above :small_pages pages is NOT
-- scanned: stuck_leases is NULL, missing_index is 1 and its note holds the CREATE INDEX to run
-- (on a view, which cannot be indexed, the note says to index its base table).
-- Stuck leases are the oldest leases, so they are counted among the first :cap leased rows in
-- lease order (an ordered index-only read that stops at the cap) rather than with a range
-- condition the planner might answer with a bitmap scan of every match.
-- status kind: processing items whose status_changed_at is older than the timeout (it may be a
-- correlated read of the queue's times_from side table: procrastinate), read through an index
-- that leads with the status column or the library's partial index on exactly the processing
-- values, both as the catalog types reported them ({stuck_indexed}, {stuck_partial}: the queue's
-- compiled mapping). Without either the processing items are still counted, by a read of the
-- table until the cap of them is found: a stuck count never vanishes (the set is small and the
-- on-call engineer needs it); the note says so and config check --live gives the index. Counts
-- are bounded by :cap.
-- The table lookups run once for every queue of the target (block 'prelude', a WITH clause the
-- runner puts before the per-queue blocks).
-- @block prelude
WITH queueops_q AS MATERIALIZED (
    -- A view has no pages of its own (relpages 0): it is never "small", whatever its base table holds.
    -- A partitioned table's pages are its partitions' (its own relpages are 0: pg-boss's job table
    -- was taken for a small one), summed once here.
    SELECT t.queue, sz.pages, sz.pages < :small_pages AND c.relkind IS DISTINCT FROM 'v' AS small,
           c.relkind = 'v' AS is_view, c.relkind = 'p' AS partitioned,
           EXISTS (SELECT 1 FROM pg_index AS i
                   JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                   WHERE i.indrelid = c.oid AND a.attname = t.lease_col AND i.indisvalid
                     AND (i.indpred IS NULL
                          OR pg_get_expr(i.indpred, i.indrelid) = format('(%I IS NOT NULL)', a.attname::text))
                  ) AS lease_indexed
    FROM unnest(ARRAY[:queue_names]::text[], ARRAY[:queue_tables]::text[], ARRAY[:lease_names]::text[])
         AS t (queue, qualified, lease_col)
    LEFT JOIN pg_class AS c ON c.oid = to_regclass(t.qualified)
    LEFT JOIN LATERAL (SELECT sum(pc.relpages) AS pages
                       FROM unnest({{tree.leaves(c.oid)}}) AS p (relid) JOIN pg_class AS pc ON pc.oid = p.relid
                       WHERE c.relkind = 'p') AS pt ON true
    CROSS JOIN LATERAL (SELECT coalesce(pt.pages, c.relpages, 0) AS pages) AS sz
)
-- @block served
-- config check --live (issue 29): what the prelude found for a lease queue, so that a stuck_leases
-- the collector cannot count (no lease index on a table past :small_pages) is a warning with the
-- reason and the CREATE INDEX instead of a value silently absent.
SELECT q.queue, q.small, q.is_view, q.lease_indexed, q.pages
FROM queueops_q AS q
WHERE q.queue = :queue
-- @block lease
-- The held items ({stuck_held}: leased; not failed when error_column is mapped: an item whose lease
-- AND error are set failed, the seeds' SimpleQueue keeps it leased on purpose, and depth's
-- count_failed counts it) in lease order, at most :cap of them, and the stuck ones among them
-- ({stuck_if}: the lease older than the timeout). Both fragments are the queue's compiled stuck
-- rule (queueops.mapping.stuck_rule), which the drill-down's stuck list (items.sql) reads too.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT q.small, q.is_view, q.lease_indexed AS indexed FROM queueops_q AS q WHERE q.queue = :queue) AS ix
CROSS JOIN LATERAL (
    SELECT CASE WHEN ix.indexed OR ix.small THEN
                (SELECT count(*) FILTER (WHERE l.stuck)
                 FROM (SELECT {stuck_if} AS stuck FROM {table} WHERE {stuck_held}{open_and}
                       ORDER BY {lease} LIMIT :cap) AS l) END AS n,
           CASE WHEN ix.indexed OR ix.small THEN
                (SELECT {lease} FROM {table} WHERE {stuck_held}{open_and} ORDER BY {lease} LIMIT 1) END AS oldest
    OFFSET 0
) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.n IS NULL THEN 'not counted: no index on the lease column (see missing_index)'
          WHEN s.n >= :cap THEN 'at least (cap reached)'
          WHEN ix.indexed THEN 'exact' ELSE 'exact (small table, no lease index)' END),
    ('oldest_lease_age_s', CASE WHEN ix.indexed OR ix.small
                                THEN coalesce(extract(epoch FROM {clock} - s.oldest), 0) END::float8,
     CASE WHEN s.oldest IS NULL THEN {held_note} ELSE 'exact' END),
    ('missing_index', CASE WHEN ix.indexed THEN 0 ELSE 1 END::float8,
     CASE WHEN ix.indexed THEN ''
          WHEN ix.is_view THEN 'a view: index the lease column of its base table'
          ELSE format('CREATE INDEX CONCURRENTLY ON %s (%I) WHERE %I IS NOT NULL',
                      :qualified_table::text, :lease_name::text, :lease_name::text) END)
) AS v (metric, value, note)
-- @block status
-- One read of at most :cap processing items (per value, in (status, key) order, or one read in
-- status order through an index leading with the status column: {processing_rows},
-- {processing_match}, {status_order}, see depth.sql) gives both the stuck count and the oldest
-- change: each row costs a heap fetch (status_changed_at is not in the status index), so the two figures share it, and no cycle reads more than :cap rows per value.
-- When a value has :cap processing items or more, the count covers only those read ('at least').
-- Without an index leading with the status column ({stuck_indexed} false), the library's own
-- partial index ({stuck_partial}: procrastinate's WHERE status = 'doing', pgqueuer's WHERE status =
-- 'picked', from catalog_types' partials) is read instead: {status} {processing_in} (IN the
-- typed constants; untyped where the type is unknown) repeats its predicate with the same constants (a bound value or an unnest() element is unknown to the
-- planner, which then cannot prove it), and LIMIT :cap with no ORDER BY bounds the read by the cap
-- whatever the index's key (issue 29). With neither, the same read finds the processing items by
-- reading the table (pg-boss's partitions: its only state index, job_i5, holds created and retry):
-- still counted, noted 'read of every <value> row'.
-- {stuck_if} is the queue's compiled stuck rule (queueops.mapping.stuck_rule), which the
-- drill-down's stuck list (items.sql, block stuck_status) reads too: the library's own rule
-- ({worker_gone}: heartbeat_from, procrastinate: no worker row vouches for it, a key lookup of the
-- worker per item read; timeout_column, pg-boss: started_on + expire_in has passed), else the status
-- change older than lease_timeout_s.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT q.small, q.is_view, q.partitioned FROM queueops_q AS q WHERE q.queue = :queue) AS ix
CROSS JOIN LATERAL (
    SELECT sum(x.n) AS n, min(x.oldest) AS oldest, max(x.seen) AS seen
    FROM (
        SELECT x.* FROM {processing_rows}
        CROSS JOIN LATERAL (
            SELECT count(*) FILTER (WHERE p.stuck) AS n, min(p.changed) AS oldest, count(*) AS seen
            FROM (SELECT {status_changed_at} AS changed, {stuck_if} AS stuck FROM {table} WHERE {status} {processing_match}{open_and}
                  ORDER BY {status_order} LIMIT :cap) AS p) AS x
        WHERE {stuck_indexed}
        UNION ALL
        SELECT x.* FROM (SELECT 1 WHERE NOT {stuck_indexed}) AS g
        CROSS JOIN LATERAL (
            SELECT count(*) FILTER (WHERE p.stuck) AS n, min(p.changed) AS oldest, count(*) AS seen
            FROM (SELECT {status_changed_at} AS changed, {stuck_if} AS stuck FROM {table} WHERE {status} {processing_in}{open_and}
                  LIMIT :cap) AS p) AS x
    ) AS x
) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.seen >= :cap THEN 'at least (cap of processing items read)'
          WHEN {stuck_indexed} OR {stuck_partial} THEN 'exact'
          WHEN ix.small THEN 'exact (small table, no status index)'
          ELSE 'exact (read of every ' || array_to_string(ARRAY[:processing_values_text]::text[], ' / ')
               || ' row: no index serves it; see config check --live)' END),
    ('oldest_lease_age_s', coalesce(extract(epoch FROM {clock} - s.oldest), 0)::float8,
     CASE WHEN s.oldest IS NULL THEN 'no processing item' ELSE 'exact (oldest of at most the cap of processing items)' END),
    ('missing_index', CASE WHEN {stuck_indexed} OR {stuck_partial} THEN 0 ELSE 1 END::float8,
     CASE WHEN {stuck_indexed} OR {stuck_partial} THEN ''
          WHEN ix.is_view THEN 'a view: index the status column of its base table'
          WHEN ix.partitioned THEN format('CREATE INDEX ON %s (%I, %I) (a partitioned table: CONCURRENTLY cannot run '
                                          || 'on it; config check --live gives the lock-free way)',
                                          :qualified_table::text, :status_name::text, :key_name::text)
          ELSE format('CREATE INDEX CONCURRENTLY ON %s (%I, %I)', :qualified_table::text, :status_name::text, :key_name::text) END)
) AS v (metric, value, note)
-- @block lease_follow
-- A lease queue whose mapping says more about readiness (issue 31): block lease, whose compiled
-- {stuck_held} leaves out the failed items ({failed}: its error is set and, with error_at, not
-- older than its lease: a job retried after a failure keeps its last error while leased again, and
-- is running, so stuck when its lease is old) and the exhausted ones (at max_attempts: released,
-- the library would never take it). The runner reads only the *_follow blocks for such a mapping.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT q.small, q.is_view, q.lease_indexed AS indexed FROM queueops_q AS q WHERE q.queue = :queue) AS ix
CROSS JOIN LATERAL (
    SELECT CASE WHEN ix.indexed OR ix.small THEN
                (SELECT count(*) FILTER (WHERE l.stuck)
                 FROM (SELECT {stuck_if} AS stuck FROM {table} WHERE {stuck_held}{open_and}
                       ORDER BY {lease} LIMIT :cap) AS l) END AS n,
           CASE WHEN ix.indexed OR ix.small THEN
                (SELECT {lease} FROM {table} WHERE {stuck_held}{open_and} ORDER BY {lease} LIMIT 1) END AS oldest
    OFFSET 0
) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.n IS NULL THEN 'not counted: no index on the lease column (see missing_index)'
          WHEN s.n >= :cap THEN 'at least (cap reached)'
          WHEN ix.indexed THEN 'exact' ELSE 'exact (small table, no lease index)' END),
    ('oldest_lease_age_s', CASE WHEN ix.indexed OR ix.small
                                THEN coalesce(extract(epoch FROM {clock} - s.oldest), 0) END::float8,
     CASE WHEN s.oldest IS NULL THEN {held_note} ELSE 'exact' END),
    ('missing_index', CASE WHEN ix.indexed THEN 0 ELSE 1 END::float8,
     CASE WHEN ix.indexed THEN ''
          WHEN ix.is_view THEN 'a view: index the lease column of its base table'
          ELSE format('CREATE INDEX CONCURRENTLY ON %s (%I) WHERE %I IS NOT NULL',
                      :qualified_table::text, :lease_name::text, :lease_name::text) END)
) AS v (metric, value, note)
-- @block lease_follow_past
-- lease_ready = "past": the lease column is a lock-until time and the library takes an item whose
-- lock has passed by itself, so an expired lock is not stuck (depth counts it as ready). What can
-- still hold an item longer than the timeout is a lock set further ahead than lease_timeout_s: that
-- is what stuck_leases counts (and requeue releases), read from the far end of the lease index.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT q.small, q.is_view, q.lease_indexed AS indexed FROM queueops_q AS q WHERE q.queue = :queue) AS ix
CROSS JOIN LATERAL (
    SELECT CASE WHEN ix.indexed OR ix.small THEN
                (SELECT count(*) FROM (SELECT 1 FROM {table}
                                       WHERE {stuck_held} AND {stuck_if}{open_and}
                                       ORDER BY {lease} DESC LIMIT :cap) AS l) END AS n
    OFFSET 0
) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.n IS NULL THEN 'not counted: no index on the lease column (see missing_index)'
          WHEN s.n >= :cap THEN 'at least (cap reached)'
          ELSE 'locks further ahead than lease_timeout_s (lease_ready = past: the library takes an expired lock again itself)'
     END),
    ('missing_index', CASE WHEN ix.indexed THEN 0 ELSE 1 END::float8,
     CASE WHEN ix.indexed THEN ''
          WHEN ix.is_view THEN 'a view: index the lease column of its base table'
          ELSE format('CREATE INDEX CONCURRENTLY ON %s (%I) WHERE %I IS NOT NULL',
                      :qualified_table::text, :lease_name::text, :lease_name::text) END)
) AS v (metric, value, note)
-- @block status_follow
-- A status queue with max_attempts (issue 31): block status, except that a processing item at
-- max_attempts is not stuck (released to a ready status, the library would never take it): the
-- compiled {stuck_if} says so.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT q.small, q.is_view, q.partitioned FROM queueops_q AS q WHERE q.queue = :queue) AS ix
CROSS JOIN LATERAL (
    SELECT sum(x.n) AS n, min(x.oldest) AS oldest, max(x.seen) AS seen
    FROM (
        SELECT x.* FROM {processing_rows}
        CROSS JOIN LATERAL (
            SELECT count(*) FILTER (WHERE p.stuck) AS n, min(p.changed) AS oldest, count(*) AS seen
            FROM (SELECT {status_changed_at} AS changed, {stuck_if} AS stuck FROM {table} WHERE {status} {processing_match}{open_and}
                  ORDER BY {status_order} LIMIT :cap) AS p) AS x
        WHERE {stuck_indexed}
        UNION ALL
        SELECT x.* FROM (SELECT 1 WHERE NOT {stuck_indexed}) AS g
        CROSS JOIN LATERAL (
            SELECT count(*) FILTER (WHERE p.stuck) AS n, min(p.changed) AS oldest, count(*) AS seen
            FROM (SELECT {status_changed_at} AS changed, {stuck_if} AS stuck FROM {table}
                  WHERE {status} {processing_in}{open_and} LIMIT :cap) AS p) AS x
    ) AS x
) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.seen >= :cap THEN 'at least (cap of processing items read)'
          WHEN {stuck_indexed} OR {stuck_partial} THEN {exact_note}
          WHEN ix.small THEN 'exact (small table, no status index)'
          ELSE 'exact (read of every ' || array_to_string(ARRAY[:processing_values_text]::text[], ' / ')
               || ' row: no index serves it; see config check --live)' END),
    ('oldest_lease_age_s', coalesce(extract(epoch FROM {clock} - s.oldest), 0)::float8,
     CASE WHEN s.oldest IS NULL THEN 'no processing item' ELSE 'exact (oldest of at most the cap of processing items)' END),
    ('missing_index', CASE WHEN {stuck_indexed} OR {stuck_partial} THEN 0 ELSE 1 END::float8,
     CASE WHEN {stuck_indexed} OR {stuck_partial} THEN ''
          WHEN ix.is_view THEN 'a view: index the status column of its base table'
          WHEN ix.partitioned THEN format('CREATE INDEX ON %s (%I, %I) (a partitioned table: CONCURRENTLY cannot run '
                                          || 'on it; config check --live gives the lock-free way)',
                                          :qualified_table::text, :status_name::text, :key_name::text)
          ELSE format('CREATE INDEX CONCURRENTLY ON %s (%I, %I)', :qualified_table::text, :status_name::text, :key_name::text) END)
) AS v (metric, value, note)
-- @block delete
-- A delete queue whose running items are claims in another table (claims; issue 29: Solid Queue's
-- solid_queue_claimed_executions, invisible before): a claim is abandoned when its process row is
-- missing (Solid Queue's ClaimedExecution.orphaned) or its heartbeat is {alive_s} s old or more
-- (Process.prunable: last_heartbeat_at <= now - process_alive_threshold), as the library's own
-- pruner judges it. At most :cap claims are read (the table holds only the running items), each
-- with a key lookup of its process. Rendered only for a queue with claims (the fragments).
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT count(*) FILTER (WHERE l.dead) AS n, count(*) AS seen, min(l.claimed_at) AS oldest
      FROM (SELECT qo_claim.{claims_at} AS claimed_at, {claim_gone} AS dead
            FROM {claims_table} AS qo_claim
            LEFT JOIN {process_table} AS qo_proc ON qo_proc.{process_key} = qo_claim.{claims_process}
            LIMIT :cap) AS l
      OFFSET 0) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.seen >= :cap THEN 'at least (cap of claims read)'
          ELSE 'exact (claims whose process is missing or silent for ' || {alive_s} || ' s)' END),
    ('oldest_lease_age_s', coalesce(greatest(extract(epoch FROM {clock} - s.oldest), 0), 0)::float8,
     CASE WHEN s.seen = 0 THEN 'no claim' WHEN s.seen >= :cap THEN 'oldest of the claims read' ELSE 'exact' END)
) AS v (metric, value, note)
