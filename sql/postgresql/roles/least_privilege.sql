-- The least-privilege logins of queueops on PostgreSQL (docs/security.md, sections 5 and 6): a
-- collector login that only reads and an action login that may write only what each action writes.
-- A psql script, written for the lab's queues (queueops/lab/config.py); the grants per queue kind
-- are the same for yours, and 'queueops config check --live' names every grant a login is missing,
-- with what it disables and the GRANT statement, for each queue of your config. Run it as a
-- superuser or as the role that owns the queue tables:
--
--   psql -v collector=queueops_collector -v action=queueops_action -v owner=queue_owner -v schema=lab \
--        -f sql/postgresql/roles/least_privilege.sql
--
-- then give each login a password (\password queueops_collector) and name them in the target:
-- url = "postgresql://queueops_collector@host/db", actions_url = "postgresql://queueops_action@host/db".
-- :"owner" is the role that owns the queue tables (a NOLOGIN role of their own, not a superuser:
-- see the rebuild section at the end). tests/hostile/test_db_roles.py runs this file.

-- The collector login: reads, never writes.
CREATE ROLE :"collector" LOGIN;
-- pg_monitor = pg_read_all_stats (other logins' sessions' state, query and transaction start:
-- oldest_snapshot, blocking_chains) + pg_stat_scan_tables (pgstattuple's exact figures:
-- ghost_records, fragmentation_pct) + pg_read_all_settings.
GRANT pg_monitor TO :"collector";
GRANT USAGE ON SCHEMA :"schema" TO :"collector";
-- Every table a collector reads: the queue tables, the ring's sequence table and the watermark
-- table. Not the payload table (q_status_data): no collector reads it.
GRANT SELECT ON :"schema".q_delete, :"schema".q_delete_watermark, :"schema".q_status_meta, :"schema".q_lease,
    :"schema".q_due, :"schema".q_ring_slot, :"schema".q_ring_seq TO :"collector";

-- The action login: what each action writes, and nothing else.
CREATE ROLE :"action" LOGIN;
GRANT USAGE ON SCHEMA :"schema" TO :"action";
-- terminate: see other logins' sessions (pg_read_all_stats) and end them (pg_signal_backend: any
-- session but a superuser's); rebuild's preview: read index bloat with pgstatindex (pg_stat_scan_tables).
GRANT pg_read_all_stats, pg_signal_backend, pg_stat_scan_tables TO :"action";
-- requeue, lease queue: release a lease (and --bump-attempts).
GRANT SELECT, UPDATE (processing_started_at, attempts) ON :"schema".q_lease TO :"action";
-- requeue, status queue: processing -> ready; archive: pick finished items (SELECT ... FOR UPDATE
-- needs UPDATE of a column) and delete them.
GRANT SELECT, UPDATE (status, status_changed_at, attempts), DELETE ON :"schema".q_status_meta TO :"action";
-- archive: the payload rows go with their item.
GRANT SELECT, DELETE ON :"schema".q_status_data TO :"action";
-- archive --mode move: also INSERT on the archive tables you name, e.g.
--   GRANT INSERT ON :"schema".q_status_meta_archive, :"schema".q_status_data_archive TO :"action";
-- watermark-reset: read the lowest pending key, move the watermark.
GRANT SELECT ON :"schema".q_delete TO :"action";
GRANT SELECT, UPDATE (low_key) ON :"schema".q_delete_watermark TO :"action";

-- rebuild: REINDEX and VACUUM need the table's owner up to PostgreSQL 16, so the action login
-- becomes a member of the owner's role: it may then do anything the owner may, DROP TABLE and
-- every write to every table that role owns included. Leave this statement out to keep the action
-- login least-privileged (config check --live then says rebuild is disabled, and a DBA reindexes).
-- PostgreSQL 17 and later: instead, GRANT MAINTAIN ON <each queue table> TO :"action" (REINDEX,
-- VACUUM, ANALYZE of that table and nothing else).
GRANT :"owner" TO :"action";
