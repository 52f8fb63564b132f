-- side_time: an item's time read from the queue's times_from side table, for the collectors'
-- reads of {enqueued_at} / {status_changed_at} when the queue row has no such column (Hangfire's
-- JobQueue: Job.CreatedAt through JobId). A correlated subquery, inlined where the blocks read the
-- time: one seek on the side table's key per item read (Job's clustered primary key on Id).
-- {outer_ref} is the queue table's bare name and the linking column: a two-part name, which an
-- un-aliased FROM schema.table exposes (never the deprecated three-part column reference).
-- @block first
(SELECT MIN(qo_side.{side_column}) FROM {side_table} AS qo_side WHERE qo_side.{side_key} = {outer_ref})
-- @block last
(SELECT MAX(qo_side.{side_column}) FROM {side_table} AS qo_side WHERE qo_side.{side_key} = {outer_ref})
