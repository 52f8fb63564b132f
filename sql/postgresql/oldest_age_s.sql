-- oldest_age_s: seconds the oldest ready item has waited (0 when nothing is ready).
-- Each block reads one row through the index the dequeue itself uses (ORDER BY ... LIMIT 1).
-- For due queues the age is the lateness of the most overdue item (now - due time).
-- @block delete
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       coalesce(extract(epoch FROM {clock} - (SELECT {enqueued_at} FROM {table}{open_where} ORDER BY {key} LIMIT 1)), 0)::float8 AS value,
       '' AS note
-- @block status_skip
-- Where the index that leads with the status column puts other columns before the enqueue time
-- (River's and Oban's fetch index: queue, priority), the first item of each (queue, priority) in
-- time order: {age_skip} (coltypes.age_skip_reads) walks the prefixes the index holds, one index
-- descent each, at most :cap of them ('at least' past that).
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       coalesce(extract(epoch FROM {clock} - r.enq), 0)::float8 AS value,
       CASE WHEN r.capped THEN 'at least: the oldest of the first ready item of each of the first cap index prefixes read'
            ELSE '' END AS note
FROM (SELECT min(x.enq) AS enq, bool_or(x.capped) AS capped FROM ({age_skip}) AS x (enq, capped)) AS r
-- @block status
-- The oldest ready item, read as the table's indexes allow (coltypes.status_read_fragments): the
-- first item of each ready value in (status, key) order, one row each, through a (status, key)
-- index or along the key (the lowest key is the oldest item, fifo and lifo alike); where the index
-- that leads with the status column puts other columns before the key and no skip read applies
-- (block status_skip), the oldest of at most :cap items read in that index's order, as depth reads
-- them: 'at least' when the read stops at the cap (an older item may sit behind them).
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       coalesce(extract(epoch FROM {clock} - r.enq), 0)::float8 AS value,
       CASE WHEN r.capped THEN 'at least: the oldest of the first cap ready items read in the index''s order'
            ELSE '' END AS note
FROM (SELECT min(x.enq) AS enq, bool_or(x.capped) AS capped FROM {age_rows}
      CROSS JOIN LATERAL (SELECT min(l.enq) AS enq, NOT {age_first} AND count(*) >= :cap AS capped
                          FROM (SELECT {enqueued_at} AS enq FROM {table} WHERE {status} {age_match}{open_and}
                                ORDER BY {age_order} LIMIT CASE WHEN {age_first} THEN 1 ELSE :cap END) AS l) AS x) AS r
-- @block delete_heap
-- order = "heap": the key says nothing about age (a GUID, a priority first), so the oldest item is
-- found by its enqueue time, through an index that leads with it. fifo and lifo read the lowest key:
-- in both, the lowest key is the oldest item (a LIFO consumer takes the highest, the oldest waits).
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       coalesce(extract(epoch FROM {clock} - (SELECT {enqueued_at} FROM {table}{open_where} ORDER BY {enqueued_at} LIMIT 1)), 0)::float8
           AS value,
       'heap: by enqueue time' AS note
-- @block status_heap
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       coalesce(extract(epoch FROM {clock} - (SELECT {enqueued_at} FROM {table} WHERE {status} IN (:ready_values){open_and}
                                             ORDER BY {enqueued_at} LIMIT 1)), 0)::float8 AS value,
       'heap: by enqueue time' AS note
-- @block lease
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       coalesce(extract(epoch FROM {clock} - (SELECT {enqueued_at} FROM {table} WHERE {lease} IS NULL{open_and}
                                             ORDER BY {enqueued_at}, {key} LIMIT 1)), 0)::float8 AS value,
       '' AS note
-- @block lease_side
-- The enqueue time lives in the queue's times_from side table: the oldest free item is the
-- lowest key, so the side table is read once for that item instead of once per free item.
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       coalesce(extract(epoch FROM {clock} - (SELECT {enqueued_at} FROM {table} WHERE {lease} IS NULL{open_and}
                                             ORDER BY {key} LIMIT 1)), 0)::float8 AS value,
       'enqueue time from the side table, oldest by key' AS note
-- @block due
-- {unlocked_and} (advisory_lock, Que): a job a worker holds by its advisory lock is running, not
-- waiting; the oldest waiting one is the oldest due job no session holds (issue 29: a locked job,
-- the oldest since the worker takes the oldest first, was read as the oldest waiting one).
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       greatest(coalesce(extract(epoch FROM {clock} - (SELECT {due} FROM {table} WHERE {due} <= {clock}{open_and}{unlocked_and}
                                                      ORDER BY {due} LIMIT 1)), 0), 0)::float8 AS value,
       '' AS note
-- @block due_enqueued
-- age_from = "enqueued" (PGMQ; issue 29): the library's own oldest-message age, now - the enqueue
-- time of the oldest item still in the table (pgmq.metrics(): oldest_msg_age_sec = now() -
-- min(enqueued_at) over the queue table). Visible or not, read or not, a message is waiting until
-- it is deleted or archived. Keys are given in enqueue order (an identity), so the lowest key is
-- the oldest item: one index tuple, not PGMQ's read of every row.
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       greatest(coalesce(extract(epoch FROM {clock} - (SELECT {enqueued_at} FROM {table}{open_where}
                                                      ORDER BY {key} LIMIT 1)), 0), 0)::float8 AS value,
       'since enqueued: the oldest item in the table, read or not (the library''s oldest-message age)' AS note
-- @block ring
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       coalesce(extract(epoch FROM {clock} - (SELECT r.{enqueued_at} FROM {table} AS r, {seq_table} AS s
                                             WHERE r.{key} = (s.{pop} % {capacity}) AND r.{refcount} > 0
                                               AND s.{push} > s.{pop})), 0)::float8 AS value,
       '' AS note
-- @block lease_follow
-- A lease queue whose mapping says more about readiness (issue 31; {free}: see depth.sql): the
-- oldest free item that is not exhausted. Reads at most :cap free items in enqueue-time order
-- (an index on (enqueued_at, key), partial on the free items, serves it) and takes the first one
-- not at max_attempts, so exhausted items never make the age grow for ever.
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       coalesce(extract(epoch FROM {clock} - (
           SELECT min(l.enq) FROM (SELECT {enqueued_at} AS enq, {exhausted} AS exhausted FROM {table}
                                   WHERE {free}{open_and} ORDER BY {enqueued_at}, {key} LIMIT :cap) AS l
           WHERE NOT l.exhausted)), 0)::float8 AS value,
       'oldest free item below max_attempts (of the first cap by enqueue time)' AS note
-- @block lease_follow_runnable
-- With runnable_at the age is counted from when the item became runnable, greatest(enqueued_at,
-- runnable_at): a job scheduled for 10:00 has not waited at 09:59, and has waited 5 minutes at
-- 10:05. Read in runnable_at order through an index that leads with it (see depth.sql), at most
-- :cap items for each of the two ready ranges (runnable_at passed, runnable_at NULL); a scheduled
-- item is never read. In the NULL range runnable_at is no order (equal keys sit in physical order):
-- it is read in {runnable_null_order} (the key where that is the age's order, coltypes).
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       greatest(coalesce(extract(epoch FROM {clock} - least(
           (SELECT min(greatest(l.enq, l.run)) FROM (SELECT {enqueued_at} AS enq, {runnable} AS run, {exhausted} AS exhausted
                                                     FROM {table} WHERE {free} AND {runnable} <= {clock}{open_and}
                                                     ORDER BY {runnable} LIMIT :cap) AS l
            WHERE NOT l.exhausted),
           (SELECT min(l.enq) FROM (SELECT {enqueued_at} AS enq, {exhausted} AS exhausted
                                    FROM {table} WHERE {free} AND {runnable} IS NULL{open_and}
                                    ORDER BY {runnable_null_order} LIMIT :cap) AS l
            WHERE NOT l.exhausted))), 0), 0)::float8 AS value,
       'since runnable: greatest(enqueued_at, runnable_at) of the ready items below max_attempts' AS note
-- @block status_follow_skip
-- A status queue with max_attempts whose fetch index puts other columns before the enqueue time
-- (Oban's): as block status_skip, each prefix's first item below max_attempts among at most :cap.
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       coalesce(extract(epoch FROM {clock} - r.enq), 0)::float8 AS value,
       CASE WHEN r.capped THEN 'at least: oldest ready item below max_attempts of the first cap index prefixes read'
            ELSE 'oldest ready item below max_attempts' END AS note
FROM (SELECT min(x.enq) AS enq, bool_or(x.capped) AS capped FROM ({age_skip_follow}) AS x (enq, capped)) AS r
-- @block status_follow
-- A status queue with max_attempts (issue 31): the oldest ready item below it, of at most :cap
-- ready items read as block status reads them: 'at least' when the read stops at the cap, unless it
-- read in age order ({age_ordered}: status, key) and found one.
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       coalesce(extract(epoch FROM {clock} - r.enq), 0)::float8 AS value,
       CASE WHEN r.capped THEN 'at least: oldest ready item below max_attempts of the first cap read'
            ELSE 'oldest ready item below max_attempts' END AS note
FROM (SELECT min(x.enq) AS enq, bool_or(x.capped) AS capped FROM {ready_rows}
      CROSS JOIN LATERAL (SELECT min(l.enq) FILTER (WHERE NOT l.exhausted) AS enq,
                                 count(*) >= :cap AND NOT ({age_ordered} AND bool_or(NOT l.exhausted)) AS capped
                          FROM (SELECT {enqueued_at} AS enq, {exhausted} AS exhausted FROM {table}
                                WHERE {status} {ready_match}{open_and} ORDER BY {status_order} LIMIT :cap) AS l) AS x) AS r
-- @block status_follow_runnable
-- With runnable_at: age since the item became runnable, greatest(enqueued_at, runnable_at), of the
-- ready items below max_attempts; a scheduled item is never read. {oldest_reads}
-- (coltypes.oldest_runnable_reads) reads at most :cap items for each ready range: in
-- (status, runnable_at) order through an index on those columns (see depth.sql), or through the
-- library's partial index on each ready value whose key holds runnable_at (pgqueuer's (entrypoint,
-- execute_after) WHERE status = 'queued'; issue 29: the table was read whole, 4,784 buffers at
-- 200,000 rows), where a read that stops at the cap gives the oldest of the items read: 'at least'.
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       greatest(coalesce(extract(epoch FROM {clock} - r.oldest), 0), 0)::float8 AS value,
       CASE WHEN r.partial
            THEN 'at least: since runnable, greatest(enqueued_at, runnable_at), of the oldest of the cap of ready items read in the order of the library''s partial index'
            ELSE 'since runnable: greatest(enqueued_at, runnable_at) of the ready items below max_attempts' END AS note
FROM (SELECT min(x.oldest) AS oldest, bool_or(x.capped) AS partial
      FROM ({oldest_reads}) AS x (oldest, capped)) AS r
-- @block due_follow
-- A due queue with max_attempts (issue 33): the oldest due item below it.
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       greatest(coalesce(extract(epoch FROM {clock} - (SELECT {due} FROM {table}
                                                      WHERE {due} <= {clock} AND NOT {exhausted}{open_and}{unlocked_and}
                                                      ORDER BY {due} LIMIT 1)), 0), 0)::float8 AS value,
       'oldest due item below max_attempts' AS note
