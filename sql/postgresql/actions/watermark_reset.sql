-- watermark-reset: set the watermark to (lowest pending key - buffer), 0 when the queue is empty.
-- "Pending" is every item that may still be dequeued: for a status queue the ready and the
-- processing items (a processing item may be requeued), for a lease queue every row (a leased
-- item comes back when its lease is released), for delete and due queues every row. Items below
-- the watermark are stranded: the dequeue only scans keys >= watermark.
-- observe_*: the watermark table's row count (must be 1), its value, the lowest pending key and
-- the number of stranded items. sample_*: the stranded items the reset releases.
-- @block observe_delete
SELECT (SELECT count(*) FROM {wm_table}) AS wm_rows,
       (SELECT {wm_column} FROM {wm_table} LIMIT 1) AS old_value,
       (SELECT min({key}) FROM {table}) AS lowest_pending,
       (SELECT count(*) FROM {table} WHERE {key} < (SELECT {wm_column} FROM {wm_table} LIMIT 1)) AS stranded
-- @block observe_due
SELECT (SELECT count(*) FROM {wm_table}) AS wm_rows,
       (SELECT {wm_column} FROM {wm_table} LIMIT 1) AS old_value,
       (SELECT min({key}) FROM {table}) AS lowest_pending,
       (SELECT count(*) FROM {table} WHERE {key} < (SELECT {wm_column} FROM {wm_table} LIMIT 1)) AS stranded
-- @block observe_lease
SELECT (SELECT count(*) FROM {wm_table}) AS wm_rows,
       (SELECT {wm_column} FROM {wm_table} LIMIT 1) AS old_value,
       (SELECT min({key}) FROM {table}) AS lowest_pending,
       (SELECT count(*) FROM {table} WHERE {key} < (SELECT {wm_column} FROM {wm_table} LIMIT 1)) AS stranded
-- @block observe_status
SELECT (SELECT count(*) FROM {wm_table}) AS wm_rows,
       (SELECT {wm_column} FROM {wm_table} LIMIT 1) AS old_value,
       (SELECT min({key}) FROM {table} WHERE {status} IN (:pending_values)) AS lowest_pending,
       (SELECT count(*) FROM {table} WHERE {status} IN (:pending_values)
          AND {key} < (SELECT {wm_column} FROM {wm_table} LIMIT 1)) AS stranded
-- @block sample_delete
SELECT {key} AS item FROM {table} WHERE {key} < :old_value ORDER BY {key} LIMIT :sample_n
-- @block sample_due
SELECT {key} AS item FROM {table} WHERE {key} < :old_value ORDER BY {key} LIMIT :sample_n
-- @block sample_lease
SELECT {key} AS item FROM {table} WHERE {key} < :old_value ORDER BY {key} LIMIT :sample_n
-- @block sample_status
SELECT {key} AS item, {status} AS status FROM {table}
WHERE {status} IN (:pending_values) AND {key} < :old_value ORDER BY {key} LIMIT :sample_n
-- @block lock
-- A reset that moves the watermark back: the row is locked and read first (one transaction with
-- move_back), so the result can say where the consumers had moved it since the preview.
SELECT {wm_column} AS value FROM {wm_table} FOR UPDATE
-- @block move_back
-- Moving the watermark back never strands an item (a lower watermark only makes the dequeue scan
-- more keys), so the confirmed value is written whatever the consumers did meanwhile -- they move
-- it forward every few seconds, and a preview is never confirmed within the same second -- but
-- only over a value at or ahead of it: a watermark already further back is never moved forward.
UPDATE {wm_table} SET {wm_column} = :new_value
WHERE {wm_column} >= :new_value
RETURNING {wm_column} AS new_value
-- @block apply
-- A reset that moves the watermark forward (no pending key below the new value): compare-and-set,
-- written only if the watermark still holds the value the preview observed. A concurrent update
-- (a dequeuer moving it, another reset) wins; this then changes nothing.
UPDATE {wm_table} SET {wm_column} = :new_value
WHERE {wm_column} = :old_value
RETURNING {wm_column} AS new_value
