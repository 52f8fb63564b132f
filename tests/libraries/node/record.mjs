// The job body the real-library tests give every library's worker: record the job's start in
// public.qo_runs, hold it until public.qo_gate opens for this library (a test kills the worker
// while it holds jobs, or lets them end), then record its end.
import pg from 'pg'

export async function recordAndWait (connectionString, library, jobId) {
  const client = new pg.Client({ connectionString })
  await client.connect()
  try {
    await client.query("INSERT INTO public.qo_runs (library, job_id, pid, phase) VALUES ($3, $1, $2, 'start')",
      [jobId, process.pid, library])
    for (;;) {
      const { rows } = await client.query('SELECT open FROM public.qo_gate WHERE library = $1', [library])
      if (rows.length && rows[0].open) break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    await client.query("INSERT INTO public.qo_runs (library, job_id, pid, phase) VALUES ($3, $1, $2, 'end')",
      [jobId, process.pid, library])
  } finally {
    await client.end()
  }
}
