-- The lab's fault switches: each block is what one fault does to the database, for real.
-- @block begin_repeatable_read
-- snapshot-hold: a REPEATABLE READ transaction whose snapshot (taken by the SELECT below) pins
-- the xmin horizon: no dead tuple deleted after it can be removed by any vacuum.
BEGIN ISOLATION LEVEL REPEATABLE READ
-- @block take_snapshot
-- No table is read, so no table lock is held: only the snapshot is.
SELECT pg_current_snapshot()::text AS snapshot
-- @block begin
BEGIN
-- @block rollback
ROLLBACK
-- @block lock_delete
-- lock-hold: EXCLUSIVE lets plain SELECTs through (so collectors keep working) but blocks every
-- INSERT/UPDATE/DELETE and SELECT ... FOR UPDATE: producers and dequeuers wait, then time out.
LOCK TABLE lab.q_delete IN EXCLUSIVE MODE
-- @block lock_status
LOCK TABLE lab.q_status_meta IN EXCLUSIVE MODE
-- @block lock_lease
LOCK TABLE lab.q_lease IN EXCLUSIVE MODE
-- @block lock_due
LOCK TABLE lab.q_due IN EXCLUSIVE MODE
-- @block lock_ring
LOCK TABLE lab.q_ring_slot IN EXCLUSIVE MODE
-- @block watermark_jump
-- watermark-jump: move the watermark past every row at or above it (only when there is one),
-- stranding them: consumers only look at id >= watermark. Returns the new mark and how many rows.
UPDATE lab.q_delete_watermark AS w SET low_key = m.top + 1
FROM (SELECT max(id) AS top, count(*) AS n FROM lab.q_delete
      WHERE id >= (SELECT low_key FROM lab.q_delete_watermark WHERE id = 1)) AS m
WHERE w.id = 1 AND m.n > 0
RETURNING w.low_key, m.n AS stranded
-- @block churn_insert
-- churn: rows with status 9 (no consumer takes them: not ready, processing or done) and random negative
-- keys, so every insert lands in the middle of the indexes and splits pages there.
INSERT INTO lab.q_status_meta (id, status) OVERRIDING SYSTEM VALUE
SELECT -(1 + floor(random() * 9e15))::bigint, 9 FROM generate_series(1, :rows)
ON CONFLICT (id) DO NOTHING
-- @block churn_delete
-- ... then delete most of them at random: dead tuples, half-empty leaf pages, bloat. The few
-- survivors (status 9, about churn_rows x (1 - fraction) / fraction of them) stay when churn is
-- switched off: they keep the index sparse until it is rebuilt.
DELETE FROM lab.q_status_meta WHERE status = 9 AND id < 0 AND random() < :fraction
