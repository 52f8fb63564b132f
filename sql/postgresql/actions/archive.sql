-- archive: move (or delete) finished items older than a cutoff out of a status queue, in small
-- batches with a pause between them (the archiving strategy of high-performance-queue: keep the
-- queue table small without a maintenance window). {age} is status_changed_at when the queue has
-- it, else enqueued_at.
-- One batch = one transaction: pick (locks the rows, skipping rows others hold), copy the payload
-- rows and the queue rows to the archive tables (move mode), delete the payload rows, delete the
-- queue rows. The delete re-checks status and age (compare-and-set) and the batch is rolled back
-- unless it removed every picked row, so each item is either archived whole or untouched; a
-- re-run continues with what is left.
-- What binds the execution to the preview (queueops/actions/archive.py): up to KEYS_MAX items,
-- the keys the preview read (pick_keys: only those keys, re-checked); beyond, the preview's count
-- as a cap on the total and its highest key as a bound (pick: key <= :last_key).
-- @block count
SELECT count(*) AS n FROM (
    SELECT 1 FROM {table} WHERE {status} IN (:done_values) AND {age} < :cutoff LIMIT :limit_n) AS s
-- @block sample
SELECT {key} AS item, {status} AS status, {age} AS finished_at
FROM {table} WHERE {status} IN (:done_values) AND {age} < :cutoff
ORDER BY {key} LIMIT :sample_n
-- @block last_key
-- The highest key that qualifies (the bound of a large archive without --max-items): a backward
-- scan of the key's index that stops at the first row that qualifies.
SELECT {key} AS item FROM {table}
WHERE {status} IN (:done_values) AND {age} < :cutoff
ORDER BY {key} DESC LIMIT 1
-- @block nth_key
-- The key of the (skip_n + 1)-th item in key order (the bound of a large archive capped by
-- --max-items: the execution takes the lowest keys first, as this order). No row: fewer qualify.
SELECT {key} AS item FROM {table}
WHERE {status} IN (:done_values) AND {age} < :cutoff
ORDER BY {key} OFFSET :skip_n LIMIT 1
-- @block count_bounded
SELECT count(*) AS n FROM (
    SELECT 1 FROM {table}
    WHERE {status} IN (:done_values) AND {age} < :cutoff AND {key} <= :last_key LIMIT :limit_n) AS s
-- @block pick
-- A large archive: at most :batch_n (never more than what is left of the preview's count), never
-- a key above the preview's highest.
SELECT {key} AS item FROM {table}
WHERE {status} IN (:done_values) AND {age} < :cutoff AND {key} <= :last_key
ORDER BY {key} LIMIT :batch_n
FOR UPDATE SKIP LOCKED
-- @block pick_keys
-- A small archive: the next chunk of the keys the preview read, those that still qualify.
SELECT {key} AS item FROM {table}
WHERE {key} IN (:confirmed_keys) AND {status} IN (:done_values) AND {age} < :cutoff
ORDER BY {key}
FOR UPDATE SKIP LOCKED
-- @block copy_data
-- Payload rows are found through the payload table's own link column (data_key), never the queue's
-- key name: Hangfire's State.Id is the state row's id, its link to the job is JobId.
INSERT INTO {archive_data_table} SELECT * FROM {data_table} WHERE {data_key} IN (:item_ids)
-- @block delete_data
DELETE FROM {data_table} WHERE {data_key} IN (:item_ids)
-- @block copy
INSERT INTO {archive_table} SELECT * FROM {table} WHERE {key} IN (:item_ids)
-- @block delete
DELETE FROM {table}
WHERE {key} IN (:item_ids) AND {status} IN (:done_values) AND {age} < :cutoff
RETURNING {key} AS item
-- @block columns
-- The columns of a table in order with their types: a move needs the archive table to have the
-- queue table's layout (INSERT ... SELECT *). An unknown table yields no rows.
SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type
FROM pg_attribute AS a
WHERE a.attrelid = to_regclass(:qualified_table) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
