// pg-boss, driven for real by tests/libraries/test_pgboss.py (Node.js, pg-boss from package-lock.json).
//   node boss.mjs install        pg-boss's own start(): creates its schema (pgboss) and the queue "qo"
//   node boss.mjs send N         N jobs through boss.send (expireInSeconds 5, retryLimit 3); prints their ids
//   node boss.mjs work           a worker (2 jobs at a time) whose handler records job.id in
//                                public.qo_runs and holds until public.qo_gate opens; pg-boss's own
//                                supervisor (every second) expires active jobs past expire_in to retry
// Connection: QO_LIB_DSN (no password in it) and PGPASSWORD, read by node-postgres.
import PgBoss from 'pg-boss'
import pg from 'pg'

const dsn = process.env.QO_LIB_DSN
const QUEUE = 'qo'

function boss (extra = {}) {
  const b = new PgBoss({ connectionString: dsn, schedule: false, supervise: false, ...extra })
  b.on('error', (err) => console.error('pg-boss error:', err.message))
  return b
}

async function recordAndWait (jobId) {
  const client = new pg.Client({ connectionString: dsn })
  await client.connect()
  try {
    await client.query("INSERT INTO public.qo_runs (library, job_id, pid, phase) VALUES ('pgboss', $1, $2, 'start')",
      [jobId, process.pid])
    for (;;) {
      const { rows } = await client.query("SELECT open FROM public.qo_gate WHERE library = 'pgboss'")
      if (rows.length && rows[0].open) break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    await client.query("INSERT INTO public.qo_runs (library, job_id, pid, phase) VALUES ('pgboss', $1, $2, 'end')",
      [jobId, process.pid])
  } finally {
    await client.end()
  }
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
    ids.push(await b.send(QUEUE, { n: i }, { expireInSeconds: 5, retryLimit: 3, retryDelay: 0 }))
  }
  console.log(JSON.stringify(ids))
  await b.stop({ graceful: false, wait: true })
} else if (cmd === 'work') {
  const b = boss({ supervise: true, maintenanceIntervalSeconds: 1 })
  await b.start()
  await b.work(QUEUE, { batchSize: 2, pollingIntervalSeconds: 0.5 },
    async (jobs) => { await Promise.all(jobs.map((job) => recordAndWait(job.id))) })
  console.log('working')
  const stop = async () => { await b.stop({ graceful: true, wait: true }); process.exit(0) }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
} else {
  console.error('usage: node boss.mjs install | send N | work')
  process.exit(2)
}
