"""Conformance of the Que preset (issue 29) on Que's own schema and statements.

Que cannot be installed here (a Ruby gem): its schema is its migrations 1..7 run verbatim
(tests/conformance/upstream/que_migrations_v2.4.1.sql, ``public.`` replaced by the module's own
schema), and the jobs are moved by Que's own statements, transcribed below from que-rb/que v2.4.1
(commit 17fb2c3b75b37599bf17043dbb692555f582f249):

* lib/que/poller.rb ``SQL[:poll_jobs]`` and ``Poller.setup`` (its pg_temp functions): the fetch,
  which takes each job with ``pg_try_advisory_lock(id)`` in a worker's session;
* lib/que/locker.rb ``SQL[:register_locker]`` / ``SQL[:clean_lockers]`` (que_lockers);
* lib/que/job_methods.rb ``SQL[:finish_job]``, ``SQL[:expire_job]``, ``SQL[:set_error]`` (retry);
* lib/que/utils/introspection.rb ``SQL[:job_stats]``: running (count_working) is an advisory lock
  on the job's id in pg_locks.

Ground truth, from that source: a job is waiting when Que's poll would take it (queue, job schema
version 2, unfinished, unexpired) and no session holds its advisory lock; depth those of them whose
run_at has passed; oldest_age_s from run_at (when the job became runnable: a retry sets it forward).
Que has no lease and no rescuer: a dead worker's locks end with its session and the poll takes its
jobs again at once (asserted below), so stuck_leases does not apply and requeue is refused.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import sql

from queueops import actions, engine, presets
from tests.conformance import common
from tests.conftest import Lab

UPSTREAM = ("que-rb/que v2.4.1 (17fb2c3b): lib/que/migrations/1..7/up.sql, lib/que/poller.rb, "
            "lib/que/locker.rb, lib/que/job_methods.rb, lib/que/utils/introspection.rb")
MIGRATIONS = Path(__file__).resolve().parent / "upstream" / "que_migrations_v2.4.1.sql"

# lib/que/poller.rb, Poller.setup: the functions each polling connection creates for itself.
POLLER_SETUP = """
CREATE TYPE pg_temp.que_query_result AS (locked boolean, remaining_priorities jsonb);
CREATE FUNCTION pg_temp.lock_and_update_priorities(priorities jsonb, job que_jobs)
RETURNS pg_temp.que_query_result
AS $$
  WITH
    lock_taken AS (
      SELECT pg_try_advisory_lock((job).id) AS taken
    ),
    relevant AS (
      SELECT priority, count
      FROM (
        SELECT
          key::smallint AS priority,
          value::text::integer AS count
        FROM jsonb_each(priorities)
        ) t1
      WHERE priority >= (job).priority
      ORDER BY priority ASC
      LIMIT 1
    )
  SELECT
    (SELECT taken FROM lock_taken), -- R
    CASE (SELECT taken FROM lock_taken)
    WHEN false THEN
      priorities
    WHEN true THEN
      CASE count
      WHEN 1 THEN
        priorities - priority::text
      ELSE
        jsonb_set(
          priorities,
          ARRAY[priority::text],
          to_jsonb(count - 1)
        )
      END
    END
  FROM relevant
$$
STABLE
LANGUAGE SQL;
CREATE FUNCTION pg_temp.que_highest_remaining_priority(priorities jsonb) RETURNS smallint AS $$
  SELECT max(key::smallint) FROM jsonb_each(priorities)
$$
STABLE
LANGUAGE SQL;
"""

# lib/que/poller.rb, SQL[:poll_jobs] ($1 queue, $2 ids already locked, $3 {priority: workers};
# public.que_jobs -> {s}; #{Que.job_schema_version} -> 2).
POLL = """
WITH RECURSIVE jobs AS (
  SELECT
    (j).*,
    l.locked,
    l.remaining_priorities
  FROM (
    SELECT j
    FROM {s}.que_jobs AS j
    WHERE queue = %(queue)s::text
      AND job_schema_version = 2
      AND NOT id = ANY(%(ids)s::bigint[])
      AND priority <= pg_temp.que_highest_remaining_priority(%(priorities)s::jsonb)
      AND run_at <= now()
      AND finished_at IS NULL AND expired_at IS NULL
    ORDER BY priority, run_at, id
    LIMIT 1
  ) AS t1
  JOIN LATERAL (SELECT * FROM pg_temp.lock_and_update_priorities(%(priorities)s::jsonb, j)) AS l ON true
  UNION ALL (
    SELECT
      (j).*,
      l.locked,
      l.remaining_priorities
    FROM (
      SELECT
        remaining_priorities,
        (
          SELECT j
          FROM {s}.que_jobs AS j
          WHERE queue = %(queue)s::text
            AND job_schema_version = 2
            AND NOT id = ANY(%(ids)s::bigint[])
            AND priority <= pg_temp.que_highest_remaining_priority(jobs.remaining_priorities)
            AND run_at <= now()
            AND finished_at IS NULL AND expired_at IS NULL
            AND (priority, run_at, id) >
              (jobs.priority, jobs.run_at, jobs.id)
          ORDER BY priority, run_at, id
          LIMIT 1
        ) AS j

      FROM jobs
      WHERE jobs.id IS NOT NULL AND jobs.remaining_priorities != '{{}}'::jsonb
      LIMIT 1
    ) AS t1
    JOIN LATERAL (SELECT * FROM pg_temp.lock_and_update_priorities(remaining_priorities, j)) AS l ON true
  )
)
SELECT id
FROM jobs
WHERE locked
"""

# lib/que/locker.rb
REGISTER_LOCKER = """
INSERT INTO {s}.que_lockers (pid, worker_count, worker_priorities, ruby_pid, ruby_hostname, listening, queues, job_schema_version)
VALUES (pg_backend_pid(), %s::integer, %s::integer[], %s::integer, %s::text, %s::boolean, %s::text[], %s::integer)
"""
CLEAN_LOCKERS = """
DELETE FROM {s}.que_lockers
WHERE pid = pg_backend_pid()
OR NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = {s}.que_lockers.pid)
"""
# lib/que/job_methods.rb
FINISH_JOB = "UPDATE {s}.que_jobs SET finished_at = now() WHERE id = %s::bigint"
EXPIRE_JOB = "UPDATE {s}.que_jobs SET error_count = error_count + 1, expired_at = now() WHERE id = %s::bigint"
SET_ERROR = """
UPDATE {s}.que_jobs
SET error_count          = error_count + 1,
    run_at               = now() + %s::float * '1 second'::interval,
    last_error_message   = left(%s::text, 500),
    last_error_backtrace = left(%s::text, 10000)
WHERE id = %s::bigint
"""
# lib/que/job.rb: maximum_retry_count 15; Job#handle_error expires when error_count + 1 > 15.
MAXIMUM_RETRY_COUNT = 15

# lib/que/utils/introspection.rb SQL[:job_stats]: a job is working while pg_locks holds an advisory
# lock on its id (restricted to this database: the lab's server runs other tests' locks too).
LOCKED = ("SELECT (classid::bigint << 32) + objid::bigint FROM pg_locks WHERE locktype = 'advisory' "
          "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
# Que's poll predicate, unlocked: the jobs it would take now or, run_at ahead, later.
TRUTH = """
SELECT count(*) FILTER (WHERE run_at <= now()) AS depth,
       count(*) FILTER (WHERE run_at > now()) AS count_not_due,
       count(*) AS rows_total,
       extract(epoch FROM now() - min(run_at) FILTER (WHERE run_at <= now()))::float8 AS oldest_age_s
FROM {s}.que_jobs
WHERE queue = 'default' AND job_schema_version = 2 AND finished_at IS NULL AND expired_at IS NULL
  AND id NOT IN ({locked})"""
WORKING = "SELECT count(*) FROM {s}.que_jobs WHERE finished_at IS NULL AND expired_at IS NULL AND id IN ({locked})"

# Set-based production shape (Que keeps finished and expired rows), rows in the order they were
# enqueued: the newest 5,000 are the backlog, due from 10 min to about 4 h ago, 3 s apart (every
# 400th on its last attempt, error_count 15; every 120th retried twice and due again); of the older
# ones 1 in 600 is scheduled an hour ahead, 1 in 700 expired, the rest finished.
BUILD = """
INSERT INTO {s}.que_jobs (job_class, queue, job_schema_version, run_at, finished_at, expired_at, error_count,
                          last_error_message)
SELECT 'ConformanceJob', 'default', 2,
       CASE WHEN w THEN now() - interval '10 min' - ({n} - g) * interval '3 s'
            WHEN g % 600 = 1 THEN now() + interval '1 hour'
            ELSE now() - interval '5 hours' END,
       CASE WHEN w OR g % 600 = 1 OR g % 700 = 3 THEN NULL ELSE now() - interval '4 hours' END,
       CASE WHEN NOT w AND g % 600 <> 1 AND g % 700 = 3 THEN now() - interval '4 hours' END,
       CASE WHEN w AND g % 400 = 0 THEN 15 WHEN w AND g % 120 = 0 THEN 2
            WHEN NOT w AND g % 600 <> 1 AND g % 700 = 3 THEN 16 ELSE 0 END,
       CASE WHEN (w AND (g % 400 = 0 OR g % 120 = 0)) OR (NOT w AND g % 700 = 3) THEN 'RuntimeError: boom' END
FROM (SELECT g, g > {n} - 5000 AS w FROM generate_series(1, {n}) AS g) AS x"""


class Worker:
    """A Que locker's connection: Poller.setup, registered in que_lockers, polling with Que's
    statement; the advisory locks it takes last as long as its session."""

    def __init__(self, lab: Lab, schema: str, workers: int) -> None:
        self.s = f'"{schema}"'
        self.conn = lab.connect()
        self.conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
        self.conn.execute(POLLER_SETUP)
        self.conn.execute(CLEAN_LOCKERS.format(s=self.s))
        self.conn.execute(REGISTER_LOCKER.format(s=self.s),
                          (workers, [None] * workers, 4242, "conformance", False, ["default"], 2))
        self.pid = int(self.conn.info.backend_pid)
        self.locked: list[int] = []

    def poll(self, n: int) -> list[int]:
        """Que's poll for ``n`` free workers of any priority: the ids it locked."""
        rows = self.conn.execute(POLL.format(s=self.s), {"queue": "default", "ids": self.locked,
                                                          "priorities": json.dumps({"32767": n})}).fetchall()
        ids = [int(r[0]) for r in rows]
        self.locked += ids
        return ids

    def done(self, job_id: int, statement: str, *args: object) -> None:
        """A worker's end of a job: Que's statement, then the locker unlocks it."""
        self.conn.execute(statement.format(s=self.s), (*args, job_id))
        self.conn.execute("SELECT pg_advisory_unlock(%s)", (job_id,))
        self.locked.remove(job_id)

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(scope="module")
def que(lab: Lab) -> Iterator[tuple[str, Worker]]:
    """The production shape, built once: Que's schema, 200,000 jobs, a live worker holding 200,
    a dead worker's 20 (its session ended, its que_lockers row left), jobs finished, retried and
    expired by Que's statements."""
    name = f"conf_que_{uuid.uuid4().hex[:8]}"
    s = f'"{name}"'
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(name)))
        conn.execute(MIGRATIONS.read_text().replace("public.", f"{s}."))
        conn.execute("RESET search_path")
        # The notify triggers (que_job_notify, que_state_notify) would run once per row of the bulk
        # load; the shape is data, not Que's enqueue path, so they are off for it only.
        conn.execute(f"ALTER TABLE {s}.que_jobs DISABLE TRIGGER USER")
        conn.execute(BUILD.format(s=s, n=common.ROWS))
        conn.execute(f"ALTER TABLE {s}.que_jobs ENABLE TRIGGER USER")
    live = Worker(lab, name, 300)
    taken = live.poll(300)
    assert len(taken) == 300
    for job_id in taken[:40]:
        live.done(job_id, FINISH_JOB)
    for job_id in taken[40:70]:  # retried in an hour: waiting, not due
        live.done(job_id, SET_ERROR, 3600.0, "RuntimeError: retry", "backtrace")
    for job_id in taken[70:100]:
        live.done(job_id, EXPIRE_JOB)
    dead = Worker(lab, name, 20)
    assert len(dead.poll(20)) == 20
    with lab.connect() as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (dead.pid,))
        common.wait_gone(conn, dead.pid)
    dead.close()
    with lab.connect() as conn:
        conn.execute(f"VACUUM {s}.que_jobs")  # as autovacuum leaves a 200,000-row table
        common.analyze(conn, f"{s}.que_jobs")
    try:
        yield name, live
    finally:
        live.close()
        with lab.connect() as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _truth(lab: Lab, schema: str) -> dict[str, float | None]:
    with lab.connect() as conn:
        return common.truth(conn, TRUTH.format(s=f'"{schema}"', locked=LOCKED))


def _cfg(lab: Lab, schema: str, zone: str) -> common.config.Config:
    return common.make_config(lab.url, Path(lab.server.password_file), zone,
                              [{"name": "que", "preset": "que", "schema": schema}])


def test_figures_equal_ques_own_in_every_zone(lab: Lab, que: tuple[str, Worker]) -> None:
    """depth (an estimate above the cap, within 10 %), count_not_due, rows_total and oldest_age_s
    equal Que's own definitions in UTC, Asia/Tokyo and America/New_York; the 200 jobs the live
    worker holds are in none of them (they were depth below the cap, and the oldest_age_s, before)."""
    schema, live = que
    with lab.connect() as conn:
        working = int(conn.execute(WORKING.format(s=f'"{schema}"', locked=LOCKED)).fetchone()[0])
        oldest_locked = conn.execute(sql.SQL("SELECT min(run_at) FROM {}.que_jobs WHERE id = ANY(%s)")
                                     .format(sql.Identifier(schema)), (live.locked,)).fetchone()[0]
    assert working == 200 == len(live.locked)
    _, want = common.in_every_zone("que", UPSTREAM, lab.url, lab.password, "que",
                                   lambda zone: _cfg(lab, schema, zone), lambda: _truth(lab, schema))
    # The fix's witness: the oldest due job is one the live worker holds (Que takes the oldest
    # first), so an age that read it would be older than the truth by far more than the slack.
    with lab.connect() as conn:
        age_locked = float(conn.execute("SELECT extract(epoch FROM now() - %s)", (oldest_locked,)).fetchone()[0])
    assert age_locked - want["oldest_age_s"] > 10 * common.AGE_SLACK_S  # type: ignore[operator]


def test_below_the_cap_a_held_job_is_not_waiting_anywhere(lab: Lab) -> None:
    """Que's schema with 600 due jobs, the 180 oldest polled by a live worker: depth 420 exact,
    oldest_age_s that of the oldest job nobody holds, and the items drill-down lists no held job
    (it listed them first: items.sql had no advisory-lock condition)."""
    from queueops import items

    name = f"conf_que_small_{uuid.uuid4().hex[:6]}"
    s = f'"{name}"'
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(name)))
        conn.execute(MIGRATIONS.read_text().replace("public.", f"{s}."))
        conn.execute("RESET search_path")
        conn.execute(f"INSERT INTO {s}.que_jobs (job_class, job_schema_version, run_at) "  # noqa: S608
                     "SELECT 'A', 2, now() - interval '1 hour' + g * interval '1 s' FROM generate_series(1, 600) AS g")
    worker = Worker(lab, name, 180)
    try:
        held = set(worker.poll(180))
        assert len(held) == 180
        want = _truth(lab, name)
        assert want["depth"] == 420
        cfg = _cfg(lab, name, "UTC")
        got = common.collect(cfg, "que")
        assert (got["depth"].value, got["depth"].note) == (420, "exact"), got
        assert abs(got["oldest_age_s"].value - want["oldest_age_s"]) <= common.AGE_SLACK_S, (got, want)  # type: ignore[operator]
        queue = cfg.queue("que")
        with engine.connection(cfg.target(queue.target), "collect", cfg.base_dir) as conn:
            rows = items.read(conn, queue, "waiting")
        assert rows and not held & {r["item"] for r in rows}, rows[:3]
    finally:
        worker.close()
        with lab.connect() as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_a_dead_workers_jobs_are_taken_again_by_ques_poll_and_requeue_is_refused(lab: Lab,
                                                                                   que: tuple[str, Worker]) -> None:
    """Que's own rescue: the dead worker's 20 jobs hold no lock, so they are waiting (in depth) and
    a new worker's poll takes them, each once; the live worker's 200 are never taken. queueops's
    requeue is refused with the preset's reason, and the preset says the rescue is immediate."""
    schema, live = que
    s = f'"{schema}"'
    with lab.connect() as conn:
        stale = conn.execute(f"SELECT count(*) FROM {s}.que_lockers "  # noqa: S608
                             "WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = que_lockers.pid)").fetchone()[0]
    assert stale == 1  # the dead worker's row, until a locker's clean_lockers
    for zone in common.ZONES:
        with pytest.raises(actions.NotOffered, match="advisory lock ends with its session"):
            common.requeue_preview_keys(_cfg(lab, schema, zone), "que")
    rescue = presets.get("que").rescue
    assert rescue.by_itself and rescue.stale_after_s == 0 and "session" in rescue.how
    fresh = Worker(lab, schema, 6000)
    try:
        taken = fresh.poll(6000)
        assert len(taken) == len(set(taken))
        assert not set(taken) & set(live.locked)
        assert int(_truth(lab, schema)["depth"] or 0) == 0  # every due job taken once
    finally:
        fresh.close()  # its locks end with its session: the jobs wait again


def test_reads_are_bounded_and_the_live_check_agrees(lab: Lab, que: tuple[str, Worker]) -> None:
    """Item 5: oldest_age_s reads at most the bound in shared buffers at 200,000 rows (the poll index
    que_poll_idx, partial on the open jobs), and config check --live reports no scan of it.

    depth is measured and recorded (artifacts/conformance/que_reads.json), not bounded here: Que
    has no index that leads with run_at, so its three counts (due, all open, not due) read the open
    jobs through que_poll_idx, ~62 buffers each while VACUUM has marked their pages all-visible and
    up to ~460 with heap fetches (another session's snapshot holds VACUUM back), and the held jobs
    are counted by key, 4 buffers each (800 with 200 held): 1,260 to 2,067 shared buffers in runs
    on this shape, around the 2,000 bound (the held keys as one = ANY (ARRAY(...)) scan read 608
    for them, 1,016 to 1,871 in all: not enough to assert the bound under a loaded lab). It grows with the open and the held jobs,
    not with the finished ones kept. Open (issue 29, item 5)."""
    from queueops import livecheck

    schema, _ = que
    cfg = _cfg(lab, schema, "UTC")
    with lab.connect() as conn:
        reads = {r.collector: r for r in common.measured_reads(cfg, "que", conn)}
    record = common.Record("que_reads", UPSTREAM)
    for r in reads.values():
        record.rows.append({"collector": r.collector, "buffers": r.buffers, "relpages": r.relpages,
                            "read_by": r.read_by, "bound": common.BUFFER_BOUND})
    record.write()
    assert set(reads) == {"depth", "oldest_age_s"}, reads  # Que has no lease: no stuck_leases
    assert reads["oldest_age_s"].buffers <= common.BUFFER_BOUND, reads
    findings = [f for f in livecheck.report_live(cfg).findings if f.queue == "que" and f.field == "oldest_age_s"]
    assert not findings, findings

def test_discover_recognises_the_preset_on_the_librarys_ddl(lab: Lab, que: tuple[str, Worker]) -> None:
    """Item 6: ``discover`` proposes the que preset for que_jobs as the library's migrations 1..7 creates it
    (timestamptz, smallint priority, jsonb), and proposes none of its side tables as a queue of its own."""
    schema = que[0]
    found = common.proposed(_cfg(lab, schema, "UTC"), schema)
    assert found == [("que_jobs", "que")], found
