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
       round(extract(epoch FROM (now() - {lease}))::numeric, 1)::float8 AS lease_age_s
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
       round(extract(epoch FROM (now() - {lease}))::numeric, 1)::float8 AS lease_age_s
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
       round(extract(epoch FROM (now() - {status_changed_at}))::numeric, 1)::float8 AS lease_age_s
FROM {table}
WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff{open_and}
ORDER BY {status_changed_at}, {key} LIMIT :sample_n
-- @block batch_status
WITH picked AS (
    SELECT {key} AS item, {status_changed_at} AS observed FROM {table}
    WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff{open_and}
    ORDER BY {status_changed_at}, {key} LIMIT :batch_n
    FOR UPDATE SKIP LOCKED)
UPDATE {table} AS t SET {status} = :ready_value, {status_changed_at} = now()
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
UPDATE {table} AS t SET {status} = :ready_value, {status_changed_at} = now(), {attempts} = t.{attempts} + 1
FROM picked
WHERE t.{key} = picked.item AND t.{status_changed_at} = picked.observed
  AND t.{status} IN (:processing_values)
RETURNING t.{key} AS item, picked.observed AS observed
