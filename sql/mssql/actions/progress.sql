-- The engine's own progress of the action's session (read from a second connection), normalised
-- to (phase, done, total) in percent. dm_exec_requests.percent_complete is documented for
-- REORGANIZE, not for a plain REBUILD; a resumable REBUILD reports in index_resumable_operations
-- (state 0 running, 1 paused).
-- @block request
SELECT N'running' AS phase, CAST(r.percent_complete AS float) AS done, CAST(100 AS float) AS total
FROM sys.dm_exec_requests AS r WHERE r.session_id = :session_id
-- @block resumable
SELECT CASE o.state WHEN 0 THEN N'resumable rebuild running' ELSE N'resumable rebuild paused' END AS phase,
       CAST(o.percent_complete AS float) AS done, CAST(100 AS float) AS total
FROM sys.index_resumable_operations AS o
WHERE o.object_id = OBJECT_ID(:qualified_table) AND o.index_id = :index_id
