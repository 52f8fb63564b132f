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
-- The enqueue time lives in the queue's times_from side table (Hangfire: the latest 'Enqueued'
-- State.CreatedAt through JobId): the oldest free item is the lowest key (an identity; with a
-- partition, Queue = N'default', along JobQueue's clustered key (Queue, Id)), so the side table is
-- read once for that item instead of once per free item to sort them all by time.
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
-- @block lease_follow
-- A lease queue whose mapping says more about readiness (issue 31; see sql/postgresql): the oldest
-- free item below max_attempts, of at most :cap free items in enqueue-time order (an index on
-- (enqueued_at, key) filtered WHERE lease IS NULL serves it).
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, (SELECT MIN(l.enq)
                                                FROM (SELECT TOP (:cap) {enqueued_at} AS enq,
                                                             CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
                                                      FROM {table} WHERE {free}{open_and} ORDER BY {enqueued_at}, {key}) AS l
                                                WHERE l.exhausted = 0),
                                  SYSUTCDATETIME()), 0) / 1000.0 AS float) AS value,
       'oldest free item below max_attempts (of the first cap by enqueue time)' AS note
-- @block lease_follow_runnable
-- Age since the item became runnable: the later of enqueued_at and runnable_at (GREATEST needs SQL
-- Server 2022: a CASE). Read TOP (:cap) in runnable_at order through an index that leads with it
-- (see depth.sql), for the passed range and the NULL range; a scheduled item is never read. The
-- NULL range in {runnable_null_order}: the runnable column then the key, which its nonclustered
-- index serves as it is (its rows carry the clustering key), the cap kept the oldest.
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(CASE WHEN o.since IS NULL OR o.since > SYSUTCDATETIME() THEN 0
                 ELSE DATEDIFF_BIG(MILLISECOND, o.since, SYSUTCDATETIME()) END / 1000.0 AS float) AS value,
       'since runnable: the later of enqueued_at and runnable_at, of the ready items below max_attempts' AS note
FROM (SELECT CASE WHEN d.since IS NULL OR z.since < d.since THEN z.since ELSE d.since END AS since
      FROM (SELECT MIN(l.since) AS since
            FROM (SELECT TOP (:cap) CASE WHEN {enqueued_at} IS NULL OR {runnable} > {enqueued_at} THEN {runnable}
                                         ELSE {enqueued_at} END AS since,
                         CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
                  FROM {table} WHERE {free} AND {runnable} <= SYSUTCDATETIME(){open_and} ORDER BY {runnable}) AS l
            WHERE l.exhausted = 0) AS d
      CROSS JOIN (SELECT MIN(l.enq) AS since
                  FROM (SELECT TOP (:cap) {enqueued_at} AS enq, CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
                        FROM {table} WHERE {free} AND {runnable} IS NULL{open_and} ORDER BY {runnable_null_order}) AS l
                  WHERE l.exhausted = 0) AS z) AS o
-- @block status_follow
-- A status queue with max_attempts (issue 31): the oldest ready item below it, of at most :cap
-- ready items read through (status, key).
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, (SELECT MIN(l.enq)
                                                FROM (SELECT TOP (:cap) {enqueued_at} AS enq,
                                                             CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
                                                      FROM {table} WHERE {status} IN (:ready_values){open_and}
                                                      ORDER BY {status}, {key}) AS l
                                                WHERE l.exhausted = 0),
                                  SYSUTCDATETIME()), 0) / 1000.0 AS float) AS value,
       'oldest ready item below max_attempts (of the first cap by status and key)' AS note
-- @block status_follow_runnable
-- Age since runnable (the later of enqueued_at and runnable_at), read TOP (:cap) in
-- (status, runnable_at) order for the passed and the NULL range (that one in (status,
-- {runnable_null_order}): the cap kept the oldest); a scheduled item is never read.
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(CASE WHEN o.since IS NULL OR o.since > SYSUTCDATETIME() THEN 0
                 ELSE DATEDIFF_BIG(MILLISECOND, o.since, SYSUTCDATETIME()) END / 1000.0 AS float) AS value,
       'since runnable: the later of enqueued_at and runnable_at, of the ready items below max_attempts' AS note
FROM (SELECT CASE WHEN d.since IS NULL OR z.since < d.since THEN z.since ELSE d.since END AS since
      FROM (SELECT MIN(l.since) AS since
            FROM (SELECT TOP (:cap) CASE WHEN {enqueued_at} IS NULL OR {runnable} > {enqueued_at} THEN {runnable}
                                         ELSE {enqueued_at} END AS since,
                         CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
                  FROM {table} WHERE {status} IN (:ready_values) AND {runnable} <= SYSUTCDATETIME(){open_and}
                  ORDER BY {status}, {runnable}) AS l
            WHERE l.exhausted = 0) AS d
      CROSS JOIN (SELECT MIN(l.enq) AS since
                  FROM (SELECT TOP (:cap) {enqueued_at} AS enq, CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
                        FROM {table} WHERE {status} IN (:ready_values) AND {runnable} IS NULL{open_and}
                        ORDER BY {status}, {runnable_null_order}) AS l
                  WHERE l.exhausted = 0) AS z) AS o
-- @block due_follow
-- A due queue with max_attempts (issue 33): the oldest due item below it (MassTransit's fetch:
-- EnqueueTime <= now AND DeliveryCount < MaxDeliveryCount, within the queue's QueueId).
SELECT :queue AS queue, 'oldest_age_s' AS metric,
       CAST(COALESCE(DATEDIFF_BIG(MILLISECOND, (SELECT TOP (1) {due} FROM {table}
                                                WHERE {due} <= SYSUTCDATETIME() AND NOT {exhausted}{open_and}
                                                ORDER BY {due}),
                                  SYSUTCDATETIME()), 0) / 1000.0 AS float) AS value,
       'oldest due item below max_attempts' AS note
