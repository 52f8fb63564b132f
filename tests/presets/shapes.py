"""The schema-only PostgreSQL presets' tables as their libraries create them (columns, types and
indexes from each library's migrations), in a schema of the test's own (``{s}``)."""

from __future__ import annotations

SHAPES = {
    # Oban.Migrations.Postgres (v1..v12): oban_jobs with its fetch index.
    "oban": """
CREATE TYPE {s}.oban_job_state AS ENUM
    ('available', 'scheduled', 'executing', 'retryable', 'completed', 'discarded', 'cancelled');
CREATE TABLE {s}.oban_jobs (
    id bigserial PRIMARY KEY, state {s}.oban_job_state NOT NULL DEFAULT 'available',
    queue text NOT NULL DEFAULT 'default', worker text NOT NULL, args jsonb NOT NULL DEFAULT '{{}}',
    errors jsonb[] NOT NULL DEFAULT ARRAY[]::jsonb[], attempt integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL DEFAULT 20,
    inserted_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
    scheduled_at timestamp without time zone NOT NULL DEFAULT timezone('UTC', now()),
    attempted_at timestamp without time zone, completed_at timestamp without time zone, attempted_by text[],
    discarded_at timestamp without time zone, priority integer NOT NULL DEFAULT 0,
    tags text[] DEFAULT ARRAY[]::text[], meta jsonb DEFAULT '{{}}', cancelled_at timestamp without time zone);
CREATE INDEX oban_jobs_state_queue_priority_scheduled_at_id_index
    ON {s}.oban_jobs (state, queue, priority, scheduled_at, id);
CREATE INDEX oban_jobs_args_index ON {s}.oban_jobs USING gin (args);
CREATE INDEX oban_jobs_meta_index ON {s}.oban_jobs USING gin (meta);
""",
    # River's riverpgxv5 migrations 001..006.
    "river": """
CREATE TYPE {s}.river_job_state AS ENUM
    ('available', 'cancelled', 'completed', 'discarded', 'pending', 'retryable', 'running', 'scheduled');
CREATE TABLE {s}.river_job (
    id bigserial PRIMARY KEY, state {s}.river_job_state NOT NULL DEFAULT 'available',
    attempt smallint NOT NULL DEFAULT 0, max_attempts smallint NOT NULL, attempted_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(), finalized_at timestamptz,
    scheduled_at timestamptz NOT NULL DEFAULT now(), priority smallint NOT NULL DEFAULT 1,
    args jsonb NOT NULL DEFAULT '{{}}', attempted_by text[], errors jsonb[], kind text NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{{}}', queue text NOT NULL DEFAULT 'default',
    tags varchar(255)[] NOT NULL DEFAULT '{{}}', unique_key bytea, unique_states bit(8));
CREATE INDEX river_job_kind ON {s}.river_job (kind);
CREATE INDEX river_job_state_and_finalized_at_index ON {s}.river_job (state, finalized_at)
    WHERE finalized_at IS NOT NULL;
CREATE INDEX river_job_prioritized_fetching_index ON {s}.river_job (state, queue, priority, scheduled_at, id);
""",
    # GoodJob 4's db/schema.rb (good_jobs as its install and update migrations leave it: every index).
    "good_job": """
CREATE TABLE {s}.good_jobs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(), queue_name text, priority integer, serialized_params jsonb,
    scheduled_at timestamp, performed_at timestamp, finished_at timestamp, error text,
    created_at timestamp NOT NULL DEFAULT now(), updated_at timestamp NOT NULL DEFAULT now(), active_job_id uuid,
    concurrency_key text, cron_key text, retried_good_job_id uuid, cron_at timestamp, batch_id uuid,
    batch_callback_id uuid, is_discrete boolean, executions_count integer, job_class text, error_event smallint,
    labels text[], locked_by_id uuid, locked_at timestamp);
CREATE INDEX index_good_jobs_on_active_job_id_and_created_at ON {s}.good_jobs (active_job_id, created_at);
CREATE INDEX index_good_jobs_on_batch_callback_id ON {s}.good_jobs (batch_callback_id)
    WHERE batch_callback_id IS NOT NULL;
CREATE INDEX index_good_jobs_on_batch_id ON {s}.good_jobs (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX index_good_jobs_on_concurrency_key_when_unfinished ON {s}.good_jobs (concurrency_key)
    WHERE finished_at IS NULL;
CREATE INDEX index_good_jobs_on_concurrency_key_and_created_at ON {s}.good_jobs (concurrency_key, created_at);
CREATE INDEX index_good_jobs_on_cron_key_and_created_at_cond ON {s}.good_jobs (cron_key, created_at)
    WHERE cron_key IS NOT NULL;
CREATE UNIQUE INDEX index_good_jobs_on_cron_key_and_cron_at_cond ON {s}.good_jobs (cron_key, cron_at)
    WHERE cron_key IS NOT NULL;
CREATE INDEX index_good_jobs_jobs_on_finished_at_only ON {s}.good_jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX index_good_jobs_on_job_class ON {s}.good_jobs (job_class);
CREATE INDEX index_good_jobs_on_labels ON {s}.good_jobs USING gin (labels) WHERE labels IS NOT NULL;
CREATE INDEX index_good_jobs_on_locked_by_id ON {s}.good_jobs (locked_by_id) WHERE locked_by_id IS NOT NULL;
CREATE INDEX index_good_job_jobs_for_candidate_lookup ON {s}.good_jobs (priority, created_at)
    WHERE finished_at IS NULL;
CREATE INDEX index_good_jobs_jobs_on_priority_created_at_when_unfinished ON {s}.good_jobs
    (priority DESC NULLS LAST, created_at) WHERE finished_at IS NULL;
CREATE INDEX index_good_jobs_on_priority_scheduled_at_unfinished_unlocked ON {s}.good_jobs
    (priority, scheduled_at) WHERE finished_at IS NULL AND locked_by_id IS NULL;
CREATE INDEX index_good_jobs_on_queue_name_and_scheduled_at ON {s}.good_jobs (queue_name, scheduled_at)
    WHERE finished_at IS NULL;
CREATE INDEX index_good_jobs_on_scheduled_at ON {s}.good_jobs (scheduled_at) WHERE finished_at IS NULL;
""",
    # Solid Queue's db/queue_schema.rb: the ready executions, and the claims with their processes (the
    # preset's claims: a dead process's claimed jobs are its stuck_leases).
    "solid_queue": """
CREATE TABLE {s}.solid_queue_ready_executions (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, queue_name varchar NOT NULL,
    priority integer NOT NULL DEFAULT 0, created_at timestamp(6) NOT NULL DEFAULT now());
CREATE UNIQUE INDEX index_solid_queue_ready_executions_on_job_id ON {s}.solid_queue_ready_executions (job_id);
CREATE INDEX index_solid_queue_poll_all ON {s}.solid_queue_ready_executions (priority, job_id);
CREATE INDEX index_solid_queue_poll_by_queue ON {s}.solid_queue_ready_executions (queue_name, priority, job_id);
CREATE TABLE {s}.solid_queue_claimed_executions (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, process_id bigint, created_at timestamp(6) NOT NULL);
CREATE UNIQUE INDEX index_solid_queue_claimed_executions_on_job_id ON {s}.solid_queue_claimed_executions (job_id);
CREATE INDEX index_solid_queue_claimed_executions_on_process_id_and_job_id
    ON {s}.solid_queue_claimed_executions (process_id, job_id);
CREATE TABLE {s}.solid_queue_processes (
    id bigserial PRIMARY KEY, kind varchar NOT NULL, last_heartbeat_at timestamp(6) NOT NULL, supervisor_id bigint,
    pid integer NOT NULL, hostname varchar, metadata text, created_at timestamp(6) NOT NULL, name varchar NOT NULL);
CREATE INDEX index_solid_queue_processes_on_last_heartbeat_at ON {s}.solid_queue_processes (last_heartbeat_at);
""",
    # Que's schema version 7.
    "que": """
CREATE TABLE {s}.que_jobs (
    priority smallint NOT NULL DEFAULT 100, run_at timestamptz NOT NULL DEFAULT now(), id bigserial PRIMARY KEY,
    job_class text NOT NULL, error_count integer NOT NULL DEFAULT 0, last_error_message text,
    queue text NOT NULL DEFAULT 'default', last_error_backtrace text, finished_at timestamptz,
    expired_at timestamptz, args jsonb NOT NULL DEFAULT '[]', data jsonb NOT NULL DEFAULT '{{}}',
    job_schema_version integer NOT NULL DEFAULT 2, kwargs jsonb NOT NULL DEFAULT '{{}}');
CREATE INDEX que_poll_idx ON {s}.que_jobs (job_schema_version, queue, priority, run_at, id)
    WHERE finished_at IS NULL AND expired_at IS NULL;
CREATE INDEX que_jobs_data_gin_idx ON {s}.que_jobs USING gin (data jsonb_path_ops);
""",
    # pgmq.create('orders'): one table per queue with its vt index.
    "pgmq": """
CREATE TABLE {s}.q_orders (
    msg_id bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY, read_ct int DEFAULT 0 NOT NULL,
    enqueued_at timestamptz DEFAULT now() NOT NULL, vt timestamptz NOT NULL, message jsonb, headers jsonb);
CREATE INDEX q_orders_vt_idx ON {s}.q_orders (vt ASC);
""",
}
