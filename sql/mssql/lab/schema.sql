-- The SQL Server twin of sql/postgresql/lab/schema.sql: one queue table per queue kind (docs/architecture.md),
-- for the SQL Server integration suite (tests/mssql). Run block by block, in this order:
-- drop (a clean start), schema_id / create_schema (CREATE SCHEMA must be alone in its batch),
-- tables, seed, snapshot_on. Times are UTC (SYSUTCDATETIME), as the collectors assume.
-- @block drop
DROP TABLE IF EXISTS lab.q_status_data;
DROP TABLE IF EXISTS lab.q_status_meta;
DROP TABLE IF EXISTS lab.q_delete;
DROP TABLE IF EXISTS lab.q_delete_watermark;
DROP TABLE IF EXISTS lab.q_lease;
DROP TABLE IF EXISTS lab.q_due;
DROP TABLE IF EXISTS lab.q_ring_slot;
DROP TABLE IF EXISTS lab.q_ring_seq
-- @block schema_id
SELECT SCHEMA_ID(N'lab') AS schema_id
-- @block create_schema
CREATE SCHEMA lab
-- @block tables
-- delete: FIFO by identity key; a dequeue deletes the row (DELETE ... OUTPUT). With a watermark.
CREATE TABLE lab.q_delete (
    id          bigint IDENTITY(1, 1) NOT NULL PRIMARY KEY,
    enqueued_at datetime2 NOT NULL DEFAULT SYSUTCDATETIME(),
    payload     char(200) NOT NULL DEFAULT ''
);
CREATE TABLE lab.q_delete_watermark (
    id      int NOT NULL PRIMARY KEY CHECK (id = 1),
    low_key bigint NOT NULL
);
-- status: QueueMeta / QueueData split; 0 ready, 1 processing, 2 done, 3 failed.
CREATE TABLE lab.q_status_meta (
    id                bigint IDENTITY(1, 1) NOT NULL PRIMARY KEY,
    status            smallint NOT NULL DEFAULT 0,
    enqueued_at       datetime2 NOT NULL DEFAULT SYSUTCDATETIME(),
    status_changed_at datetime2 NOT NULL DEFAULT SYSUTCDATETIME(),
    attempts          int NOT NULL DEFAULT 0
);
CREATE INDEX q_status_meta_status ON lab.q_status_meta (status, id);
CREATE TABLE lab.q_status_data (
    id      bigint NOT NULL PRIMARY KEY REFERENCES lab.q_status_meta (id) ON DELETE CASCADE,
    payload nvarchar(400) NOT NULL
);
-- lease: a dequeue stamps processing_started_at; success deletes; failure writes errors.
CREATE TABLE lab.q_lease (
    id                    bigint IDENTITY(1, 1) NOT NULL PRIMARY KEY,
    created_at            datetime2 NOT NULL DEFAULT SYSUTCDATETIME(),
    processing_started_at datetime2 NULL,
    attempts              int NOT NULL DEFAULT 0,
    errors                nvarchar(400) NULL,
    payload               nvarchar(400) NOT NULL DEFAULT ''
);
CREATE INDEX q_lease_pop ON lab.q_lease (created_at, id) WHERE processing_started_at IS NULL;
CREATE INDEX q_lease_leased ON lab.q_lease (processing_started_at) WHERE processing_started_at IS NOT NULL;
-- due: items carry a due time; a dequeue deletes rows whose due time has passed.
CREATE TABLE lab.q_due (
    id          bigint IDENTITY(1, 1) NOT NULL PRIMARY KEY,
    due_at      datetime2 NOT NULL,
    enqueued_at datetime2 NOT NULL DEFAULT SYSUTCDATETIME(),
    payload     nvarchar(400) NOT NULL DEFAULT ''
);
CREATE INDEX q_due_due ON lab.q_due (due_at, id);
-- ring: preallocated slots updated in place; push / pop sequences; a reference count per slot.
CREATE TABLE lab.q_ring_slot (
    slot            int NOT NULL PRIMARY KEY,
    message_id      bigint NULL,
    enqueued_at     datetime2 NULL,
    reference_count int NOT NULL DEFAULT 0,
    payload         char(300) NULL
);
CREATE TABLE lab.q_ring_seq (
    id       int NOT NULL PRIMARY KEY CHECK (id = 1),
    push_seq bigint NOT NULL DEFAULT 0,
    pop_seq  bigint NOT NULL DEFAULT 0
)
-- @block seed
INSERT INTO lab.q_delete_watermark (id, low_key) VALUES (1, 0);
INSERT INTO lab.q_ring_seq (id) VALUES (1);
INSERT INTO lab.q_ring_slot (slot)
SELECT n.slot FROM (SELECT TOP (1024) ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) - 1 AS slot
                    FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b) AS n
-- @block snapshot_on
-- Row versioning for SNAPSHOT transactions: what makes version ghosts and the
-- snapshot-hold fault possible (docs/reference/mssql-system-views.toml).
ALTER DATABASE CURRENT SET ALLOW_SNAPSHOT_ISOLATION ON
