-- The statements 'config check --live' prints as the fix of a missing privilege (queueops/privileges.py),
-- one block per kind of grant; shown to the operator, never run by queueops. Every name is a quoted
-- fragment: {login} and {role} are role names, {schema} a schema, {table} a schema-qualified table,
-- {columns} a list of quoted column names. docs/security.md section 5 says what each grant enables;
-- sql/postgresql/roles/least_privilege.sql is the whole script for the lab's queues.
--   member    a predefined role (pg_monitor, pg_signal_backend, ...) or, for rebuild up to
--             PostgreSQL 16, the table owner's role: the login then has every right of the owner
--             (docs/security.md, the trade-off)
--   maintain  PostgreSQL 17+: REINDEX and VACUUM of this table, and nothing else
--   default_select  the tables {role} creates in {schema} from now on: a partition a queue library
--             adds later (pg-boss, one per queue) is readable, and so are its statistics
--   owner     for a table owned by a superuser: granting that role would hand out the ownership
--             of everything the superuser owns; the queue tables get an owner role of their own
-- @block usage
GRANT USAGE ON SCHEMA {schema} TO {login}
-- @block select
GRANT SELECT ON {table} TO {login}
-- @block select_all
GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {login}
-- @block default_select
ALTER DEFAULT PRIVILEGES FOR ROLE {role} IN SCHEMA {schema} GRANT SELECT ON TABLES TO {login}
-- @block update
GRANT UPDATE ({columns}) ON {table} TO {login}
-- @block delete
GRANT DELETE ON {table} TO {login}
-- @block member
GRANT {role} TO {login}
-- @block maintain
GRANT MAINTAIN ON {table} TO {login}
-- @block owner
ALTER TABLE {table} OWNER TO {role}
