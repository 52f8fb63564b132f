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
-- status kind: processing items whose status_changed_at is older than the timeout, read through
-- (status_changed_at may be a correlated read of the queue's times_from side table: procrastinate)
-- an index that leads with the status column (same rule). Counts are bounded by :cap.
-- The index lookups run once for every queue of the target (block 'prelude', a WITH clause the
-- runner puts before the per-queue blocks).
-- @block prelude
WITH queueops_q AS MATERIALIZED (
    -- A view has no pages of its own (relpages 0): it is never "small", whatever its base table holds.
    SELECT t.queue, coalesce(c.relpages, 0) < :small_pages AND c.relkind IS DISTINCT FROM 'v' AS small,
           c.relkind = 'v' AS is_view,
           EXISTS (SELECT 1 FROM pg_index AS i
                   JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                   WHERE i.indrelid = c.oid AND a.attname = t.lease_col AND i.indisvalid
                     AND (i.indpred IS NULL
                          OR pg_get_expr(i.indpred, i.indrelid) = format('(%I IS NOT NULL)', a.attname::text))
                  ) AS lease_indexed,
           EXISTS (SELECT 1 FROM pg_index AS i
                   JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                   WHERE i.indrelid = c.oid AND a.attname = t.status_col AND i.indisvalid AND i.indpred IS NULL
                  ) AS status_indexed,
           -- The library's own index (issue 29): a valid partial btree index WHERE status = 'doing'
           -- (procrastinate_jobs_lock_idx_v1) or status IN (...) (pgqueuer_picked_heartbeat_idx),
           -- whatever its key, holds exactly the processing rows when its predicate names the status
           -- column alone and its values are the queue's processing_values: the status block's
           -- partial read (the same values as constants, so the planner proves the predicate) reads
           -- it and no other row. Read from pg_get_expr's text: each literal (with its cast) or
           -- integer becomes ?, then the shape must be col = ? or col = ANY (ARRAY[?, ...]) (a
           -- varchar column's (col)::text too), and the literals the same set as the values.
           EXISTS (SELECT 1 FROM pg_index AS i
                   JOIN pg_class AS ic ON ic.oid = i.indexrelid
                   JOIN pg_am AS am ON am.oid = ic.relam AND am.amname = 'btree'
                   JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attname = t.status_col
                   CROSS JOIN LATERAL (SELECT pg_get_expr(i.indpred, i.indrelid) AS pred) AS p
                   CROSS JOIN LATERAL (
                       SELECT regexp_replace(regexp_replace(regexp_replace(p.pred,
                                  '''(?:[^'']|'''')*''(::[a-zA-Z_][a-zA-Z0-9_ ."]*)?', '?', 'g'),
                                  '\m\d+\M', '?', 'g'), '[\s()]|::text\[\]', '', 'g') AS shape,
                              regexp_replace(quote_ident(t.status_col), '[\s()]', '', 'g')
                              || CASE WHEN a.atttypid IN ('varchar'::regtype, 'bpchar'::regtype)
                                      THEN '::text=' ELSE '=' END AS head,
                              ARRAY(SELECT coalesce(replace(m[1], '''''', ''''), m[2])
                                    FROM regexp_matches(p.pred, '''((?:[^'']|'''')*)''|\m(\d+)\M', 'g') AS m
                                   ) AS vals
                   ) AS f
                   WHERE i.indrelid = c.oid AND i.indisvalid AND i.indpred IS NOT NULL
                     AND left(f.shape, length(f.head)) = f.head
                     AND substr(f.shape, length(f.head) + 1) ~ '^(\?|ANYARRAY\[\?(,\?)*\])$'
                     AND f.vals @> t.processing AND f.vals <@ t.processing
                  ) AS status_partial
    FROM unnest(ARRAY[:queue_names]::text[], ARRAY[:queue_tables]::text[], ARRAY[:lease_names]::text[],
                ARRAY[:status_names]::text[], ARRAY[:processing_sets]::text[])
         AS t0 (queue, qualified, lease_col, status_col, processing_json)
    CROSS JOIN LATERAL (SELECT t0.*, ARRAY(SELECT json_array_elements_text(t0.processing_json::json)) AS processing) AS t
    LEFT JOIN pg_class AS c ON c.oid = to_regclass(t.qualified)
)
-- @block served
-- config check --live (issue 29): what the prelude found for each queue, so that a stuck_leases the
-- collector cannot count (no index serves its read on a table past :small_pages) is a warning with
-- the reason and the CREATE INDEX instead of a value silently absent.
SELECT q.queue, q.small, q.is_view, q.lease_indexed, q.status_indexed, q.status_partial,
       coalesce(c.relpages, 0) AS pages
FROM queueops_q AS q
LEFT JOIN pg_class AS c ON c.oid = to_regclass(:qualified_table)
WHERE q.queue = :queue
-- @block lease
-- With error_column: an item whose lease AND error are set failed (the seeds' SimpleQueue keeps it
-- leased on purpose); it is never a stuck lease (depth's count_failed counts it). Without one,
-- block lease_basic.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT q.small, q.is_view, q.lease_indexed AS indexed FROM queueops_q AS q WHERE q.queue = :queue) AS ix
CROSS JOIN LATERAL (
    SELECT CASE WHEN ix.indexed OR ix.small THEN
                (SELECT count(*) FILTER (WHERE l.lease < {clock} - make_interval(secs => :lease_timeout_s))
                 FROM (SELECT {lease} AS lease FROM {table} WHERE {lease} IS NOT NULL AND {error} IS NULL{open_and}
                       ORDER BY {lease} LIMIT :cap) AS l) END AS n,
           CASE WHEN ix.indexed OR ix.small THEN
                (SELECT {lease} FROM {table} WHERE {lease} IS NOT NULL AND {error} IS NULL{open_and} ORDER BY {lease} LIMIT 1) END AS oldest
    OFFSET 0
) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.n IS NULL THEN 'not counted: no index on the lease column (see missing_index)'
          WHEN s.n >= :cap THEN 'at least (cap reached)'
          WHEN ix.indexed THEN 'exact' ELSE 'exact (small table, no lease index)' END),
    ('oldest_lease_age_s', CASE WHEN ix.indexed OR ix.small
                                THEN coalesce(extract(epoch FROM {clock} - s.oldest), 0) END::float8,
     CASE WHEN s.oldest IS NULL THEN 'no leased item (failed items excluded)' ELSE 'exact' END),
    ('missing_index', CASE WHEN ix.indexed THEN 0 ELSE 1 END::float8,
     CASE WHEN ix.indexed THEN ''
          WHEN ix.is_view THEN 'a view: index the lease column of its base table'
          ELSE format('CREATE INDEX CONCURRENTLY ON %s (%I) WHERE %I IS NOT NULL',
                      :qualified_table::text, :lease_name::text, :lease_name::text) END)
) AS v (metric, value, note)
-- @block lease_basic
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT q.small, q.is_view, q.lease_indexed AS indexed FROM queueops_q AS q WHERE q.queue = :queue) AS ix
CROSS JOIN LATERAL (
    SELECT CASE WHEN ix.indexed OR ix.small THEN
                (SELECT count(*) FILTER (WHERE l.lease < {clock} - make_interval(secs => :lease_timeout_s))
                 FROM (SELECT {lease} AS lease FROM {table} WHERE {lease} IS NOT NULL{open_and}
                       ORDER BY {lease} LIMIT :cap) AS l) END AS n,
           CASE WHEN ix.indexed OR ix.small THEN
                (SELECT {lease} FROM {table} WHERE {lease} IS NOT NULL{open_and} ORDER BY {lease} LIMIT 1) END AS oldest
    OFFSET 0
) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.n IS NULL THEN 'not counted: no index on the lease column (see missing_index)'
          WHEN s.n >= :cap THEN 'at least (cap reached)'
          WHEN ix.indexed THEN 'exact' ELSE 'exact (small table, no lease index)' END),
    ('oldest_lease_age_s', CASE WHEN ix.indexed OR ix.small
                                THEN coalesce(extract(epoch FROM {clock} - s.oldest), 0) END::float8,
     CASE WHEN s.oldest IS NULL THEN 'no leased item' ELSE 'exact' END),
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
-- Without an index leading with the status column, the library's own partial index (prelude,
-- status_partial: procrastinate's WHERE status = 'doing', pgqueuer's WHERE status = 'picked') is
-- read instead: {status} IN ({processing_list}) repeats its predicate with the same constants (a
-- bound value or an unnest() element is unknown to the planner, which then cannot prove it), and
-- LIMIT :cap with no ORDER BY bounds the read by the cap whatever the index's key (issue 29).
-- {worker_gone} (heartbeat_from, procrastinate): the item is stuck when no worker row vouches for
-- it, whatever its status-change age (a key lookup of the worker per item read); NULL otherwise.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT q.small, q.is_view, q.status_indexed AS indexed, q.status_partial AND NOT q.status_indexed AS partial,
             q.status_indexed OR q.status_partial OR q.small AS counted
      FROM queueops_q AS q WHERE q.queue = :queue) AS ix
CROSS JOIN LATERAL (
    SELECT sum(x.n) AS n, min(x.oldest) AS oldest, max(x.seen) AS seen
    FROM (
        SELECT x.* FROM {processing_rows}
        CROSS JOIN LATERAL (
            SELECT count(*) FILTER (WHERE coalesce(p.gone, p.changed < {clock} - make_interval(secs => :lease_timeout_s))) AS n,
                   min(p.changed) AS oldest, count(*) AS seen
            FROM (SELECT {status_changed_at} AS changed, {worker_gone} AS gone FROM {table} WHERE {status} {processing_match}{open_and}
                  ORDER BY {status_order} LIMIT :cap) AS p) AS x
        WHERE ix.counted AND NOT ix.partial
        UNION ALL
        SELECT x.* FROM (SELECT 1 WHERE ix.partial) AS g
        CROSS JOIN LATERAL (
            SELECT count(*) FILTER (WHERE coalesce(p.gone, p.changed < {clock} - make_interval(secs => :lease_timeout_s))) AS n,
                   min(p.changed) AS oldest, count(*) AS seen
            FROM (SELECT {status_changed_at} AS changed, {worker_gone} AS gone FROM {table} WHERE {status} IN ({processing_list}){open_and}
                  LIMIT :cap) AS p) AS x
    ) AS x
) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.n IS NULL THEN 'not counted: no index serves the read of processing items: none leads with the '
                                || 'status column, none is partial on exactly the processing values (see missing_index)'
          WHEN s.seen >= :cap THEN 'at least (cap of processing items read)'
          WHEN ix.indexed OR ix.partial THEN 'exact' ELSE 'exact (small table, no status index)' END),
    ('oldest_lease_age_s', CASE WHEN ix.counted THEN coalesce(extract(epoch FROM {clock} - s.oldest), 0) END::float8,
     CASE WHEN s.oldest IS NULL THEN 'no processing item' ELSE 'exact (oldest of at most the cap of processing items)' END),
    ('missing_index', CASE WHEN ix.indexed OR ix.partial THEN 0 ELSE 1 END::float8,
     CASE WHEN ix.indexed OR ix.partial THEN ''
          WHEN ix.is_view THEN 'a view: index the status column of its base table'
          ELSE format('CREATE INDEX CONCURRENTLY ON %s (%I, %I)', :qualified_table::text, :status_name::text, :key_name::text) END)
) AS v (metric, value, note)
-- @block lease_follow
-- A lease queue whose mapping says more about readiness (issue 31). A held item is stuck when
-- its lease is older than the timeout, it has not failed ({failed}: its error is set and, with
-- error_at, not older than its lease: a job retried after a failure keeps its last error while
-- leased again, and is running, so stuck when its lease is old), and it is not exhausted (at
-- max_attempts: released, the library would never take it). Same index and bound as block lease.
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT q.small, q.is_view, q.lease_indexed AS indexed FROM queueops_q AS q WHERE q.queue = :queue) AS ix
CROSS JOIN LATERAL (
    SELECT CASE WHEN ix.indexed OR ix.small THEN
                (SELECT count(*) FILTER (WHERE l.lease < {clock} - make_interval(secs => :lease_timeout_s))
                 FROM (SELECT {lease} AS lease FROM {table}
                       WHERE {lease} IS NOT NULL AND NOT {failed} AND NOT {exhausted}{open_and}
                       ORDER BY {lease} LIMIT :cap) AS l) END AS n,
           CASE WHEN ix.indexed OR ix.small THEN
                (SELECT {lease} FROM {table} WHERE {lease} IS NOT NULL AND NOT {failed} AND NOT {exhausted}{open_and}
                 ORDER BY {lease} LIMIT 1) END AS oldest
    OFFSET 0
) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.n IS NULL THEN 'not counted: no index on the lease column (see missing_index)'
          WHEN s.n >= :cap THEN 'at least (cap reached)'
          WHEN ix.indexed THEN 'exact' ELSE 'exact (small table, no lease index)' END),
    ('oldest_lease_age_s', CASE WHEN ix.indexed OR ix.small
                                THEN coalesce(extract(epoch FROM {clock} - s.oldest), 0) END::float8,
     CASE WHEN s.oldest IS NULL THEN 'no leased item (failed and exhausted items excluded)' ELSE 'exact' END),
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
                                       WHERE {lease} > {clock} + make_interval(secs => :lease_timeout_s)
                                         AND NOT {failed} AND NOT {exhausted}{open_and}
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
-- max_attempts is not stuck (released to a ready status, the library would never take it).
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT q.small, q.is_view, q.status_indexed AS indexed, q.status_partial AND NOT q.status_indexed AS partial,
             q.status_indexed OR q.status_partial OR q.small AS counted
      FROM queueops_q AS q WHERE q.queue = :queue) AS ix
CROSS JOIN LATERAL (
    SELECT sum(x.n) AS n, min(x.oldest) AS oldest, max(x.seen) AS seen
    FROM (
        SELECT x.* FROM {processing_rows}
        CROSS JOIN LATERAL (
            SELECT count(*) FILTER (WHERE coalesce(p.gone, p.changed < {clock} - make_interval(secs => :lease_timeout_s))
                                   AND NOT p.exhausted) AS n,
                   min(p.changed) AS oldest, count(*) AS seen
            FROM (SELECT {status_changed_at} AS changed, {worker_gone} AS gone, {exhausted} AS exhausted FROM {table} WHERE {status} {processing_match}{open_and}
                  ORDER BY {status_order} LIMIT :cap) AS p) AS x
        WHERE ix.counted AND NOT ix.partial
        UNION ALL
        SELECT x.* FROM (SELECT 1 WHERE ix.partial) AS g
        CROSS JOIN LATERAL (
            SELECT count(*) FILTER (WHERE coalesce(p.gone, p.changed < {clock} - make_interval(secs => :lease_timeout_s))
                                   AND NOT p.exhausted) AS n,
                   min(p.changed) AS oldest, count(*) AS seen
            FROM (SELECT {status_changed_at} AS changed, {worker_gone} AS gone, {exhausted} AS exhausted FROM {table}
                  WHERE {status} IN ({processing_list}){open_and} LIMIT :cap) AS p) AS x
    ) AS x
) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.n IS NULL THEN 'not counted: no index serves the read of processing items: none leads with the '
                                || 'status column, none is partial on exactly the processing values (see missing_index)'
          WHEN s.seen >= :cap THEN 'at least (cap of processing items read)'
          WHEN ix.indexed OR ix.partial THEN {exact_note}
          ELSE 'exact (small table, no status index)' END),
    ('oldest_lease_age_s', CASE WHEN ix.counted THEN coalesce(extract(epoch FROM {clock} - s.oldest), 0) END::float8,
     CASE WHEN s.oldest IS NULL THEN 'no processing item' ELSE 'exact (oldest of at most the cap of processing items)' END),
    ('missing_index', CASE WHEN ix.indexed OR ix.partial THEN 0 ELSE 1 END::float8,
     CASE WHEN ix.indexed OR ix.partial THEN ''
          WHEN ix.is_view THEN 'a view: index the status column of its base table'
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
      FROM (SELECT c.{claims_at} AS claimed_at,
                   p.{heartbeat} IS NULL OR p.{heartbeat} <= {clock} - make_interval(secs => {alive_s}) AS dead
            FROM {claims_table} AS c LEFT JOIN {process_table} AS p ON p.{process_key} = c.{claims_process}
            LIMIT :cap) AS l
      OFFSET 0) AS s
CROSS JOIN LATERAL (VALUES
    ('stuck_leases', s.n::float8,
     CASE WHEN s.seen >= :cap THEN 'at least (cap of claims read)'
          ELSE 'exact (claims whose process is missing or silent for ' || {alive_s} || ' s)' END),
    ('oldest_lease_age_s', coalesce(greatest(extract(epoch FROM {clock} - s.oldest), 0), 0)::float8,
     CASE WHEN s.seen = 0 THEN 'no claim' WHEN s.seen >= :cap THEN 'oldest of the claims read' ELSE 'exact' END)
) AS v (metric, value, note)
