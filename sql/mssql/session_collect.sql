-- Collector session settings: never wait long for a lock (error 1222 after the timeout) and
-- lose any deadlock. The isolation level (READ UNCOMMITTED: collectors take no shared locks and
-- can never block a dequeuer; counts are monitoring figures, not accounting) is set through
-- the ODBC connection attribute by queueops.engine, and the statement timeout by pyodbc's
-- query timeout.
SET LOCK_TIMEOUT {lock_timeout_ms};
SET DEADLOCK_PRIORITY LOW;
SELECT @@LOCK_TIMEOUT AS lock_timeout_ms;
