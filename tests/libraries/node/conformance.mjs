// pg-boss's own fetch, complete and fail, for tests/libraries/test_conformance_pgboss*.py (issue 29).
//   node conformance.mjs fetch N      boss.fetch('qo', { batchSize: N }): prints the fetched ids
//   node conformance.mjs complete IDS boss.complete('qo', ids)  (IDS: a JSON array)
//   node conformance.mjs fail IDS     boss.fail('qo', ids): retry while retry_count < retry_limit, else failed
// Connection: QO_LIB_DSN (no password in it) and PGPASSWORD, read by node-postgres. No supervisor,
// no schedule: nothing moves a job but the command given. QO_PGBOSS = "pg-boss" (10.x, the default),
// "pg-boss-11" or "pg-boss-12" (both run by Node.js 22, see boss.mjs).
const mod = await import(process.env.QO_PGBOSS || 'pg-boss')
const PgBoss = mod.PgBoss || mod.default

const QUEUE = 'qo'
const [cmd, arg] = process.argv.slice(2)
const boss = new PgBoss({ connectionString: process.env.QO_LIB_DSN, schedule: false, supervise: false })
boss.on('error', (err) => console.error('pg-boss error:', err.message))
await boss.start()
try {
  if (cmd === 'fetch') {
    const jobs = await boss.fetch(QUEUE, { batchSize: Number(arg) })
    console.log(JSON.stringify(jobs.map((j) => j.id)))
  } else if (cmd === 'complete') {
    await boss.complete(QUEUE, JSON.parse(arg))
    console.log('[]')
  } else if (cmd === 'fail') {
    await boss.fail(QUEUE, JSON.parse(arg))
    console.log('[]')
  } else {
    console.error('usage: node conformance.mjs fetch N | complete IDS | fail IDS')
    process.exitCode = 2
  }
} finally {
  await boss.stop({ graceful: false, wait: true })
}
