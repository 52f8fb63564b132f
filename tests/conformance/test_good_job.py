"""Conformance of the GoodJob preset (issue 29) on GoodJob's own schema and statements.

GoodJob cannot be installed here (a Ruby gem): its schema is its install migration as Rails 7.1+
runs it on PostgreSQL (tests/conformance/upstream/good_job_v4.19.2.sql: timestamp(6) without time
zone, written in UTC), and jobs are moved by GoodJob's statements as ActiveRecord renders them,
transcribed from bensheldon/good_job v4.19.2 (81db22b7cfde2579b2d735e076fa6eaacc65affa):

* app/models/good_job/job.rb ``perform_with_advisory_lock`` (the default lock_strategy :advisory,
  lib/good_job/configuration.rb): ``unfinished.dequeueing_ordered.only_scheduled.limit(1)
  .with_advisory_lock_claim``, i.e. app/models/concerns/good_job/advisory_lockable.rb
  ``advisory_lock``: a MATERIALIZED CTE of the candidates and ``pg_try_advisory_lock`` of the md5
  key of ``'good_jobs-' || id``, held by the process's session while the job runs;
* ``Job#perform``: the claim (performed_at, executions_count, locked_by_id, locked_at, lock_type),
  then on the way out locked_by_id / locked_at / lock_type cleared and finished_at set, or for a
  retry (``Job.enqueue`` of the same active_job_id) performed_at / finished_at NULL and a new
  scheduled_at; a discard keeps the row finished with its error (error_event 5, discarded);
* app/models/good_job/process.rb: a process row with lock_type advisory holds an advisory lock on
  ``'good_job_processes-' || id``; ``Process.cleanup`` (run by every live process's heartbeat, every
  STALE_INTERVAL 30 s) finds the inactive ones (advisory lock gone, or lock_type NULL and silent for
  EXPIRED_INTERVAL 5 min), clears their jobs' locked_by_id / locked_at and deletes them.

Ground truth, from that source: waiting = what the advisory dequeue takes (unfinished, scheduled_at
past, no advisory lock on the job), rows_total adds the unfinished ones scheduled ahead (the
``scheduled`` / ``retried`` scopes), oldest_age_s from scheduled_at (when the job became runnable).
The preset maps a running job by locked_by_id (GoodJob's candidate index leaves such rows out), so
a dead process's jobs are counted as waiting once GoodJob's own cleanup clears their locked_by_id
(within a live process's 30 s heartbeat); before it, the advisory dequeue may already take them.
That lag is asserted as such below, then every figure equals the truth in the three zones.
"""

# The statements are the library's, transcribed with the test's own schema name (a quoted
# identifier it generates) put in: string-built SQL by design.
# ruff: noqa: S608

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from queueops import actions, presets
from tests.conformance import common
from tests.conftest import Lab

UPSTREAM = ("bensheldon/good_job v4.19.2 (81db22b7): install migration create_good_jobs.rb.erb, "
            "app/models/good_job/job.rb, app/models/concerns/good_job/advisory_lockable.rb, "
            "app/models/good_job/process.rb")
DDL = Path(__file__).resolve().parent / "upstream" / "good_job_v4.19.2.sql"
UTC = "timezone('UTC', now())"  # Rails's Time.current as ActiveRecord writes it to a naive column

# advisory_lockable.rb advisory_lock_bigint_sql (hash_function "md5", the default)
LOCK_KEY = "('x' || substr(md5({value}), 1, 16))::bit(64)::bigint"
JOB_KEY = LOCK_KEY.format(value="'good_jobs' || '-' || \"rows\".\"id\"::text")
# job.rb perform_with_advisory_lock: the relation with_advisory_lock_claim renders (the limit is one
# job per execution thread; n threads polling at once are n such claims, here one statement).
DEQUEUE = f"""
SELECT "good_jobs"."id" FROM {{s}}."good_jobs" WHERE "good_jobs"."id" IN (
  WITH "rows" AS MATERIALIZED (
    SELECT "good_jobs"."id" FROM {{s}}."good_jobs"
    WHERE "good_jobs"."finished_at" IS NULL AND "good_jobs"."scheduled_at" <= {UTC}
    ORDER BY priority ASC NULLS LAST, "good_jobs"."created_at" ASC
  )
  SELECT "rows"."id" FROM "rows" WHERE pg_try_advisory_lock({JOB_KEY}) LIMIT %s
) ORDER BY priority ASC NULLS LAST, "good_jobs"."created_at" ASC"""
# Job#perform: the claim, in one transaction with the execution record.
CLAIM = f"""
UPDATE {{s}}.good_jobs SET performed_at = {UTC}, executions_count = coalesce(executions_count, 0) + 1,
       locked_by_id = %(process)s, locked_at = {UTC}, lock_type = 0, updated_at = {UTC}
WHERE id = ANY(%(ids)s::uuid[])"""
EXECUTION = f"""
INSERT INTO {{s}}.good_job_executions (active_job_id, job_class, queue_name, serialized_params, scheduled_at,
                                       created_at, updated_at, process_id)
SELECT active_job_id, job_class, queue_name, serialized_params, coalesce(scheduled_at, created_at), {UTC}, {UTC},
       %(process)s FROM {{s}}.good_jobs WHERE id = ANY(%(ids)s::uuid[])"""
# Job#perform's end: succeeded; discarded (error_event 5); retried (Job.enqueue of the same
# active_job_id sets scheduled_at and clears performed_at / finished_at; error_event 3).
FINISH = f"""UPDATE {{s}}.good_jobs SET locked_by_id = NULL, locked_at = NULL, lock_type = NULL, error = NULL,
       error_event = NULL, finished_at = {UTC}, updated_at = {UTC} WHERE id = ANY(%(ids)s::uuid[])"""
DISCARD = f"""UPDATE {{s}}.good_jobs SET locked_by_id = NULL, locked_at = NULL, lock_type = NULL,
       error = 'DiscardedError: boom', error_event = 5, finished_at = {UTC}, updated_at = {UTC}
WHERE id = ANY(%(ids)s::uuid[])"""
RETRY = f"""UPDATE {{s}}.good_jobs SET locked_by_id = NULL, locked_at = NULL, lock_type = NULL,
       error = 'RetryableError: boom', error_event = 3, scheduled_at = {UTC} + interval '1 hour',
       performed_at = NULL, finished_at = NULL, updated_at = {UTC} WHERE id = ANY(%(ids)s::uuid[])"""
# process.rb find_or_create_record(with_advisory_lock: true): the row, and its session's lock.
PROCESS = f"""INSERT INTO {{s}}.good_job_processes (id, state, lock_type, created_at, updated_at)
VALUES (%(process)s, '{{{{}}}}', 0, {UTC}, {UTC})"""
PROCESS_LOCK = "SELECT pg_try_advisory_lock(" + LOCK_KEY.format(value="'good_job_processes' || '-' || %s::text") + ")"
# process.rb Process.cleanup: inactive (lock_type advisory and advisory_unlocked, or no lock_type
# and silent for EXPIRED_INTERVAL), each one's jobs released, then the row deleted.
PKEY = "'good_job_processes' || '-' || \"good_job_processes\".\"id\"::text"
INACTIVE = f"""
SELECT "good_job_processes"."id" FROM {{s}}."good_job_processes"
LEFT JOIN pg_locks ON pg_locks.locktype = 'advisory' AND pg_locks.objsubid = 1
  AND pg_locks.classid = substring(({LOCK_KEY.format(value=PKEY)})::bit(64) from 1 for 32)::bit(32)::int
  AND pg_locks.objid = substring(({LOCK_KEY.format(value=PKEY)})::bit(64) from 33 for 32)::bit(32)::int
WHERE ("good_job_processes"."lock_type" = 0 AND pg_locks.locktype IS NULL)
   OR ("good_job_processes"."lock_type" IS NULL AND "good_job_processes"."updated_at" < {UTC} - interval '5 minutes')"""
RELEASE = "UPDATE {s}.good_jobs SET locked_by_id = NULL, locked_at = NULL WHERE locked_by_id = %s"
DELETE_PROCESS = "DELETE FROM {s}.good_job_processes WHERE id = %s"

# advisory_lockable.rb joins_advisory_locks: a job is advisory-locked by any session.
GKEY = "'good_jobs' || '-' || j.id::text"
JOINS_LOCKS = f"""LEFT JOIN pg_locks ON pg_locks.locktype = 'advisory' AND pg_locks.objsubid = 1
  AND pg_locks.classid = substring(({LOCK_KEY.format(value=GKEY)})::bit(64) from 1 for 32)::bit(32)::int
  AND pg_locks.objid = substring(({LOCK_KEY.format(value=GKEY)})::bit(64) from 33 for 32)::bit(32)::int"""
TRUTH = f"""
SELECT count(*) FILTER (WHERE j.scheduled_at <= {UTC}) AS depth,
       count(*) FILTER (WHERE j.scheduled_at > {UTC}) AS count_not_due,
       count(*) AS rows_total,
       extract(epoch FROM {UTC} - min(j.scheduled_at) FILTER (WHERE j.scheduled_at <= {UTC}))::float8 AS oldest_age_s
FROM {{s}}.good_jobs AS j {JOINS_LOCKS}
WHERE j.finished_at IS NULL AND pg_locks.locktype IS NULL"""
RUNNING = f"SELECT count(*) FROM {{s}}.good_jobs AS j {JOINS_LOCKS} WHERE j.finished_at IS NULL AND pg_locks.locktype IS NOT NULL"

# Set-based production shape (GoodJob preserves finished jobs: preserve_job_records), rows in the
# order they were enqueued: the newest 5,000 are the backlog, runnable from 10 min to ~4 h ago, 3 s
# apart (every 400th retried four times: its fifth attempt is ActiveJob retry_on's last by default);
# of the older ones 1 in 600 is scheduled an hour ahead, 1 in 700 discarded (finished with its
# error), the rest succeeded.
BUILD = f"""
INSERT INTO {{s}}.good_jobs (id, active_job_id, queue_name, priority, job_class, serialized_params, created_at,
                            updated_at, scheduled_at, performed_at, finished_at, error, error_event, executions_count)
SELECT x.id, x.id, 'default', 0, 'ConformanceJob', '{{{{}}}}', x.sch, x.sch, x.sch,
       CASE WHEN x.fin THEN x.sch END, CASE WHEN x.fin THEN x.sch + interval '1 s' END,
       CASE WHEN x.disc THEN 'DiscardedError: boom' WHEN x.w AND x.g % 400 = 0 THEN 'RetryableError: boom' END,
       CASE WHEN x.disc THEN 5 WHEN x.w AND x.g % 400 = 0 THEN 3 END,
       CASE WHEN x.w AND x.g % 400 = 0 THEN 4 WHEN x.fin THEN 1 ELSE 0 END
FROM (SELECT g, gen_random_uuid() AS id, g > {{n}} - 5000 AS w,
             CASE WHEN g > {{n}} - 5000 THEN {UTC} - interval '10 min' - ({{n}} - g) * interval '3 s'
                  WHEN g % 600 = 1 THEN {UTC} + interval '1 hour'
                  ELSE {UTC} - interval '5 hours' END AS sch,
             g <= {{n}} - 5000 AND g % 600 <> 1 AS fin, g <= {{n}} - 5000 AND g % 600 <> 1 AND g % 700 = 3 AS disc
      FROM generate_series(1, {{n}}) AS g) AS x"""


class Process:
    """A GoodJob process's session: its good_job_processes row and advisory lock, and the jobs it
    claimed with GoodJob's advisory dequeue (their locks last as long as the session)."""

    def __init__(self, lab: Lab, schema: str) -> None:
        self.s = f'"{schema}"'
        self.id = str(uuid.uuid4())
        self.conn = lab.connect()
        self.pid = int(self.conn.info.backend_pid)
        self.conn.execute(PROCESS.format(s=self.s), {"process": self.id})
        assert self.conn.execute(PROCESS_LOCK, (self.id,)).fetchone()[0]

    def claim(self, n: int) -> list[str]:
        ids = [str(r[0]) for r in self.conn.execute(DEQUEUE.format(s=self.s), (n,)).fetchall()]
        with self.conn.transaction():
            self.conn.execute(EXECUTION.format(s=self.s), {"process": self.id, "ids": ids})
            self.conn.execute(CLAIM.format(s=self.s), {"process": self.id, "ids": ids})
        return ids

    def end(self, statement: str, ids: list[str]) -> None:
        """Job#perform's end for ``ids``, then with_advisory_lock_claim's unlock of each."""
        self.conn.execute(statement.format(s=self.s), {"ids": ids})
        for job_id in ids:
            self.conn.execute("SELECT pg_advisory_unlock(" + LOCK_KEY.format(value="'good_jobs' || '-' || %s::text")
                              + ")", (job_id,))

    def cleanup(self) -> int:
        """Process.cleanup, as this live process's heartbeat runs it: the inactive processes released."""
        gone = [r[0] for r in self.conn.execute(INACTIVE.format(s=self.s)).fetchall()]
        for process in gone:
            self.conn.execute(RELEASE.format(s=self.s), (process,))
            self.conn.execute(DELETE_PROCESS.format(s=self.s), (process,))
        return len(gone)


@pytest.fixture(scope="module")
def good_job(lab: Lab) -> Iterator[dict[str, Any]]:
    """The production shape, built once: 200,000 jobs, a live process running 200 (locked_by_id and
    advisory locks held by its session), 100 it finished, retried and discarded, and a dead process
    whose 20 jobs kept its locked_by_id (session ended, advisory locks gone, row not cleaned up)."""
    name = f"conf_gj_{uuid.uuid4().hex[:8]}"
    s = f'"{name}"'
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(DDL.read_text().replace("{s}", s))
        conn.execute(BUILD.format(s=s, n=common.ROWS))
    live = Process(lab, name)
    taken = live.claim(300)
    assert len(taken) == 300
    live.end(FINISH, taken[:40])
    live.end(RETRY, taken[40:70])
    live.end(DISCARD, taken[70:100])
    dead = Process(lab, name)
    abandoned = dead.claim(20)
    with lab.connect() as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (dead.pid,))
        common.wait_gone(conn, dead.pid)
        conn.execute(f"VACUUM {s}.good_jobs")  # as autovacuum leaves a 200,000-row table
        common.analyze(conn, f"{s}.good_jobs")
    dead.conn.close()
    try:
        yield {"schema": name, "live": live, "running": taken[100:], "abandoned": abandoned, "dead": dead.id}
    finally:
        live.conn.close()
        with lab.connect() as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _truth(lab: Lab, schema: str, query: str = TRUTH) -> dict[str, float | None]:
    with lab.connect() as conn:
        conn.execute("SET TimeZone = 'UTC'")
        return common.truth(conn, query.format(s=f'"{schema}"'))


def _cfg(lab: Lab, schema: str, zone: str) -> common.config.Config:
    return common.make_config(lab.url, Path(lab.server.password_file), zone,
                              [{"name": "good_job", "preset": "good_job", "schema": schema}])


def test_figures_equal_good_jobs_own_in_every_zone(lab: Lab, good_job: dict[str, Any]) -> None:
    """Before GoodJob's cleanup, the dead process's 20 jobs are counted as running (locked_by_id
    set; the advisory dequeue could take them): the one lag, asserted as such. After
    Process.cleanup, depth (an estimate above the cap, within 10 %), count_not_due, rows_total and
    oldest_age_s equal GoodJob's own in UTC, Asia/Tokyo and America/New_York (naive UTC columns:
    Tokyo read them 9 h older, New York 5 h younger, before naive_times)."""
    schema, live = good_job["schema"], good_job["live"]
    assert _truth(lab, schema, RUNNING)["count"] == 200
    before = _truth(lab, schema)
    got = common.collect(_cfg(lab, schema, "UTC"), "good_job")
    unlocked = _truth(lab, schema, TRUTH + " AND j.locked_by_id IS NULL")
    assert abs(got["oldest_age_s"].value - unlocked["oldest_age_s"]) <= common.AGE_SLACK_S, got  # type: ignore[operator]
    assert before["oldest_age_s"] > unlocked["oldest_age_s"] + common.AGE_SLACK_S  # type: ignore[operator]
    assert live.cleanup() == 1
    _, want = common.in_every_zone("good_job", UPSTREAM, lab.url, lab.password, "good_job",
                                   lambda zone: _cfg(lab, schema, zone), lambda: _truth(lab, schema))
    assert want["depth"] > common.CAP  # type: ignore[operator]


def test_released_jobs_are_taken_once_by_good_jobs_dequeue_and_requeue_is_refused(
        lab: Lab, good_job: dict[str, Any]) -> None:
    """GoodJob rescues by itself: after Process.cleanup (test above, or here) a new process's
    advisory dequeue takes each of the dead process's jobs exactly once and never one the live
    process holds. queueops's requeue is refused in every zone, and the preset says after how long
    GoodJob takes them back (its heartbeat's cleanup)."""
    schema, live = good_job["schema"], good_job["live"]
    live.cleanup()
    for zone in common.ZONES:
        with pytest.raises(actions.NotOffered, match="GoodJob"):
            common.requeue_preview_keys(_cfg(lab, schema, zone), "good_job")
    rescue = presets.get("good_job").rescue
    assert rescue.by_itself and rescue.heartbeat_s == 30 and rescue.stale_after_s == 300
    fresh = Process(lab, schema)
    try:
        taken = [str(r[0]) for r in fresh.conn.execute(DEQUEUE.format(s=f'"{schema}"'), (10_000,)).fetchall()]
        assert len(taken) == len(set(taken))
        assert set(good_job["abandoned"]) <= set(taken)
        assert not set(taken) & set(good_job["running"])
    finally:
        fresh.conn.close()


def test_reads_are_bounded_and_the_live_check_agrees(lab: Lab, good_job: dict[str, Any]) -> None:
    """Item 5: each fast collector statement at 200,000 rows reads at most the bound in shared
    buffers, and config check --live reports no scan of them."""
    from queueops import livecheck

    cfg = _cfg(lab, good_job["schema"], "UTC")
    with lab.connect() as conn:
        reads = common.measured_reads(cfg, "good_job", conn)
    findings = [f for f in livecheck.report_live(cfg).findings if f.queue == "good_job"]
    print("READS", reads, "FINDINGS", findings)
    assert {r.collector for r in reads} >= {"depth", "oldest_age_s"}, reads
    assert all(r.buffers <= common.BUFFER_BOUND for r in reads), reads
    assert not [f for f in findings if "scans" in f.reason], findings


def test_discover_recognises_the_preset_on_the_librarys_ddl(lab: Lab, good_job: dict[str, Any]) -> None:
    """Item 6: ``discover`` proposes the good_job preset for good_jobs as the library's install migration on Rails 7.1+ creates it
    (timestamp(6) without time zone, uuid), and proposes none of its side tables as a queue of its own."""
    schema = good_job["schema"]
    found = common.proposed(_cfg(lab, schema, "UTC"), schema)
    assert found == [("good_jobs", "good_job")], found
