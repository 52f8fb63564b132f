-- What decides readiness beyond the mapping (issue 31), for requeue and 'config check --live'.
-- Names are bound as values; an unknown table yields no rows.
-- @block columns
-- The queue table's columns: NOT NULL (a lease that cannot be set NULL) and comments (a lock-until
-- column often says so).
SELECT a.attname AS column_name, a.attnotnull AS not_null,
       coalesce(col_description(a.attrelid, a.attnum), '') AS comment
FROM pg_attribute AS a
WHERE a.attrelid = to_regclass(:qualified_table) AND a.attnum > 0 AND NOT a.attisdropped
-- @block side_locks
-- Every column of the tables the queue table references by a foreign key, with the referencing
-- column: queueops.readiness keeps the lock-like ones (lock, locked_at, locked_by, lease...,
-- worker...). A library that serialises named queues locks such a side row too (graphile-worker's
-- job_queues.locked_at), and an item is not taken while it is held.
SELECT format('%I.%I', n.nspname, r.relname) AS side_table, a.attname AS side_column, k.attname AS via
FROM pg_constraint AS c
JOIN pg_class AS r ON r.oid = c.confrelid
JOIN pg_namespace AS n ON n.oid = r.relnamespace
JOIN pg_attribute AS a ON a.attrelid = c.confrelid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_attribute AS k ON k.attrelid = c.conrelid AND k.attnum = ANY (c.conkey)
WHERE c.conrelid = to_regclass(:qualified_table) AND c.contype = 'f' AND c.confrelid <> c.conrelid
ORDER BY 1, 2, 3
-- @block lease_ahead
-- How far ahead of the clock the furthest lease lies: a column that records when an item was taken
-- never holds a time minutes ahead, a lock-until column does (its lease is when the lock ends).
-- One row from the far end of an index that leads with the lease column (stuck_leases needs it too).
SELECT extract(epoch FROM (SELECT {lease} FROM {table} WHERE {lease} IS NOT NULL{open_and}
                           ORDER BY {lease} DESC LIMIT 1) - {clock})::float8 AS ahead_s
