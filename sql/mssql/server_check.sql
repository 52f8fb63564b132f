-- server_check: what 'config check --live' reads of a SQL Server target and of each login (issue
-- 33, items 7 and 8): the version and edition (online index operations; the minimum, SQL Server 2016
-- (13.x): DATEDIFF_BIG, STRING_ESCAPE, FOR JSON), the database's compatibility level and row
-- versioning, and the login's effective permissions. HAS_PERMS_BY_NAME answers for the login
-- itself, through every role and group (a missing right is a 0, never an error: a login learns what
-- it lacks); a permission the platform does not have is not asked (Azure SQL Database has no
-- server-level permissions; KILL DATABASE CONNECTION exists there only).
-- @block server
SELECT CAST(SERVERPROPERTY('ProductMajorVersion') AS int) AS major_version,
       CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(128)) AS product_version,
       CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition,
       CAST(SERVERPROPERTY('Edition') AS nvarchar(128)) AS edition,
       d.compatibility_level, d.is_read_committed_snapshot_on, d.snapshot_isolation_state,
       SUSER_SNAME() AS login_name, USER_NAME() AS user_name, DB_NAME() AS database_name,
       CASE WHEN CAST(SERVERPROPERTY('EngineEdition') AS int) <> 5
            THEN HAS_PERMS_BY_NAME(NULL, NULL, N'VIEW SERVER STATE') END AS view_server_state,
       CASE WHEN CAST(SERVERPROPERTY('EngineEdition') AS int) <> 5
            THEN HAS_PERMS_BY_NAME(NULL, NULL, N'ALTER ANY CONNECTION') END AS alter_any_connection,
       HAS_PERMS_BY_NAME(DB_NAME(), N'DATABASE', N'VIEW DATABASE STATE') AS view_database_state,
       CASE WHEN CAST(SERVERPROPERTY('EngineEdition') AS int) = 5
            THEN HAS_PERMS_BY_NAME(DB_NAME(), N'DATABASE', N'KILL DATABASE CONNECTION') END AS kill_database_connection
FROM sys.databases AS d
WHERE d.database_id = DB_ID()
-- @block table
-- The login's rights on one table (NULL: no such table; the existence check says so).
SELECT HAS_PERMS_BY_NAME(:qualified_table, N'OBJECT', N'SELECT') AS can_select,
       HAS_PERMS_BY_NAME(:qualified_table, N'OBJECT', N'UPDATE') AS can_update,
       HAS_PERMS_BY_NAME(:qualified_table, N'OBJECT', N'DELETE') AS can_delete,
       HAS_PERMS_BY_NAME(:qualified_table, N'OBJECT', N'INSERT') AS can_insert,
       HAS_PERMS_BY_NAME(:qualified_table, N'OBJECT', N'ALTER') AS can_alter
