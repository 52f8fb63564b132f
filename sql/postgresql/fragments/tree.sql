-- tree: the relations of a table's partition tree, read from pg_inherits alone. A statement
-- includes a block as {{tree.leaves(EXPR)}} or {{tree.relations(EXPR)}}, EXPR an oid
-- (queueops/sqlfiles.py expands it when the file is loaded); each is a scalar oid[] subquery.
-- Never pg_partition_tree: it (find_all_inheritors) takes an AccessShareLock on every partition,
-- so a statement that reads only the catalogue waited behind a VACUUM FULL or a LOCK of one
-- partition until its lock timeout (lock_waits timed out behind the very holder it was looking
-- for). pg_inherits is read through its inhparent index, one seek per level.
-- @block relations
-- The table and every relation under it (partitions at every level, inheritance children): what a
-- lock on any of them stalls. NULL when EXPR is NULL.
(WITH RECURSIVE qo_tree (rel) AS (
     SELECT ({{arg}})::oid
     UNION
     SELECT qo_i.inhrelid FROM qo_tree JOIN pg_inherits AS qo_i ON qo_i.inhparent = qo_tree.rel)
 SELECT array_agg(qo_tree.rel) FROM qo_tree WHERE qo_tree.rel IS NOT NULL)
-- @block leaves
-- The relations that hold the table's rows: a partitioned table's partitions that are not
-- partitioned themselves (pg_partition_tree's leaves), any other relation itself. NULL for a
-- partitioned table without partitions, or an oid that is no relation.
(WITH RECURSIVE qo_tree (rel, kind) AS (
     SELECT qo_c.oid, qo_c.relkind FROM pg_class AS qo_c WHERE qo_c.oid = ({{arg}})::oid
     UNION
     SELECT qo_i.inhrelid, qo_k.relkind FROM qo_tree
     JOIN pg_inherits AS qo_i ON qo_i.inhparent = qo_tree.rel
     JOIN pg_class AS qo_k ON qo_k.oid = qo_i.inhrelid
     WHERE qo_tree.kind = 'p')
 SELECT array_agg(qo_tree.rel) FROM qo_tree WHERE qo_tree.kind <> 'p')
