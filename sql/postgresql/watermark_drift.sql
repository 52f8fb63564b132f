-- watermark_drift: lowest ready key - watermark (queues that declare a watermark table).
-- >= 0: healthy while small; large: dequeues scan through ghosts again. < 0: the rows below the
-- watermark are stranded and will never be dequeued (critical). stranded_count counts them
-- (bounded by :cap, read through the key index from the start). An empty queue has drift 0.
-- Each value is one index seek: the lowest ready key through the index the dequeue uses, the
-- watermark from its one-row table. OFFSET 0 keeps each seek a single subquery.
-- @block delete
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT w.{wm_column} FROM {wm_table} AS w LIMIT 1) AS wm,
             (SELECT {key} FROM {table} ORDER BY {key} LIMIT 1) AS low OFFSET 0) AS s
CROSS JOIN LATERAL (SELECT count(*) AS n
                    FROM (SELECT 1 FROM {table} WHERE {key} < s.wm ORDER BY {key} LIMIT :cap) AS l) AS st
CROSS JOIN LATERAL (VALUES
    ('watermark_drift', CASE WHEN s.low IS NULL THEN 0 ELSE s.low - s.wm END::float8,
     CASE WHEN s.wm IS NULL THEN 'no watermark row' WHEN s.low IS NULL THEN 'queue empty'
          WHEN s.low < s.wm THEN 'stranded: ready items below the watermark' ELSE 'exact' END),
    ('stranded_count', st.n::float8, CASE WHEN st.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('watermark', s.wm::float8, '')
) AS v (metric, value, note)
-- @block status
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT w.{wm_column} FROM {wm_table} AS w LIMIT 1) AS wm,
             (SELECT {key} FROM {table} WHERE {status} IN (:ready_values) ORDER BY {status}, {key} LIMIT 1) AS low OFFSET 0) AS s
CROSS JOIN LATERAL (SELECT count(*) AS n
                    FROM (SELECT 1 FROM {table} WHERE {status} IN (:ready_values) AND {key} < s.wm LIMIT :cap) AS l) AS st
CROSS JOIN LATERAL (VALUES
    ('watermark_drift', CASE WHEN s.low IS NULL THEN 0 ELSE s.low - s.wm END::float8,
     CASE WHEN s.wm IS NULL THEN 'no watermark row' WHEN s.low IS NULL THEN 'queue empty'
          WHEN s.low < s.wm THEN 'stranded: ready items below the watermark' ELSE 'exact' END),
    ('stranded_count', st.n::float8, CASE WHEN st.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('watermark', s.wm::float8, '')
) AS v (metric, value, note)
-- @block lease
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT w.{wm_column} FROM {wm_table} AS w LIMIT 1) AS wm,
             (SELECT {key} FROM {table} WHERE {lease} IS NULL ORDER BY {key} LIMIT 1) AS low OFFSET 0) AS s
CROSS JOIN LATERAL (SELECT count(*) AS n
                    FROM (SELECT 1 FROM {table} WHERE {lease} IS NULL AND {key} < s.wm ORDER BY {key} LIMIT :cap) AS l) AS st
CROSS JOIN LATERAL (VALUES
    ('watermark_drift', CASE WHEN s.low IS NULL THEN 0 ELSE s.low - s.wm END::float8,
     CASE WHEN s.wm IS NULL THEN 'no watermark row' WHEN s.low IS NULL THEN 'queue empty'
          WHEN s.low < s.wm THEN 'stranded: ready items below the watermark' ELSE 'exact' END),
    ('stranded_count', st.n::float8, CASE WHEN st.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('watermark', s.wm::float8, '')
) AS v (metric, value, note)
-- @block due
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT w.{wm_column} FROM {wm_table} AS w LIMIT 1) AS wm,
             (SELECT {key} FROM {table} ORDER BY {key} LIMIT 1) AS low OFFSET 0) AS s
CROSS JOIN LATERAL (SELECT count(*) AS n
                    FROM (SELECT 1 FROM {table} WHERE {key} < s.wm ORDER BY {key} LIMIT :cap) AS l) AS st
CROSS JOIN LATERAL (VALUES
    ('watermark_drift', CASE WHEN s.low IS NULL THEN 0 ELSE s.low - s.wm END::float8,
     CASE WHEN s.wm IS NULL THEN 'no watermark row' WHEN s.low IS NULL THEN 'queue empty'
          WHEN s.low < s.wm THEN 'stranded: items below the watermark' ELSE 'exact' END),
    ('stranded_count', st.n::float8, CASE WHEN st.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('watermark', s.wm::float8, '')
) AS v (metric, value, note)
