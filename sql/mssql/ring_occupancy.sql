-- ring_occupancy: a preallocated ring buffer's state from its push / pop sequences (one row).
-- occupancy = push - pop; free_slots = capacity - occupancy (0: producers stall, the ring is
-- full); pop_ahead_of_push > 0 means the consumer sequence passed the producer's (critical).
-- slots_in_use counts slots whose reference count is above zero: the slot table has exactly
-- :capacity rows, so reading it is bounded by design. ring_basic: rings declared without
-- capacity / reference count.
-- @block ring
SELECT :queue AS queue, v.metric, v.value, v.note
FROM {seq_table} AS s
CROSS APPLY (SELECT COUNT(*) AS n FROM {table} AS r WHERE r.{refcount} > 0) AS u
CROSS APPLY (SELECT CASE WHEN s.{push} > s.{pop} THEN s.{push} - s.{pop} ELSE 0 END AS occ,
                    CASE WHEN s.{pop} > s.{push} THEN s.{pop} - s.{push} ELSE 0 END AS ahead) AS o
CROSS APPLY (VALUES
    ('occupancy', CAST(o.occ AS float), 'exact'),
    ('occupancy_pct', CAST(100.0 * o.occ / {capacity} AS float), 'exact'),
    ('free_slots', CAST({capacity} - o.occ AS float),
     CASE WHEN o.occ >= {capacity} THEN 'full: producers stall' ELSE 'exact' END),
    ('pop_ahead_of_push', CAST(o.ahead AS float),
     CASE WHEN o.ahead > 0 THEN 'consumer sequence passed the producer''s' ELSE 'exact' END),
    ('slots_in_use', CAST(u.n AS float), 'exact (reference count > 0)')
) AS v (metric, value, note)
-- @block ring_basic
SELECT :queue AS queue, v.metric, v.value, v.note
FROM {seq_table} AS s
CROSS APPLY (SELECT CASE WHEN s.{push} > s.{pop} THEN s.{push} - s.{pop} ELSE 0 END AS occ,
                    CASE WHEN s.{pop} > s.{push} THEN s.{pop} - s.{push} ELSE 0 END AS ahead) AS o
CROSS APPLY (VALUES
    ('occupancy', CAST(o.occ AS float), 'exact'),
    ('pop_ahead_of_push', CAST(o.ahead AS float),
     CASE WHEN o.ahead > 0 THEN 'consumer sequence passed the producer''s' ELSE 'exact' END)
) AS v (metric, value, note)
