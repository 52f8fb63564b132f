-- oldest_age_s: seconds the oldest ready item has waited (0 when nothing is ready).
-- Each block reads one row through the index the dequeue uses (TOP (1) ... ORDER BY).
-- Times are UTC (SYSUTCDATETIME), as lease and enqueue times should be.
-- @block delete
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, (SELECT TOP (1) {enqueued_at} FROM {table}{open_where} ORDER BY {key}),
                                  SYSUTCDATETIME()), 0) / 1000.0 AS float) AS value,
       '' AS note
-- @block status
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, (SELECT TOP (1) {enqueued_at} FROM {table}
                                                WHERE {status} IN (:ready_values){open_and} ORDER BY {status}, {key}),
                                  SYSUTCDATETIME()), 0) / 1000.0 AS float) AS value,
       '' AS note
-- @block delete_heap
-- order = "heap": the key says nothing about age, so the oldest item is found by its enqueue time
-- (see sql/postgresql/oldest_age_s.sql); fifo and lifo read the lowest key, the oldest in both.
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, (SELECT TOP (1) {enqueued_at} FROM {table}{open_where} ORDER BY {enqueued_at}),
                                  SYSUTCDATETIME()), 0) / 1000.0 AS float) AS value,
       'heap: by enqueue time' AS note
-- @block status_heap
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, (SELECT TOP (1) {enqueued_at} FROM {table}
                                                WHERE {status} IN (:ready_values){open_and} ORDER BY {enqueued_at}),
                                  SYSUTCDATETIME()), 0) / 1000.0 AS float) AS value,
       'heap: by enqueue time' AS note
-- @block lease
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, (SELECT TOP (1) {enqueued_at} FROM {table}
                                                WHERE {lease} IS NULL{open_and} ORDER BY {enqueued_at}, {key}),
                                  SYSUTCDATETIME()), 0) / 1000.0 AS float) AS value,
       '' AS note
-- @block lease_side
-- The enqueue time lives in the queue's times_from side table (Hangfire: Job.CreatedAt through
-- JobId): the oldest free item is the lowest key (an identity), so the side table is read once
-- for that item instead of once per free item to sort them all by time.
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, (SELECT TOP (1) {enqueued_at} FROM {table}
                                                WHERE {lease} IS NULL{open_and} ORDER BY {key}),
                                  SYSUTCDATETIME()), 0) / 1000.0 AS float) AS value,
       'enqueue time from the side table, oldest by key' AS note
-- @block due
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, (SELECT TOP (1) {due} FROM {table}
                                                WHERE {due} <= SYSUTCDATETIME(){open_and} ORDER BY {due}),
                                  SYSUTCDATETIME()), 0) / 1000.0 AS float) AS value,
       '' AS note
-- @block ring
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, (SELECT r.{enqueued_at} FROM {table} AS r CROSS JOIN {seq_table} AS s
                                                WHERE r.{key} = s.{pop} % {capacity} AND r.{refcount} > 0
                                                  AND s.{push} > s.{pop}),
                                  SYSUTCDATETIME()), 0) / 1000.0 AS float) AS value,
       '' AS note
