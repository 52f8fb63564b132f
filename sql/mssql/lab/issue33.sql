-- Lab statements of the SQL Server integration tests of issue 33 (tests/mssql/test_issue33.py):
-- a login without VIEW SERVER STATE, a schema change holding Sch-M on a queue table. Test-only:
-- {login} is a quoted identifier and {password_literal} an N'...' literal the test makes from
-- random hex digits.
-- @block create_login
CREATE LOGIN {login} WITH PASSWORD = {password_literal}, CHECK_POLICY = OFF, CHECK_EXPIRATION = OFF
-- @block create_user
CREATE USER {login} FOR LOGIN {login}
-- @block grant_select
GRANT SELECT ON SCHEMA::[lab] TO {login}
-- @block drop_user
DROP USER IF EXISTS {login}
-- @block drop_login
DROP LOGIN {login}
-- @block requests_seen
-- What this login sees of the server's requests: without VIEW SERVER STATE, only its own.
SELECT COUNT(*) AS seen, SUM(CASE WHEN r.session_id = @@SPID THEN 1 ELSE 0 END) AS own
FROM sys.dm_exec_requests AS r
-- @block schema_change_hold
-- Sch-M on the lease queue's table until the transaction ends (what NServiceBus's ALTER TABLE
-- ... ADD or a library migration takes).
ALTER TABLE [lab].[q_lease] ADD [qo_issue33] int NULL
