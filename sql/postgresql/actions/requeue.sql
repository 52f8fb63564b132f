-- requeue: release stuck work. Lease kind: clear the lease of items leased before the cutoff.
-- Status kind: set items processing since before the cutoff back to ready.
-- Preview blocks (count_*, sample_*) use exactly the predicate of the batch blocks; the cutoff is
-- fixed at preview time, so preview and execution select the same rows when nothing changes.
-- Batch blocks: one statement = one transaction; rows other sessions hold are skipped (SKIP
-- LOCKED), so a live dequeuer is never blocked; each row is written only if its lease value is
-- still the one observed when it was picked (compare-and-set), and the observed value is returned.
-- @block count_lease
SELECT count(*) AS n FROM (
    SELECT 1 FROM {table} WHERE {lease} < :cutoff{open_and} LIMIT :limit_n) AS s
-- @block sample_lease
SELECT {key} AS item, {lease} AS observed,
       round(extract(epoch FROM ({clock} - {lease}))::numeric, 1)::float8 AS lease_age_s
FROM {table} WHERE {lease} < :cutoff{open_and}
ORDER BY {lease}, {key} LIMIT :sample_n
-- @block batch_lease
WITH picked AS (
    SELECT {key} AS item, {lease} AS observed FROM {table}
    WHERE {lease} < :cutoff{open_and}
    ORDER BY {lease}, {key} LIMIT :batch_n
    FOR UPDATE SKIP LOCKED)
UPDATE {table} AS t SET {lease} = NULL
FROM picked
WHERE t.{key} = picked.item AND t.{lease} = picked.observed
RETURNING t.{key} AS item, picked.observed AS observed
-- @block batch_lease_attempts
WITH picked AS (
    SELECT {key} AS item, {lease} AS observed FROM {table}
    WHERE {lease} < :cutoff{open_and}
    ORDER BY {lease}, {key} LIMIT :batch_n
    FOR UPDATE SKIP LOCKED)
UPDATE {table} AS t SET {lease} = NULL, {attempts} = t.{attempts} + 1
FROM picked
WHERE t.{key} = picked.item AND t.{lease} = picked.observed
RETURNING t.{key} AS item, picked.observed AS observed
-- Lease queues with an error column (the seeds' SimpleQueue): an item whose error is set failed
-- and keeps its lease on purpose; it is never released. The *_unfailed blocks are the lease
-- blocks with that predicate, used whenever the queue maps error_column.
-- @block count_lease_unfailed
SELECT count(*) AS n FROM (
    SELECT 1 FROM {table} WHERE {lease} < :cutoff AND {error} IS NULL{open_and} LIMIT :limit_n) AS s
-- @block sample_lease_unfailed
SELECT {key} AS item, {lease} AS observed,
       round(extract(epoch FROM ({clock} - {lease}))::numeric, 1)::float8 AS lease_age_s
FROM {table} WHERE {lease} < :cutoff AND {error} IS NULL{open_and}
ORDER BY {lease}, {key} LIMIT :sample_n
-- @block batch_lease_unfailed
WITH picked AS (
    SELECT {key} AS item, {lease} AS observed FROM {table}
    WHERE {lease} < :cutoff AND {error} IS NULL{open_and}
    ORDER BY {lease}, {key} LIMIT :batch_n
    FOR UPDATE SKIP LOCKED)
UPDATE {table} AS t SET {lease} = NULL
FROM picked
WHERE t.{key} = picked.item AND t.{lease} = picked.observed
RETURNING t.{key} AS item, picked.observed AS observed
-- @block batch_lease_attempts_unfailed
WITH picked AS (
    SELECT {key} AS item, {lease} AS observed FROM {table}
    WHERE {lease} < :cutoff AND {error} IS NULL{open_and}
    ORDER BY {lease}, {key} LIMIT :batch_n
    FOR UPDATE SKIP LOCKED)
UPDATE {table} AS t SET {lease} = NULL, {attempts} = t.{attempts} + 1
FROM picked
WHERE t.{key} = picked.item AND t.{lease} = picked.observed
RETURNING t.{key} AS item, picked.observed AS observed
-- @block count_status
SELECT count(*) AS n FROM (
    SELECT 1 FROM {table}
    WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff{open_and} LIMIT :limit_n) AS s
-- @block sample_status
SELECT {key} AS item, {status} AS status, {status_changed_at} AS observed,
       round(extract(epoch FROM ({clock} - {status_changed_at}))::numeric, 1)::float8 AS lease_age_s
FROM {table}
WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff{open_and}
ORDER BY {status_changed_at}, {key} LIMIT :sample_n
-- @block batch_status
WITH picked AS (
    SELECT {key} AS item, {status_changed_at} AS observed FROM {table}
    WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff{open_and}
    ORDER BY {status_changed_at}, {key} LIMIT :batch_n
    FOR UPDATE SKIP LOCKED)
UPDATE {table} AS t SET {status} = :ready_value, {status_changed_at} = {clock}
FROM picked
WHERE t.{key} = picked.item AND t.{status_changed_at} = picked.observed
  AND t.{status} IN (:processing_values)
RETURNING t.{key} AS item, picked.observed AS observed
-- @block batch_status_attempts
WITH picked AS (
    SELECT {key} AS item, {status_changed_at} AS observed FROM {table}
    WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff{open_and}
    ORDER BY {status_changed_at}, {key} LIMIT :batch_n
    FOR UPDATE SKIP LOCKED)
UPDATE {table} AS t SET {status} = :ready_value, {status_changed_at} = {clock}, {attempts} = t.{attempts} + 1
FROM picked
WHERE t.{key} = picked.item AND t.{status_changed_at} = picked.observed
  AND t.{status} IN (:processing_values)
RETURNING t.{key} AS item, picked.observed AS observed
-- Lease queues whose mapping says more about readiness (issue 31): the *_follow blocks. They
-- write every column that decides readiness ({release_set}: the lease NULL, or now() when
-- lease_ready = "past" and the library takes a lock that has passed; owner_column NULL; ready_flag
-- true), so a released item is one the mapping itself counts as ready and the library takes. Never
-- released: a failed item ({failed}: its error set and, with error_at, not older than its lease) and
-- an exhausted one ({live} is false: attempts at max_attempts, or one short of it with
-- --bump-attempts), which the library would never take again. {bump_set} adds the attempt.
-- @block count_lease_follow
SELECT count(*) AS n FROM (
    SELECT 1 FROM {table} WHERE {lease} < :cutoff AND NOT {failed} AND {live}{open_and} LIMIT :limit_n) AS s
-- @block sample_lease_follow
SELECT {key} AS item, {lease} AS observed,
       round(extract(epoch FROM ({clock} - {lease}))::numeric, 1)::float8 AS lease_age_s
FROM {table} WHERE {lease} < :cutoff AND NOT {failed} AND {live}{open_and}
ORDER BY {lease}, {key} LIMIT :sample_n
-- @block batch_lease_follow
WITH picked AS (
    SELECT {key} AS item, {lease} AS observed FROM {table}
    WHERE {lease} < :cutoff AND NOT {failed} AND {live}{open_and}
    ORDER BY {lease}, {key} LIMIT :batch_n
    FOR UPDATE SKIP LOCKED)
UPDATE {table} AS t SET {release_set}{bump_set}
FROM picked
WHERE t.{key} = picked.item AND t.{lease} = picked.observed
RETURNING t.{key} AS item, picked.observed AS observed
-- lease_ready = "past": the lease is a lock-until time; a lock that has passed is already ready (the
-- library takes it again), so what requeue releases is a lock set further ahead than the timeout:
-- :cutoff is the database clock PLUS lease_timeout_s. The lock is set to now(), which the library's
-- own dequeue (lock < now() in any later transaction) takes.
-- @block count_lease_follow_past
SELECT count(*) AS n FROM (
    SELECT 1 FROM {table} WHERE {lease} > :cutoff AND NOT {failed} AND {live}{open_and} LIMIT :limit_n) AS s
-- @block sample_lease_follow_past
SELECT {key} AS item, {lease} AS observed,
       round(extract(epoch FROM ({lease} - {clock}))::numeric, 1)::float8 AS lock_ahead_s
FROM {table} WHERE {lease} > :cutoff AND NOT {failed} AND {live}{open_and}
ORDER BY {lease} DESC, {key} LIMIT :sample_n
-- @block batch_lease_follow_past
WITH picked AS (
    SELECT {key} AS item, {lease} AS observed FROM {table}
    WHERE {lease} > :cutoff AND NOT {failed} AND {live}{open_and}
    ORDER BY {lease} DESC, {key} LIMIT :batch_n
    FOR UPDATE SKIP LOCKED)
UPDATE {table} AS t SET {release_set}{bump_set}
FROM picked
WHERE t.{key} = picked.item AND t.{lease} = picked.observed
RETURNING t.{key} AS item, picked.observed AS observed
-- Status queues whose mapping says more about readiness (issue 31): an item at max_attempts is
-- never set back to a ready status ({live}: the library would never take it), owner_column is
-- cleared ({owner_set}), {bump_set} adds the attempt.
-- @block count_status_follow
SELECT count(*) AS n FROM (
    SELECT 1 FROM {table}
    WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff AND {live}{open_and} LIMIT :limit_n) AS s
-- @block sample_status_follow
SELECT {key} AS item, {status} AS status, {status_changed_at} AS observed,
       round(extract(epoch FROM ({clock} - {status_changed_at}))::numeric, 1)::float8 AS lease_age_s
FROM {table}
WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff AND {live}{open_and}
ORDER BY {status_changed_at}, {key} LIMIT :sample_n
-- @block batch_status_follow
WITH picked AS (
    SELECT {key} AS item, {status_changed_at} AS observed FROM {table}
    WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff AND {live}{open_and}
    ORDER BY {status_changed_at}, {key} LIMIT :batch_n
    FOR UPDATE SKIP LOCKED)
UPDATE {table} AS t SET {status} = :ready_value, {status_changed_at} = {clock}{owner_set}{bump_set}
FROM picked
WHERE t.{key} = picked.item AND t.{status_changed_at} = picked.observed
  AND t.{status} IN (:processing_values)
RETURNING t.{key} AS item, picked.observed AS observed
