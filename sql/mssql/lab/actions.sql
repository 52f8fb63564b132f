-- Test-support steps for the actions suite (tests/mssql/test_actions_mssql.py) on the SQL Server lab
-- of schema.sql: finished items, payload rows, archive tables, counts to assert on, and the action's
-- session to kill. The actions' own T-SQL is in sql/mssql/actions/.
-- @block finish_status
WITH c AS (SELECT TOP (:n) status, status_changed_at FROM lab.q_status_meta WHERE status = 1 ORDER BY id)
UPDATE c SET status = 2, status_changed_at = DATEADD(SECOND, -:age_s, SYSUTCDATETIME())
-- @block payloads
INSERT INTO lab.q_status_data (id, payload)
SELECT m.id, CONCAT(N'payload ', m.id) FROM lab.q_status_meta AS m
WHERE NOT EXISTS (SELECT 1 FROM lab.q_status_data AS d WHERE d.id = m.id)
-- @block create_archive
-- Same columns in the same order as the queue tables, and no IDENTITY: archives keep the keys.
CREATE TABLE lab.q_status_meta_archive (
    id bigint NOT NULL, status smallint NOT NULL, enqueued_at datetime2 NOT NULL,
    status_changed_at datetime2 NOT NULL, attempts int NOT NULL
);
CREATE TABLE lab.q_status_data_archive (id bigint NOT NULL, payload nvarchar(400) NOT NULL)
-- @block drop_archive
DROP TABLE IF EXISTS lab.q_status_meta_archive;
DROP TABLE IF EXISTS lab.q_status_data_archive
-- @block counts
SELECT (SELECT COUNT(*) FROM lab.q_lease WHERE processing_started_at IS NULL) AS lease_ready,
       (SELECT COUNT(*) FROM lab.q_lease WHERE processing_started_at IS NOT NULL) AS lease_leased,
       (SELECT COUNT(*) FROM lab.q_status_meta WHERE status = 0) AS status_ready,
       (SELECT COUNT(*) FROM lab.q_status_meta WHERE status = 0 AND attempts = 1) AS status_ready_retried,
       (SELECT COUNT(*) FROM lab.q_status_meta WHERE status = 1) AS status_processing,
       (SELECT COUNT(*) FROM lab.q_status_meta WHERE status = 2) AS status_done,
       (SELECT COUNT(*) FROM lab.q_status_data) AS status_payloads,
       (SELECT COUNT(*) FROM lab.q_delete) AS delete_rows,
       (SELECT MIN(id) FROM lab.q_delete) AS delete_lowest,
       (SELECT TOP (1) low_key FROM lab.q_delete_watermark) AS watermark
-- @block archive_counts
SELECT (SELECT COUNT(*) FROM lab.q_status_meta_archive) AS meta,
       (SELECT COUNT(*) FROM lab.q_status_data_archive) AS data
-- @block action_sessions
SELECT s.session_id, s.program_name FROM sys.dm_exec_sessions AS s WHERE s.program_name LIKE :pattern
-- @block kill
KILL {session_n}
-- @block set_watermark
UPDATE lab.q_delete_watermark SET low_key = :value
