-- items: the items behind a number, for the console's drill-down (issue 32, item 6); see
-- sql/postgresql/items.sql. Read-only, TOP (:limit_n) through the index the number's collector
-- reads, in its order; every value bound. Times are UTC (SYSUTCDATETIME), as the collectors read
-- them. Optional columns are fragments holding the quoted column or a typed NULL ({attempts_sel},
-- {error_sel}, {owner_sel}, {enq_sel}). Columns: item, since, age_s, attempts, last_error, owner.
-- @block stuck_lease
-- Stuck leases exactly as stuck_leases.sql counts them: the queue's compiled stuck rule
-- (queueops.mapping.stuck_rule: {stuck_held}, the held items; {stuck_if}, the stuck ones).
SELECT TOP (:limit_n) {key} AS item, {lease} AS since,
       CAST(DATEDIFF_BIG(MILLISECOND, {lease}, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       {attempts_sel} AS attempts, LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error,
       CAST({owner_sel} AS nvarchar(450)) AS owner
FROM {table}
WHERE {stuck_held} AND {stuck_if}{open_and}
ORDER BY {lease}, {key}
-- @block stuck_status
-- The first :cap processing items (stuck_leases.sql, blocks status and status_follow), those the
-- compiled rule {stuck_if} calls stuck among them.
SELECT TOP (:limit_n) p.item, p.since, CAST(DATEDIFF_BIG(MILLISECOND, p.since, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       p.attempts, p.last_error, p.owner
FROM (SELECT TOP (:cap) {key} AS item, {status_changed_at} AS since, CASE WHEN {stuck_if} THEN 1 ELSE 0 END AS stuck,
             {attempts_sel} AS attempts, LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error,
             CAST({owner_sel} AS nvarchar(450)) AS owner
      FROM {table} WHERE {status} IN (:processing_values){open_and}
      ORDER BY {status}, {key}) AS p
WHERE p.stuck = 1
ORDER BY p.since, p.item
-- @block waiting_lease
SELECT TOP (:limit_n) {key} AS item, {enqueued_at} AS since,
       CAST(DATEDIFF_BIG(MILLISECOND, {enqueued_at}, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       {attempts_sel} AS attempts, LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error,
       CAST(NULL AS nvarchar(450)) AS owner
FROM {table} WHERE {lease} IS NULL{open_and}
ORDER BY {enqueued_at}, {key}
-- @block waiting_lease_follow
SELECT TOP (:limit_n) l.item, l.since, CAST(DATEDIFF_BIG(MILLISECOND, l.since, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       l.attempts, l.last_error, CAST(NULL AS nvarchar(450)) AS owner
FROM (SELECT TOP (:cap) {key} AS item, {enqueued_at} AS since, {attempts_sel} AS attempts,
             LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error,
             CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
      FROM {table} WHERE {free}{open_and} ORDER BY {enqueued_at}, {key}) AS l
WHERE l.exhausted = 0
ORDER BY l.since, l.item
-- @block waiting_lease_follow_runnable
-- A lease queue with runnable_at, as oldest_age_s.sql (block lease_follow_runnable) reads its age:
-- the free items below max_attempts whose runnable time has passed (TOP (:cap) in runnable_at
-- order), aged from the later of enqueued_at and runnable_at, and those without one (TOP (:cap) in
-- {runnable_null_order}, the age's own read of that range); a scheduled item is never listed.
SELECT TOP (:limit_n) l.item, l.since, CAST(DATEDIFF_BIG(MILLISECOND, l.since, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       l.attempts, l.last_error, CAST(NULL AS nvarchar(450)) AS owner
FROM (SELECT d.item, d.since, d.attempts, d.last_error, d.exhausted
      FROM (SELECT TOP (:cap) {key} AS item,
                   CASE WHEN {enqueued_at} IS NULL OR {runnable} > {enqueued_at} THEN {runnable} ELSE {enqueued_at} END AS since,
                   {attempts_sel} AS attempts, LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error,
                   CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
            FROM {table} WHERE {free} AND {runnable} <= SYSUTCDATETIME(){open_and} ORDER BY {runnable}) AS d
      UNION ALL
      SELECT z.item, z.since, z.attempts, z.last_error, z.exhausted
      FROM (SELECT TOP (:cap) {key} AS item, {enqueued_at} AS since, {attempts_sel} AS attempts,
                   LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error,
                   CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
            FROM {table} WHERE {free} AND {runnable} IS NULL{open_and} ORDER BY {runnable_null_order}) AS z) AS l
WHERE l.exhausted = 0
ORDER BY l.since, l.item
-- @block waiting_status_follow
-- A status queue with max_attempts, as oldest_age_s.sql (block status_follow) reads its age: the
-- ready items below it among the first TOP (:cap) in (status, key) order, oldest enqueue time first.
SELECT TOP (:limit_n) l.item, l.since, CAST(DATEDIFF_BIG(MILLISECOND, l.since, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       l.attempts, l.last_error, l.owner
FROM (SELECT TOP (:cap) {key} AS item, {enqueued_at} AS since, {attempts_sel} AS attempts,
             LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error, CAST({owner_sel} AS nvarchar(450)) AS owner,
             CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
      FROM {table} WHERE {status} IN (:ready_values){open_and} ORDER BY {status}, {key}) AS l
WHERE l.exhausted = 0
ORDER BY l.since, l.item
-- @block waiting_status_follow_runnable
-- A status queue with runnable_at, as oldest_age_s.sql (block status_follow_runnable) reads its age:
-- the ready items below max_attempts whose runnable time has passed (TOP (:cap) in (status,
-- runnable_at) order), aged from the later of enqueued_at and runnable_at, and those without one
-- (in {runnable_null_order}, as the age reads them); a scheduled item is never listed.
SELECT TOP (:limit_n) l.item, l.since, CAST(DATEDIFF_BIG(MILLISECOND, l.since, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       l.attempts, l.last_error, l.owner
FROM (SELECT d.item, d.since, d.attempts, d.last_error, d.owner, d.exhausted
      FROM (SELECT TOP (:cap) {key} AS item,
                   CASE WHEN {enqueued_at} IS NULL OR {runnable} > {enqueued_at} THEN {runnable} ELSE {enqueued_at} END AS since,
                   {attempts_sel} AS attempts, LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error,
                   CAST({owner_sel} AS nvarchar(450)) AS owner, CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
            FROM {table} WHERE {status} IN (:ready_values) AND {runnable} <= SYSUTCDATETIME(){open_and}
            ORDER BY {status}, {runnable}) AS d
      UNION ALL
      SELECT z.item, z.since, z.attempts, z.last_error, z.owner, z.exhausted
      FROM (SELECT TOP (:cap) {key} AS item, {enqueued_at} AS since, {attempts_sel} AS attempts,
                   LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error,
                   CAST({owner_sel} AS nvarchar(450)) AS owner, CASE WHEN {exhausted} THEN 1 ELSE 0 END AS exhausted
            FROM {table} WHERE {status} IN (:ready_values) AND {runnable} IS NULL{open_and}
            ORDER BY {status}, {runnable_null_order}) AS z) AS l
WHERE l.exhausted = 0
ORDER BY l.since, l.item
-- @block waiting_status
SELECT TOP (:limit_n) {key} AS item, {enq_sel} AS since,
       CAST(DATEDIFF_BIG(MILLISECOND, {enq_sel}, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       {attempts_sel} AS attempts, LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error,
       CAST({owner_sel} AS nvarchar(450)) AS owner
FROM {table} WHERE {status} IN (:ready_values){open_and}
ORDER BY {status}, {key}
-- @block waiting_status_heap
-- order = "heap" (the key says nothing about age): the oldest ready items by enqueue time, as
-- oldest_age_s.sql (block status_heap) reads the first.
SELECT TOP (:limit_n) {key} AS item, {enqueued_at} AS since,
       CAST(DATEDIFF_BIG(MILLISECOND, {enqueued_at}, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       {attempts_sel} AS attempts, LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error,
       CAST({owner_sel} AS nvarchar(450)) AS owner
FROM {table} WHERE {status} IN (:ready_values){open_and}
ORDER BY {enqueued_at}, {key}
-- @block waiting_delete_heap
-- order = "heap": the oldest items by enqueue time, as oldest_age_s.sql (block delete_heap) reads the first.
SELECT TOP (:limit_n) {key} AS item, {enqueued_at} AS since,
       CAST(DATEDIFF_BIG(MILLISECOND, {enqueued_at}, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       CAST(NULL AS int) AS attempts, CAST(NULL AS nvarchar(500)) AS last_error, CAST(NULL AS nvarchar(450)) AS owner
FROM {table}{open_where}
ORDER BY {enqueued_at}, {key}
-- @block waiting_delete
SELECT TOP (:limit_n) {key} AS item, {enq_sel} AS since,
       CAST(DATEDIFF_BIG(MILLISECOND, {enq_sel}, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       CAST(NULL AS int) AS attempts, CAST(NULL AS nvarchar(500)) AS last_error, CAST(NULL AS nvarchar(450)) AS owner
FROM {table}{open_where}
ORDER BY {key}
-- @block waiting_due
SELECT TOP (:limit_n) {key} AS item, {due} AS since,
       CAST(DATEDIFF_BIG(MILLISECOND, {due}, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       CAST(NULL AS int) AS attempts, CAST(NULL AS nvarchar(500)) AS last_error, CAST(NULL AS nvarchar(450)) AS owner
FROM {table} WHERE {due} <= SYSUTCDATETIME(){open_and}
ORDER BY {due}
-- @block waiting_due_follow
-- A due queue with max_attempts (MassTransit's MaxDeliveryCount), as oldest_age_s.sql (block
-- due_follow) reads its age: the most overdue items below the limit; a message at its limit is
-- never delivered again, so it is not waiting.
SELECT TOP (:limit_n) {key} AS item, {due} AS since,
       CAST(DATEDIFF_BIG(MILLISECOND, {due}, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       {attempts_sel} AS attempts, CAST(NULL AS nvarchar(500)) AS last_error, CAST(NULL AS nvarchar(450)) AS owner
FROM {table} WHERE {due} <= SYSUTCDATETIME() AND NOT {exhausted}{open_and}
ORDER BY {due}
-- @block by_key
SELECT TOP (:limit_n) {key} AS item, {enq_sel} AS enqueued_at, {held_sel} AS since,
       CAST(DATEDIFF_BIG(MILLISECOND, {held_sel}, SYSUTCDATETIME()) / 1000.0 AS float) AS age_s,
       CAST({state_sel} AS nvarchar(450)) AS status, {attempts_sel} AS attempts,
       LEFT(CAST({error_sel} AS nvarchar(4000)), 500) AS last_error, CAST({owner_sel} AS nvarchar(450)) AS owner
FROM {table} WHERE {key} = :key{open_and}
