"""Issue 29, River: the preset's figures against River's own definitions, at production size, in
three server time zones.

River is Go and cannot run here, but its insert-only Python client can: riverqueue 0.7.0 (PyPI,
riverqueue/riverqueue-python), ``riverqueue.Client(riversqlalchemy.Driver(engine))`` on a psycopg
SQLAlchemy engine whose search_path is the test's schema (the client names ``river_job`` unqualified).
Every job of the scenario the assertions are about enters river_job through that client, River's own
code and SQL (riverqueue/driver/riversqlalchemy/dbsqlc/river_job.sql): ``JobInsertFastMany``
(``insert_many``) for the 10,000 jobs of the live window, the 300 retried jobs and the 1,900 scheduled
ones, ``JobInsertFast`` (``insert``) for the 30 jobs a dead client left running; the client writes
args, kind, max_attempts, metadata ``{}``, priority, queue, scheduled_at, tags and the state it derives
(``scheduled`` when InsertOpts.scheduled_at is given, else ``available``), created_at is the insert's
now(), unique_key and unique_states stay NULL. The other 187,770 jobs, the finalized history, are one
set-based INSERT of the test's (HISTORY): the client writes only available and scheduled jobs, and
bringing 190,000 of them to completed through the client and River's statements took 29 s here
(insert_many 8.5 s, JobSchedule 6.1 s, JobGetAvailable 4.7 s, JobSetStateIfRunningMany 9.3 s) against
3.4 s for the INSERT, and left the table 2.4 times as many pages.

Everything that moves jobs is Go and stays transcribed: the river_job statements of River's migrations
002-007 and the queries below, from riverqueue/river v0.43.0 + 2 commits (fdf6cdf), in
tests/conformance/upstream/river_v0.43.0.sql, run with River's schema placeholder and sqlc parameters
filled in (``now``, River's own clock parameter, places a statement in the past):

* ``JobSchedule`` (the leader's scheduler): retryable / scheduled whose scheduled_at passed become
  available;
* ``JobGetAvailable`` (the producer's fetch): available in the queue, scheduled_at passed, ``ORDER BY
  priority, scheduled_at, id LIMIT max_to_lock FOR UPDATE SKIP LOCKED``, set running, attempt + 1;
* ``JobSetStateIfRunningMany`` (the completer): completed with finalized_at, or retryable with the
  next scheduled_at and the error appended;
* ``JobGetStuck`` + ``JobRescueMany`` (the leader's JobRescuer, internal/maintenance/job_rescuer.go,
  every 30 s, RescueStuckJobsAfter 1 h by default): running jobs attempted before the horizon become
  retryable, or discarded when attempt >= max_attempts.

The client 0.7.0 predates migration 006: its unique insert (``JobInsertUnique``, UniqueOpts without
by_state) says ``ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL``, the index of migration
005 that 006 drops (for river_job_unique_idx on unique_key and unique_states, a column the client never
writes), so PostgreSQL refuses it here (test_the_clients_unique_insert_predates_migration_006); with
by_state it locks, looks up and inserts without a unique_key. No job of the shape is unique, and all
are priority 1 (River's default): with an older lower-priority job behind more than the cap of
priority-1 ones, oldest_age_s misses it (a finding, test_oldest_age_sees_an_older_job_of_a_lower_priority).

The figures: depth is what JobGetAvailable can take (available, scheduled_at passed); count_processing
is running (River's JobCountByQueueAndState); stuck_leases is what JobGetStuck returns at the preset's
lease_timeout_s (River has no heartbeat: attempted_at is a running job's only sign of life);
oldest_age_s is since the oldest available job became runnable, its scheduled_at (it was created_at:
a job retried an hour later looked an hour older). River rescues stuck jobs itself, so queueops
refuses requeue and the preset says after how long.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import psycopg
import pytest
import riverqueue
import sqlalchemy
from psycopg import sql
from riverqueue import InsertManyParams, InsertOpts
from riverqueue.driver import riversqlalchemy

from queueops import actions, livecheck, presets
from tests.conformance import common
from tests.conftest import Lab

UPSTREAM = ("riverqueue/river v0.43.0 + 2 commits (fdf6cdf): riverdriver/riverpgxv5/migration/main/001..007, "
            "riverdriver/riverpgxv5/internal/dbsqlc/river_job.sql, internal/maintenance/job_rescuer.go; "
            "jobs inserted by riverqueue 0.7.0 (Python): riverqueue/driver/riversqlalchemy/dbsqlc/river_job.sql "
            "JobInsertFast, JobInsertFastMany")
SOURCE = (Path(__file__).parent / "upstream" / "river_v0.43.0.sql").read_text()
N = common.ROWS
LEASE_S = 4200  # the preset's lease_timeout_s
MAX_ATTEMPTS = 25  # River's default (migration 007; the client's MAX_ATTEMPTS_DEFAULT)
LIVE = 10_000  # the live window, inserted by the client: half run (1 in 50 of those still running), half wait
RETRIED = 300  # run 92 min ago, failed, to be retried 90 min ago: the oldest runnable jobs
SCHEDULED = 1_900  # scheduled from 30 min ago to 30 min ahead
STUCK = 20  # running, attempted 75-94 min ago by a dead client; 5 on their last attempt
OLD_STUCK = 10  # running, attempted 3 h ago (the rescuer takes them below)
HISTORY_ROWS = N - LIVE - RETRIED - SCHEDULED - STUCK - OLD_STUCK


def _schema(text: str, s: str) -> str:
    return re.sub(r"/\* TEMPLATE: schema \*/\s*", f"{s}.", text)


def migrations(s: str) -> list[str]:
    """River's up migrations of river_job in order, each its own statement string (each runs in its own
    transaction, as river migrate-up does: 004 adds an enum value that 006 uses)."""
    parts = re.split(r"^-- migration: .*$", SOURCE.split("\n-- name: ")[0], flags=re.M)[1:]
    return [_schema(p, s) for p in parts]


def query(name: str, s: str) -> str:
    """One of River's sqlc queries, its parameters as psycopg's named placeholders."""
    text = next(p for p in SOURCE.split("\n-- name: ")[1:] if p.startswith(name + " "))
    text = text.split("\n", 1)[1]
    text = text.replace("sqlc.narg('now')", "%(now)s").replace("sqlc.embed(river_job)", "river_job.*")
    return re.sub(r"@(\w+)", r"%(\1)s", _schema(text, s))


# The finalized history, one set-based INSERT (River writes timestamptz): the jobs the client cannot
# write (it writes available and scheduled jobs only). Ids in insert order, one every 0.4 s from ~22 h
# ago to ~80 min ago (the JobCleaner keeps completed jobs 24 h by default); 1 in 100 each retryable
# (5-15 min ahead), discarded (attempts exhausted), cancelled (before it ran); the rest completed.
HISTORY = """
INSERT INTO {s}.river_job (state, attempt, max_attempts, attempted_at, created_at, finalized_at, scheduled_at,
                           args, kind, queue, errors, attempted_by)
SELECT x.state::{s}.river_job_state,
       CASE x.state WHEN 'discarded' THEN {m} WHEN 'cancelled' THEN 0 ELSE 1 END, {m},
       CASE WHEN x.state <> 'cancelled' THEN x.ins + interval '1 s' END, x.ins,
       CASE WHEN x.state <> 'retryable' THEN x.ins + interval '2 s' END,
       CASE WHEN x.state = 'retryable' THEN now() + interval '5 min' + (x.g % 600) * interval '1 s' ELSE x.ins END,
       jsonb_build_object('n', x.g), 'my_kind', 'default',
       CASE WHEN x.state IN ('retryable', 'discarded') THEN ARRAY['{{"error": "boom"}}'::jsonb] END,
       CASE WHEN x.state <> 'cancelled' THEN ARRAY['client_a'] END
FROM (SELECT g, now() - ({n} - g) * interval '0.4 s' AS ins,
             CASE g % 100 WHEN 51 THEN 'retryable' WHEN 52 THEN 'discarded' WHEN 53 THEN 'cancelled'
                          ELSE 'completed' END AS state
      FROM generate_series(1, {rows}) AS g) AS x
"""

# Ground truth from River's source (timestamptz: any session zone reads it right).
# JobGetStuck at the preset's timeout: the truth's stuck_leases and the ids it counts.
STUCK_SQL = "state = 'running' AND attempted_at < now() - make_interval(secs => {lease})"
TRUTH = """
SELECT count(*) FILTER (WHERE state = 'available' AND scheduled_at <= now()) AS depth,
       count(*) FILTER (WHERE state = 'running') AS count_processing,
       count(*) FILTER (WHERE state IN ('completed', 'discarded', 'cancelled')) AS count_done,
       count(*) AS rows_total,
       count(*) FILTER (WHERE {stuck}) AS stuck_leases,
       extract(epoch FROM now() - min(scheduled_at) FILTER (WHERE state = 'available' AND scheduled_at <= now()))
           AS oldest_age_s,
       extract(epoch FROM now() - min(attempted_at) FILTER (WHERE state = 'running')) AS oldest_lease_age_s
FROM {s}.river_job
"""


@dataclass
class Args:
    """A job's args as riverqueue wants them: a kind and to_json()."""

    n: int
    kind: str = "my_kind"

    def to_json(self) -> str:
        return json.dumps({"n": self.n})


class Built(NamedTuple):
    schema: str
    last_attempt: list[int]  # the stuck jobs on their last attempt (max_attempts 1), as the client returned them


def _client(lab: Lab, schema: str) -> tuple[riverqueue.Client, sqlalchemy.Engine]:
    """River's Python client on a SQLAlchemy engine (psycopg) whose sessions see ``schema`` first."""
    url = sqlalchemy.engine.make_url(lab.url).set(drivername="postgresql+psycopg")
    engine = sqlalchemy.create_engine(url, connect_args={"password": lab.password,
                                                         "options": f"-c search_path={schema}"})
    return riverqueue.Client(riversqlalchemy.Driver(engine)), engine


def _fetch(conn: psycopg.Connection, s: str, n: int, at: datetime | None = None, by: str = "client_a") -> list[int]:
    """JobGetAvailable as a producer calls it, at River's clock ``at`` (now when None)."""
    return [r[0] for r in conn.execute(query("JobGetAvailable", s), {
        "queue": "default", "max_to_lock": n, "now": at, "max_attempted_by": 100, "attempted_by": by})]


def _schedule(conn: psycopg.Connection, s: str, at: datetime | None = None) -> int:
    """JobSchedule as the leader's scheduler runs it, at River's clock ``at`` (now when None)."""
    return len(conn.execute(query("JobSchedule", s), {"now": at, "max": 10_000}).fetchall())


def _set_state(conn: psycopg.Connection, s: str, jobs: list[int], state: str, **kw: Any) -> list[int]:
    """JobSetStateIfRunningMany as River's completer calls it for ``jobs``."""
    n, now = len(jobs), datetime.now(UTC)
    params = {"ids": jobs, "attempt_do_update": [False] * n, "attempt": [0] * n,
              "errors_do_update": [state == "retryable"] * n, "errors": ['{"error": "boom"}'] * n,
              "finalized_at_do_update": [state == "completed"] * n, "finalized_at": [now] * n,
              "metadata_do_merge": [False] * n, "metadata_updates": ["{}"] * n,
              "scheduled_at_do_update": [state == "retryable"] * n,
              "scheduled_at": [kw.get("scheduled_at", now)] * n, "state": [state] * n, "now": None}
    return [r[0] for r in conn.execute(query("JobSetStateIfRunningMany", s), params)]


def _rescue(conn: psycopg.Connection, s: str, horizon: datetime) -> dict[int, str]:
    """The JobRescuer's pass: JobGetStuck, then JobRescueMany (retryable with the next retry time
    while attempts remain, else discarded with finalized_at; job_rescuer.go makeRetryDecision)."""
    stuck = conn.execute(query("JobGetStuck", s), {"after_id": 0, "stuck_horizon": horizon, "max": 1000}).fetchall()
    cols = [d.name for d in conn.execute(f"SELECT * FROM {s}.river_job LIMIT 0").description or []]  # noqa: S608
    rows = [dict(zip(cols, r, strict=True)) for r in stuck]
    now = datetime.now(UTC)
    zero = datetime(1, 1, 1, tzinfo=UTC)
    decide = {r["id"]: "retryable" if r["attempt"] < r["max_attempts"] else "discarded" for r in rows}
    if rows:
        conn.execute(query("JobRescueMany", s), {
            "id": [r["id"] for r in rows], "error": ['{"error": "Stuck job rescued by JobRescuer"}'] * len(rows),
            "finalized_at": [zero if decide[r["id"]] == "retryable" else now for r in rows],
            "scheduled_at": [now + timedelta(seconds=30) if decide[r["id"]] == "retryable" else r["scheduled_at"]
                             for r in rows],
            "state": [decide[r["id"]] for r in rows]})
    return decide


def _insert_scenario(client: riverqueue.Client, conn: psycopg.Connection, s: str, t0: datetime) -> list[int]:
    """The scenario's jobs, inserted by River's client and moved by River's statements at River's clock
    (``now``) where they happened in the past (the client's created_at is the insert's now() all the
    same: no figure reads it). Returns the ids of the stuck jobs on their last attempt."""
    # scheduled from 30 min ago to 30 min ahead: the client writes them scheduled; no scheduler has run
    # since the leader (the dead client below) died, so the fixture's JobSchedule stages half of them
    step = 3600 / SCHEDULED
    assert client.insert_many([InsertManyParams(Args(-k), InsertOpts(
        scheduled_at=t0 + timedelta(seconds=k * step - 1800))) for k in range(SCHEDULED)]) == SCHEDULED
    # the dead client's jobs: run at their scheduled time 3 h ago and 94-75 min ago, never finished;
    # five of the later ones allowed one attempt (max_attempts 1): on their last attempt
    old = t0 - timedelta(hours=3)
    for k in range(OLD_STUCK):
        assert client.insert(Args(k), InsertOpts(scheduled_at=old)).job.state == "scheduled"
    assert _schedule(conn, s, old) == OLD_STUCK and len(_fetch(conn, s, OLD_STUCK, old)) == OLD_STUCK
    times = [t0 - timedelta(minutes=94 - k) for k in range(STUCK)]
    last = [client.insert(Args(100 + k), InsertOpts(scheduled_at=at, max_attempts=1 if k % 4 == 0 else None)).job
            for k, at in enumerate(times)]
    assert _schedule(conn, s, times[-1]) == STUCK
    for at in times:
        assert len(_fetch(conn, s, 1, at)) == 1
    # the retried jobs: run 92 min ago, failed, to be retried 90 min ago; retryable since (the leader's
    # scheduler died with it): the fixture's JobSchedule makes them the oldest runnable jobs
    ran = t0 - timedelta(minutes=92)
    assert client.insert_many([InsertManyParams(Args(1000 + k), InsertOpts(scheduled_at=ran))
                               for k in range(RETRIED)]) == RETRIED
    assert _schedule(conn, s, ran) == RETRIED
    failed = _fetch(conn, s, RETRIED, ran + timedelta(seconds=1))
    assert len(_set_state(conn, s, failed, "retryable", scheduled_at=t0 - timedelta(minutes=90))) == RETRIED
    # the live window: inserted to run at once (available); the producers took the older half 100 at a time and the completer finished all but 1 in 50 of them
    assert client.insert_many([Args(10_000 + k) for k in range(LIVE)]) == LIVE
    taken = [i for _ in range(LIVE // 2 // 100) for i in _fetch(conn, s, 100)]
    assert len(taken) == LIVE // 2
    assert len(_set_state(conn, s, [i for k, i in enumerate(taken) if k % 50], "completed")) == LIVE // 2 * 49 // 50
    return sorted(j.id for k, j in enumerate(last) if k % 4 == 0)


@pytest.fixture(scope="module")
def river(lab: Lab) -> Iterator[Built]:
    """River's table at production size, its scenario inserted by River's client and moved by River's
    own queries, analyzed; built once."""
    name = f"river_{uuid.uuid4().hex[:8]}"
    s = f'"{name}"'
    started = time.monotonic()
    client, engine = _client(lab, name)
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        for step in migrations(s):
            conn.execute(step)
        conn.execute(HISTORY.format(s=s, n=N, rows=HISTORY_ROWS, m=MAX_ATTEMPTS))
        last_attempt = _insert_scenario(client, conn, s, datetime.now(UTC))
        engine.dispose()
        fetched = _fetch(conn, s, 50, by="client_b") + _fetch(conn, s, 50, by="client_b")
        assert len(fetched) == 100
        assert len(_set_state(conn, s, fetched[:30], "completed")) == 30
        retry_at = datetime.now(UTC) + timedelta(seconds=60)
        assert len(_set_state(conn, s, fetched[30:40], "retryable", scheduled_at=retry_at)) == 10
        staged = _schedule(conn, s)
        assert 500 < staged < 5000, staged
        # the leader's rescuer ran once, long ago at a 2 h horizon: the 3-hour-old jobs only
        rescued = _rescue(conn, s, datetime.now(UTC) - timedelta(hours=2))
        assert len(rescued) == OLD_STUCK and set(rescued.values()) == {"retryable"}
        common.analyze(conn, f"{s}.river_job")
    print(f"\nRIVER build {time.monotonic() - started:.1f} s")
    yield Built(name, last_attempt)
    with lab.connect() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _cfg(lab: Lab, schema: str, zone: str) -> Any:
    return common.make_config(lab.url, Path(lab.server.password_file), zone,
                              [{"name": "river", "preset": "river", "schema": schema}])


def _truth(lab: Lab, schema: str) -> dict[str, float | None]:
    with lab.connect() as conn:
        return common.truth(conn, TRUTH.format(s=f'"{schema}"', stuck=STUCK_SQL.format(lease=LEASE_S)))


def test_figures_are_rivers_own_in_every_zone(lab: Lab, river: Built) -> None:
    _, truth = common.in_every_zone("river", UPSTREAM, lab.url, lab.password, "river",
                                    lambda zone: _cfg(lab, river.schema, zone), lambda: _truth(lab, river.schema))
    assert truth["depth"] > common.CAP and truth["stuck_leases"] == STUCK and truth["rows_total"] == N  # type: ignore[operator]


def test_the_stuck_list_is_what_stuck_leases_counts(lab: Lab, river: Built) -> None:
    """The items drill-down's stuck list (queueops.items, as the console reads it) holds exactly
    the 20 jobs JobGetStuck returns at the preset's timeout, in every zone."""
    ids = common.truth_ids(lab.connect, f'SELECT id FROM "{river.schema}".river_job '  # noqa: S608
                                        f'WHERE {STUCK_SQL.format(lease=LEASE_S)}')
    common.assert_stuck_list_is_the_count(lambda zone: _cfg(lab, river.schema, zone), "river", ids,
                                          _truth(lab, river.schema)["stuck_leases"])


def test_the_oldest_waiting_list_begins_with_the_age(lab: Lab, river: Built) -> None:
    """The drill-down's oldest-waiting list begins with River's own oldest available job (its
    retried jobs at priority 4 behind the fresh ones at 1 among them), in every zone."""
    common.assert_waiting_list_is_the_age(lambda zone: _cfg(lab, river.schema, zone), "river",
                                          _truth(lab, river.schema)["oldest_age_s"])


def test_reads_are_bounded_by_the_cap_and_the_live_check_says_seek(lab: Lab, river: Built) -> None:
    """Item 5: the state values from unnest walked River's primary key (~8,700 buffers at 200,000
    rows); read through river_job_prioritized_fetching_index each statement stays under the bound."""
    cfg = _cfg(lab, river.schema, "UTC")
    with lab.connect() as conn:
        reads = common.measured_reads(cfg, "river", conn)
    for r in reads:
        print(f"\nRIVER reads {r.collector}: {r.buffers} buffers of {r.relpages} pages via {r.read_by}")
    assert {r.collector for r in reads} == set(common.FAST_COLLECTORS)
    assert all(r.buffers <= common.BUFFER_BOUND < r.relpages for r in reads), reads
    report = livecheck.report_live(cfg)
    scans = [f for f in report.findings if "scan" in f.reason or "not counted" in f.reason]
    assert not scans, scans


def test_discover_recognises_the_preset_on_the_librarys_ddl(lab: Lab, river: Built) -> None:
    """Item 6: ``discover`` proposes the river preset for river_job as River's migrations 002-007 leave it (the state enum with 'pending', bit(8) unique_states), and none of the
    library's other tables as a queue of its own."""
    found = common.proposed(_cfg(lab, river.schema, "UTC"), river.schema)
    assert found == [("river_job", "river")], found


def test_requeue_is_refused_and_the_preset_says_when_river_rescues(lab: Lab, river: Built) -> None:
    """Item 4: River's JobRescuer takes stuck jobs back itself (every 30 s, after RescueStuckJobsAfter,
    1 h by default): requeue is refused with that reason, and the rescuer's own pass at the default
    horizon takes exactly the jobs queueops counts stuck (at the preset's longer timeout) and more."""
    with pytest.raises(actions.NotOffered, match="JobRescuer"):
        actions.plan(_cfg(lab, river.schema, "UTC"), "requeue", "river", {})
    rescue = presets.get("river").rescue
    assert rescue.by_itself and rescue.stale_after_s == 3600 and "1 hour" in rescue.how and "30 s" in rescue.how
    s = f'"{river.schema}"'
    with lab.connect() as conn:
        stuck = {r[0] for r in conn.execute(
            f"SELECT id FROM {s}.river_job WHERE state = 'running' "  # noqa: S608
            f"AND attempted_at < now() - make_interval(secs => {LEASE_S})")}
        decided = _rescue(conn, s, datetime.now(UTC) - timedelta(seconds=rescue.stale_after_s))
        assert stuck <= set(decided)
        assert not set(decided) & {r[0] for r in conn.execute(
            f"SELECT id FROM {s}.river_job WHERE attempted_at >= now() - interval '10 min'")}  # noqa: S608
        assert len(river.last_attempt) == 5
        assert sorted(k for k, v in decided.items() if v == "discarded") == river.last_attempt


@pytest.fixture()
def small_river(lab: Lab) -> Iterator[tuple[str, riverqueue.Client]]:
    """An empty river_job of its own (River's migrations) and River's client on it."""
    name = f"river_{uuid.uuid4().hex[:8]}"
    client, engine = _client(lab, name)
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        for step in migrations(f'"{name}"'):
            conn.execute(step)
    yield name, client
    engine.dispose()
    with lab.connect() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_oldest_age_sees_an_older_job_of_a_lower_priority(lab: Lab, small_river: tuple[str, riverqueue.Client]) -> None:
    """River fetches by priority first: a priority-4 job waiting 10 min behind 1,100 priority-1 jobs
    waiting 1 min is the oldest runnable job, and River's definition (the truth) says 600 s."""
    name, client = small_river
    t0 = datetime.now(UTC)
    jobs = [InsertManyParams(Args(0), InsertOpts(scheduled_at=t0 - timedelta(minutes=10), priority=4))]
    jobs += [InsertManyParams(Args(k), InsertOpts(scheduled_at=t0 - timedelta(minutes=1))) for k in range(1, 1101)]
    assert client.insert_many(jobs) == len(jobs)
    with lab.connect() as conn:
        assert _schedule(conn, f'"{name}"') == len(jobs)
        common.analyze(conn, f'"{name}".river_job')
    truth = _truth(lab, name)["oldest_age_s"]
    got = common.collect(_cfg(lab, name, "UTC"), "river")["oldest_age_s"]
    print(f"\nRIVER oldest_age_s behind priority: truth {truth}, queueops {got.value} ({got.note!r})")
    assert truth is not None and truth > 590 and got.value is not None
    assert abs(got.value - truth) <= common.AGE_SLACK_S


def test_the_clients_unique_insert_predates_migration_006(small_river: tuple[str, riverqueue.Client]) -> None:
    """riverqueue 0.7.0's unique insert (JobInsertUnique: UniqueOpts without by_state) names
    migration 005's unique index, ON CONFLICT (kind, unique_key) WHERE unique_key IS NOT NULL, which
    migration 006 drops: PostgreSQL refuses it on River 0.43's schema, so the shape has no unique job.
    This fails once the pinned client writes unique jobs River 0.43 can hold (then add some)."""
    _, client = small_river
    with pytest.raises(sqlalchemy.exc.ProgrammingError, match="no unique or exclusion constraint matching"):
        client.insert(Args(1), InsertOpts(unique_opts=riverqueue.UniqueOpts(by_args=True)))
