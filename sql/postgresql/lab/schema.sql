-- The lab: one queue table per queue kind (docs/architecture.md), plus the lab's own bookkeeping
-- (fault switches, workload settings and a ledger of every item produced and processed).
-- Idempotent: lab start runs it every time.
CREATE SCHEMA IF NOT EXISTS lab;
CREATE EXTENSION IF NOT EXISTS pgstattuple;

-- delete: FIFO by identity key; a dequeue deletes the row (DELETE ... RETURNING).
CREATE TABLE IF NOT EXISTS lab.q_delete (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    payload     char(200) NOT NULL DEFAULT ''
);
-- The watermark pattern: the lowest key worth scanning from.
CREATE TABLE IF NOT EXISTS lab.q_delete_watermark (
    id      int PRIMARY KEY CHECK (id = 1),
    low_key bigint NOT NULL
);
INSERT INTO lab.q_delete_watermark (id, low_key) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;

-- status: QueueMeta / QueueData split; a dequeue updates status 0 (ready) -> 1 (processing).
CREATE TABLE IF NOT EXISTS lab.q_status_meta (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status            smallint NOT NULL DEFAULT 0,  -- 0 ready, 1 processing, 2 done, 3 failed, 9 churn (fault)
    enqueued_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    status_changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts          int NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS q_status_meta_status ON lab.q_status_meta (status, id);
-- The dequeue's own index: ready rows only. Without it the planner may take the claim's
-- ORDER BY id from the primary key once statistics show mostly ready rows, and then walks every
-- done row below the first ready one on each claim (the done rows all have the lowest ids): measured
-- on the overhead benchmark's workload, 540 -> 20 claims a second after the plan flipped, a minute
-- or so into every run. procrastinate, pg-boss and the lease queue above index ready rows the same way.
CREATE INDEX IF NOT EXISTS q_status_meta_ready ON lab.q_status_meta (id) WHERE status = 0;
CREATE TABLE IF NOT EXISTS lab.q_status_data (
    id      bigint PRIMARY KEY REFERENCES lab.q_status_meta (id) ON DELETE CASCADE,
    payload text NOT NULL
);

-- lease: a dequeue stamps processing_started_at; success deletes; failure writes errors.
CREATE TABLE IF NOT EXISTS lab.q_lease (
    id                    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    processing_started_at timestamptz,
    attempts              int NOT NULL DEFAULT 0,
    errors                text,
    payload               text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS q_lease_pop ON lab.q_lease (created_at, id) WHERE processing_started_at IS NULL;
-- Lets "stuck leases" be an index-only scan instead of a full scan (the partial index WHERE lease IS NULL holds only free rows).
CREATE INDEX IF NOT EXISTS q_lease_leased ON lab.q_lease (processing_started_at) WHERE processing_started_at IS NOT NULL;

-- due: items carry a due time; a dequeue deletes rows whose due time has passed.
CREATE TABLE IF NOT EXISTS lab.q_due (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    due_at      timestamptz NOT NULL,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    payload     text NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS q_due_due ON lab.q_due (due_at, id);

-- ring: preallocated slots updated in place; push / pop sequences; a reference count per slot.
CREATE TABLE IF NOT EXISTS lab.q_ring_slot (
    slot            int PRIMARY KEY,
    message_id      bigint,
    enqueued_at     timestamptz,
    reference_count int NOT NULL DEFAULT 0,
    payload         char(300)
) WITH (fillfactor = 50);
INSERT INTO lab.q_ring_slot (slot) SELECT g FROM generate_series(0, 1023) AS g ON CONFLICT (slot) DO NOTHING;
CREATE TABLE IF NOT EXISTS lab.q_ring_seq (
    id       int PRIMARY KEY CHECK (id = 1),
    push_seq bigint NOT NULL DEFAULT 0,
    pop_seq  bigint NOT NULL DEFAULT 0
);
INSERT INTO lab.q_ring_seq (id) VALUES (1) ON CONFLICT (id) DO NOTHING;

-- Bookkeeping of the lab itself.
CREATE TABLE IF NOT EXISTS lab.faults (
    name       text PRIMARY KEY,
    enabled    boolean NOT NULL DEFAULT false,
    changed_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
INSERT INTO lab.faults (name) VALUES ('dead-consumer'), ('snapshot-hold'), ('watermark-jump'), ('lock-hold'), ('churn')
ON CONFLICT (name) DO NOTHING;
CREATE TABLE IF NOT EXISTS lab.settings (
    name  text PRIMARY KEY,
    value text NOT NULL
);
-- Every item produced and every item finished, to prove nothing is lost or processed twice.
CREATE TABLE IF NOT EXISTS lab.ledger (
    queue  text NOT NULL,
    item   bigint NOT NULL,
    event  text NOT NULL CHECK (event IN ('produced', 'processed', 'failed')),
    worker text NOT NULL DEFAULT '',
    ts     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS ledger_item ON lab.ledger (queue, item);
-- The workload's cumulative counters (lock timeouts, reconnects, ...), flushed every few seconds;
-- updated_at doubles as the workload's heartbeat.
CREATE TABLE IF NOT EXISTS lab.counters (
    name       text PRIMARY KEY,
    value      bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
