-- The lab workload's consumers. Every dequeue skips rows other consumers hold (SKIP LOCKED) and
-- runs under a short lock_timeout; every finishing statement writes its ledger row in the same
-- statement, so "processed" in the ledger means exactly "the queue says it is done".
-- @block delete
-- Watermark pattern: scan from the lowest key worth scanning, never below it.
WITH d AS (
    DELETE FROM lab.q_delete
    WHERE id = (SELECT id FROM lab.q_delete
                WHERE id >= (SELECT low_key FROM lab.q_delete_watermark WHERE id = 1)
                ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1)
    RETURNING id)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'delete', id, 'processed', :worker FROM d
RETURNING item
-- @block watermark_advance
-- Only ever forward, and a buffer behind the key just taken (rows skipped as locked are still
-- being taken by another consumer). Never below a value someone else set (e.g. a jump).
UPDATE lab.q_delete_watermark SET low_key = greatest(low_key, :key - :buffer) WHERE id = 1
-- @block due
WITH d AS (
    DELETE FROM lab.q_due
    WHERE id = (SELECT id FROM lab.q_due WHERE due_at <= clock_timestamp()
                ORDER BY due_at, id FOR UPDATE SKIP LOCKED LIMIT 1)
    RETURNING id)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'due', id, 'processed', :worker FROM d
RETURNING item
-- @block lease_claim
-- Stamp the lease (ProcessingStartedAt); the stamp is the lease's identity for finishing it.
UPDATE lab.q_lease SET processing_started_at = clock_timestamp(), attempts = attempts + 1, errors = NULL
WHERE id = (SELECT id FROM lab.q_lease WHERE processing_started_at IS NULL
            ORDER BY created_at, id FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING id, processing_started_at AS lease, payload
-- @block lease_reclaim
-- Hangfire style: a lease older than the invisibility timeout may be taken again.
UPDATE lab.q_lease SET processing_started_at = clock_timestamp(), attempts = attempts + 1, errors = NULL
WHERE id = (SELECT id FROM lab.q_lease
            WHERE processing_started_at < clock_timestamp() - make_interval(secs => :reclaim_s)
            ORDER BY processing_started_at, id FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING id, processing_started_at AS lease, payload
-- @block lease_done
-- Success deletes, but only while the lease is still ours (not reclaimed or requeued meanwhile).
WITH d AS (DELETE FROM lab.q_lease WHERE id = :id AND processing_started_at = :lease RETURNING id)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'lease', id, 'processed', :worker FROM d
RETURNING item
-- @block lease_fail
-- Failure records the error and clears the lease: the item is ready again. A claim clears the
-- error (above): an item whose lease AND error are set is failed for good (the seeds' SimpleQueue
-- semantics that error_column maps), which the lab never leaves behind.
WITH f AS (UPDATE lab.q_lease SET processing_started_at = NULL, errors = :error
           WHERE id = :id AND processing_started_at = :lease RETURNING id)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'lease', id, 'failed', :worker FROM f
RETURNING item
-- @block status_claim
-- 0 ready -> 1 processing; status_changed_at is the lease stamp. Reads the QueueData payload.
UPDATE lab.q_status_meta AS m SET status = 1, status_changed_at = clock_timestamp(), attempts = m.attempts + 1
WHERE m.id = (SELECT id FROM lab.q_status_meta WHERE status = 0
              ORDER BY status, id FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING m.id, m.status_changed_at AS lease, m.attempts,
          (SELECT d.payload FROM lab.q_status_data AS d WHERE d.id = m.id) AS payload
-- @block status_done
-- 1 processing -> 2 done. Done rows stay (an archive job has work later).
WITH u AS (UPDATE lab.q_status_meta SET status = 2, status_changed_at = clock_timestamp()
           WHERE id = :id AND status = 1 AND status_changed_at = :lease RETURNING id)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'status', id, 'processed', :worker FROM u
RETURNING item
-- @block status_fail
-- Back to 0 ready for another attempt; after :max_attempts attempts to 3 failed.
WITH u AS (UPDATE lab.q_status_meta
           SET status = CASE WHEN attempts >= :max_attempts THEN 3 ELSE 0 END,
               status_changed_at = clock_timestamp()
           WHERE id = :id AND status = 1 AND status_changed_at = :lease RETURNING id)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'status', id, 'failed', :worker FROM u
RETURNING item
-- @block ring
-- LMAX-style pop: take the next pop sequence only while it is behind push (never ahead), then
-- release slot seq % capacity if it holds exactly that message.
WITH s AS (UPDATE lab.q_ring_seq SET pop_seq = pop_seq + 1
           WHERE id = 1 AND pop_seq < push_seq
           RETURNING pop_seq - 1 AS seq),
     r AS (UPDATE lab.q_ring_slot AS r
           SET message_id = NULL, reference_count = r.reference_count - 1
           FROM s WHERE r.slot = s.seq % :capacity AND r.message_id = s.seq
           RETURNING s.seq)
INSERT INTO lab.ledger (queue, item, event, worker)
SELECT 'ring', seq, 'processed', :worker FROM r
RETURNING item
