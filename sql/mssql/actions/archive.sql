-- archive: move (or delete) finished items older than a cutoff out of a status queue, in small
-- batches with a pause between them (the archiving strategy of high-performance-queue). {age} is
-- status_changed_at when the queue has it, else enqueued_at.
-- One batch = one transaction (XACT_ABORT ON): pick the keys with U locks held to the end of the
-- transaction (READPAST: rows other sessions hold are skipped), copy payload and queue rows to the
-- archive tables (move mode), delete the payload rows, then the queue rows re-checking status and
-- age. queueops commits only if every picked row was removed, else rolls back: each item is
-- archived whole or untouched, and a re-run continues with what is left.
-- @block count
SELECT COUNT(*) AS n FROM (
    SELECT TOP (:limit_n) 1 AS x FROM {table} WITH (NOLOCK)
    WHERE {status} IN (:done_values) AND {age} < :cutoff) AS s
-- @block sample
SELECT TOP (:sample_n) {key} AS item, {status} AS status, {age} AS finished_at
FROM {table} WITH (NOLOCK)
WHERE {status} IN (:done_values) AND {age} < :cutoff
ORDER BY {key}
-- @block pick
SELECT TOP (:batch_n) {key} AS item
FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
WHERE {status} IN (:done_values) AND {age} < :cutoff
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
