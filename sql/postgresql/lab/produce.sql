-- The lab workload's producers: one block per queue kind, one item per statement.
-- Each statement also writes the 'produced' ledger row, so the item and its ledger entry commit
-- (or fail) together: a crash or a lost connection can never leave one without the other.
-- @block delete
-- Several producers: the advisory lock (held to commit) is taken before the key is drawn, so keys
-- commit in key order and the consumers' watermark never passes a row still to be committed.
WITH i AS (INSERT INTO lab.q_delete (payload)
           SELECT :payload FROM (SELECT pg_advisory_xact_lock(hashtext('lab.q_delete produce'))) AS serial
           RETURNING id)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'delete', id, 'produced', :worker FROM i
RETURNING item
-- @block status
-- QueueMeta / QueueData: the small status row and its payload in a side table.
WITH m AS (INSERT INTO lab.q_status_meta DEFAULT VALUES RETURNING id),
     d AS (INSERT INTO lab.q_status_data (id, payload) SELECT id, :payload FROM m)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'status', id, 'produced', :worker FROM m
RETURNING item
-- @block lease
WITH i AS (INSERT INTO lab.q_lease (payload) VALUES (:payload) RETURNING id)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'lease', id, 'produced', :worker FROM i
RETURNING item
-- @block due
WITH i AS (INSERT INTO lab.q_due (due_at, payload)
           VALUES (clock_timestamp() + make_interval(secs => :delay_s), :payload) RETURNING id)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'due', id, 'produced', :worker FROM i
RETURNING item
-- @block ring
-- LMAX-style push: take the next push sequence (only while push - pop < capacity, i.e. not full)
-- and fill slot seq % capacity, whose reference count must be 0. No row back = the ring is full.
WITH s AS (UPDATE lab.q_ring_seq SET push_seq = push_seq + 1
           WHERE id = 1 AND push_seq - pop_seq < :capacity
           RETURNING push_seq - 1 AS seq),
     r AS (UPDATE lab.q_ring_slot AS r
           SET message_id = s.seq, enqueued_at = clock_timestamp(), payload = :payload,
               reference_count = r.reference_count + 1
           FROM s WHERE r.slot = s.seq % :capacity AND r.reference_count = 0
           RETURNING r.message_id)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'ring', message_id, 'produced', :worker FROM r
RETURNING item
