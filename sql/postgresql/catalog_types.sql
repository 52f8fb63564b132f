-- The type of every mapped column of a target's queues, in one statement: read by
-- 'config check --live' and when a target is first collected, so that status values are bound in
-- the column's own type (an enum stays an enum: its index is used) and time columns, watermark
-- keys and status values are checked against what the table really holds.
-- Tables and columns are bound as values (aligned lists); to_regclass yields NULL for a missing
-- table instead of raising, so a missing table or column is simply absent from the result.
--   type_schema, type_name  the column's type (a domain's base type), for a cast fragment
--   type_text               format_type(): how psql shows it (varchar(20), timestamp with time zone)
--   category                integer | timestamp | text | enum | uuid | boolean | other
--   labels                  an enum's labels in their sort order (NULL for other types)
--   relkind                 r table, p partitioned table, v view, m materialized view, f foreign table
--   leads_index             a valid btree index, not partial, leads with the column (issue 29: a
--                           status count reads such an index in status order, one read for all its
--                           values; without one, each value alone along the key)
--   then_columns            the second key column of each index that leads_index counts
--   index_keys              each such index's later key columns (all plain and ascending):
--                           [[{name, notnull}, ...], ...]
--   partials                the partial btree indexes on status values:
--                           [{name, values, order, flags, copies, predicate}]
--   null_partials           the partial indexes on open rows ("col IS NULL" conjuncts, one of them
--                           this column): [{columns, copies}]
--   notnull                 the column is NOT NULL (oldest_age_s reads no NULL range of a runnable
--                           column that cannot hold one, and orders the one that can)
SELECT t.qualified AS qualified_table, t.col AS column_name, n.nspname AS type_schema, ty.typname AS type_name,
       format_type(a.atttypid, a.atttypmod) AS type_text,
       CASE WHEN ty.typname IN ('int2', 'int4', 'int8') THEN 'integer'
            WHEN ty.typname IN ('timestamptz', 'timestamp') THEN 'timestamp'
            WHEN ty.typtype = 'e' THEN 'enum'
            WHEN ty.typcategory = 'S' THEN 'text'
            WHEN ty.typname = 'uuid' THEN 'uuid'
            WHEN ty.typname = 'bool' THEN 'boolean'
            ELSE 'other' END AS category,
       CASE WHEN ty.typtype = 'e' THEN
            (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum AS e
             WHERE e.enumtypid = ty.oid) END AS labels,
       c.relkind::text AS relkind, a.attnotnull AS notnull,
       EXISTS (SELECT 1 FROM pg_index AS i
               JOIN pg_class AS ic ON ic.oid = i.indexrelid
               JOIN pg_am AS am ON am.oid = ic.relam AND am.amname = 'btree'
               WHERE i.indrelid = c.oid AND i.indkey[0] = a.attnum AND i.indisvalid AND i.indpred IS NULL) AS leads_index,
       -- The second key column of each such index: a (status, key) index reads each status value's
       -- first item in key order, one row (oldest_age_s: the lowest key is the oldest item).
       ARRAY(SELECT a2.attname::text FROM pg_index AS i
             JOIN pg_class AS ic ON ic.oid = i.indexrelid
             JOIN pg_am AS am ON am.oid = ic.relam AND am.amname = 'btree'
             JOIN pg_attribute AS a2 ON a2.attrelid = i.indrelid AND a2.attnum = i.indkey[1]
             WHERE i.indrelid = c.oid AND i.indkey[0] = a.attnum AND i.indisvalid AND i.indpred IS NULL
             ORDER BY 1) AS then_columns,
       -- Each such index's key columns after this one, when all its key columns are plain and
       -- ascending: [[{name, notnull}, ...], ...]. oldest_age_s skips through the columns between
       -- the status and the enqueue time (River's and Oban's (state, queue, priority, scheduled_at,
       -- id)): the first item of each (queue, priority) in time order, one index descent each.
       (SELECT json_agg(k.cols ORDER BY k.name)
        FROM (SELECT ic.relname AS name,
                     json_agg(json_build_object('name', ka.attname, 'notnull', ka.attnotnull) ORDER BY kk.n) AS cols
              FROM pg_index AS i
              JOIN pg_class AS ic ON ic.oid = i.indexrelid
              JOIN pg_am AS am ON am.oid = ic.relam AND am.amname = 'btree'
              CROSS JOIN LATERAL generate_series(1, i.indnkeyatts - 1) AS kk (n)
              JOIN pg_attribute AS ka ON ka.attrelid = i.indrelid AND ka.attnum = i.indkey[kk.n]
              WHERE i.indrelid = c.oid AND i.indkey[0] = a.attnum AND i.indisvalid AND i.indpred IS NULL
                AND NOT EXISTS (SELECT 1 FROM generate_series(0, i.indnkeyatts - 1) AS z (n)
                                WHERE i.indkey[z.n] = 0 OR i.indoption[z.n] & 1 = 1)
              GROUP BY ic.relname) AS k) AS index_keys,
       -- The library's partial indexes on status values (issue 29: procrastinate's WHERE status = 'todo',
       -- pgqueuer's WHERE status = 'queued'): a valid btree index whose predicate is the column alone,
       -- col = ? or col = ANY (ARRAY[?, ...]) (read from pg_get_expr's text: the one place that parses
       -- it; depth, oldest_age_s and stuck_leases read the result through the compiled mapping), with
       -- plain key columns: its name, the values it holds, and its key as an ORDER BY (names quoted
       -- here, directions and NULLS placement as the index has them), so that a count of one of
       -- those values reads that index in its order and stops at the cap.
       -- A partitioned table (pg-boss's job): such an index on every partition (pg-boss creates
       -- its indexes on each queue's partition, none on the parent).
       -- Beside the status condition the predicate may hold "NOT flag" conjuncts on boolean columns
       -- (pg-boss 12's job_i11, WHERE state < 'active' AND NOT blocked: exactly the waiting rows
       -- of a closed_when_true queue, whose reltuples is depth's estimate above the cap): flags
       -- lists those columns. Such an index holds only part of its values' rows, so the counts and
       -- the age never read through it (coltypes keeps it apart). copies: each leaf's copy of it
       -- (regclass text; pg-boss names each after its partition), predicate: one copy's
       -- pg_get_expr text, which depth's prelude finds a partition made since on by equality.
       (SELECT json_agg(json_build_object('name', g.name, 'values', g.vals, 'order', g.ord, 'flags', g.flags,
                                          'copies', g.copies, 'predicate', g.pred) ORDER BY g.name)
        FROM (SELECT min(p.name) AS name, p.vals, p.ord, p.flags, array_agg(p.copy ORDER BY p.copy) AS copies,
                     min(p.pred) AS pred FROM (
              SELECT i.indrelid, ic.relname::text AS name, i.indexrelid::regclass::text AS copy, pr.pred, cj.flags,
                     -- col < ? (<=, >, >=, <>) on an enum: the labels on that side of it in the
                     -- enum's order (pg-boss's job_i5 WHERE state < 'active': created, retry).
                     CASE WHEN f.op IN ('=', '=ANY') THEN f.vals
                          ELSE ARRAY(SELECT e.enumlabel::text FROM pg_enum AS e
                                     JOIN pg_enum AS x ON x.enumtypid = e.enumtypid AND x.enumlabel = f.vals[1]
                                     WHERE e.enumtypid = a.atttypid
                                       AND CASE f.op WHEN '<' THEN e.enumsortorder < x.enumsortorder
                                                     WHEN '<=' THEN e.enumsortorder <= x.enumsortorder
                                                     WHEN '>' THEN e.enumsortorder > x.enumsortorder
                                                     WHEN '>=' THEN e.enumsortorder >= x.enumsortorder
                                                     ELSE e.enumsortorder <> x.enumsortorder END
                                     ORDER BY e.enumsortorder) END AS vals,
                     (SELECT string_agg(quote_ident(ka.attname)
                                        || CASE WHEN i.indoption[k.n] & 1 = 1 THEN ' DESC' ELSE '' END
                                        || CASE WHEN i.indoption[k.n] & 2 = 2 THEN ' NULLS FIRST' ELSE ' NULLS LAST' END,
                                        ', ' ORDER BY k.n)
                      FROM generate_series(0, i.indnkeyatts - 1) AS k (n)
                      JOIN pg_attribute AS ka ON ka.attrelid = i.indrelid AND ka.attnum = i.indkey[k.n]) AS ord
              -- Only this table's (or its partitions', fragments/tree.sql) valid partial indexes,
              -- chosen before pg_get_expr reads a predicate (OFFSET 0 keeps the filter below it): pg_get_expr takes
              -- ACCESS SHARE on the index's table, and evaluated for every partial index of the
              -- database it waited on any table a migration held, for every queue table's columns.
              FROM (SELECT i0.* FROM pg_index AS i0
                    WHERE i0.indrelid IN (SELECT unnest({{tree.leaves(c.oid)}}))
                      AND i0.indisvalid AND i0.indpred IS NOT NULL
                    OFFSET 0) AS i
              JOIN pg_class AS ic ON ic.oid = i.indexrelid
              JOIN pg_am AS am ON am.oid = ic.relam AND am.amname = 'btree'
              CROSS JOIN LATERAL (SELECT pg_get_expr(i.indpred, i.indrelid) AS pred) AS pr
              -- The predicate's conjuncts, split on ' AND ' with every constant (and its cast)
              -- masked first (a quoted ' AND ' is no conjunction), parentheses trimmed: "NOT col" of a boolean
              -- column of the table is a flag; exactly one other conjunct is the status condition.
              CROSS JOIN LATERAL (
                  SELECT coalesce(array_agg(fa.attname::text ORDER BY fa.attname) FILTER (WHERE fa.attname IS NOT NULL),
                                  '{}') AS flags,
                         array_agg(x.p) FILTER (WHERE fa.attname IS NULL) AS rest
                  FROM regexp_split_to_table(
                           regexp_replace(pr.pred, '''(?:[^'']|'''')*''(::[a-zA-Z_][a-zA-Z0-9_ ."]*)?', '?', 'g'),
                           ' AND ') AS y (p)
                  CROSS JOIN LATERAL (SELECT btrim(y.p, '() ') AS p) AS x
                  LEFT JOIN pg_attribute AS fa ON fa.attrelid = i.indrelid AND fa.attnum > 0 AND NOT fa.attisdropped
                       AND fa.atttypid = 'bool'::regtype AND x.p = 'NOT ' || quote_ident(fa.attname)
              ) AS cj
              CROSS JOIN LATERAL (
                  SELECT regexp_replace(regexp_replace(regexp_replace(CASE WHEN cardinality(cj.rest) = 1 THEN cj.rest[1] END,
                             '''(?:[^'']|'''')*''(::[a-zA-Z_][a-zA-Z0-9_ ."]*)?', '?', 'g'),
                             '\m\d+\M', '?', 'g'), '[\s()]|::text\[\]', '', 'g') AS shape,
                         regexp_replace(quote_ident(a.attname), '[\s()]', '', 'g')
                         || CASE WHEN a.atttypid IN ('varchar'::regtype, 'bpchar'::regtype)
                                 THEN '::text' ELSE '' END AS head,
                         ARRAY(SELECT coalesce(replace(m[1], '''''', ''''), m[2])
                               FROM regexp_matches(pr.pred, '''((?:[^'']|'''')*)''|\m(\d+)\M', 'g') AS m) AS vals
              ) AS f0
              CROSS JOIN LATERAL (
                  SELECT f0.*, (regexp_match(substr(f0.shape, length(f0.head) + 1),
                                             '^(=|<|<=|>|>=|<>)\?$|^=ANYARRAY\[\?(?:,\?)*\]$'))[1] AS op1,
                         substr(f0.shape, length(f0.head) + 1) ~ '^=ANYARRAY\[\?(,\?)*\]$' AS any_form
              ) AS f1
              CROSS JOIN LATERAL (SELECT f1.*, CASE WHEN f1.any_form THEN '=ANY' ELSE f1.op1 END AS op) AS f
              WHERE f.op IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM generate_series(0, i.indnkeyatts - 1) AS z (n) WHERE i.indkey[z.n] = 0)
                AND left(f.shape, length(f.head)) = f.head
                AND (f.op IN ('=', '=ANY') OR (ty.typtype = 'e' AND cardinality(f.vals) = 1))) AS p
              GROUP BY p.vals, p.ord, p.flags
              HAVING count(DISTINCT p.indrelid) = cardinality({{tree.leaves(c.oid)}})) AS g) AS partials,
       -- The library's partial indexes on its open rows (issue 29: an open_when_null queue, GoodJob's
       -- index_good_jobs_on_priority_scheduled_at_unfinished_unlocked, Que's que_poll_idx): a valid
       -- index whose predicate's conjuncts are all "col IS NULL", one of them this column, on every
       -- leaf; its columns and each leaf's copy (regclass text), whose reltuples depth's prelude
       -- sums above the cap. Read for a column that can hold NULL only.
       (SELECT json_agg(json_build_object('columns', g.cols, 'copies', g.copies) ORDER BY g.cols)
        FROM (SELECT p.cols, array_agg(p.copy ORDER BY p.copy) AS copies
              FROM (SELECT i.indrelid, i.indexrelid::regclass::text AS copy, cj.cols
                    FROM (SELECT i0.* FROM pg_index AS i0
                          WHERE NOT a.attnotnull AND i0.indrelid IN (SELECT unnest({{tree.leaves(c.oid)}}))
                            AND i0.indisvalid AND i0.indpred IS NOT NULL
                          OFFSET 0) AS i
                    CROSS JOIN LATERAL (
                        SELECT array_agg(na.attname::text ORDER BY na.attname) AS cols, count(*) AS n,
                               count(na.attname) AS named
                        FROM regexp_split_to_table(pg_get_expr(i.indpred, i.indrelid), ' AND ') AS y (p)
                        CROSS JOIN LATERAL (SELECT btrim(y.p, '() ') AS p) AS x
                        LEFT JOIN pg_attribute AS na ON na.attrelid = i.indrelid AND na.attnum > 0
                             AND NOT na.attisdropped AND x.p = quote_ident(na.attname) || ' IS NULL'
                    ) AS cj
                    WHERE cj.n = cj.named AND a.attname::text = ANY (cj.cols)) AS p
              GROUP BY p.cols
              HAVING count(DISTINCT p.indrelid) = cardinality({{tree.leaves(c.oid)}})) AS g) AS null_partials
FROM unnest(ARRAY[:tables]::text[], ARRAY[:columns]::text[]) AS t (qualified, col)
JOIN pg_class AS c ON c.oid = to_regclass(t.qualified)
JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = t.col AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_type AS d ON d.oid = a.atttypid
JOIN pg_type AS ty ON ty.oid = CASE WHEN d.typtype = 'd' THEN d.typbasetype ELSE d.oid END
JOIN pg_namespace AS n ON n.oid = ty.typnamespace
