-- The SQL Server lab's workload steps and fault switches, for the integration suite (tests/mssql).
-- Each block is one step a producer, a consumer or a fault performs; the suite runs them and
-- checks that the collectors' metrics move. UPDATE TOP (n) is written as an updatable CTE.
-- @block produce_delete
INSERT INTO lab.q_delete (enqueued_at)
SELECT DATEADD(SECOND, -:age_s, SYSUTCDATETIME())
FROM (SELECT TOP (:n) 1 AS x FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b) AS g
-- @block produce_status
INSERT INTO lab.q_status_meta (status, enqueued_at, status_changed_at)
SELECT 0, DATEADD(SECOND, -:age_s, SYSUTCDATETIME()), SYSUTCDATETIME()
FROM (SELECT TOP (:n) 1 AS x FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b) AS g
-- @block produce_lease
INSERT INTO lab.q_lease (created_at)
SELECT DATEADD(SECOND, -:age_s, SYSUTCDATETIME())
FROM (SELECT TOP (:n) 1 AS x FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b) AS g
-- @block produce_due
INSERT INTO lab.q_due (due_at)
SELECT DATEADD(SECOND, -:age_s, SYSUTCDATETIME())
FROM (SELECT TOP (:n) 1 AS x FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b) AS g
-- @block push_ring
UPDATE lab.q_ring_seq SET push_seq = push_seq + :n
-- @block dead_consumer_lease
-- dead-consumer: take leases like a consumer, then never finish them.
WITH c AS (SELECT TOP (:n) processing_started_at FROM lab.q_lease WITH (READPAST, UPDLOCK, ROWLOCK)
           WHERE processing_started_at IS NULL ORDER BY created_at, id)
UPDATE c SET processing_started_at = SYSUTCDATETIME()
-- @block dead_consumer_status
WITH c AS (SELECT TOP (:n) status, status_changed_at FROM lab.q_status_meta WITH (READPAST, UPDLOCK, ROWLOCK)
           WHERE status = 0 ORDER BY status, id)
UPDATE c SET status = 1, status_changed_at = SYSUTCDATETIME()
-- @block requeue_stuck
-- what 'act requeue' does, to show the metric come back
UPDATE lab.q_lease SET processing_started_at = NULL WHERE processing_started_at IS NOT NULL;
UPDATE lab.q_status_meta SET status = 0, status_changed_at = SYSUTCDATETIME() WHERE status = 1
-- @block watermark_jump
-- watermark-jump: move the watermark past every row: they are stranded.
UPDATE lab.q_delete_watermark SET low_key = COALESCE((SELECT MAX(q.id) FROM lab.q_delete AS q), 0) + 1
-- @block watermark_reset
UPDATE lab.q_delete_watermark SET low_key = COALESCE((SELECT MIN(q.id) FROM lab.q_delete AS q), 0)
-- @block lock_hold_lease
-- lock-hold: run in a session with autocommit off; the exclusive table lock stays until rollback.
SELECT TOP (1) id FROM lab.q_lease WITH (TABLOCKX, HOLDLOCK)
-- @block set_lock_timeout
SET LOCK_TIMEOUT {lock_timeout_ms}
-- @block dequeue_lease
-- a dequeuer without READPAST: it waits for the table lock (then fails with error 1222)
WITH c AS (SELECT TOP (1) processing_started_at FROM lab.q_lease WITH (UPDLOCK, ROWLOCK)
           WHERE processing_started_at IS NULL ORDER BY created_at, id)
UPDATE c SET processing_started_at = SYSUTCDATETIME()
-- @block snapshot_read
-- snapshot-hold: run in a SNAPSHOT transaction (isolation set through the ODBC attribute); the
-- first read starts the snapshot, which then keeps every later version and version ghost.
SELECT COUNT(*) AS n FROM lab.q_status_meta
-- @block delete_below
DELETE FROM lab.q_delete WHERE id < :below
-- @block churn_insert
-- churn: rows with random due times (page splits in the middle of q_due_due), then most of them
-- deleted at random (ghosts, then sparse pages).
INSERT INTO lab.q_due (due_at)
SELECT DATEADD(SECOND, ABS(CHECKSUM(NEWID())) % 86400, SYSUTCDATETIME())
FROM (SELECT TOP (:n) 1 AS x FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b) AS g
-- @block churn_delete
DELETE FROM lab.q_due WHERE ABS(CHECKSUM(NEWID())) % 10 <> 0
-- @block spid
SELECT @@SPID AS spid
-- @block reset
DELETE FROM lab.q_status_data;
DELETE FROM lab.q_status_meta;
DELETE FROM lab.q_delete;
DELETE FROM lab.q_lease;
DELETE FROM lab.q_due;
UPDATE lab.q_delete_watermark SET low_key = 0;
UPDATE lab.q_ring_slot SET message_id = NULL, enqueued_at = NULL, reference_count = 0, payload = NULL;
UPDATE lab.q_ring_seq SET push_seq = 0, pop_seq = 0
