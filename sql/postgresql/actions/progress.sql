-- The engine's own progress of the action's session (read from a second connection), normalised
-- to (phase, done, total). done/total are blocks where the engine reports blocks, else tuples,
-- else the number of sessions it waits for.
-- @block create_index
SELECT p.phase,
       CASE WHEN p.blocks_total > 0 THEN p.blocks_done WHEN p.tuples_total > 0 THEN p.tuples_done
            ELSE p.lockers_done END AS done,
       CASE WHEN p.blocks_total > 0 THEN p.blocks_total WHEN p.tuples_total > 0 THEN p.tuples_total
            ELSE p.lockers_total END AS total
FROM pg_stat_progress_create_index AS p WHERE p.pid = :session_id
-- @block vacuum
SELECT 'vacuum: ' || v.phase AS phase, v.heap_blks_scanned AS done, v.heap_blks_total AS total
FROM pg_stat_progress_vacuum AS v WHERE v.pid = :session_id
UNION ALL
SELECT 'analyze: ' || a.phase, a.sample_blks_scanned, a.sample_blks_total
FROM pg_stat_progress_analyze AS a WHERE a.pid = :session_id
