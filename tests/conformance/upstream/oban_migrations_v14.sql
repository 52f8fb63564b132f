-- Oban's oban_jobs as its migrations leave it at version 14 (the current one), transcribed from
-- oban-bg/oban v2.23.0 (commit 2939e313), lib/oban/migrations/postgres/v01.ex .. v14.ex, Ecto's
-- types as ecto_sql renders them on PostgreSQL (:utc_datetime_usec -> timestamp, :map -> jsonb,
-- {:array, :map} -> jsonb[], :bigserial). Triggers and functions left out (v12 drops the notify
-- trigger; oban_peers is another table). {s}: the test's schema.
-- v01 (the enum as v01 creates it today, with v09's 'cancelled' and v14's 'suspended')
CREATE TYPE {s}.oban_job_state AS ENUM
    ('available', 'suspended', 'scheduled', 'executing', 'retryable', 'completed', 'discarded', 'cancelled');
CREATE TABLE {s}.oban_jobs (
    id bigserial PRIMARY KEY,
    state {s}.oban_job_state NOT NULL DEFAULT 'available',
    queue text NOT NULL DEFAULT 'default',
    worker text NOT NULL,
    args jsonb NOT NULL,
    errors jsonb[] NOT NULL DEFAULT ARRAY[]::jsonb[],
    attempt integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL DEFAULT 20,
    inserted_at timestamp NOT NULL DEFAULT timezone('UTC', now()),
    scheduled_at timestamp NOT NULL DEFAULT timezone('UTC', now()),
    attempted_at timestamp,
    completed_at timestamp);
-- v02
ALTER TABLE {s}.oban_jobs ADD CONSTRAINT worker_length CHECK (char_length(worker) > 0 AND char_length(worker) < 128);
ALTER TABLE {s}.oban_jobs ADD CONSTRAINT queue_length CHECK (char_length(queue) > 0 AND char_length(queue) < 128);
-- v03
ALTER TABLE {s}.oban_jobs ADD COLUMN IF NOT EXISTS attempted_by text[];
-- v08
ALTER TABLE {s}.oban_jobs ADD COLUMN IF NOT EXISTS discarded_at timestamp;
ALTER TABLE {s}.oban_jobs ADD COLUMN IF NOT EXISTS priority integer;
ALTER TABLE {s}.oban_jobs ADD COLUMN IF NOT EXISTS tags text[];
ALTER TABLE {s}.oban_jobs ALTER COLUMN priority SET DEFAULT 0;
ALTER TABLE {s}.oban_jobs ALTER COLUMN tags SET DEFAULT ARRAY[]::text[];
CREATE INDEX IF NOT EXISTS oban_jobs_state_queue_priority_scheduled_at_id_index
    ON {s}.oban_jobs (state, queue, priority, scheduled_at, id);
-- v09
ALTER TABLE {s}.oban_jobs ADD COLUMN IF NOT EXISTS meta jsonb DEFAULT '{}';
ALTER TABLE {s}.oban_jobs ADD COLUMN IF NOT EXISTS cancelled_at timestamp;
-- v10
ALTER TABLE {s}.oban_jobs ALTER COLUMN args SET DEFAULT '{}';
ALTER TABLE {s}.oban_jobs ALTER COLUMN priority SET NOT NULL;
ALTER TABLE {s}.oban_jobs ADD CONSTRAINT positive_max_attempts CHECK (max_attempts > 0);
ALTER TABLE {s}.oban_jobs ADD CONSTRAINT attempt_range CHECK (attempt between 0 and max_attempts);
CREATE INDEX IF NOT EXISTS oban_jobs_args_index ON {s}.oban_jobs USING gin (args);
CREATE INDEX IF NOT EXISTS oban_jobs_meta_index ON {s}.oban_jobs USING gin (meta);
-- v12 (v10's priority_range replaced)
ALTER TABLE {s}.oban_jobs ADD CONSTRAINT non_negative_priority CHECK (priority >= 0) NOT VALID;
-- v13
CREATE INDEX IF NOT EXISTS oban_jobs_state_cancelled_at_index ON {s}.oban_jobs (state, cancelled_at);
CREATE INDEX IF NOT EXISTS oban_jobs_state_discarded_at_index ON {s}.oban_jobs (state, discarded_at);
