"""Conformance of the Solid Queue preset (issue 29) on Solid Queue's own schema and statements.

Solid Queue cannot be installed here (a Ruby gem): its schema is its db/queue_schema.rb as Rails 8
loads it on PostgreSQL (tests/conformance/upstream/solid_queue_v1.5.0.sql: timestamp(6) without
time zone, written in UTC), and jobs are moved by Solid Queue's statements as ActiveRecord renders
them, transcribed from rails/solid_queue v1.5.0 (29e818d9c1181195736ffc5d7c1d1c03757b7752):

* app/models/solid_queue/ready_execution.rb ``claim`` / ``select_and_lock``: the candidates
  ``ORDER BY priority, job_id LIMIT n FOR UPDATE SKIP LOCKED``, claimed_execution.rb ``claiming``
  (``insert_all!`` of the claims), then the ready rows deleted, in one transaction;
* claimed_execution.rb ``finished`` (job.finished!: finished_at, preserve_finished_jobs) and
  ``failed_with`` (a failed execution), each deleting the claim under its row lock;
* app/models/solid_queue/process.rb ``register`` / ``heartbeat`` (every process_heartbeat_interval,
  60 s), process/prunable.rb ``prune`` (processes with last_heartbeat_at <= now - 5 min,
  process_alive_threshold: their claims failed with ProcessPrunedError, the row deleted) and
  lib/solid_queue/supervisor/maintenance.rb ``fail_orphaned_executions`` (claims whose process row
  is gone: ClaimedExecution.orphaned, failed with ProcessMissingError).

Ground truth, from that source: waiting = the ready executions (what claim takes: every queue, none
paused), oldest_age_s from the ready execution's created_at (when the job became ready: enqueued
or dispatched), running = the claimed executions, abandoned = the claims the supervisor will fail
(process missing or silent 5 min). Solid Queue fails those jobs; it never releases them to ready,
so requeue is refused and the preset says when Solid Queue acts.
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

UPSTREAM = ("rails/solid_queue v1.5.0 (29e818d9): db/queue_schema.rb (install template), "
            "app/models/solid_queue/{ready_execution,claimed_execution,process}.rb, process/prunable.rb, "
            "lib/solid_queue/supervisor/maintenance.rb")
DDL = Path(__file__).resolve().parent / "upstream" / "solid_queue_v1.5.0.sql"
UTC = "timezone('UTC', now())"  # Time.current as ActiveRecord writes it to a naive column

# process.rb Process.register
REGISTER = f"""INSERT INTO {{s}}.solid_queue_processes (kind, last_heartbeat_at, supervisor_id, pid, hostname,
                                      metadata, created_at, name)
VALUES ('Worker', {UTC}, NULL, pg_backend_pid(), 'conformance', '{{{{}}}}', {UTC}, %s) RETURNING id"""
# process.rb Process#heartbeat: with_lock { touch(:last_heartbeat_at) }; ``at`` is when it beat.
HEARTBEAT_LOCK = "SELECT id FROM {s}.solid_queue_processes WHERE id = %s LIMIT 1 FOR UPDATE"
HEARTBEAT = "UPDATE {s}.solid_queue_processes SET last_heartbeat_at = %s WHERE id = %s"
# ready_execution.rb select_candidates (queue_list "*": every queue, ordered priority, job_id).
CANDIDATES = """SELECT id, job_id FROM {s}.solid_queue_ready_executions
ORDER BY priority ASC, job_id ASC LIMIT %s FOR UPDATE SKIP LOCKED"""
# claimed_execution.rb claiming: insert_all! (timestamps set), the claims read back.
CLAIMING = f"""INSERT INTO {{s}}.solid_queue_claimed_executions (job_id, process_id, created_at)
SELECT j, %(process)s, {UTC} FROM unnest(%(jobs)s::bigint[]) AS j"""
CLAIMED = "SELECT id, job_id FROM {s}.solid_queue_claimed_executions WHERE job_id = ANY(%s) AND process_id = %s"
DELETE_READY = "DELETE FROM {s}.solid_queue_ready_executions WHERE id = ANY(%s)"
# claimed_execution.rb finalize: unless_already_finalized (the claim's row lock), then the job's
# end, then destroy! of the claim.
CLAIM_LOCK = "SELECT id FROM {s}.solid_queue_claimed_executions WHERE id = %s LIMIT 1 FOR UPDATE"
FINISHED = f"UPDATE {{s}}.solid_queue_jobs SET finished_at = {UTC}, updated_at = {UTC} WHERE id = %s"
FAILED = f"""INSERT INTO {{s}}.solid_queue_failed_executions (job_id, error, created_at)
VALUES (%s, %s, {UTC})"""
DESTROY_CLAIM = "DELETE FROM {s}.solid_queue_claimed_executions WHERE id = %s"
# prunable.rb Process.prune(excluding:): prunable.excluding(self).non_blocking_lock, in batches.
PRUNABLE = f"""SELECT id FROM {{s}}.solid_queue_processes
WHERE last_heartbeat_at <= {UTC} - interval '300 seconds' AND id != %s
ORDER BY id LIMIT 50 FOR UPDATE SKIP LOCKED"""
PROCESS_CLAIMS = "SELECT id, job_id FROM {s}.solid_queue_claimed_executions WHERE process_id = %s"
DEREGISTER = "DELETE FROM {s}.solid_queue_processes WHERE id = %s"
# maintenance.rb fail_orphaned_executions: ClaimedExecution.orphaned (where.missing(:process)).
ORPHANED = """SELECT c.id, c.job_id FROM {s}.solid_queue_claimed_executions AS c
LEFT OUTER JOIN {s}.solid_queue_processes AS p ON p.id = c.process_id WHERE p.id IS NULL"""

# The abandoned claims as Solid Queue's supervisor judges them (orphaned, prunable): the truth's
# stuck_leases counts them, the drill-down must list their jobs.
ABANDONED = f"""{{s}}.solid_queue_claimed_executions AS c
        LEFT JOIN {{s}}.solid_queue_processes AS p ON p.id = c.process_id
        WHERE p.id IS NULL OR p.last_heartbeat_at <= {UTC} - interval '300 seconds'"""
TRUTH = f"""
SELECT (SELECT count(*) FROM {{s}}.solid_queue_ready_executions) AS depth,
       (SELECT count(*) FROM {{s}}.solid_queue_ready_executions) AS rows_total,
       (SELECT extract(epoch FROM {UTC} - min(created_at)) FROM {{s}}.solid_queue_ready_executions)::float8 AS oldest_age_s,
       (SELECT count(*) FROM {ABANDONED}) AS stuck_leases,
       (SELECT coalesce(extract(epoch FROM {UTC} - min(created_at)), 0)
        FROM {{s}}.solid_queue_claimed_executions)::float8 AS oldest_lease_age_s"""

# Set-based production shape (finished jobs kept: preserve_finished_jobs, cleared after a day), in
# the order they were enqueued: the newest 5,000 ready, since 10 min to ~4 h ago, 3 s apart; of the
# older ones 1 in 600 scheduled an hour ahead, 1 in 700 failed, the rest finished.
BUILD = f"""
INSERT INTO {{s}}.solid_queue_jobs (id, queue_name, class_name, arguments, priority, active_job_id, scheduled_at,
                                   finished_at, created_at, updated_at)
SELECT g, 'default', 'ConformanceJob', '{{{{}}}}', 0, gen_random_uuid()::text,
       CASE WHEN g > {{n}} - 5000 THEN {UTC} - interval '10 min' - ({{n}} - g) * interval '3 s'
            WHEN g % 600 = 1 THEN {UTC} + interval '1 hour' ELSE {UTC} - interval '5 hours' END,
       CASE WHEN g <= {{n}} - 5000 AND g % 600 <> 1 AND g % 700 <> 3 THEN {UTC} - interval '4 hours' END,
       {UTC} - interval '5 hours', {UTC} - interval '4 hours'
FROM generate_series(1, {{n}}) AS g;
SELECT setval(pg_get_serial_sequence('{{s}}.solid_queue_jobs', 'id'), {{n}});
INSERT INTO {{s}}.solid_queue_ready_executions (job_id, queue_name, priority, created_at)
SELECT id, queue_name, priority, scheduled_at FROM {{s}}.solid_queue_jobs WHERE id > {{n}} - 5000;
INSERT INTO {{s}}.solid_queue_scheduled_executions (job_id, queue_name, priority, scheduled_at, created_at)
SELECT id, queue_name, priority, scheduled_at, created_at FROM {{s}}.solid_queue_jobs
WHERE id <= {{n}} - 5000 AND id % 600 = 1;
INSERT INTO {{s}}.solid_queue_failed_executions (job_id, error, created_at)
SELECT id, '{{{{"exception_class":"RuntimeError","message":"boom"}}}}', {UTC} - interval '4 hours'
FROM {{s}}.solid_queue_jobs WHERE id <= {{n}} - 5000 AND id % 600 <> 1 AND id % 700 = 3"""


class Process:
    """A Solid Queue worker: its process row (registered, heartbeating) and the jobs it claimed."""

    def __init__(self, lab: Lab, schema: str, name: str) -> None:
        self.s = f'"{schema}"'
        self.conn = lab.connect()
        self.id = int(self.conn.execute(REGISTER.format(s=self.s), (name,)).fetchone()[0])

    def claim(self, n: int) -> dict[int, int]:
        """ReadyExecution.claim: {claim id: job id}."""
        with self.conn.transaction():
            rows = self.conn.execute(CANDIDATES.format(s=self.s), (n,)).fetchall()
            jobs = [r[1] for r in rows]
            self.conn.execute(CLAIMING.format(s=self.s), {"process": self.id, "jobs": jobs})
            claimed = dict(self.conn.execute(CLAIMED.format(s=self.s), (jobs, self.id)).fetchall())
            by_job = {r[1]: r[0] for r in rows}
            self.conn.execute(DELETE_READY.format(s=self.s), ([by_job[j] for j in claimed.values()],))
        return claimed

    def heartbeat(self, at: str = UTC) -> None:
        """Process#heartbeat; ``at``: the time it beat (the last beat of a process that then died)."""
        with self.conn.transaction():
            self.conn.execute(HEARTBEAT_LOCK.format(s=self.s), (self.id,))
            self.conn.execute(sql.SQL(HEARTBEAT.format(s=self.s).replace("%s", "{}", 1)).format(sql.SQL(at)),
                              (self.id,))

    def finalize(self, claim: int, job: int, error: str | None = None) -> None:
        """ClaimedExecution#finished or #failed_with."""
        with self.conn.transaction():
            if self.conn.execute(CLAIM_LOCK.format(s=self.s), (claim,)).fetchone() is None:
                return  # already finalized
            if error is None:
                self.conn.execute(FINISHED.format(s=self.s), (job,))
            else:
                self.conn.execute(FAILED.format(s=self.s), (job, error))
            self.conn.execute(DESTROY_CLAIM.format(s=self.s), (claim,))

    def prune(self) -> list[int]:
        """Supervisor maintenance: Process.prune(excluding: self), then fail_orphaned_executions.
        The jobs whose claims were failed."""
        failed: list[int] = []
        with self.conn.transaction():
            for (process,) in self.conn.execute(PRUNABLE.format(s=self.s), (self.id,)).fetchall():
                for claim, job in self.conn.execute(PROCESS_CLAIMS.format(s=self.s), (process,)).fetchall():
                    self.finalize(claim, job, '{"exception_class":"SolidQueue::Processes::ProcessPrunedError"}')
                    failed.append(job)
                self.conn.execute(DEREGISTER.format(s=self.s), (process,))
        for claim, job in self.conn.execute(ORPHANED.format(s=self.s)).fetchall():
            self.finalize(claim, job, '{"exception_class":"SolidQueue::Processes::ProcessMissingError"}')
            failed.append(job)
        return failed


@pytest.fixture(scope="module")
def solid_queue(lab: Lab) -> Iterator[dict[str, Any]]:
    """The production shape, built once: 200,000 jobs; a live worker that claimed 300 (finished 40,
    failed 30, runs 230 with a fresh heartbeat); a dead worker whose 20 claims outlived its last
    heartbeat 10 minutes ago; 5 claims of a process whose row is gone."""
    name = f"conf_sq_{uuid.uuid4().hex[:8]}"
    s = f'"{name}"'
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(DDL.read_text().replace("{s}", s))
        conn.execute(BUILD.format(s=s, n=common.ROWS))
    live = Process(lab, name, "worker-live")
    claims = live.claim(300)
    assert len(claims) == 300
    items = list(claims.items())
    for claim, job in items[:40]:
        live.finalize(claim, job)
    for claim, job in items[40:70]:
        live.finalize(claim, job, '{"exception_class":"RuntimeError","message":"boom"}')
    dead = Process(lab, name, "worker-dead")
    abandoned = list(dead.claim(20).values())
    # Its last heartbeat was 10 minutes ago: the process died then (its heartbeats stopped).
    dead.heartbeat(f"{UTC} - interval '10 minutes'")
    dead.conn.close()
    gone = Process(lab, name, "worker-gone")
    orphaned = list(gone.claim(5).values())
    gone.conn.execute(DEREGISTER.format(s=s), (gone.id,))  # its row destroyed, its claims left behind
    gone.conn.close()
    with lab.connect() as conn:
        for table in ("solid_queue_jobs", "solid_queue_ready_executions", "solid_queue_claimed_executions"):
            conn.execute(f"VACUUM {s}.{table}")  # as autovacuum leaves them
            common.analyze(conn, f"{s}.{table}")
    try:
        yield {"schema": name, "live": live, "running": [j for _, j in items[70:]], "abandoned": abandoned,
               "orphaned": orphaned}
    finally:
        live.conn.close()
        with lab.connect() as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _truth(lab: Lab, schema: str) -> dict[str, float | None]:
    with lab.connect() as conn:
        return common.truth(conn, TRUTH.format(s=f'"{schema}"'))


def _cfg(lab: Lab, schema: str, zone: str) -> common.config.Config:
    return common.make_config(lab.url, Path(lab.server.password_file), zone,
                              [{"name": "solid_queue", "preset": "solid_queue", "schema": schema}])


def test_figures_equal_solid_queues_own_in_every_zone(lab: Lab, solid_queue: dict[str, Any]) -> None:
    """depth, rows_total and oldest_age_s of the ready executions, and the 25 abandoned claims (the
    dead process's 20, the 5 orphaned: stuck_leases, invisible before) with the oldest claim's age,
    equal Solid Queue's own in UTC, Asia/Tokyo and America/New_York; the 230 claims of the live
    process are never among the stuck."""
    schema, live = solid_queue["schema"], solid_queue["live"]
    live.heartbeat()
    _, want = common.in_every_zone("solid_queue", UPSTREAM, lab.url, lab.password, "solid_queue",
                                   lambda zone: _cfg(lab, schema, zone), lambda: _truth(lab, schema))
    assert want["stuck_leases"] == 25 and want["depth"] > common.CAP  # type: ignore[operator]


def test_the_stuck_list_is_what_stuck_leases_counts(lab: Lab, solid_queue: dict[str, Any]) -> None:
    """The items drill-down's stuck list (queueops.items, as the console reads it; it listed none
    for a delete queue) holds exactly the jobs of the 25 abandoned claims, the dead process's 20 and
    the 5 orphaned, in every zone; none of the live process's 230."""
    schema, live = solid_queue["schema"], solid_queue["live"]
    live.heartbeat()
    abandoned = ABANDONED.format(s=f'"{schema}"')
    ids = common.truth_ids(lab.connect, f"SELECT c.job_id FROM {abandoned}")  # noqa: S608
    assert ids == sorted(solid_queue["abandoned"] + solid_queue["orphaned"])
    common.assert_stuck_list_is_the_count(lambda zone: _cfg(lab, schema, zone), "solid_queue", ids,
                                          _truth(lab, schema)["stuck_leases"])


def test_reads_are_bounded_and_the_live_check_agrees(lab: Lab, solid_queue: dict[str, Any]) -> None:
    """Item 5: each fast collector statement reads at most the bound in shared buffers at 200,000
    jobs (before the prune below empties the claims), and config check --live reports no scan of them."""
    from queueops import livecheck

    cfg = _cfg(lab, solid_queue["schema"], "UTC")
    with lab.connect() as conn:
        reads = common.measured_reads(cfg, "solid_queue", conn)
    findings = [f for f in livecheck.report_live(cfg).findings if f.queue == "solid_queue"]
    print("READS", reads, "FINDINGS", findings)
    assert {r.collector for r in reads} == {"depth", "oldest_age_s", "stuck_leases"}, reads
    assert all(r.buffers <= common.BUFFER_BOUND for r in reads), reads
    assert not [f for f in findings if "scans" in f.reason], findings


def test_solid_queue_fails_abandoned_claims_itself_and_requeue_is_refused(
        lab: Lab, solid_queue: dict[str, Any]) -> None:
    """Solid Queue's supervisor fails the abandoned claims (failed executions; the jobs are not run
    again by themselves), after which stuck_leases is 0 in every zone and a new worker's claim takes
    none of them, nor a job the live process runs. requeue is refused with the reason, and the
    preset says after how long Solid Queue acts (its 5-minute alive threshold)."""
    schema, live = solid_queue["schema"], solid_queue["live"]
    s = f'"{schema}"'
    for zone in common.ZONES:
        with pytest.raises(actions.NotOffered, match="Solid Queue fails"):
            common.requeue_preview_keys(_cfg(lab, schema, zone), "solid_queue")
    rescue = presets.get("solid_queue").rescue
    assert rescue.by_itself and rescue.stale_after_s == 300 and "fails their claimed executions" in rescue.how
    live.heartbeat()
    failed = live.prune()
    assert sorted(failed) == sorted(solid_queue["abandoned"] + solid_queue["orphaned"])
    with lab.connect() as conn:
        errors = dict(conn.execute(f"SELECT job_id, error FROM {s}.solid_queue_failed_executions "
                                   "WHERE job_id = ANY(%s)", (failed,)).fetchall())
    assert len(errors) == 25 and all("Process" in e for e in errors.values())
    for zone in common.ZONES:
        got = common.collect(_cfg(lab, schema, zone), "solid_queue")
        assert (got["stuck_leases"].value, got["depth"].note.split(" ")[0]) == (0, "estimate"), (zone, got)
    ready = int(_truth(lab, schema)["depth"] or 0)
    assert ready == 5_000 - 300 - 20 - 5
    fresh = Process(lab, schema, "worker-fresh")
    try:
        taken = list(fresh.claim(10_000).values())
        assert len(taken) == len(set(taken)) == ready  # the ready executions, each once
        assert not set(taken) & (set(failed) | set(solid_queue["running"]))
    finally:
        fresh.conn.close()


def test_discover_recognises_the_preset_on_the_librarys_ddl(lab: Lab, solid_queue: dict[str, Any]) -> None:
    """Item 6: ``discover`` proposes the solid_queue preset for solid_queue_ready_executions as the library's queue_schema.rb creates it
    (timestamp(6) without time zone, character varying), and proposes none of its side tables as a queue of its own."""
    schema = solid_queue["schema"]
    found = common.proposed(_cfg(lab, schema, "UTC"), schema)
    assert found == [("solid_queue_ready_executions", "solid_queue")], found


def test_claims_mapping_is_refused_where_nothing_would_count_it() -> None:
    """A claims mapping on SQL Server, or on a kind with its own lease or status, would leave
    stuck_leases silently absent: refused with the reason."""
    raw = {"targets": [{"name": "t", "dialect": "mssql", "url": "mssql+pyodbc://u@h/db"}],
           "queues": [{"name": "q", "target": "t", "preset": "solid_queue"}]}
    with pytest.raises(common.config.ConfigError, match="claims.*SQL Server"):
        common.config.parse(raw)
    claims = presets.get("solid_queue").queue["claims"]
    lease = {"targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h/db"}],
             "queues": [{"name": "q", "target": "t", "kind": "lease", "table": "jobs", "key": "id",
                         "lease_column": "leased_at", "claims": claims}]}
    with pytest.raises(common.config.ConfigError, match="claims apply to a delete queue"):
        common.config.parse(lease)
