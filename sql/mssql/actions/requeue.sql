-- requeue: release stuck work. Lease kind: clear the lease of items leased before the cutoff.
-- Status kind: set items processing since before the cutoff back to ready.
-- Preview blocks read WITH (NOLOCK) so a preview never waits for (or blocks) a dequeuer; they use
-- exactly the predicate of the batch blocks and the cutoff fixed at preview time.
-- Batch blocks: one statement = one transaction, an updatable CTE (UPDATE TOP is not used).
-- READPAST skips rows other sessions hold, so live dequeuers are never blocked; UPDLOCK makes the
-- read and the write of each row one atomic step, so a row is written only with the lease value
-- it was read with (OUTPUT deleted.* returns that observed value); READCOMMITTEDLOCK keeps READPAST
-- legal when the database uses READ_COMMITTED_SNAPSHOT.
-- OUTPUT goes INTO a table variable, then is selected: OUTPUT without INTO fails (Msg 334) on a
-- table with an enabled trigger, and audit triggers are common on job tables. The key travels as
-- text (nvarchar(450): any key type converts; it is compared back as a bound value, which converts
-- to the column's type), the observed lease or status time as datetime2.
-- @block count_lease
SELECT COUNT(*) AS n FROM (
    SELECT TOP (:limit_n) 1 AS x FROM {table} WITH (NOLOCK) WHERE {lease} < :cutoff{open_and}) AS s
-- @block sample_lease
SELECT TOP (:sample_n) {key} AS item, {lease} AS observed,
       DATEDIFF(SECOND, {lease}, SYSUTCDATETIME()) AS lease_age_s
FROM {table} WITH (NOLOCK) WHERE {lease} < :cutoff{open_and}
ORDER BY {lease}, {key}
-- @block batch_lease
DECLARE @queueops_out TABLE (item nvarchar(450) NOT NULL, observed datetime2 NULL);
WITH picked AS (
    SELECT TOP (:batch_n) {key}, {lease}
    FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
    WHERE {lease} < :cutoff{open_and}
    ORDER BY {lease}, {key})
UPDATE picked SET {lease} = NULL
OUTPUT CONVERT(nvarchar(450), inserted.{key}), CONVERT(datetime2, deleted.{lease}) INTO @queueops_out;
SELECT o.item, o.observed FROM @queueops_out AS o
-- @block batch_lease_attempts
DECLARE @queueops_out TABLE (item nvarchar(450) NOT NULL, observed datetime2 NULL);
WITH picked AS (
    SELECT TOP (:batch_n) {key}, {lease}, {attempts}
    FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
    WHERE {lease} < :cutoff{open_and}
    ORDER BY {lease}, {key})
UPDATE picked SET {lease} = NULL, {attempts} = {attempts} + 1
OUTPUT CONVERT(nvarchar(450), inserted.{key}), CONVERT(datetime2, deleted.{lease}) INTO @queueops_out;
SELECT o.item, o.observed FROM @queueops_out AS o
-- Lease queues with an error column (the seeds' SimpleQueue): an item whose error is set failed
-- and keeps its lease on purpose; it is never released. The *_unfailed blocks are the lease
-- blocks with that predicate, used whenever the queue maps error_column.
-- @block count_lease_unfailed
SELECT COUNT(*) AS n FROM (
    SELECT TOP (:limit_n) 1 AS x FROM {table} WITH (NOLOCK) WHERE {lease} < :cutoff AND {error} IS NULL{open_and}) AS s
-- @block sample_lease_unfailed
SELECT TOP (:sample_n) {key} AS item, {lease} AS observed,
       DATEDIFF(SECOND, {lease}, SYSUTCDATETIME()) AS lease_age_s
FROM {table} WITH (NOLOCK) WHERE {lease} < :cutoff AND {error} IS NULL{open_and}
ORDER BY {lease}, {key}
-- @block batch_lease_unfailed
DECLARE @queueops_out TABLE (item nvarchar(450) NOT NULL, observed datetime2 NULL);
WITH picked AS (
    SELECT TOP (:batch_n) {key}, {lease}
    FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
    WHERE {lease} < :cutoff AND {error} IS NULL{open_and}
    ORDER BY {lease}, {key})
UPDATE picked SET {lease} = NULL
OUTPUT CONVERT(nvarchar(450), inserted.{key}), CONVERT(datetime2, deleted.{lease}) INTO @queueops_out;
SELECT o.item, o.observed FROM @queueops_out AS o
-- @block batch_lease_attempts_unfailed
DECLARE @queueops_out TABLE (item nvarchar(450) NOT NULL, observed datetime2 NULL);
WITH picked AS (
    SELECT TOP (:batch_n) {key}, {lease}, {attempts}
    FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
    WHERE {lease} < :cutoff AND {error} IS NULL{open_and}
    ORDER BY {lease}, {key})
UPDATE picked SET {lease} = NULL, {attempts} = {attempts} + 1
OUTPUT CONVERT(nvarchar(450), inserted.{key}), CONVERT(datetime2, deleted.{lease}) INTO @queueops_out;
SELECT o.item, o.observed FROM @queueops_out AS o
-- @block count_status
SELECT COUNT(*) AS n FROM (
    SELECT TOP (:limit_n) 1 AS x FROM {table} WITH (NOLOCK)
    WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff{open_and}) AS s
-- @block sample_status
SELECT TOP (:sample_n) {key} AS item, {status} AS status, {status_changed_at} AS observed,
       DATEDIFF(SECOND, {status_changed_at}, SYSUTCDATETIME()) AS lease_age_s
FROM {table} WITH (NOLOCK)
WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff{open_and}
ORDER BY {status_changed_at}, {key}
-- @block batch_status
DECLARE @queueops_out TABLE (item nvarchar(450) NOT NULL, observed datetime2 NULL);
WITH picked AS (
    SELECT TOP (:batch_n) {key}, {status}, {status_changed_at}
    FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
    WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff{open_and}
    ORDER BY {status_changed_at}, {key})
UPDATE picked SET {status} = :ready_value, {status_changed_at} = SYSUTCDATETIME()
OUTPUT CONVERT(nvarchar(450), inserted.{key}), CONVERT(datetime2, deleted.{status_changed_at}) INTO @queueops_out;
SELECT o.item, o.observed FROM @queueops_out AS o
-- @block batch_status_attempts
DECLARE @queueops_out TABLE (item nvarchar(450) NOT NULL, observed datetime2 NULL);
WITH picked AS (
    SELECT TOP (:batch_n) {key}, {status}, {status_changed_at}, {attempts}
    FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
    WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff{open_and}
    ORDER BY {status_changed_at}, {key})
UPDATE picked SET {status} = :ready_value, {status_changed_at} = SYSUTCDATETIME(), {attempts} = {attempts} + 1
OUTPUT CONVERT(nvarchar(450), inserted.{key}), CONVERT(datetime2, deleted.{status_changed_at}) INTO @queueops_out;
SELECT o.item, o.observed FROM @queueops_out AS o
-- Lease queues whose mapping says more about readiness (issue 31): the *_follow blocks (see
-- sql/postgresql/actions/requeue.sql). {release_set} writes every column that decides readiness
-- (the lease NULL, or SYSUTCDATETIME() for a lock-until lease; owner_column NULL; ready_flag 1);
-- the updatable CTE selects those columns ({release_cols}{bump_col}). Failed ({failed}) and
-- exhausted ({live} false) items are never released. Same hints as the lease blocks: READPAST
-- skips rows a dequeuer holds, UPDLOCK makes the read and the write one step.
-- @block count_lease_follow
SELECT COUNT(*) AS n FROM (
    SELECT TOP (:limit_n) 1 AS x FROM {table} WITH (NOLOCK)
    WHERE {lease} < :cutoff AND NOT {failed} AND {live}{open_and}) AS s
-- @block sample_lease_follow
SELECT TOP (:sample_n) {key} AS item, {lease} AS observed,
       DATEDIFF(SECOND, {lease}, SYSUTCDATETIME()) AS lease_age_s
FROM {table} WITH (NOLOCK) WHERE {lease} < :cutoff AND NOT {failed} AND {live}{open_and}
ORDER BY {lease}, {key}
-- @block batch_lease_follow
DECLARE @queueops_out TABLE (item nvarchar(450) NOT NULL, observed datetime2 NULL);
WITH picked AS (
    SELECT TOP (:batch_n) {key}, {release_cols}{bump_col}
    FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
    WHERE {lease} < :cutoff AND NOT {failed} AND {live}{open_and}
    ORDER BY {lease}, {key})
UPDATE picked SET {release_set}{bump_set}
OUTPUT CONVERT(nvarchar(450), inserted.{key}), CONVERT(datetime2, deleted.{lease}) INTO @queueops_out;
SELECT o.item, o.observed FROM @queueops_out AS o
-- lease_ready = "past": :cutoff is the server's UTC clock PLUS lease_timeout_s; a lock set further
-- ahead is released to SYSUTCDATETIME(), which the library's lock < SYSUTCDATETIME() then takes.
-- @block count_lease_follow_past
SELECT COUNT(*) AS n FROM (
    SELECT TOP (:limit_n) 1 AS x FROM {table} WITH (NOLOCK)
    WHERE {lease} > :cutoff AND NOT {failed} AND {live}{open_and}) AS s
-- @block sample_lease_follow_past
SELECT TOP (:sample_n) {key} AS item, {lease} AS observed,
       DATEDIFF(SECOND, SYSUTCDATETIME(), {lease}) AS lock_ahead_s
FROM {table} WITH (NOLOCK) WHERE {lease} > :cutoff AND NOT {failed} AND {live}{open_and}
ORDER BY {lease} DESC, {key}
-- @block batch_lease_follow_past
DECLARE @queueops_out TABLE (item nvarchar(450) NOT NULL, observed datetime2 NULL);
WITH picked AS (
    SELECT TOP (:batch_n) {key}, {release_cols}{bump_col}
    FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
    WHERE {lease} > :cutoff AND NOT {failed} AND {live}{open_and}
    ORDER BY {lease} DESC, {key})
UPDATE picked SET {release_set}{bump_set}
OUTPUT CONVERT(nvarchar(450), inserted.{key}), CONVERT(datetime2, deleted.{lease}) INTO @queueops_out;
SELECT o.item, o.observed FROM @queueops_out AS o
-- Status queues whose mapping says more about readiness (issue 31): an item at max_attempts is
-- never set back to ready ({live}), owner_column is cleared ({owner_set}; the CTE selects it,
-- {owner_col}), {bump_set} adds the attempt.
-- @block count_status_follow
SELECT COUNT(*) AS n FROM (
    SELECT TOP (:limit_n) 1 AS x FROM {table} WITH (NOLOCK)
    WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff AND {live}{open_and}) AS s
-- @block sample_status_follow
SELECT TOP (:sample_n) {key} AS item, {status} AS status, {status_changed_at} AS observed,
       DATEDIFF(SECOND, {status_changed_at}, SYSUTCDATETIME()) AS lease_age_s
FROM {table} WITH (NOLOCK)
WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff AND {live}{open_and}
ORDER BY {status_changed_at}, {key}
-- @block batch_status_follow
DECLARE @queueops_out TABLE (item nvarchar(450) NOT NULL, observed datetime2 NULL);
WITH picked AS (
    SELECT TOP (:batch_n) {key}, {status}, {status_changed_at}{owner_col}{bump_col}
    FROM {table} WITH (ROWLOCK, READPAST, UPDLOCK, READCOMMITTEDLOCK)
    WHERE {status} IN (:processing_values) AND {status_changed_at} < :cutoff AND {live}{open_and}
    ORDER BY {status_changed_at}, {key})
UPDATE picked SET {status} = :ready_value, {status_changed_at} = SYSUTCDATETIME(){owner_set}{bump_set}
OUTPUT CONVERT(nvarchar(450), inserted.{key}), CONVERT(datetime2, deleted.{status_changed_at}) INTO @queueops_out;
SELECT o.item, o.observed FROM @queueops_out AS o
