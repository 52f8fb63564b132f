-- Collector session settings: fail fast instead of waiting behind a queue's locks, and never
-- write. Every collector statement runs in autocommit (its own short snapshot), so a collector
-- never holds back cleanup of dead tuples the way a long transaction would.
-- plan_cache_mode: custom plans (each statement planned with its values), except on the collector
-- service's long-lived connection, whose statements are kept prepared and run with the generic
-- plan made once (collectors/runner.py, keep_plans: planning was about half a cycle's cost).
-- jit off: a collector statement reads catalogues and a capped part of an index, milliseconds of
-- work, but the planner's default row estimates for catalogue functions (set-returning functions,
-- unnest) put depth's estimated cost above jit_above_cost: with the server's default jit = on it
-- was compiled with LLVM every cycle, 4.4 s of a 4.4 s statement on the 100,000-row lab. Depth's
-- one read of pg_stats per source brought its cost down to 3,299, but a cost is the planner's
-- guess and grows with the queues of a target: JIT stays off.
SELECT set_config('statement_timeout', :statement_timeout, false) AS statement_timeout,
       set_config('lock_timeout', :lock_timeout, false) AS lock_timeout,
       set_config('default_transaction_read_only', 'on', false) AS read_only,
       set_config('plan_cache_mode', :plan_cache_mode, false) AS plan_cache_mode,
       set_config('jit', 'off', false) AS jit
