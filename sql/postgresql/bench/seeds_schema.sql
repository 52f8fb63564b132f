-- Tables for benchmarks/seeds.py: the seeds' queue designs, side by side on one server.
DROP TABLE IF EXISTS bench_q, bench_wm, bench_naive, bench_ring;
DROP SEQUENCE IF EXISTS bench_ring_push, bench_ring_pop;
-- The watermark seed's table: identity key, char(400) filler.
CREATE TABLE bench_q (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, filler char(400) NOT NULL);
CREATE TABLE bench_wm (id int PRIMARY KEY, low bigint NOT NULL);
INSERT INTO bench_wm VALUES (1, 0);
-- The ring-buffer seed: the naive insert/delete queue and the preallocated ring (300-byte messages).
CREATE TABLE bench_naive (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, payload char(300) NOT NULL);
CREATE TABLE bench_ring (slot int PRIMARY KEY, message_id bigint, reference_count int NOT NULL DEFAULT 0,
                         payload char(300)) WITH (fillfactor = 50);
CREATE SEQUENCE bench_ring_push;
CREATE SEQUENCE bench_ring_pop;
