"""Issue 29, Oban: the preset's figures against Oban's own definitions, at production size, in three
server time zones.

Oban is Elixir: it cannot be installed here. Its schema is its migrations' DDL at version 14
(tests/conformance/upstream/oban_migrations_v14.sql) and the statements that move jobs are
transcribed from oban-bg/oban v2.23.0 (commit 2939e313):

* ``Oban.Engines.Basic.fetch_jobs`` (lib/oban/engines/basic.ex): a CTE of ``state = 'available'``
  in the queue, ``ORDER BY priority, scheduled_at, id LIMIT demand FOR UPDATE SKIP LOCKED``, then the
  UPDATE of those rows ``WHERE attempt < max_attempts`` to executing, attempt + 1;
* ``complete_job``, ``error_job`` (retryable, scheduled_at = now + backoff, the error appended);
* ``stage_jobs`` (lib/oban/stager.ex calls it every second): scheduled / retryable whose
  scheduled_at has passed become available;
* ``rescue_jobs`` (the Lifeline plugin, lib/oban/plugins/lifeline.ex in every release, every minute,
  rescue_after 60 min by default): executing jobs attempted before the cutoff become available, or
  discarded when attempt >= max_attempts.

Oban writes every time as the UTC wall clock (Elixir's DateTime.utc_now() bound as a parameter, or
``timezone('UTC', now())``) into ``timestamp without time zone`` columns. The figures:

* depth: what fetch_jobs can take: available and attempt < max_attempts (Oban's fetch takes
  'available' whatever its scheduled_at: the Stager decides when a job becomes available);
* count_processing: executing;
* stuck_leases: what Lifeline's rescue_query takes at the preset's lease_timeout_s: executing,
  attempted before the cutoff, attempt < max_attempts (at the limit Lifeline discards it instead);
* oldest_age_s: since the oldest fetchable job became runnable, its scheduled_at (inserted_at for
  a job run at once; the backoff's end for a retried one). It was inserted_at: a job retried after a
  day looked a day old.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from queueops import actions, livecheck
from tests.conformance import common
from tests.conftest import Lab

UPSTREAM = ("oban-bg/oban commit 2939e313 (v2.23.0 + 51 commits; the released v2.23.1 has the same migrations, "
            "fetch_jobs and rescue_jobs): lib/oban/migrations/postgres/v01..v14.ex, lib/oban/engines/basic.ex, "
            "lib/oban/plugins/lifeline.ex, lib/oban/stager.ex")
DDL = Path(__file__).parent / "upstream" / "oban_migrations_v14.sql"
N = common.ROWS
LEASE_S = 4200  # the preset's lease_timeout_s
MAX_ATTEMPTS = 3

# The production shape, one set-based INSERT ({u}: the UTC wall clock as Oban writes it). Ids in
# insert order, one every 0.4 s over the last ~22 h; the Pruner keeps finished jobs a day.
#   the last 10,000 ids: every other one available (5,000, a backlog run at once: scheduled_at =
#     inserted_at), 1 in 50 of the rest executing with a fresh attempt (the last 4 minutes), the
#     rest completed;
#   ids 1001-1020: executing, attempted 2 h ago (a dead node's), of which 1001-1005 on their last
#     attempt (attempt = max_attempts);
#   ids 1021-1320: available after a retry the Stager made available: inserted ~22 h ago,
#     scheduled_at (the backoff's end) 90 min ago: the oldest runnable jobs;
#   the older ids: 1 in 100 each scheduled (from 30 min ago to 30 min ahead: the Stager makes the
#     past half available), retryable (backoff ending in 5-15 min), discarded (attempts spent),
#     cancelled; the rest completed.
SHAPE = """
INSERT INTO {s}.oban_jobs (state, queue, worker, args, attempt, max_attempts, inserted_at, scheduled_at,
                           attempted_at, completed_at, discarded_at, cancelled_at, errors, priority)
SELECT x.state::{s}.oban_job_state, 'default', 'MyApp.Worker', jsonb_build_object('n', x.g), x.attempt, {m},
       x.ins, x.sch, x.att,
       CASE WHEN x.state = 'completed' THEN x.ins + interval '2 s' END,
       CASE WHEN x.state = 'discarded' THEN x.ins + interval '1 min' END,
       CASE WHEN x.state = 'cancelled' THEN x.ins + interval '1 min' END,
       CASE WHEN x.state IN ('retryable', 'discarded') THEN ARRAY['{{"error": "boom"}}'::jsonb] ELSE ARRAY[]::jsonb[] END,
       0
FROM (
    SELECT g, {u} - ({n} - g) * interval '0.4 s' AS ins,
           CASE WHEN g > {n} - 10000 AND g % 2 = 0 THEN 'available'
                WHEN g > {n} - 10000 AND g % 50 = 1 THEN 'executing'
                WHEN g > {n} - 10000 THEN 'completed'
                WHEN g BETWEEN 1001 AND 1020 THEN 'executing'
                WHEN g BETWEEN 1021 AND 1320 THEN 'available'
                WHEN g % 100 = 50 THEN 'scheduled'
                WHEN g % 100 = 51 THEN 'retryable'
                WHEN g % 100 = 52 THEN 'discarded'
                WHEN g % 100 = 53 THEN 'cancelled'
                ELSE 'completed' END AS state
    FROM generate_series(1, {n}) AS g) AS s
CROSS JOIN LATERAL (SELECT s.g, s.state, s.ins,
    CASE WHEN s.state = 'executing' AND s.g BETWEEN 1001 AND 1005 THEN {m}
         WHEN s.state IN ('discarded') THEN {m}
         WHEN s.state IN ('executing', 'retryable', 'completed') OR s.g BETWEEN 1021 AND 1320 THEN 1
         ELSE 0 END AS attempt,
    CASE WHEN s.g BETWEEN 1021 AND 1320 THEN {u} - interval '90 min'
         WHEN s.state = 'scheduled' THEN {u} + (s.g % 3600 - 1800) * interval '1 s'
         WHEN s.state = 'retryable' THEN {u} + interval '5 min' + (s.g % 600) * interval '1 s'
         ELSE s.ins END AS sch,
    CASE WHEN s.state = 'executing' AND s.g BETWEEN 1001 AND 1020 THEN {u} - interval '2 hours' - s.g * interval '1 s'
         WHEN s.state = 'executing' THEN {u} - (s.g % 240) * interval '1 s'
         WHEN s.state IN ('completed', 'discarded', 'retryable') OR s.g BETWEEN 1021 AND 1320 THEN s.ins + interval '1 s'
         END AS att) AS x
"""

# Oban.Engines.Basic.fetch_jobs as Ecto sends it (the CTE is its "optimization fence"; attempted_at
# is DateTime.utc_now() bound as a naive UTC value; attempted_by [node, uuid]).
FETCH = """
WITH "subset" AS (
    SELECT so0."id" AS "id" FROM {s}."oban_jobs" AS so0
    WHERE (so0."state" = 'available') AND (so0."queue" = %(queue)s)
    ORDER BY so0."priority", so0."scheduled_at", so0."id" LIMIT %(demand)s FOR UPDATE SKIP LOCKED)
UPDATE {s}."oban_jobs" AS o0
SET "state" = 'executing', "attempted_at" = %(now)s, "attempted_by" = %(by)s, "attempt" = o0."attempt" + 1
FROM "subset" AS f1
WHERE (o0."id" = f1."id") AND (o0."attempt" < o0."max_attempts")
RETURNING o0."id"
"""
# complete_job, error_job (basic.ex): state and time set on the one job.
COMPLETE = 'UPDATE {s}."oban_jobs" AS o0 SET "state" = \'completed\', "completed_at" = %(now)s WHERE (o0."id" = %(id)s)'
ERROR = ('UPDATE {s}."oban_jobs" AS o0 SET "state" = \'retryable\', "scheduled_at" = %(at)s, '
         '"errors" = o0."errors" || %(errors)s::jsonb[] WHERE (o0."id" = %(id)s)')
# stage_jobs (basic.ex), the Stager's limit 5,000.
STAGE = """
UPDATE {s}."oban_jobs" AS o0 SET "state" = 'available'
FROM (SELECT so0."id" AS "id", so0."state" AS "state" FROM {s}."oban_jobs" AS so0
      WHERE (so0."state" IN ('scheduled', 'retryable')) AND (so0."scheduled_at" <= %(now)s)
      ORDER BY so0."scheduled_at" DESC, so0."id" DESC LIMIT 5000) AS s1
WHERE (o0."id" = s1."id")
"""
# rescue_jobs (basic.ex) as Lifeline runs it: rescue_query then discard_query.
RESCUE = ('UPDATE {s}."oban_jobs" AS o0 SET "state" = \'available\' WHERE (o0."state" = \'executing\' '
          'AND o0."attempted_at" < %(cut)s) AND (o0."attempt" < o0."max_attempts") RETURNING o0."id"')
DISCARD = ('UPDATE {s}."oban_jobs" AS o0 SET "state" = \'discarded\', "discarded_at" = %(now)s '
           'WHERE (o0."state" = \'executing\' AND o0."attempted_at" < %(cut)s) '
           'AND (o0."attempt" >= o0."max_attempts") RETURNING o0."id"')

# Ground truth from Oban's source, in a UTC session (where a naive UTC value reads right).
# count_exhausted (available at max_attempts) is left out: Oban never makes such a job (its fetch
# raises attempt only with the state), so the shape has none, and above the cap queueops labels its
# 0 an estimate (the share in the cap's read), which the harness counts as an estimate below the cap.
# Lifeline's rescue set at the preset's timeout: the truth's stuck_leases and the ids it counts.
STUCK = "state = 'executing' AND attempt < max_attempts AND attempted_at < now() - make_interval(secs => {lease})"
TRUTH = """
SELECT count(*) FILTER (WHERE state = 'available' AND attempt < max_attempts) AS depth,
       count(*) FILTER (WHERE state = 'executing') AS count_processing,
       count(*) FILTER (WHERE state IN ('completed', 'discarded', 'cancelled')) AS count_done,
       count(*) AS rows_total,
       count(*) FILTER (WHERE {stuck}) AS stuck_leases,
       extract(epoch FROM now() - min(scheduled_at) FILTER (WHERE state = 'available' AND attempt < max_attempts))
           AS oldest_age_s,
       extract(epoch FROM now() - min(attempted_at) FILTER (WHERE state = 'executing')) AS oldest_lease_age_s
FROM {s}.oban_jobs
"""


def utc_now() -> datetime:
    """Elixir's DateTime.utc_now() as Ecto binds it into a utc_datetime_usec column: naive UTC."""
    return datetime.now(UTC).replace(tzinfo=None)


@pytest.fixture(scope="module")
def oban(lab: Lab) -> Iterator[str]:
    """Oban's table at production size, moved by Oban's own statements, analyzed; built once."""
    name = f"oban_{uuid.uuid4().hex[:8]}"
    s = f'"{name}"'
    started = time.monotonic()
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(DDL.read_text().replace("{s}", s))
        conn.execute(SHAPE.format(s=s, u="timezone('UTC', now())", n=N, m=MAX_ATTEMPTS))
        # A node fetches 2 x 50, completes 30 of them and fails 10 (backoff 60 s); the Stager runs.
        fetched: list[int] = []
        for _ in range(2):
            fetched += [r[0] for r in conn.execute(FETCH.format(s=s), {
                "queue": "default", "demand": 50, "now": utc_now(), "by": ["node@a", str(uuid.uuid4())]})]
        assert len(fetched) == 100
        for job in fetched[:30]:
            conn.execute(COMPLETE.format(s=s), {"now": utc_now(), "id": job})
        for job in fetched[30:40]:
            conn.execute(ERROR.format(s=s), {"at": utc_now() + timedelta(seconds=60), "id": job,
                                             "errors": ['{"error": "boom"}']})
        staged = conn.execute(STAGE.format(s=s), {"now": utc_now()}).rowcount
        assert 500 < staged < 5000, staged
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SET default_statistics_target = 1000")  # every row sampled (see test_depth_production)
        conn.execute(f"ANALYZE {s}.oban_jobs")
    print(f"\nOBAN build {time.monotonic() - started:.1f} s")
    yield name
    with lab.connect() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _cfg(lab: Lab, schema: str, zone: str, store: Path | None = None) -> Any:
    return common.make_config(lab.url, Path(lab.server.password_file), zone,
                              [{"name": "oban", "preset": "oban", "schema": schema}], store,
                              "operator" if store else None)


def _truth(lab: Lab, schema: str) -> dict[str, float | None]:
    with lab.connect() as conn:
        conn.execute("SET TimeZone = 'UTC'")
        return common.truth(conn, TRUTH.format(s=f'"{schema}"', stuck=STUCK.format(lease=LEASE_S)))


def test_figures_are_obans_own_in_every_zone(lab: Lab, oban: str) -> None:
    _, truth = common.in_every_zone("oban", UPSTREAM, lab.url, lab.password, "oban",
                                    lambda zone: _cfg(lab, oban, zone), lambda: _truth(lab, oban))
    # the shape is what the issue asks for
    assert truth["depth"] > common.CAP and truth["stuck_leases"] == 15 and truth["rows_total"] == N  # type: ignore[operator]


def test_the_stuck_list_is_what_stuck_leases_counts(lab: Lab, oban: str) -> None:
    """The items drill-down's stuck list (queueops.items, as the console reads it) holds exactly
    the 15 jobs Lifeline's rescue takes, in every zone: not the 5 on their last attempt, no fresh one."""
    ids = common.truth_ids(lab.connect, f'SELECT id FROM "{oban}".oban_jobs WHERE {STUCK.format(lease=LEASE_S)}')  # noqa: S608
    common.assert_stuck_list_is_the_count(lambda zone: _cfg(lab, oban, zone), "oban", ids,
                                          _truth(lab, oban)["stuck_leases"])


def test_the_oldest_waiting_list_begins_with_the_age(lab: Lab, oban: str) -> None:
    """The drill-down's oldest-waiting list begins with Oban's own oldest available job below its
    attempt limit, in every zone."""
    common.assert_waiting_list_is_the_age(lambda zone: _cfg(lab, oban, zone), "oban",
                                          _truth(lab, oban)["oldest_age_s"])


def test_reads_are_bounded_by_the_cap_and_the_live_check_says_seek(lab: Lab, oban: str) -> None:
    """Item 5: each fast statement reads a number of buffers set by the cap, not by the table (the
    state values from unnest walked the primary key: ~9,000 buffers); the live check agrees."""
    cfg = _cfg(lab, oban, "UTC")
    with lab.connect() as conn:
        reads = common.measured_reads(cfg, "oban", conn)
    for r in reads:
        print(f"\nOBAN reads {r.collector}: {r.buffers} buffers of {r.relpages} pages via {r.read_by}")
    assert {r.collector for r in reads} == set(common.FAST_COLLECTORS)
    assert all(r.buffers <= common.BUFFER_BOUND for r in reads), reads
    assert all(r.relpages > common.BUFFER_BOUND for r in reads), reads  # a walk of the table would show
    report = livecheck.report_live(cfg)
    scans = [f for f in report.findings if "scan" in f.reason or "not counted" in f.reason]
    assert not scans, scans


def test_discover_recognises_the_preset_on_the_librarys_ddl(lab: Lab, oban: str) -> None:
    """Item 6: ``discover`` proposes the oban preset for oban_jobs as Oban's migrations v01-v14 leave it (the state enum with 'suspended', naive timestamps), and none of the
    library's other tables as a queue of its own."""
    found = common.proposed(_cfg(lab, oban, "UTC"), oban)
    assert found == [("oban_jobs", "oban")], found


def test_requeue_releases_only_abandoned_jobs_and_obans_fetch_takes_each_once(lab: Lab, oban: str,
                                                                             tmp_path: Path) -> None:
    """Item 4. In every zone the preview holds exactly Lifeline's rescue set (never a job with a
    fresh attempt); the preset warns (Lifeline may be configured); a job on its last attempt is not
    made available (Oban would never fetch it: Lifeline discards it). After the requeue Oban's own
    fetch takes each released job exactly once."""
    s = f'"{oban}"'
    with lab.connect() as conn:
        conn.execute("SET TimeZone = 'UTC'")
        rescue = {r[0] for r in conn.execute(
            f"SELECT id FROM {s}.oban_jobs WHERE state = 'executing' AND attempted_at < now() - "  # noqa: S608
            f"make_interval(secs => {LEASE_S}) AND attempt < max_attempts")}
        last = {r[0] for r in conn.execute(
            f"SELECT id FROM {s}.oban_jobs WHERE state = 'executing' AND attempted_at < now() - "  # noqa: S608
            f"make_interval(secs => {LEASE_S}) AND attempt >= max_attempts")}
        fresh = {r[0] for r in conn.execute(
            f"SELECT id FROM {s}.oban_jobs WHERE state = 'executing' AND attempted_at >= now() - interval '10 min'")}  # noqa: S608
    assert len(rescue) == 15 and len(last) == 5 and len(fresh) > 100
    for zone in common.ZONES:
        plan = actions.plan(_cfg(lab, oban, zone), "requeue", "oban", {})
        keys = {r["item"] for r in plan.preview.rows}
        assert keys == rescue, (zone, sorted(keys ^ rescue))
        assert not keys & (fresh | last), zone
        assert any("Lifeline rescues" in w for w in plan.preview.warnings), plan.preview.warnings
        # the 5 on their last attempt: not released, and the preview says how many and why
        assert any(w.startswith("5 processing item(s) older than 4200 s at max_attempts not released")
                   for w in plan.preview.warnings), plan.preview.warnings
    result = common.requeue(_cfg(lab, oban, "Asia/Tokyo", tmp_path / "store.db"), "oban")
    assert result.outcome == "ok", result
    with lab.connect() as conn:
        states = dict(conn.execute(f"SELECT id, state::text FROM {s}.oban_jobs WHERE id = ANY(%s)",  # noqa: S608
                                   (sorted(rescue | last | fresh),)).fetchall())
        assert {states[k] for k in rescue} == {"available"}
        assert {states[k] for k in fresh | last} == {"executing"}
        # Oban's fetch, demand 20: the released jobs sort first (their scheduled_at is the oldest);
        # each is taken once, the second fetch takes none of them again.
        first = [r[0] for r in conn.execute(FETCH.format(s=s), {
            "queue": "default", "demand": 20, "now": utc_now(), "by": ["node@b", str(uuid.uuid4())]})]
        second = [r[0] for r in conn.execute(FETCH.format(s=s), {
            "queue": "default", "demand": 20, "now": utc_now(), "by": ["node@b", str(uuid.uuid4())]})]
        assert len(first) == len(set(first)) == 20 and rescue <= set(first), (sorted(rescue - set(first)))
        assert not rescue & set(second)
        # Lifeline's own rescue now finds only the jobs on their last attempt, and discards them.
        cut = utc_now() - timedelta(seconds=LEASE_S)
        assert not conn.execute(RESCUE.format(s=s), {"cut": cut}).fetchall()
        assert {r[0] for r in conn.execute(DISCARD.format(s=s), {"cut": cut, "now": utc_now()})} == last


def test_oldest_age_sees_the_oldest_fetchable_job_of_every_queue_and_priority(lab: Lab) -> None:
    """Oban's fetch index is (state, queue, priority, scheduled_at, id): the first cap of available
    jobs in its order are the first queue's highest priority. Behind 1,100 of them (waiting 1 min)
    sit an older priority-3 job of the same queue (20 min) and one of a later queue (10 min), and a
    job at its attempt limit older still (30 min), which Oban's fetch never takes. The age is the
    priority-3 job's, read exactly (a skip read of the index, no 'at least'): it was the 1-min one."""
    name = f"oban_{uuid.uuid4().hex[:8]}"
    s = f'"{name}"'
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        try:
            conn.execute(DDL.read_text().replace("{s}", s))
            conn.execute(f"""
                INSERT INTO {s}.oban_jobs (state, queue, worker, args, attempt, max_attempts, inserted_at,
                                           scheduled_at, priority)
                SELECT 'available', q, 'MyApp.Worker', '{{}}', a, {MAX_ATTEMPTS}, at, at, p
                FROM (SELECT 'default' AS q, 0 AS p, 0 AS a, timezone('UTC', now()) - interval '1 min' AS at
                      FROM generate_series(1, 1100)
                      UNION ALL SELECT 'default', 3, 0, timezone('UTC', now()) - interval '20 min'
                      UNION ALL SELECT 'mailers', 0, 0, timezone('UTC', now()) - interval '10 min'
                      UNION ALL SELECT 'a_first', 0, {MAX_ATTEMPTS}, timezone('UTC', now()) - interval '30 min') AS j
                """)  # noqa: S608 - this module's own constants
            conn.execute(f"ANALYZE {s}.oban_jobs")
            truth = _truth(lab, name)["oldest_age_s"]
            got = common.collect(_cfg(lab, name, "America/New_York"), "oban")["oldest_age_s"]
        finally:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
    print(f"\nOBAN oldest_age_s behind queue and priority: truth {truth}, queueops {got.value} ({got.note!r})")
    assert truth is not None and 1190 < truth < 1260 and got.value is not None
    assert abs(got.value - truth) <= common.AGE_SLACK_S and not got.note.startswith("at least"), got
