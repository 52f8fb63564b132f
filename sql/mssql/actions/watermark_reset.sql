-- watermark-reset: set the watermark to (lowest pending key - buffer), 0 when the queue is empty.
-- "Pending" is every item that may still be dequeued: for a status queue the ready and the
-- processing items, for lease, delete and due queues every row. Items below the watermark are
-- stranded: the dequeue only scans keys >= watermark. Counts read WITH (NOLOCK) (they never wait
-- for a dequeuer); the watermark value itself is read committed, since the reset compares it.
-- @block observe_delete
SELECT (SELECT COUNT(*) FROM {wm_table}) AS wm_rows,
       (SELECT TOP (1) {wm_column} FROM {wm_table}) AS old_value,
       (SELECT MIN({key}) FROM {table} WITH (NOLOCK)) AS lowest_pending,
       (SELECT COUNT(*) FROM {table} WITH (NOLOCK)
        WHERE {key} < (SELECT TOP (1) {wm_column} FROM {wm_table})) AS stranded
-- @block observe_due
SELECT (SELECT COUNT(*) FROM {wm_table}) AS wm_rows,
       (SELECT TOP (1) {wm_column} FROM {wm_table}) AS old_value,
       (SELECT MIN({key}) FROM {table} WITH (NOLOCK)) AS lowest_pending,
       (SELECT COUNT(*) FROM {table} WITH (NOLOCK)
        WHERE {key} < (SELECT TOP (1) {wm_column} FROM {wm_table})) AS stranded
-- @block observe_lease
SELECT (SELECT COUNT(*) FROM {wm_table}) AS wm_rows,
       (SELECT TOP (1) {wm_column} FROM {wm_table}) AS old_value,
       (SELECT MIN({key}) FROM {table} WITH (NOLOCK)) AS lowest_pending,
       (SELECT COUNT(*) FROM {table} WITH (NOLOCK)
        WHERE {key} < (SELECT TOP (1) {wm_column} FROM {wm_table})) AS stranded
-- @block observe_status
SELECT (SELECT COUNT(*) FROM {wm_table}) AS wm_rows,
       (SELECT TOP (1) {wm_column} FROM {wm_table}) AS old_value,
       (SELECT MIN({key}) FROM {table} WITH (NOLOCK) WHERE {status} IN (:pending_values)) AS lowest_pending,
       (SELECT COUNT(*) FROM {table} WITH (NOLOCK) WHERE {status} IN (:pending_values)
        AND {key} < (SELECT TOP (1) {wm_column} FROM {wm_table})) AS stranded
-- @block sample_delete
SELECT TOP (:sample_n) {key} AS item FROM {table} WITH (NOLOCK) WHERE {key} < :old_value ORDER BY {key}
-- @block sample_due
SELECT TOP (:sample_n) {key} AS item FROM {table} WITH (NOLOCK) WHERE {key} < :old_value ORDER BY {key}
-- @block sample_lease
SELECT TOP (:sample_n) {key} AS item FROM {table} WITH (NOLOCK) WHERE {key} < :old_value ORDER BY {key}
-- @block sample_status
SELECT TOP (:sample_n) {key} AS item, {status} AS status FROM {table} WITH (NOLOCK)
WHERE {status} IN (:pending_values) AND {key} < :old_value ORDER BY {key}
-- @block lock
-- A reset that moves the watermark back: the row is locked (UPDLOCK, held to the end of the
-- transaction by HOLDLOCK) and read first, in one transaction with move_back.
SELECT {wm_column} AS value FROM {wm_table} WITH (UPDLOCK, HOLDLOCK, ROWLOCK)
-- @block move_back
-- Moving the watermark back never strands an item, so the confirmed value is written whatever the
-- consumers did meanwhile, but only over a value at or ahead of it (never forward).
DECLARE @queueops_back TABLE (new_value bigint NOT NULL);
UPDATE {wm_table} SET {wm_column} = :new_value
OUTPUT inserted.{wm_column} INTO @queueops_back
WHERE {wm_column} >= :new_value;
SELECT o.new_value FROM @queueops_back AS o
-- @block apply
-- Compare-and-set: written only if the watermark still holds the value the preview observed.
-- OUTPUT ... INTO a table variable: OUTPUT without INTO fails (Msg 334) on a table with a trigger.
DECLARE @queueops_out TABLE (new_value bigint NOT NULL);
UPDATE {wm_table} SET {wm_column} = :new_value
OUTPUT inserted.{wm_column} INTO @queueops_out
WHERE {wm_column} = :old_value;
SELECT o.new_value FROM @queueops_out AS o
