-- Lab ledger audit: per queue, items produced, processed, processed twice, processed without
-- being produced, still queued, and lost (produced, never processed, no longer in the queue).
-- Run it after the workload stopped: in-flight items are then either done or still queued.
WITH l AS (
    SELECT queue, item,
           count(*) FILTER (WHERE event = 'produced') AS produced,
           count(*) FILTER (WHERE event = 'processed') AS processed
    FROM lab.ledger GROUP BY queue, item
), queued AS (
    SELECT 'delete' AS queue, id AS item FROM lab.q_delete
    UNION ALL SELECT 'status', id FROM lab.q_status_meta WHERE id > 0 AND status <> 2
    UNION ALL SELECT 'lease', id FROM lab.q_lease
    UNION ALL SELECT 'due', id FROM lab.q_due
    UNION ALL SELECT 'ring', message_id FROM lab.q_ring_slot WHERE reference_count > 0
)
SELECT coalesce(l.queue, q.queue) AS queue,
       count(*) FILTER (WHERE l.produced >= 1) AS produced,
       count(*) FILTER (WHERE l.produced > 1) AS produced_twice,
       count(*) FILTER (WHERE l.processed >= 1) AS processed,
       count(*) FILTER (WHERE l.processed > 1) AS processed_twice,
       count(*) FILTER (WHERE l.processed >= 1 AND l.produced = 0) AS processed_unproduced,
       count(*) FILTER (WHERE q.item IS NOT NULL) AS queued,
       count(*) FILTER (WHERE q.item IS NOT NULL AND coalesce(l.produced, 0) = 0) AS queued_unproduced,
       count(*) FILTER (WHERE q.item IS NOT NULL AND l.processed >= 1) AS queued_after_processed,
       count(*) FILTER (WHERE l.produced >= 1 AND l.processed = 0 AND q.item IS NULL) AS lost
FROM l FULL JOIN queued AS q ON q.queue = l.queue AND q.item = l.item
GROUP BY coalesce(l.queue, q.queue)
ORDER BY 1
