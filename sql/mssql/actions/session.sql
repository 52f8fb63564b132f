-- Action session settings: every statement waits at most the lock timeout (error 1222) instead of
-- queueing behind the queue's dequeuers; the action loses any deadlock rather than a dequeuer;
-- and XACT_ABORT makes any error inside a batch's transaction roll the whole batch back (a 1222
-- alone would only cancel the statement). The statement timeout is pyodbc's query timeout, set
-- by queueops.actions. Returns the session id, so progress can be read from a second connection.
-- @block main
SET LOCK_TIMEOUT {lock_timeout_ms};
SET DEADLOCK_PRIORITY LOW;
SET XACT_ABORT ON;
SELECT @@SPID AS session_id, @@LOCK_TIMEOUT AS lock_timeout_ms;
-- @block clock
-- The server's UTC clock decides what is "older than" (lease and status times are kept in UTC);
-- the preview fixes this cutoff and the execution reuses it. Whole seconds and the millisecond
-- remainder are added separately: DATEADD takes an int, and milliseconds overflow it after 24 days.
SELECT DATEADD(MILLISECOND, -:age_ms_part, DATEADD(SECOND, -:age_whole_s, SYSUTCDATETIME())) AS cutoff,
       SYSUTCDATETIME() AS db_now
