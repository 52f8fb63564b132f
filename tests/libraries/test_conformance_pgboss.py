"""Issue 29 conformance: the pg-boss preset on pg-boss's own schema at production size.

pg-boss 10.4.2 (npm, tests/libraries/node/package-lock.json), schema installed by its own
``start()`` and ``createQueue('qo')`` (boss.mjs install) in a database of this module's own
(tests/libraries/conformance_db.py); pgboss.job is partitioned by queue name. pg-boss keeps a
finished job in pgboss.job until its archive step moves it (archiveCompletedAfterSeconds, 12 h by
default). The shape (200,300 rows, written as plans.js's insertJob / fetchNextJob / completeJobs /
failJobs write them, set-based with back-dated times): 190,500 completed in the last 12 hours,
3,000 failed (retries used up), 1,000 cancelled, 5,000 created over the last 2 hours, 300 in
'retry' (failed once, start_after five minutes ago), 300 sent for later (start_after ahead), 200
active: 170 started in the last 5 minutes, 10 long jobs (expire_in 2 hours, started 30 minutes
ago), 20 of a dead worker (started an hour ago, expire_in 15 minutes; 5 of them on their last
attempt). Then pg-boss's own API (node conformance.mjs) fetches 50, completes 20 and fails 10.

Ground truth, from pg-boss/src/plans.js of that version:
- depth: fetchNextJob: state < 'active' (created, retry) AND start_after < now();
- count_processing: state 'active' (countStates);
- count_scheduled: created / retry with start_after not yet passed (fetchNextJob leaves them);
- count_done: completed, cancelled and failed, the preset's done values (countStates' states);
- stuck_leases: what the supervisor's failJobsByTimeout takes: state 'active' AND
  started_on + expire_in < now() (each job's own expire_in);
- oldest_age_s: the oldest fetchable job's wait since it became runnable, greatest(created_on,
  start_after) (failJobs sets a retry's start_after to now() + retry_delay).
pg-boss's columns are timestamptz; compared in the three server time zones.
"""

# ruff: noqa: S608 - the build and truth statements format only this module's own integer constants

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from queueops import actions, presets
from tests.conformance import common
from tests.libraries.conformance_db import pgboss_shaped, preset_config, reads_and_live_check
from tests.libraries.conftest import LibServer

VERSION = "pg-boss 10.4.2 (npm), pg-boss/src/plans.js"
QUEUE = "pgboss"
COMPLETED, FAILED, CANCELLED, CREATED, RETRY, LATER = 190_500, 3_000, 1_000, 5_000, 300, 300
LIVE, LONG, DEAD, DEAD_LAST = 170, 10, 20, 5
FETCHED, COMPLETED_BY_LIB, FAILED_BY_LIB = 50, 20, 10

_COLS = "name, priority, data, state, retry_limit, retry_count, start_after, started_on, expire_in, created_on, completed_on"
BUILD = [
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), s.state::pgboss.job_state, 2, s.retries,
               t.created, t.created + interval '1 second', interval '15 minutes', t.created, t.created + interval '3 seconds'
        FROM generate_series(1, {COMPLETED + FAILED + CANCELLED}) AS g
        CROSS JOIN LATERAL (SELECT now() - interval '12 hours' + g * interval '0.2 seconds' AS created) AS t
        CROSS JOIN LATERAL (SELECT CASE WHEN g % 65 = 0 THEN 'failed' WHEN g % 195 = 1 THEN 'cancelled'
                                        ELSE 'completed' END AS state,
                                   CASE WHEN g % 65 = 0 THEN 2 ELSE 0 END AS retries) AS s""",
    # Created (send): start_after = created_on, over the last two hours.
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), 'created', 2, 0, t.c, NULL, interval '15 minutes', t.c, NULL
        FROM generate_series(1, {CREATED}) AS g,
             LATERAL (SELECT now() - interval '2 hours' + g * interval '1 second') AS t (c)""",
    # Retry (failJobs with retry_count < retry_limit): created 3 h ago, started an hour ago,
    # start_after = failure time + retry_delay, five minutes ago.
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), 'retry', 2, 0, now() - interval '5 minutes',
               now() - interval '1 hour', interval '15 minutes', now() - interval '3 hours', NULL
        FROM generate_series(1, {RETRY}) AS g""",
    # Sent for later (sendAfter / startAfter): start_after ahead.
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), 'created', 2, 0, now() + g * interval '10 seconds', NULL,
               interval '15 minutes', now() - interval '10 minutes', NULL
        FROM generate_series(1, {LATER}) AS g""",
    # Active (fetchNextJob: started_on = now()): live, long (own expire_in), dead (some on their last attempt).
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g, 'active', true), 'active', 2,
               CASE WHEN g <= {DEAD_LAST} THEN 2 ELSE 0 END, now() - interval '2 hours',
               CASE WHEN g <= {DEAD} THEN now() - interval '1 hour'
                    WHEN g <= {DEAD + LONG} THEN now() - interval '30 minutes'
                    ELSE now() - (g % 300) * interval '1 second' END,
               CASE WHEN g > {DEAD} AND g <= {DEAD + LONG} THEN interval '2 hours' ELSE interval '15 minutes' END,
               now() - interval '2 hours', NULL
        FROM generate_series(1, {DEAD + LONG + LIVE}) AS g""",
]

# failJobsByTimeout (plans.js): the jobs the truth's stuck_leases counts.
EXPIRED = "state = 'active' AND started_on + expire_in < now()"
TRUTH = f"""
SELECT (SELECT count(*) FROM pgboss.job WHERE state < 'active' AND start_after < now()) AS depth,
       (SELECT count(*) FROM pgboss.job WHERE state = 'active') AS count_processing,
       (SELECT count(*) FROM pgboss.job WHERE state < 'active' AND start_after >= now()) AS count_scheduled,
       (SELECT count(*) FROM pgboss.job WHERE state IN ('completed', 'cancelled', 'failed')) AS count_done,
       (SELECT count(*) FROM pgboss.job WHERE {EXPIRED}) AS stuck_leases,
       (SELECT coalesce(extract(epoch FROM now() - min(greatest(created_on, start_after))), 0) FROM pgboss.job
        WHERE state < 'active' AND start_after < now()) AS oldest_age_s
"""

LEFT_OUT: dict[str, str] = {}


@pytest.fixture(scope="module")
def shaped(libserver: LibServer) -> Iterator[LibServer]:
    with pgboss_shaped(libserver, 10, BUILD, FETCHED, COMPLETED_BY_LIB, FAILED_BY_LIB) as db:
        yield db


def _cfg(db: LibServer, zone: str, tmp: Path | None = None) -> common.config.Config:
    return preset_config(db, "pgboss", zone, tmp)


def test_figures_are_pgboss_own_in_every_zone(shaped: LibServer) -> None:
    common.in_every_zone("pgboss", VERSION, shaped.url, shaped.password, QUEUE, lambda zone: _cfg(shaped, zone),
                         lambda: common.utc_truth(shaped.connect, TRUTH), LEFT_OUT)


def test_reads_measured_and_the_live_check_says_which_are_unbounded(shaped: LibServer) -> None:
    """Item 5: each fast statement's shared buffers at 200k rows, and ``config check --live``'s
    verdict on the same statement. pgboss.job is partitioned by queue name; pg-boss's only index on
    the state is job_i5 on each partition, partial on the fetchable states (state < 'active') and
    led by (name, start_after): depth reads it (at most the cap of created and retry jobs, the jobs
    sent for later sought by start_after) and reads no active or finished job (no index serves
    them: their estimate); stuck_leases still reads the partitions whole (counted exactly all the
    same), and the live check says so."""
    with shaped.connect() as conn:
        pages = conn.execute("SELECT sum(c.relpages) FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid "
                             "WHERE i.inhparent = 'pgboss.job'::regclass").fetchone()[0]
    print(f"\npgboss.job's partitions: {pages} pages")
    reads, findings = reads_and_live_check(shaped, QUEUE)
    scans = {f.field for f in findings if "scans instead of seeking" in f.reason}
    assert pages > common.BUFFER_BOUND
    assert reads["depth"].buffers <= common.BUFFER_BOUND and reads["oldest_age_s"].buffers <= common.BUFFER_BOUND
    assert "stuck_leases" in scans
    # The index it proposes can run on a partitioned table (CONCURRENTLY cannot, on the parent).
    fix = next(f.fix for f in findings if f.field == "stuck_leases" and "scans instead" in f.reason)
    assert fix.startswith('CREATE INDEX ON "pgboss"."job" ("state", "id")  -- a partitioned table'), fix
    assert "CONCURRENTLY on each partition" in fix, fix


def test_the_stuck_list_is_what_stuck_leases_counts(shaped: LibServer) -> None:
    """The items drill-down's stuck list (queueops.items, as the console reads it) holds exactly the
    20 jobs failJobsByTimeout takes, in every zone: not the 10 long jobs started 30 minutes ago with
    their own 2-hour expire_in (it listed them before: it read the status-change age against
    lease_timeout_s, not expire_in)."""
    ids = common.truth_ids(shaped.connect, f"SELECT id FROM pgboss.job WHERE {EXPIRED}")
    assert len(ids) == DEAD
    common.assert_stuck_list_is_the_count(lambda zone: _cfg(shaped, zone), QUEUE, ids,
                                          common.utc_truth(shaped.connect, TRUTH)["stuck_leases"])


def test_the_oldest_waiting_list_begins_with_the_age(shaped: LibServer) -> None:
    """The drill-down's oldest-waiting list begins with pg-boss's own oldest fetchable job (uuid
    keys: the list used to be a random hundred, jobs sent for later among them), in every zone."""
    common.assert_waiting_list_is_the_age(lambda zone: _cfg(shaped, zone), QUEUE,
                                          common.utc_truth(shaped.connect, TRUTH)["oldest_age_s"])


def test_stuck_is_counted_on_the_partitions_and_says_how(shaped: LibServer) -> None:
    """pgboss.job is partitioned: its own relpages are 0, so the stuck read took it for a small table
    ("exact (small table, no status index)"). Its size is its partitions' (past the small-table
    limit); no index serves the active jobs (job_i5 holds created and retry), and the count is still
    exact (a stuck count never vanishes), noted as the read of every active row; the index advice
    is a plain CREATE INDEX (CONCURRENTLY cannot run on a partitioned table)."""
    got = common.collect(_cfg(shaped, "UTC"), QUEUE)
    with shaped.connect() as conn:
        want = conn.execute("SELECT count(*) FROM pgboss.job WHERE state = 'active' AND started_on + expire_in < now()"
                            ).fetchone()[0]
    assert want > 0
    assert (got["stuck_leases"].value, got["stuck_leases"].note) == (
        want, "exact (read of every active row: no index serves it; see config check --live)")
    assert got["missing_index"].value == 1
    assert got["missing_index"].note.startswith('CREATE INDEX ON "pgboss"."job" (state, id) (a partitioned table'), \
        got["missing_index"].note
    assert got["oldest_lease_age_s"].value is not None and got["oldest_lease_age_s"].value > 3000


def test_requeue_is_refused_and_the_preset_says_when_pgboss_expires(shaped: LibServer, tmp_path: Path) -> None:
    """pg-boss's supervisor rescues by itself: requeue is refused with the reason, and the preset
    says after how long (expire_in, 15 minutes by default, plus a maintenance interval of 2)."""
    cfg = _cfg(shaped, "America/New_York", tmp_path / "store.db")
    with pytest.raises(actions.NotOffered) as refused:
        actions.plan(cfg, "requeue", QUEUE, {})
    assert "expires active jobs past expire_in" in str(refused.value)
    rescue = presets.get("pgboss").rescue
    assert rescue.by_itself and rescue.stale_after_s == 15 * 60 + 120
    assert "started_on + expire_in" in rescue.how
    with shaped.connect() as conn:
        active = conn.execute("SELECT count(*) FROM pgboss.job WHERE state = 'active'").fetchone()[0]
    assert active == DEAD + LONG + LIVE + FETCHED - COMPLETED_BY_LIB - FAILED_BY_LIB  # nothing was released


def test_an_own_time_limit_or_a_worker_heartbeat_is_one_rule_and_requeue_says_it_cannot_follow_it() -> None:
    """timeout_column (pg-boss's expire_in) and heartbeat_from (procrastinate's worker heartbeat)
    decide a stuck item by the library's own rule: a clear error where they cannot apply, and a
    requeue (which selects by the item's own time against lease_timeout_s) refused with why."""
    from queueops import config
    from queueops.actions import requeue
    from queueops.actions.model import RequeueOptions

    def parse(**queue: object) -> config.Config:
        return config.parse({"targets": [{"name": "a", "dialect": "postgresql", "url": "postgresql://u@h/d"}],
                             "queues": [{"name": "j", "target": "a", "table": "j", "key": "id", **queue}]})

    status = {"kind": "status", "status_column": "state", "status_changed_at": "started_on"}
    worker = {"table": "w", "key": "id", "column": "last_heartbeat", "ref": "worker_id", "alive_s": 30}
    for extra, rule in (({"timeout_column": "expire_in"}, "timeout_column"), ({"heartbeat_from": worker}, "heartbeat_from")):
        with pytest.raises(actions.ActionError, match=rule):
            requeue.check(parse(**status, **extra).queue("j"), RequeueOptions())
    with pytest.raises(config.ConfigError, match="timeout_column applies to a status queue"):
        parse(kind="lease", lease_column="locked_at", timeout_column="expire_in")
    with pytest.raises(config.ConfigError, match="one rule decides"):
        parse(**status, timeout_column="expire_in", heartbeat_from=worker)
    with pytest.raises(config.ConfigError, match="heartbeat_from applies to a status queue"):
        parse(kind="lease", lease_column="locked_at", heartbeat_from=worker)
