-- heartbeat: {worker_gone} for stuck_leases' status blocks when a processing item's liveness is on
-- its worker's row (heartbeat_from, issue 29; procrastinate: procrastinate_jobs.worker_id ->
-- procrastinate_workers.last_heartbeat). True when no worker row vouches for the item: none with
-- its key, or one whose heartbeat is at least alive_s old (a validated integer). One key lookup of
-- the worker per item read. {outer_ref} is the queue table's bare name and the item's worker column.
-- @block gone
NOT EXISTS (SELECT 1 FROM {hb_table} AS qo_hb
            WHERE qo_hb.{hb_key} = {outer_ref} AND qo_hb.{hb_column} >= {clock} - make_interval(secs => {alive_s}))
