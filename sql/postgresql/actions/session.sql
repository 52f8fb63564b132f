-- Action session settings. Every statement of an action gives up after the lock timeout instead
-- of queueing behind (and in front of) the queue's dequeuers, and after the statement timeout;
-- a transaction left idle (the action's process hung between two statements of a batch) is
-- aborted by the server, so no batch can hold its row locks for long. Returns the backend pid,
-- so progress can be read from a second connection. The session is also findable by its
-- application_name: queueops-action-<action>-<audit id>.
-- @block main
SELECT pg_backend_pid() AS session_id,
       set_config('lock_timeout', :lock_timeout, false) AS lock_timeout,
       set_config('statement_timeout', :statement_timeout, false) AS statement_timeout,
       set_config('idle_in_transaction_session_timeout', :idle_timeout, false) AS idle_timeout,
       set_config('plan_cache_mode', 'force_custom_plan', false) AS plan_cache_mode
-- @block read_only
-- Previews only read: make any write in a preview session an error.
SELECT set_config('default_transaction_read_only', 'on', false) AS read_only
-- @block statement_timeout
-- Index work runs longer than a batch: its own bound (the rebuild's max duration).
SELECT set_config('statement_timeout', :statement_timeout, false) AS statement_timeout
-- @block clock
-- The database's clock decides what is "older than": the preview fixes this cutoff and the
-- execution reuses it, so both select exactly the same rows when nothing changes in between.
-- {clock} is the queue's (queueops.fragments.clock): for naive UTC columns the UTC wall clock, so
-- the cutoff is a naive UTC timestamp, bound and compared in the column's own type (issue 29).
SELECT {clock} - make_interval(secs => :age_s) AS cutoff, {clock} AS db_now
