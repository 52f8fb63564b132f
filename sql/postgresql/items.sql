-- items: the items behind a number, for the console's drill-down (issue 32, item 6). Read-only,
-- bounded: at most :limit_n rows (the console asks for 100), each read through the index the
-- collector of that number uses, in that index's order, so a table of millions costs what the
-- collector costs. Every value is bound; identifiers are the queue's quoted fragments.
-- Optional columns come as fragments that are the quoted column or NULL: {attempts_sel},
-- {error_sel}, {owner_sel} (attempts, last error, lease owner), {enq_sel} (the enqueue time).
-- Columns of every block: item, since (the lease, status change, enqueue or due time), age_s,
-- attempts, last_error, owner.
-- @block stuck_lease
-- Stuck leases exactly as stuck_leases.sql counts them: the queue's compiled stuck rule
-- (queueops.mapping.stuck_rule: {stuck_held}, the held items the count reads; {stuck_if}, the stuck
-- ones among them), oldest first, through the index that leads with the lease column.
SELECT {key} AS item, {lease} AS since, round(extract(epoch FROM {clock} - {lease})::numeric, 1)::float8 AS age_s,
       {attempts_sel} AS attempts, left(CAST({error_sel} AS text), 500) AS last_error, CAST({owner_sel} AS text) AS owner
FROM {table}
WHERE {stuck_held} AND {stuck_if}{open_and}
ORDER BY {lease}, {key} LIMIT :limit_n
-- @block stuck_status
-- Stuck processing items exactly as stuck_leases.sql (blocks status, status_follow) counts them:
-- the first :cap processing items in (status, key) order, then those the compiled rule {stuck_if}
-- calls stuck (the library's own: a worker's heartbeat, expire_in; else the status change older
-- than lease_timeout_s; not exhausted), oldest change first. {status_changed_at} may be read from
-- the queue's side table (procrastinate's events), as the count reads it.
SELECT p.item, p.since, round(extract(epoch FROM {clock} - p.since)::numeric, 1)::float8 AS age_s,
       p.attempts, p.last_error, p.owner
FROM (SELECT {key} AS item, {status_changed_at} AS since, {stuck_if} AS stuck, {attempts_sel} AS attempts,
             left(CAST({error_sel} AS text), 500) AS last_error, CAST({owner_sel} AS text) AS owner
      FROM {table} WHERE {status} IN (:processing_values){open_and}
      ORDER BY {status}, {key} LIMIT :cap) AS p
WHERE p.stuck
ORDER BY p.since, p.item LIMIT :limit_n
-- @block stuck_claims
-- Abandoned claims exactly as stuck_leases.sql (block delete) counts them: claims whose process is
-- missing or silent ({claim_gone}, the compiled rule), each listed by the item it holds
-- (claims.item_column: Solid Queue's job_id) with its process as the owner, oldest claim first.
SELECT qo_claim.{claims_item} AS item, qo_claim.{claims_at} AS since,
       round(extract(epoch FROM {clock} - qo_claim.{claims_at})::numeric, 1)::float8 AS age_s,
       CAST(NULL AS int) AS attempts, CAST(NULL AS text) AS last_error,
       CAST(qo_claim.{claims_process} AS text) AS owner
FROM {claims_table} AS qo_claim
LEFT JOIN {process_table} AS qo_proc ON qo_proc.{process_key} = qo_claim.{claims_process}
WHERE {claim_gone}
ORDER BY qo_claim.{claims_at}, qo_claim.{claims_item} LIMIT :limit_n
-- @block waiting_lease
-- The oldest free items, as oldest_age_s.sql (block lease) reads the first of them: (enqueued_at, key)
-- among the rows whose lease is NULL (the dequeue's own partial index).
SELECT {key} AS item, {enqueued_at} AS since,
       round(extract(epoch FROM {clock} - {enqueued_at})::numeric, 1)::float8 AS age_s,
       {attempts_sel} AS attempts, left(CAST({error_sel} AS text), 500) AS last_error, CAST(NULL AS text) AS owner
FROM {table} WHERE {lease} IS NULL{open_and}
ORDER BY {enqueued_at}, {key} LIMIT :limit_n
-- @block waiting_lease_follow
-- A lease queue that maps readiness fields: the free items ({free}) that are not exhausted, of the
-- first :cap free ones in enqueue order (oldest_age_s.sql, block lease_follow).
SELECT l.item, l.since, round(extract(epoch FROM {clock} - l.since)::numeric, 1)::float8 AS age_s,
       l.attempts, l.last_error, CAST(NULL AS text) AS owner
FROM (SELECT {key} AS item, {enqueued_at} AS since, {attempts_sel} AS attempts,
             left(CAST({error_sel} AS text), 500) AS last_error, {exhausted} AS exhausted
      FROM {table} WHERE {free}{open_and} ORDER BY {enqueued_at}, {key} LIMIT :cap) AS l
WHERE NOT l.exhausted
ORDER BY l.since, l.item LIMIT :limit_n
-- @block waiting_lease_follow_runnable
-- A lease queue with runnable_at, as oldest_age_s.sql (block lease_follow_runnable) reads its age:
-- the free items below max_attempts whose runnable time has passed (at most :cap, in runnable_at
-- order), aged from greatest(enqueued_at, runnable_at), and those without one (at most :cap, in
-- {runnable_null_order}, the age's own read of that range); a scheduled item is never listed.
SELECT l.item, l.since, round(extract(epoch FROM {clock} - l.since)::numeric, 1)::float8 AS age_s,
       l.attempts, l.last_error, CAST(NULL AS text) AS owner
FROM ((SELECT {key} AS item, greatest({enqueued_at}, {runnable}) AS since, {attempts_sel} AS attempts,
              left(CAST({error_sel} AS text), 500) AS last_error, {exhausted} AS exhausted
       FROM {table} WHERE {free} AND {runnable} <= {clock}{open_and} ORDER BY {runnable} LIMIT :cap)
      UNION ALL
      (SELECT {key}, {enqueued_at}, {attempts_sel}, left(CAST({error_sel} AS text), 500), {exhausted}
       FROM {table} WHERE {free} AND {runnable} IS NULL{open_and} ORDER BY {runnable_null_order} LIMIT :cap)) AS l
WHERE NOT l.exhausted
ORDER BY l.since, l.item LIMIT :limit_n
-- @block waiting_status
-- The oldest ready items in (status, key) order, as oldest_age_s.sql (block status) reads the first.
SELECT {key} AS item, {enq_sel} AS since,
       round(extract(epoch FROM {clock} - {enq_sel})::numeric, 1)::float8 AS age_s,
       {attempts_sel} AS attempts, left(CAST({error_sel} AS text), 500) AS last_error, CAST({owner_sel} AS text) AS owner
FROM {table} WHERE {status} IN (:ready_values){open_and}
ORDER BY {status}, {key} LIMIT :limit_n
-- @block waiting_reads
-- The oldest waiting items of a status queue read exactly as oldest_age_s.sql reads its age
-- (queueops.items._waiting_reads): {waiting_reads} are its reads with each row's columns, through
-- the runnable column's index (block status_follow_runnable: since greatest(enqueued_at,
-- runnable_at); a scheduled item is never listed) or the skip walk of the fetch index (blocks
-- status_skip, status_follow_skip: the first items of each (queue, priority)), items at their
-- attempt limit left out. Oldest first by that time, so the first row's age is the age's figure.
SELECT w.item, w.since, round(extract(epoch FROM {clock} - w.since)::numeric, 1)::float8 AS age_s,
       w.attempts, w.last_error, w.owner
FROM ({waiting_reads}) AS w (item, attempts, last_error, owner, since)
ORDER BY w.since, w.item LIMIT :limit_n
-- @block waiting_status_follow
-- A status queue with max_attempts and no skip read: the ready items below it among the first
-- :cap read as oldest_age_s.sql (block status_follow) reads them, oldest enqueue time first.
SELECT l.item, l.since, round(extract(epoch FROM {clock} - l.since)::numeric, 1)::float8 AS age_s,
       l.attempts, l.last_error, l.owner
FROM {ready_rows} CROSS JOIN LATERAL (
    SELECT {key} AS item, {enqueued_at} AS since, {exhausted} AS exhausted, {attempts_sel} AS attempts,
           left(CAST({error_sel} AS text), 500) AS last_error, CAST({owner_sel} AS text) AS owner
    FROM {table} WHERE {status} {ready_match}{open_and} ORDER BY {status_order} LIMIT :cap) AS l
WHERE NOT l.exhausted
ORDER BY l.since, l.item LIMIT :limit_n
-- @block waiting_status_heap
-- order = "heap" (the key says nothing about age): the oldest ready items by enqueue time, as
-- oldest_age_s.sql (block status_heap) reads the first.
SELECT {key} AS item, {enqueued_at} AS since,
       round(extract(epoch FROM {clock} - {enqueued_at})::numeric, 1)::float8 AS age_s,
       {attempts_sel} AS attempts, left(CAST({error_sel} AS text), 500) AS last_error, CAST({owner_sel} AS text) AS owner
FROM {table} WHERE {status} IN (:ready_values){open_and}
ORDER BY {enqueued_at}, {key} LIMIT :limit_n
-- @block waiting_delete
-- The oldest items of a delete queue: the lowest keys (oldest_age_s.sql, block delete).
SELECT {key} AS item, {enq_sel} AS since,
       round(extract(epoch FROM {clock} - {enq_sel})::numeric, 1)::float8 AS age_s,
       CAST(NULL AS int) AS attempts, CAST(NULL AS text) AS last_error, CAST(NULL AS text) AS owner
FROM {table}{open_where}
ORDER BY {key} LIMIT :limit_n
-- @block waiting_delete_heap
-- order = "heap": the oldest items by enqueue time, as oldest_age_s.sql (block delete_heap) reads the first.
SELECT {key} AS item, {enqueued_at} AS since,
       round(extract(epoch FROM {clock} - {enqueued_at})::numeric, 1)::float8 AS age_s,
       CAST(NULL AS int) AS attempts, CAST(NULL AS text) AS last_error, CAST(NULL AS text) AS owner
FROM {table}{open_where}
ORDER BY {enqueued_at}, {key} LIMIT :limit_n
-- @block waiting_due
-- The most overdue items of a due queue, through the due column's index (oldest_age_s.sql, block due);
-- with advisory_lock (Que) the items a worker holds (in progress, not waiting) are left out.
SELECT {key} AS item, {due} AS since,
       round(extract(epoch FROM {clock} - {due})::numeric, 1)::float8 AS age_s,
       CAST(NULL AS int) AS attempts, CAST(NULL AS text) AS last_error, CAST(NULL AS text) AS owner
FROM {table} WHERE {due} <= {clock}{open_and}{unlocked_and}
ORDER BY {due} LIMIT :limit_n
-- @block waiting_due_follow
-- A due queue with max_attempts, as oldest_age_s.sql (block due_follow) reads its age: the most
-- overdue items below the limit (an item at its limit is never taken again: not waiting).
SELECT {key} AS item, {due} AS since,
       round(extract(epoch FROM {clock} - {due})::numeric, 1)::float8 AS age_s,
       {attempts_sel} AS attempts, CAST(NULL AS text) AS last_error, CAST(NULL AS text) AS owner
FROM {table} WHERE {due} <= {clock} AND NOT {exhausted}{open_and}{unlocked_and}
ORDER BY {due} LIMIT :limit_n
-- @block waiting_due_enqueued
-- age_from = "enqueued" (PGMQ), as oldest_age_s.sql (block due_enqueued) reads its age: the oldest
-- items in the table by enqueue order (the lowest keys), visible or not: a message its consumers
-- keep failing on is the oldest, whatever its vt says.
SELECT {key} AS item, {enqueued_at} AS since,
       round(extract(epoch FROM {clock} - {enqueued_at})::numeric, 1)::float8 AS age_s,
       {attempts_sel} AS attempts, CAST(NULL AS text) AS last_error, CAST(NULL AS text) AS owner
FROM {table}{open_where}
ORDER BY {key} LIMIT :limit_n
-- @block by_key
-- One item by its key, exact match on the bound value (the key's index; a key that is not unique:
-- at most :limit_n rows). {held_sel}: the lease, status change or due time; {state_sel}: the
-- status, or NULL.
SELECT {key} AS item, {enq_sel} AS enqueued_at, {held_sel} AS since,
       round(extract(epoch FROM {clock} - {held_sel})::numeric, 1)::float8 AS age_s,
       CAST({state_sel} AS text) AS status, {attempts_sel} AS attempts,
       left(CAST({error_sel} AS text), 500) AS last_error, CAST({owner_sel} AS text) AS owner
FROM {table} WHERE {key} = :key{open_and}
LIMIT :limit_n
