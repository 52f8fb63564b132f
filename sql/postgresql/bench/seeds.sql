-- Statements of benchmarks/seeds.py, one block each.
-- @block fill
INSERT INTO bench_q (filler) SELECT repeat(md5(g::text), 12) FROM generate_series(1, :n) AS g
-- @block hold_snapshot
SELECT count(*) AS n FROM bench_q
-- @block dequeue_naive
DELETE FROM bench_q WHERE id = (SELECT id FROM bench_q ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id
-- @block dequeue_watermark
DELETE FROM bench_q
WHERE id = (SELECT id FROM bench_q WHERE id >= (SELECT low FROM bench_wm WHERE id = 1)
            ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1)
RETURNING id
-- @block advance_watermark
UPDATE bench_wm SET low = :low WHERE id = 1 AND low < :low
-- @block reset
TRUNCATE bench_q RESTART IDENTITY; UPDATE bench_wm SET low = 0
-- @block ring_init
TRUNCATE bench_naive RESTART IDENTITY;
DELETE FROM bench_ring;
INSERT INTO bench_ring (slot) SELECT g FROM generate_series(0, {capacity} - 1) AS g;
ALTER SEQUENCE bench_ring_push RESTART WITH 1;
ALTER SEQUENCE bench_ring_pop RESTART WITH 1
-- @block vacuum
VACUUM ANALYZE bench_ring, bench_naive, bench_q
-- @block naive_push
INSERT INTO bench_naive (payload) VALUES (:payload)
-- @block naive_pop
DELETE FROM bench_naive WHERE id = (SELECT id FROM bench_naive ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id
-- @block ring_take_push
-- Take the next push number and fill its slot in one round trip; when the slot is still in use
-- (ring full) the number is returned with filled = 0 and the caller retries ring_push with it.
WITH n AS (SELECT nextval('bench_ring_push') AS n),
     u AS (UPDATE bench_ring SET message_id = n.n, reference_count = 1, payload = :payload
           FROM n WHERE slot = n.n % {capacity} AND reference_count = 0 RETURNING 1)
SELECT n.n, (SELECT count(*) FROM u) AS filled FROM n
-- @block ring_push
UPDATE bench_ring SET message_id = :n, reference_count = 1, payload = :payload
WHERE slot = :n % {capacity} AND reference_count = 0
-- @block ring_take_pop
-- Take the next pop number and empty its slot in one round trip; when that message is not
-- pushed yet the number is returned with filled = 0 and the caller retries ring_pop with it.
WITH n AS (SELECT nextval('bench_ring_pop') AS n),
     u AS (UPDATE bench_ring SET message_id = NULL, reference_count = 0, payload = NULL
           FROM n WHERE slot = n.n % {capacity} AND reference_count = 1 AND message_id = n.n RETURNING 1)
SELECT n.n, (SELECT count(*) FROM u) AS filled FROM n
-- @block ring_pop
UPDATE bench_ring SET message_id = NULL, reference_count = 0, payload = NULL
WHERE slot = :n % {capacity} AND reference_count = 1 AND message_id = :n
RETURNING message_id
