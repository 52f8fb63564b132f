-- side_time: an item's time read from the queue's times_from side table, for the collectors'
-- reads of {enqueued_at} / {status_changed_at} when the queue row has no such column (Hangfire's
-- JobQueue: the latest State.CreatedAt named 'Enqueued' through JobId). A correlated subquery,
-- inlined where the blocks read the time: one seek on the side table's key per item read (State's
-- clustered primary key (JobId, Id): a job's few states).
-- {outer_ref} is the queue table's bare name and the linking column: a two-part name, which an
-- un-aliased FROM schema.table exposes (never the deprecated three-part column reference).
-- {side_and}: times_from.only's predicate on the side rows (empty without it); with
-- times_from.latest the enqueue time is read with 'last' (the latest matching side time).
-- @block first
(SELECT MIN(qo_side.{side_column}) FROM {side_table} AS qo_side WHERE qo_side.{side_key} = {outer_ref}{side_and})
-- @block last
(SELECT MAX(qo_side.{side_column}) FROM {side_table} AS qo_side WHERE qo_side.{side_key} = {outer_ref}{side_and})
