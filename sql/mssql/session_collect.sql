-- Collector session settings: never wait long for a lock (error 1222 after the timeout) and
-- lose any deadlock. The isolation level (READ UNCOMMITTED: collectors take no shared row locks;
-- a statement still holds Sch-S for its run, which a queued Sch-M waits for: docs/security.md,
-- section 6; counts are monitoring figures, not accounting) is set through
-- the ODBC connection attribute by queueops.engine, and the statement timeout by pyodbc's
-- query timeout.
SET LOCK_TIMEOUT {lock_timeout_ms};
SET DEADLOCK_PRIORITY LOW;
-- The version and engine edition pick the blocks this server can run (oldest_snapshot's
-- persistent version store: SQL Server 2019, major 15, Azure SQL Database 5, Managed Instance 8).
SELECT @@LOCK_TIMEOUT AS lock_timeout_ms, CAST(SERVERPROPERTY('ProductMajorVersion') AS int) AS major_version,
       CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition;
