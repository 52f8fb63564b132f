"""Issue 29 conformance: the pgqueuer preset on pgqueuer's own schema at production size.

pgqueuer 1.6.0 (PyPI), schema installed by its own ``pgq install`` in a database of this module's
own (tests/libraries/conformance_db.py). pgqueuer deletes a finished job from ``pgqueuer`` and logs
it in ``pgqueuer_log``; only a job that ended 'failed' is held in the queue table. So its 200,000
rows are open work: 155,000 jobs enqueued to run later (execute_after up to a day ahead), 40,000
held 'failed', 5,000 due now, 300 retried (retry_job: created three hours ago, execute_after five
minutes ago), 200 picked (180 with a fresh heartbeat, 20 whose worker died an hour ago); 50,000
finished jobs in pgqueuer_log. Rows are written as pgqueuer's enqueue / dequeue / retry / log
statements write them (qb.py), set-based with back-dated times. Then pgqueuer's own Queries (its
Python package, PsycopgDriver) dequeue 50 jobs, log 20 of them 'successful' (deleted) and 10
'failed' (held), and retry 10.

Ground truth, from pgqueuer/adapters/persistence/qb.py of that version:
- depth: build_dequeue_query's next_queued: status 'queued' AND execute_after < now();
- count_processing: status 'picked' (build_queue_size_query groups by status);
- count_scheduled: 'queued' with execute_after not yet passed (the dequeue does not take them);
- count_done: the end statuses left in the table: only 'failed' (log_jobs holds it; every other
  end deletes the row);
- stuck_leases: next_stale: 'picked' AND heartbeat < now() - heartbeat_timeout (30 s by default);
  the shape has no heartbeat between 30 s and the preset's lease_timeout_s (120 s), see docs;
- oldest_age_s: the oldest due job's wait since it became runnable, now() - execute_after
  (enqueue writes execute_after = now() + its delay, retry_job now() + the retry delay).
pgqueuer's columns are timestamptz; compared in the three server time zones.
"""

# ruff: noqa: S608 - the build and truth statements format only this module's own integer constants

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queueops import actions, livecheck, roles
from tests.conformance import common
from tests.libraries.conformance_db import own_database
from tests.libraries.conftest import BIN, LibServer

VERSION = "pgqueuer 1.6.0 (PyPI), pgqueuer/adapters/persistence/qb.py, domain/schema/queue.py"
QUEUE = "pgqueuer"
LATER, HELD, DUE, RETRIED, LIVE, DEAD, LOGGED = 155_000, 40_000, 5_000, 300, 180, 20, 50_000
FETCHED, DONE_BY_LIB, FAILED_BY_LIB, RETRIED_BY_LIB = 50, 20, 10, 10
HEARTBEAT_TIMEOUT = timedelta(seconds=30)  # pgqueuer's default (QueueManager.run, pgq run)

BUILD = [
    # Enqueued to run later (enqueue: execute_after = now() + delay).
    f"""INSERT INTO pgqueuer (priority, entrypoint, status, created, updated, heartbeat, execute_after, payload)
        SELECT 0, 'record', 'queued', now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour',
               now() + g * interval '0.5 seconds', convert_to(repeat('x', 60), 'UTF8')
        FROM generate_series(1, {LATER}) AS g""",
    # Held: log_jobs with status 'failed' keeps the row (status 'failed', queue_manager_id NULL).
    f"""INSERT INTO pgqueuer (priority, entrypoint, status, created, updated, heartbeat, execute_after, attempts, payload)
        SELECT 0, 'record', 'failed', now() - interval '2 days', now() - interval '1 day', now() - interval '1 day',
               now() - interval '2 days', 1, convert_to(repeat('x', 60), 'UTF8')
        FROM generate_series(1, {HELD}) AS g""",
    # Due now: enqueued over the last two hours, no delay.
    f"""INSERT INTO pgqueuer (priority, entrypoint, status, created, updated, heartbeat, execute_after, payload)
        SELECT 0, 'record', 'queued', t, t, t, t, convert_to(repeat('x', 60), 'UTF8')
        FROM generate_series(1, {DUE}) AS g, LATERAL (SELECT now() - interval '2 hours' + g * interval '1 second') AS x (t)""",
    # Retried (retry_job: status queued, execute_after = now() + delay, attempts + 1): created
    # three hours ago, runnable again since five minutes ago.
    f"""INSERT INTO pgqueuer (priority, entrypoint, status, created, updated, heartbeat, execute_after, attempts, payload)
        SELECT 0, 'record', 'queued', now() - interval '3 hours', now() - interval '10 minutes',
               now() - interval '10 minutes', now() - interval '5 minutes', 1, convert_to(repeat('x', 60), 'UTF8')
        FROM generate_series(1, {RETRIED}) AS g""",
    # Picked (the dequeue's claim: status picked, heartbeat = updated = now(), queue_manager_id):
    # 20 of a dead worker (heartbeat an hour old), 180 of a live one (heartbeat within 10 s).
    f"""INSERT INTO pgqueuer (priority, entrypoint, status, created, updated, heartbeat, execute_after,
                              queue_manager_id, payload)
        SELECT 0, 'record', 'picked', now() - interval '3 hours', h, h, now() - interval '3 hours',
               CASE WHEN g <= {DEAD} THEN '00000000-0000-0000-0000-00000000dead'::uuid
                    ELSE '00000000-0000-0000-0000-0000000011fe'::uuid END, convert_to(repeat('x', 60), 'UTF8')
        FROM generate_series(1, {LIVE + DEAD}) AS g,
             LATERAL (SELECT CASE WHEN g <= {DEAD} THEN now() - interval '1 hour'
                                  ELSE now() - (g % 10) * interval '1 second' END) AS x (h)""",
    f"""INSERT INTO pgqueuer_log (job_id, status, entrypoint, priority, created)
        SELECT -g, s.status::pgqueuer_status, 'record', 0, now() - interval '3 days' + g * interval '1 second'
        FROM generate_series(1, {LOGGED}) AS g, (VALUES ('queued'), ('picked'), ('successful')) AS s (status)""",
    "ANALYZE pgqueuer_log",
]

# next_stale (qb.py): the picked jobs the truth's stuck_leases counts.
STALE = f"status = 'picked' AND heartbeat < now() - interval '{HEARTBEAT_TIMEOUT.total_seconds():g} seconds'"
TRUTH = f"""
SELECT (SELECT count(*) FROM pgqueuer WHERE status = 'queued' AND execute_after < now()) AS depth,
       (SELECT count(*) FROM pgqueuer WHERE status = 'picked') AS count_processing,
       (SELECT count(*) FROM pgqueuer WHERE status = 'queued' AND execute_after >= now()) AS count_scheduled,
       (SELECT count(*) FROM pgqueuer
        WHERE status IN ('successful', 'exception', 'canceled', 'deleted', 'failed')) AS count_done,
       (SELECT count(*) FROM pgqueuer WHERE {STALE}) AS stuck_leases,
       (SELECT coalesce(extract(epoch FROM now() - min(execute_after)), 0) FROM pgqueuer
        WHERE status = 'queued' AND execute_after < now()) AS oldest_age_s
"""

# Figures queueops gets wrong on this shape, left out of the comparison (recorded with the reason):
LEFT_OUT: dict[str, str] = {}


async def _queries(db: LibServer) -> tuple[Any, psycopg.AsyncConnection]:
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.queries import Queries

    conn = await psycopg.AsyncConnection.connect(db.url, password=db.password, autocommit=True)
    return Queries(PsycopgDriver(conn)), conn


async def _dequeue(db: LibServer, batch: int, manager: uuid.UUID) -> list[Any]:
    """pgqueuer's own dequeue (Queries.dequeue, the statement its QueueManager runs)."""
    from pgqueuer.queries import EntrypointExecutionParameter

    q, conn = await _queries(db)
    try:
        return await q.dequeue(batch_size=batch, entrypoints={"record": EntrypointExecutionParameter(0)},
                               queue_manager_id=manager, global_concurrency_limit=None,
                               heartbeat_timeout=HEARTBEAT_TIMEOUT)
    finally:
        await conn.close()


async def _move(db: LibServer) -> None:
    q, conn = await _queries(db)
    try:
        jobs = await _dequeue(db, FETCHED, uuid.uuid4())
        assert len(jobs) == FETCHED
        done = jobs[:DONE_BY_LIB]
        failed = jobs[DONE_BY_LIB:DONE_BY_LIB + FAILED_BY_LIB]
        await q.log_jobs([(j, "successful", None) for j in done] + [(j, "failed", None) for j in failed])
        for j in jobs[DONE_BY_LIB + FAILED_BY_LIB:DONE_BY_LIB + FAILED_BY_LIB + RETRIED_BY_LIB]:
            await q.retry_job(j, timedelta(seconds=0), None)
    finally:
        await conn.close()


@pytest.fixture(scope="module")
def shaped(libserver: LibServer) -> Iterator[LibServer]:
    with own_database(libserver, "conformance_pgqueuer") as db:
        db.run([str(BIN / "pgq"), "--pg-dsn", db.url, "install"])
        started = time.monotonic()
        with db.connect() as conn:
            for sql in BUILD:
                conn.execute(sql)
        asyncio.run(_move(db))
        with db.connect() as conn:
            common.analyze(conn, "pgqueuer")
            rows = conn.execute("SELECT count(*) FROM pgqueuer").fetchone()[0]
        print(f"\nBUILD pgqueuer: {rows} rows in {time.monotonic() - started:.1f} s")
        assert rows >= common.ROWS
        yield db


def _cfg(db: LibServer, zone: str, tmp: Path | None = None) -> common.config.Config:
    return common.make_config(db.url, Path(db.info.password_file), zone, [{"name": QUEUE, "preset": "pgqueuer"}],
                              store=tmp)


def test_figures_are_pgqueuers_own_in_every_zone(shaped: LibServer) -> None:
    common.in_every_zone("pgqueuer", VERSION, shaped.url, shaped.password, QUEUE, lambda zone: _cfg(shaped, zone),
                         lambda: common.utc_truth(shaped.connect, TRUTH), LEFT_OUT)


def test_the_stuck_list_is_what_stuck_leases_counts(shaped: LibServer) -> None:
    """The items drill-down's stuck list (queueops.items, as the console reads it) holds exactly the
    20 picked jobs next_stale takes (their worker died an hour ago), in every zone, none of the live
    worker's."""
    async def beat() -> None:  # the live workers beat (pgqueuer's own update_heartbeat)
        q, conn = await _queries(shaped)
        try:
            live = await conn.execute("SELECT id FROM pgqueuer WHERE status = 'picked' "
                                      "AND heartbeat >= now() - interval '10 minutes'")
            await q.update_heartbeat([r[0] for r in await live.fetchall()])
        finally:
            await conn.close()

    asyncio.run(beat())
    ids = common.truth_ids(shaped.connect, f"SELECT id FROM pgqueuer WHERE {STALE}")
    assert len(ids) == DEAD
    common.assert_stuck_list_is_the_count(lambda zone: _cfg(shaped, zone), QUEUE, ids,
                                          common.utc_truth(shaped.connect, TRUTH)["stuck_leases"])


def test_the_oldest_waiting_list_begins_with_the_age(shaped: LibServer) -> None:
    """The drill-down's oldest-waiting list begins with pgqueuer's own oldest queued job, aged from
    its execute_after, in every zone."""
    common.assert_waiting_list_is_the_age(lambda zone: _cfg(shaped, zone), QUEUE,
                                          common.utc_truth(shaped.connect, TRUTH)["oldest_age_s"])


def test_reads_measured_and_the_live_check_says_which_are_unbounded(shaped: LibServer) -> None:
    """Item 5: each fast statement's shared buffers at 200k rows, and ``config check --live``'s
    verdict on the same statement: "scans instead of seeking" where the read is not bounded. depth
    reads at most the cap of queued jobs through pgqueuer's partial index (the 155,000 enqueued for
    later no longer read: three whole-table scans before) and no finished job (no index serves
    them: their estimate); oldest_age_s reads at most the cap of runnable queued jobs through
    pgqueuer_ep_ea_idx (entrypoint, execute_after), an 'at least' when the read stops at the cap
    (the table was read whole before: 4,784 buffers)."""
    cfg = _cfg(shaped, "UTC")
    with shaped.connect() as conn:
        reads = {r.collector: r for r in common.measured_reads(cfg, QUEUE, conn)}
    report = livecheck.report_live(cfg)
    scans = {f.field for f in report.findings if "scans instead of seeking" in f.reason}
    print("\nREADS pgqueuer: " + "; ".join(f"{r.collector} {r.buffers} buffers of {r.relpages} pages "
                                            f"via {','.join(r.read_by)}" for r in reads.values()))
    print("LIVE pgqueuer:\n" + "\n".join(f.line("") for f in report.findings))
    assert livecheck.read_bound() == common.BUFFER_BOUND
    assert set(reads) == set(common.FAST_COLLECTORS)
    for r in reads.values():
        assert r.relpages > common.BUFFER_BOUND, r  # the table is far past the bound
        assert (r.buffers <= common.BUFFER_BOUND) == (r.collector not in scans), (r, scans)
    # stuck_leases reads pgqueuer's own partial index on the picked jobs, within the bound.
    assert reads["stuck_leases"].buffers <= common.BUFFER_BOUND
    assert reads["depth"].buffers <= common.BUFFER_BOUND and reads["oldest_age_s"].buffers <= common.BUFFER_BOUND
    assert not scans, scans
    # ... and the live check says the age is a lower bound there, with the index that makes it exact
    age = [f for f in report.findings if f.field == "oldest_age_s"]
    assert len(age) == 1 and "'at least'" in age[0].reason and "pgqueuer_ep_ea_idx" in age[0].reason, age
    assert age[0].fix == 'CREATE INDEX CONCURRENTLY ON "public"."pgqueuer" ("status", "execute_after")', age
    assert not [f for f in report.findings if f.severity == "error"], report.findings


def test_requeue_then_pgqueuers_own_dequeue_takes_each_released_job_once(shaped: LibServer, tmp_path: Path) -> None:
    """Item 4 (last in the module: it drains the queue). The preset warns (pgqueuer re-picks a
    job whose heartbeat is older than heartbeat_timeout by itself) and allows requeue; in Tokyo
    time, requeue releases exactly the dead worker's jobs, never one with a fresh heartbeat, and
    pgqueuer's own dequeue then takes each released job exactly once."""
    cfg = _cfg(shaped, "Asia/Tokyo", tmp_path / "store.db")
    with shaped.connect() as conn:
        dead = {r[0] for r in conn.execute("SELECT id FROM pgqueuer WHERE status = 'picked' "
                                           "AND heartbeat < now() - interval '1 minute'").fetchall()}
        live = {r[0] for r in conn.execute("SELECT id FROM pgqueuer WHERE status = 'picked' "
                                           "AND heartbeat >= now() - interval '1 minute'").fetchall()}
    assert len(dead) == DEAD and len(live) >= LIVE
    plan = actions.plan(cfg, "requeue", QUEUE, {})
    assert any("re-picks" in w for w in plan.preview.warnings), plan.preview.warnings
    assert {int(r["item"]) for r in plan.preview.rows} == dead
    result = actions.execute(cfg, plan, actor=roles.Actor("conformance", "operator", "test"))
    assert result.outcome == "ok", result.to_json()
    with shaped.connect() as conn:
        status = dict(conn.execute("SELECT id, status::text FROM pgqueuer WHERE id = ANY(%s)",
                                   (sorted(dead | live),)).fetchall())
    assert {status[i] for i in dead} == {"queued"} and {status[i] for i in live} == {"picked"}
    taken: list[int] = []
    manager = uuid.uuid4()
    while batch := asyncio.run(_dequeue(shaped, 1000, manager)):
        taken += [int(j.id) for j in batch]
    counts = {i: taken.count(i) for i in dead}
    assert counts == dict.fromkeys(dead, 1), counts
    assert not live & set(taken)  # a job with a fresh heartbeat is never taken again
    assert len(taken) == len(set(taken))
