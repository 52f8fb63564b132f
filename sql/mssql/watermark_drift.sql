-- watermark_drift: lowest ready key - watermark (queues that declare a watermark table).
-- >= 0: healthy while small; large: dequeues scan through ghosts again. < 0: the rows below the
-- watermark are stranded and will never be dequeued (critical). stranded_count counts them
-- (bounded by TOP (:cap)). An empty queue has drift 0. Each value is one seek: TOP (1) in key
-- order for the lowest ready key, the watermark from its one-row table.
-- @block delete
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT TOP (1) w.{wm_column} FROM {wm_table} AS w) AS wm,
             (SELECT TOP (1) {key} FROM {table} ORDER BY {key}) AS low) AS s
CROSS APPLY (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {key} < s.wm) AS l) AS st
CROSS APPLY (VALUES
    ('watermark_drift', CAST(CASE WHEN s.low IS NULL THEN 0 ELSE s.low - s.wm END AS float),
     CASE WHEN s.wm IS NULL THEN 'no watermark row' WHEN s.low IS NULL THEN 'queue empty'
          WHEN s.low < s.wm THEN 'stranded: ready items below the watermark' ELSE 'exact' END),
    ('stranded_count', CAST(st.n AS float), CASE WHEN st.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('watermark', CAST(s.wm AS float), '')
) AS v (metric, value, note)
-- @block status
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT TOP (1) w.{wm_column} FROM {wm_table} AS w) AS wm,
             (SELECT MIN({key}) FROM {table} WHERE {status} IN (:ready_values)) AS low) AS s
CROSS APPLY (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table}
                                        WHERE {status} IN (:ready_values) AND {key} < s.wm) AS l) AS st
CROSS APPLY (VALUES
    ('watermark_drift', CAST(CASE WHEN s.low IS NULL THEN 0 ELSE s.low - s.wm END AS float),
     CASE WHEN s.wm IS NULL THEN 'no watermark row' WHEN s.low IS NULL THEN 'queue empty'
          WHEN s.low < s.wm THEN 'stranded: ready items below the watermark' ELSE 'exact' END),
    ('stranded_count', CAST(st.n AS float), CASE WHEN st.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('watermark', CAST(s.wm AS float), '')
) AS v (metric, value, note)
-- @block lease
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT TOP (1) w.{wm_column} FROM {wm_table} AS w) AS wm,
             (SELECT TOP (1) {key} FROM {table} WHERE {lease} IS NULL ORDER BY {key}) AS low) AS s
CROSS APPLY (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table}
                                        WHERE {lease} IS NULL AND {key} < s.wm) AS l) AS st
CROSS APPLY (VALUES
    ('watermark_drift', CAST(CASE WHEN s.low IS NULL THEN 0 ELSE s.low - s.wm END AS float),
     CASE WHEN s.wm IS NULL THEN 'no watermark row' WHEN s.low IS NULL THEN 'queue empty'
          WHEN s.low < s.wm THEN 'stranded: ready items below the watermark' ELSE 'exact' END),
    ('stranded_count', CAST(st.n AS float), CASE WHEN st.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('watermark', CAST(s.wm AS float), '')
) AS v (metric, value, note)
-- @block due
SELECT :queue AS queue, v.metric, v.value, v.note
FROM (SELECT (SELECT TOP (1) w.{wm_column} FROM {wm_table} AS w) AS wm,
             (SELECT TOP (1) {key} FROM {table} ORDER BY {key}) AS low) AS s
CROSS APPLY (SELECT COUNT(*) AS n FROM (SELECT TOP (:cap) 1 AS x FROM {table} WHERE {key} < s.wm) AS l) AS st
CROSS APPLY (VALUES
    ('watermark_drift', CAST(CASE WHEN s.low IS NULL THEN 0 ELSE s.low - s.wm END AS float),
     CASE WHEN s.wm IS NULL THEN 'no watermark row' WHEN s.low IS NULL THEN 'queue empty'
          WHEN s.low < s.wm THEN 'stranded: items below the watermark' ELSE 'exact' END),
    ('stranded_count', CAST(st.n AS float), CASE WHEN st.n >= :cap THEN 'at least (cap reached)' ELSE 'exact' END),
    ('watermark', CAST(s.wm AS float), '')
) AS v (metric, value, note)
