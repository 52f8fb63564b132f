-- ring_occupancy: a preallocated ring buffer's state from its push / pop sequences (one row).
-- occupancy = push - pop; free_slots = capacity - occupancy (0: producers stall, the ring is
-- full); pop_ahead_of_push > 0 means the consumer sequence passed the producer's: a bug that
-- hands out empty or stale slots (critical). slots_in_use counts slots whose reference count is
-- above zero: the slot table has exactly :capacity rows, so reading it is bounded by design.
-- ring_basic serves rings declared without capacity / reference count.
-- @block ring
SELECT :queue AS queue, v.metric, v.value, v.note
FROM {seq_table} AS s
CROSS JOIN LATERAL (SELECT count(*) AS n FROM {table} AS r WHERE r.{refcount} > 0) AS u
CROSS JOIN LATERAL (VALUES
    ('occupancy', greatest(s.{push} - s.{pop}, 0)::float8, 'exact'),
    ('occupancy_pct', (100.0 * greatest(s.{push} - s.{pop}, 0) / {capacity})::float8, 'exact'),
    ('free_slots', ({capacity} - greatest(s.{push} - s.{pop}, 0))::float8,
     CASE WHEN s.{push} - s.{pop} >= {capacity} THEN 'full: producers stall' ELSE 'exact' END),
    ('pop_ahead_of_push', greatest(s.{pop} - s.{push}, 0)::float8,
     CASE WHEN s.{pop} > s.{push} THEN 'consumer sequence passed the producer''s' ELSE 'exact' END),
    ('slots_in_use', u.n::float8, 'exact (reference count > 0)')
) AS v (metric, value, note)
-- @block ring_basic
SELECT :queue AS queue, v.metric, v.value, v.note
FROM {seq_table} AS s
CROSS JOIN LATERAL (VALUES
    ('occupancy', greatest(s.{push} - s.{pop}, 0)::float8, 'exact'),
    ('pop_ahead_of_push', greatest(s.{pop} - s.{push}, 0)::float8,
     CASE WHEN s.{pop} > s.{push} THEN 'consumer sequence passed the producer''s' ELSE 'exact' END)
) AS v (metric, value, note)
