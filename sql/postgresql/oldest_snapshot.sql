-- oldest_snapshot (target): the root cause of dead tuples that VACUUM cannot remove: whatever
-- holds the oldest xmin horizon of this database. Candidates: backends of this database with a
-- snapshot (backend_xmin) or a transaction id (backend_xid), prepared transactions, and
-- replication slots (which pin the horizon of every database). The oldest by xid age wins.
--   oldest_snapshot_age_s  seconds since the holder's transaction started (0: nothing holds one)
--   oldest_xmin_age_xids   age(xmin) in transaction ids
--   snapshot_transactions  backends of this database holding a snapshot or an xid now
-- note: JSON naming the holder (kind, pid, usename, application_name, client_addr, state,
-- backend_type, xact_start, state_change, wait_event, query excerpt). This collector's own
-- backend is excluded. Reads only pg_stat_activity, pg_prepared_xacts, pg_replication_slots.
-- Without pg_read_all_stats (pg_monitor) a login sees no other login's backend_xmin, backend_xid
-- or xact_start: their snapshots read as none, 0 s. The rows then say so in their note ('not
-- visible: the collector login lacks pg_read_all_stats ...'; a holder that is still seen, one of
-- its own sessions or a prepared transaction, carries it as "not_visible"), instead of reading as
-- healthy.
-- @block main
WITH holders AS (
    SELECT 'backend' AS kind, a.pid, a.usename::text AS usename, a.application_name,
           a.client_addr::text AS client_addr, a.state, a.backend_type, a.xact_start, a.state_change,
           a.wait_event_type || ':' || a.wait_event AS wait_event, left(a.query, 300) AS query,
           greatest(age(a.backend_xmin), age(a.backend_xid)) AS xid_age
    FROM pg_stat_activity AS a
    WHERE (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
      AND a.pid <> pg_backend_pid()
      AND (a.datname = current_database() OR a.datname IS NULL)
    UNION ALL
    SELECT 'prepared transaction', NULL, p.owner::text, NULL, NULL, 'prepared', NULL, p.prepared, p.prepared,
           NULL, p.gid, age(p.transaction)
    FROM pg_prepared_xacts AS p
    WHERE p.database = current_database()
    UNION ALL
    SELECT 'replication slot', r.active_pid, NULL, NULL, NULL, CASE WHEN r.active THEN 'active' ELSE 'inactive' END,
           r.slot_type, NULL, NULL, NULL, r.slot_name, greatest(age(r.xmin), age(r.catalog_xmin))
    FROM pg_replication_slots AS r
    WHERE r.xmin IS NOT NULL OR r.catalog_xmin IS NOT NULL
), oldest AS (
    SELECT h.* FROM holders AS h ORDER BY h.xid_age DESC NULLS LAST, h.xact_start NULLS LAST LIMIT 1
), counted AS (
    SELECT count(*) FILTER (WHERE h.kind = 'backend') AS n FROM holders AS h
), visible AS (
    SELECT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS all_stats,
           'not visible: the collector login lacks pg_read_all_stats (other logins'' transactions show '
           'no snapshot or start in pg_stat_activity, so theirs read as none)' AS why
)
SELECT '' AS queue, v.metric, v.value, v.note
FROM counted AS c
CROSS JOIN visible AS vis
LEFT JOIN oldest AS o ON true
CROSS JOIN LATERAL (SELECT json_build_object(
        'kind', o.kind, 'pid', o.pid, 'usename', o.usename, 'application_name', o.application_name,
        'client_addr', o.client_addr, 'state', o.state, 'backend_type', o.backend_type,
        'xact_start', o.xact_start, 'state_change', o.state_change, 'wait_event', o.wait_event,
        'xid_age', o.xid_age, 'query', o.query) AS holder) AS h
CROSS JOIN LATERAL (SELECT CASE
        WHEN o.kind IS NULL AND vis.all_stats THEN '{}'
        WHEN o.kind IS NULL THEN vis.why
        WHEN vis.all_stats THEN h.holder::text
        ELSE (h.holder::jsonb || jsonb_build_object('not_visible', vis.why))::text END AS detail) AS j
CROSS JOIN LATERAL (VALUES
    ('oldest_snapshot_age_s', coalesce(extract(epoch FROM now() - o.xact_start), 0)::float8, j.detail),
    ('oldest_xmin_age_xids', coalesce(o.xid_age, 0)::float8, j.detail),
    ('snapshot_transactions', c.n::float8, 'backends holding a snapshot or a transaction id'
                                           || CASE WHEN vis.all_stats THEN '' ELSE '; ' || vis.why END)
) AS v (metric, value, note)
