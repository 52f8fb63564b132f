-- archive: move (or delete) finished items older than a cutoff out of a status queue, in small
-- batches with a pause between them (the archiving strategy of high-performance-queue). {age} is
-- status_changed_at when the queue has it, else enqueued_at.
-- One batch = one transaction (XACT_ABORT ON): pick the keys with U locks held to the end of the
-- transaction (READPAST: rows other sessions hold are skipped), copy payload and queue rows to the
-- archive tables (move mode), delete the payload rows, then the queue rows re-checking status and
-- age. queueops commits only if every picked row was removed, else rolls back: each item is
-- archived whole or untouched, and a re-run continues with what is left.
-- What binds the execution to the preview (queueops/actions/archive.py): up to KEYS_MAX items,
-- the keys the preview read (pick_keys: only those keys, re-checked; at most 1000 bound keys a
-- statement, far below the 2100-parameter limit); beyond, the preview's count as a cap on the
-- total and its highest key as a bound (pick: key <= :last_key, a range on the key's index).
-- @block count
SELECT COUNT(*) AS n FROM (
    SELECT TOP (:limit_n) 1 AS x FROM {table} WITH (NOLOCK)
    WHERE {status} IN (:done_values) AND {age} < :cutoff) AS s
-- @block sample
SELECT TOP (:sample_n) {key} AS item, {status} AS status, {age} AS finished_at
FROM {table} WITH (NOLOCK)
WHERE {status} IN (:done_values) AND {age} < :cutoff
ORDER BY {key}
-- @block last_key
-- The highest key that qualifies (the bound of a large archive without --max-items): a backward
-- range scan of the key's index that stops at the first row that qualifies.
SELECT TOP (1) {key} AS item
FROM {table} WITH (NOLOCK)
WHERE {status} IN (:done_values) AND {age} < :cutoff
ORDER BY {key} DESC
-- @block nth_key
-- The key of the (skip_n + 1)-th item in key order (the bound of a large archive capped by
-- --max-items). No row: fewer qualify.
SELECT {key} AS item
FROM {table} WITH (NOLOCK)
WHERE {status} IN (:done_values) AND {age} < :cutoff
ORDER BY {key} OFFSET :skip_n ROWS FETCH NEXT 1 ROWS ONLY
-- @block count_bounded
SELECT COUNT(*) AS n FROM (
    SELECT TOP (:limit_n) 1 AS x FROM {table} WITH (NOLOCK)
    WHERE {status} IN (:done_values) AND {age} < :cutoff AND {key} <= :last_key) AS s
-- @block pick
-- A large archive: at most :batch_n (never more than what is left of the preview's count), never
-- a key above the preview's highest.
SELECT TOP (:batch_n) {key} AS item
FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
WHERE {status} IN (:done_values) AND {age} < :cutoff AND {key} <= :last_key
ORDER BY {key}
-- @block pick_keys
-- A small archive: the next chunk of the keys the preview read, those that still qualify. The
-- key list is a set of seeks on the key's index; rows other sessions hold are skipped.
SELECT {key} AS item
FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
WHERE {key} IN (:confirmed_keys) AND {status} IN (:done_values) AND {age} < :cutoff
ORDER BY {key}
-- @block copy_data
-- Payload rows are found through the payload table's own link column (data_key), never the queue's
-- key name: Hangfire's State.Id is the state row's id, its link to the job is JobId.
INSERT INTO {archive_data_table} SELECT * FROM {data_table} WHERE {data_key} IN (:item_ids)
-- @block delete_data
DELETE {data_table} WHERE {data_key} IN (:item_ids)
-- @block copy
INSERT INTO {archive_table} SELECT * FROM {table} WHERE {key} IN (:item_ids)
-- @block delete
-- OUTPUT ... INTO a table variable: OUTPUT without INTO fails (Msg 334) on a table with a trigger.
DECLARE @queueops_out TABLE (item nvarchar(450) NOT NULL);
DELETE {table}
OUTPUT CONVERT(nvarchar(450), deleted.{key}) INTO @queueops_out
WHERE {key} IN (:item_ids) AND {status} IN (:done_values) AND {age} < :cutoff;
SELECT o.item FROM @queueops_out AS o
-- @block columns
-- The columns of a table in order with their types: a move needs the archive table to have the
-- queue table's layout (INSERT ... SELECT *) and no identity column. Unknown table: no rows.
SELECT c.name AS name,
       CONCAT(TYPE_NAME(c.system_type_id), '(', c.max_length, ',', c.precision, ',', c.scale, ')') AS type,
       c.is_identity AS is_identity
FROM sys.columns AS c
WHERE c.object_id = OBJECT_ID(:qualified_table)
ORDER BY c.column_id
