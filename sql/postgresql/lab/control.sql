-- The lab workload's own bookkeeping: session settings, fault and setting polls, counters,
-- and the janitor that keeps the lab bounded when it runs for days.
-- @block session
-- Every worker connection: a short lock timeout (dequeuers give up instead of queueing behind a
-- lock; that is what the lock-hold fault makes visible) and a statement timeout as a backstop.
SELECT set_config('lock_timeout', :lock_timeout, false) AS lock_timeout,
       set_config('statement_timeout', :statement_timeout, false) AS statement_timeout
-- @block faults
SELECT name, enabled FROM lab.faults ORDER BY name
-- @block settings
SELECT name, value FROM lab.settings ORDER BY name
-- @block ring_capacity
-- The ring's capacity is the number of preallocated slots.
SELECT count(*) AS capacity FROM lab.q_ring_slot
-- @block counters_add
-- Add the deltas since the last flush (cumulative, like a server counter).
INSERT INTO lab.counters AS c (name, value)
SELECT n, v FROM unnest(ARRAY[:names]::text[], ARRAY[:deltas]::bigint[]) AS d (n, v)
ON CONFLICT (name) DO UPDATE SET value = c.value + excluded.value, updated_at = clock_timestamp()
-- @block heartbeat
INSERT INTO lab.counters AS c (name, value) VALUES ('workload.heartbeat', 1)
ON CONFLICT (name) DO UPDATE SET value = c.value + 1, updated_at = clock_timestamp()
-- @block trim_status_done
-- Keep at most :keep done rows in the status queue (the newest); an archive job has plenty.
DELETE FROM lab.q_status_meta
WHERE id IN (SELECT id FROM lab.q_status_meta WHERE status = 2 AND id > 0
             ORDER BY status, id DESC OFFSET :keep LIMIT :batch)
-- @block trim_ledger
DELETE FROM lab.ledger WHERE ts < clock_timestamp() - make_interval(hours => :keep_h)
