-- GoodJob v4.19.2 (bensheldon/good_job 81db22b7cfde2579b2d735e076fa6eaacc65affa):
-- lib/generators/good_job/templates/install/migrations/create_good_jobs.rb.erb as Rails 7.1+ runs it
-- on PostgreSQL (t.datetime -> timestamp(6) without time zone, t.timestamps -> created_at /
-- updated_at NOT NULL, id: :uuid -> uuid DEFAULT gen_random_uuid(), limit: 2 -> smallint), every
-- table and index in the migration's order. {s}: the test's own schema.
CREATE TABLE {s}.good_jobs (
    id uuid DEFAULT gen_random_uuid() NOT NULL PRIMARY KEY,
    queue_name text, priority integer, serialized_params jsonb,
    scheduled_at timestamp(6) without time zone, performed_at timestamp(6) without time zone,
    finished_at timestamp(6) without time zone, error text,
    created_at timestamp(6) without time zone NOT NULL, updated_at timestamp(6) without time zone NOT NULL,
    active_job_id uuid, concurrency_key text, cron_key text, retried_good_job_id uuid,
    cron_at timestamp(6) without time zone, batch_id uuid, batch_callback_id uuid, is_discrete boolean,
    executions_count integer, job_class text, error_event smallint, labels text[], locked_by_id uuid,
    locked_at timestamp(6) without time zone, lock_type smallint);
CREATE TABLE {s}.good_job_batches (
    id uuid DEFAULT gen_random_uuid() NOT NULL PRIMARY KEY,
    created_at timestamp(6) without time zone NOT NULL, updated_at timestamp(6) without time zone NOT NULL,
    description text, serialized_properties jsonb, on_finish text, on_success text, on_discard text,
    callback_queue_name text, callback_priority integer, enqueued_at timestamp(6) without time zone,
    discarded_at timestamp(6) without time zone, finished_at timestamp(6) without time zone,
    jobs_finished_at timestamp(6) without time zone);
CREATE TABLE {s}.good_job_executions (
    id uuid DEFAULT gen_random_uuid() NOT NULL PRIMARY KEY,
    created_at timestamp(6) without time zone NOT NULL, updated_at timestamp(6) without time zone NOT NULL,
    active_job_id uuid NOT NULL, job_class text, queue_name text, serialized_params jsonb,
    scheduled_at timestamp(6) without time zone, finished_at timestamp(6) without time zone, error text,
    error_event smallint, error_backtrace text[], process_id uuid, duration interval);
CREATE TABLE {s}.good_job_processes (
    id uuid DEFAULT gen_random_uuid() NOT NULL PRIMARY KEY,
    created_at timestamp(6) without time zone NOT NULL, updated_at timestamp(6) without time zone NOT NULL,
    state jsonb, lock_type smallint);
CREATE TABLE {s}.good_job_settings (
    id uuid DEFAULT gen_random_uuid() NOT NULL PRIMARY KEY,
    created_at timestamp(6) without time zone NOT NULL, updated_at timestamp(6) without time zone NOT NULL,
    key text, value jsonb);
CREATE UNIQUE INDEX index_good_job_settings_on_key ON {s}.good_job_settings (key);
CREATE INDEX index_good_jobs_on_scheduled_at ON {s}.good_jobs (scheduled_at) WHERE (finished_at IS NULL);
CREATE INDEX index_good_jobs_on_queue_name_and_scheduled_at ON {s}.good_jobs (queue_name, scheduled_at) WHERE (finished_at IS NULL);
CREATE INDEX index_good_jobs_on_active_job_id_and_created_at ON {s}.good_jobs (active_job_id, created_at);
CREATE INDEX index_good_jobs_on_concurrency_key_when_unfinished ON {s}.good_jobs (concurrency_key) WHERE (finished_at IS NULL);
CREATE INDEX index_good_jobs_on_concurrency_key_and_created_at ON {s}.good_jobs (concurrency_key, created_at);
CREATE INDEX index_good_jobs_on_cron_key_and_created_at_cond ON {s}.good_jobs (cron_key, created_at) WHERE (cron_key IS NOT NULL);
CREATE UNIQUE INDEX index_good_jobs_on_cron_key_and_cron_at_cond ON {s}.good_jobs (cron_key, cron_at) WHERE (cron_key IS NOT NULL);
CREATE INDEX index_good_jobs_jobs_on_finished_at_only ON {s}.good_jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX index_good_jobs_jobs_on_priority_created_at_when_unfinished ON {s}.good_jobs (priority DESC NULLS LAST, created_at) WHERE finished_at IS NULL;
CREATE INDEX index_good_job_jobs_for_candidate_lookup ON {s}.good_jobs (priority ASC NULLS LAST, created_at) WHERE finished_at IS NULL;
CREATE INDEX index_good_jobs_on_batch_id ON {s}.good_jobs (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX index_good_jobs_on_batch_callback_id ON {s}.good_jobs (batch_callback_id) WHERE batch_callback_id IS NOT NULL;
CREATE INDEX index_good_jobs_on_job_class ON {s}.good_jobs (job_class);
CREATE INDEX index_good_jobs_on_labels ON {s}.good_jobs USING gin (labels) WHERE (labels IS NOT NULL);
CREATE INDEX index_good_job_executions_on_active_job_id_and_created_at ON {s}.good_job_executions (active_job_id, created_at);
CREATE INDEX index_good_jobs_on_priority_scheduled_at_unfinished_unlocked ON {s}.good_jobs (priority ASC NULLS LAST, scheduled_at) WHERE finished_at IS NULL AND locked_by_id IS NULL;
CREATE INDEX index_good_jobs_on_priority_scheduled_at_unfinished ON {s}.good_jobs (priority, scheduled_at, id) WHERE finished_at IS NULL;
CREATE INDEX index_good_jobs_on_queue_name_priority_scheduled_at_unfinished ON {s}.good_jobs (queue_name, scheduled_at, id) WHERE finished_at IS NULL;
CREATE INDEX index_good_jobs_on_locked_by_id ON {s}.good_jobs (locked_by_id) WHERE locked_by_id IS NOT NULL;
CREATE INDEX index_good_job_executions_on_process_id_and_created_at ON {s}.good_job_executions (process_id, created_at);
CREATE INDEX index_good_jobs_for_candidate_dequeue_unlocked ON {s}.good_jobs (priority ASC NULLS LAST, scheduled_at ASC, id ASC) WHERE finished_at IS NULL AND locked_by_id IS NULL;
CREATE INDEX index_good_jobs_on_queue_name ON {s}.good_jobs (queue_name);
CREATE INDEX index_good_jobs_on_created_at ON {s}.good_jobs (created_at);
CREATE INDEX index_good_jobs_on_discarded ON {s}.good_jobs (finished_at DESC) WHERE finished_at IS NOT NULL AND error IS NOT NULL;
CREATE INDEX index_good_jobs_on_scheduled_at_and_queue_name ON {s}.good_jobs (scheduled_at, queue_name);
CREATE INDEX index_good_jobs_on_unfinished_or_errored ON {s}.good_jobs (id) WHERE finished_at IS NULL OR error IS NOT NULL;
