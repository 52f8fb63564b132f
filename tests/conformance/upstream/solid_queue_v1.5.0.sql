-- Solid Queue v1.5.0 (rails/solid_queue 29e818d9c1181195736ffc5d7c1d1c03757b7752):
-- lib/generators/solid_queue/install/templates/db/queue_schema.rb as Rails 8 loads it on PostgreSQL
-- (create_table -> bigserial id, t.string -> character varying, t.datetime -> timestamp(6) without
-- time zone, written in UTC), every table, index and foreign key. {s}: the test's own schema.
CREATE TABLE {s}.solid_queue_jobs (
    id bigserial PRIMARY KEY, queue_name character varying NOT NULL, class_name character varying NOT NULL,
    arguments text, priority integer DEFAULT 0 NOT NULL, active_job_id character varying,
    scheduled_at timestamp(6) without time zone, finished_at timestamp(6) without time zone,
    concurrency_key character varying, created_at timestamp(6) without time zone NOT NULL,
    updated_at timestamp(6) without time zone NOT NULL);
CREATE INDEX index_solid_queue_jobs_on_active_job_id ON {s}.solid_queue_jobs (active_job_id);
CREATE INDEX index_solid_queue_jobs_on_class_name ON {s}.solid_queue_jobs (class_name);
CREATE INDEX index_solid_queue_jobs_on_finished_at ON {s}.solid_queue_jobs (finished_at);
CREATE INDEX index_solid_queue_jobs_for_filtering ON {s}.solid_queue_jobs (queue_name, finished_at);
CREATE INDEX index_solid_queue_jobs_for_alerting ON {s}.solid_queue_jobs (scheduled_at, finished_at);
CREATE TABLE {s}.solid_queue_blocked_executions (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, queue_name character varying NOT NULL,
    priority integer DEFAULT 0 NOT NULL, concurrency_key character varying NOT NULL,
    expires_at timestamp(6) without time zone NOT NULL, created_at timestamp(6) without time zone NOT NULL);
CREATE INDEX index_solid_queue_blocked_executions_for_release ON {s}.solid_queue_blocked_executions (concurrency_key, priority, job_id);
CREATE INDEX index_solid_queue_blocked_executions_for_maintenance ON {s}.solid_queue_blocked_executions (expires_at, concurrency_key);
CREATE UNIQUE INDEX index_solid_queue_blocked_executions_on_job_id ON {s}.solid_queue_blocked_executions (job_id);
CREATE TABLE {s}.solid_queue_claimed_executions (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, process_id bigint,
    created_at timestamp(6) without time zone NOT NULL);
CREATE UNIQUE INDEX index_solid_queue_claimed_executions_on_job_id ON {s}.solid_queue_claimed_executions (job_id);
CREATE INDEX index_solid_queue_claimed_executions_on_process_id_and_job_id ON {s}.solid_queue_claimed_executions (process_id, job_id);
CREATE TABLE {s}.solid_queue_failed_executions (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, error text, created_at timestamp(6) without time zone NOT NULL);
CREATE UNIQUE INDEX index_solid_queue_failed_executions_on_job_id ON {s}.solid_queue_failed_executions (job_id);
CREATE TABLE {s}.solid_queue_pauses (
    id bigserial PRIMARY KEY, queue_name character varying NOT NULL, created_at timestamp(6) without time zone NOT NULL);
CREATE UNIQUE INDEX index_solid_queue_pauses_on_queue_name ON {s}.solid_queue_pauses (queue_name);
CREATE TABLE {s}.solid_queue_processes (
    id bigserial PRIMARY KEY, kind character varying NOT NULL, last_heartbeat_at timestamp(6) without time zone NOT NULL,
    supervisor_id bigint, pid integer NOT NULL, hostname character varying, metadata text,
    created_at timestamp(6) without time zone NOT NULL, name character varying NOT NULL);
CREATE INDEX index_solid_queue_processes_on_last_heartbeat_at ON {s}.solid_queue_processes (last_heartbeat_at);
CREATE UNIQUE INDEX index_solid_queue_processes_on_name_and_supervisor_id ON {s}.solid_queue_processes (name, supervisor_id);
CREATE INDEX index_solid_queue_processes_on_supervisor_id ON {s}.solid_queue_processes (supervisor_id);
CREATE TABLE {s}.solid_queue_ready_executions (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, queue_name character varying NOT NULL,
    priority integer DEFAULT 0 NOT NULL, created_at timestamp(6) without time zone NOT NULL);
CREATE UNIQUE INDEX index_solid_queue_ready_executions_on_job_id ON {s}.solid_queue_ready_executions (job_id);
CREATE INDEX index_solid_queue_poll_all ON {s}.solid_queue_ready_executions (priority, job_id);
CREATE INDEX index_solid_queue_poll_by_queue ON {s}.solid_queue_ready_executions (queue_name, priority, job_id);
CREATE TABLE {s}.solid_queue_recurring_executions (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, task_key character varying NOT NULL,
    run_at timestamp(6) without time zone NOT NULL, created_at timestamp(6) without time zone NOT NULL);
CREATE UNIQUE INDEX index_solid_queue_recurring_executions_on_job_id ON {s}.solid_queue_recurring_executions (job_id);
CREATE UNIQUE INDEX index_solid_queue_recurring_executions_on_task_key_and_run_at ON {s}.solid_queue_recurring_executions (task_key, run_at);
CREATE TABLE {s}.solid_queue_recurring_tasks (
    id bigserial PRIMARY KEY, key character varying NOT NULL, schedule character varying NOT NULL,
    command character varying(2048), class_name character varying, arguments text, queue_name character varying,
    priority integer DEFAULT 0, static boolean DEFAULT true NOT NULL, description text,
    created_at timestamp(6) without time zone NOT NULL, updated_at timestamp(6) without time zone NOT NULL);
CREATE UNIQUE INDEX index_solid_queue_recurring_tasks_on_key ON {s}.solid_queue_recurring_tasks (key);
CREATE INDEX index_solid_queue_recurring_tasks_on_static ON {s}.solid_queue_recurring_tasks (static);
CREATE TABLE {s}.solid_queue_scheduled_executions (
    id bigserial PRIMARY KEY, job_id bigint NOT NULL, queue_name character varying NOT NULL,
    priority integer DEFAULT 0 NOT NULL, scheduled_at timestamp(6) without time zone NOT NULL,
    created_at timestamp(6) without time zone NOT NULL);
CREATE UNIQUE INDEX index_solid_queue_scheduled_executions_on_job_id ON {s}.solid_queue_scheduled_executions (job_id);
CREATE INDEX index_solid_queue_dispatch_all ON {s}.solid_queue_scheduled_executions (scheduled_at, priority, job_id);
CREATE TABLE {s}.solid_queue_semaphores (
    id bigserial PRIMARY KEY, key character varying NOT NULL, value integer DEFAULT 1 NOT NULL,
    expires_at timestamp(6) without time zone NOT NULL, created_at timestamp(6) without time zone NOT NULL,
    updated_at timestamp(6) without time zone NOT NULL);
CREATE INDEX index_solid_queue_semaphores_on_expires_at ON {s}.solid_queue_semaphores (expires_at);
CREATE INDEX index_solid_queue_semaphores_on_key_and_value ON {s}.solid_queue_semaphores (key, value);
CREATE UNIQUE INDEX index_solid_queue_semaphores_on_key ON {s}.solid_queue_semaphores (key);
ALTER TABLE {s}.solid_queue_blocked_executions ADD FOREIGN KEY (job_id) REFERENCES {s}.solid_queue_jobs (id) ON DELETE CASCADE;
ALTER TABLE {s}.solid_queue_claimed_executions ADD FOREIGN KEY (job_id) REFERENCES {s}.solid_queue_jobs (id) ON DELETE CASCADE;
ALTER TABLE {s}.solid_queue_failed_executions ADD FOREIGN KEY (job_id) REFERENCES {s}.solid_queue_jobs (id) ON DELETE CASCADE;
ALTER TABLE {s}.solid_queue_ready_executions ADD FOREIGN KEY (job_id) REFERENCES {s}.solid_queue_jobs (id) ON DELETE CASCADE;
ALTER TABLE {s}.solid_queue_recurring_executions ADD FOREIGN KEY (job_id) REFERENCES {s}.solid_queue_jobs (id) ON DELETE CASCADE;
ALTER TABLE {s}.solid_queue_scheduled_executions ADD FOREIGN KEY (job_id) REFERENCES {s}.solid_queue_jobs (id) ON DELETE CASCADE;
