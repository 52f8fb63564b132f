"""Issue 29, River: the preset's figures against River's own definitions, at production size, in
three server time zones.

River is Go: it cannot be installed here. The river_job statements of its migrations 002-007 and
the queries it runs are transcribed from riverqueue/river v0.43.0 + 2 commits (fdf6cdf) into
tests/conformance/upstream/river_v0.43.0.sql and run here with River's schema placeholder and sqlc
parameters filled in:

* ``JobGetAvailable`` (the producer's fetch): available in the queue, scheduled_at passed, ``ORDER BY
  priority, scheduled_at, id LIMIT max_to_lock FOR UPDATE SKIP LOCKED``, set running, attempt + 1;
* ``JobSetStateIfRunningMany`` (the completer): completed with finalized_at, or retryable with the
  next scheduled_at and the error appended;
* ``JobSchedule`` (the leader's scheduler): retryable / scheduled whose scheduled_at passed become
  available;
* ``JobGetStuck`` + ``JobRescueMany`` (the leader's JobRescuer, internal/maintenance/job_rescuer.go,
  every 30 s, RescueStuckJobsAfter 1 h by default): running jobs attempted before the horizon become
  retryable, or discarded when attempt >= max_attempts.

The figures: depth is what JobGetAvailable can take (available, scheduled_at passed); count_processing
is running (River's JobCountByQueueAndState); stuck_leases is what JobGetStuck returns at the preset's
lease_timeout_s (River has no heartbeat: attempted_at is a running job's only sign of life);
oldest_age_s is since the oldest available job became runnable, its scheduled_at (it was created_at:
a job retried an hour later looked an hour older). River rescues stuck jobs itself, so queueops
refuses requeue and the preset says after how long.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from queueops import actions, livecheck, presets
from tests.conformance import common
from tests.conftest import Lab

UPSTREAM = ("riverqueue/river v0.43.0 + 2 commits (fdf6cdf): riverdriver/riverpgxv5/migration/main/001..007, "
            "riverdriver/riverpgxv5/internal/dbsqlc/river_job.sql, internal/maintenance/job_rescuer.go")
SOURCE = (Path(__file__).parent / "upstream" / "river_v0.43.0.sql").read_text()
N = common.ROWS
LEASE_S = 4200  # the preset's lease_timeout_s
MAX_ATTEMPTS = 25  # River's default (migration 007)


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


# The production shape, one set-based INSERT (River writes timestamptz). Ids in insert order, one
# every 0.4 s over the last ~22 h; the JobCleaner keeps completed jobs 24 h by default.
#   the last 10,000 ids: every other one available (5,000, run at once: scheduled_at = created_at),
#     1 in 50 of the rest running with a fresh attempt (the last 4 minutes), the rest completed;
#   ids 1001-1020: running, attempted 75-95 min ago (a dead client's; no leader has rescued them),
#     1001-1005 on their last attempt; ids 1021-1030 running, attempted 3 h ago (the rescuer takes
#     them below);
#   ids 1031-1330: available after a retry the scheduler made available: created ~22 h ago,
#     scheduled_at (the retry time) 90 min ago: the oldest runnable jobs;
#   the older ids: 1 in 100 each scheduled (from 30 min ago to 30 min ahead), retryable (5-15 min
#     ahead), discarded, cancelled; the rest completed.
SHAPE = """
INSERT INTO {s}.river_job (state, attempt, max_attempts, attempted_at, created_at, finalized_at, scheduled_at,
                           args, kind, queue, errors, attempted_by)
SELECT x.state::{s}.river_job_state, x.attempt, {m}, x.att, x.ins,
       CASE WHEN x.state IN ('completed', 'discarded', 'cancelled') THEN x.ins + interval '2 s' END, x.sch,
       jsonb_build_object('n', x.g), 'my_kind', 'default',
       CASE WHEN x.state IN ('retryable', 'discarded') THEN ARRAY['{{"error": "boom"}}'::jsonb] END,
       CASE WHEN x.att IS NOT NULL THEN ARRAY['client_a'] END
FROM (
    SELECT g, now() - ({n} - g) * interval '0.4 s' AS ins,
           CASE WHEN g > {n} - 10000 AND g % 2 = 0 THEN 'available'
                WHEN g > {n} - 10000 AND g % 50 = 1 THEN 'running'
                WHEN g > {n} - 10000 THEN 'completed'
                WHEN g BETWEEN 1001 AND 1030 THEN 'running'
                WHEN g BETWEEN 1031 AND 1330 THEN 'available'
                WHEN g % 100 = 50 THEN 'scheduled'
                WHEN g % 100 = 51 THEN 'retryable'
                WHEN g % 100 = 52 THEN 'discarded'
                WHEN g % 100 = 53 THEN 'cancelled'
                ELSE 'completed' END AS state
    FROM generate_series(1, {n}) AS g) AS s
CROSS JOIN LATERAL (SELECT s.g, s.state, s.ins,
    CASE WHEN s.state = 'running' AND s.g BETWEEN 1001 AND 1005 THEN {m}
         WHEN s.state = 'discarded' THEN {m}
         WHEN s.state IN ('running', 'retryable', 'completed') OR s.g BETWEEN 1031 AND 1330 THEN 1
         ELSE 0 END AS attempt,
    CASE WHEN s.g BETWEEN 1031 AND 1330 THEN now() - interval '90 min'
         WHEN s.state = 'scheduled' THEN now() + (s.g % 3600 - 1800) * interval '1 s'
         WHEN s.state = 'retryable' THEN now() + interval '5 min' + (s.g % 600) * interval '1 s'
         ELSE s.ins END AS sch,
    CASE WHEN s.state = 'running' AND s.g BETWEEN 1001 AND 1020 THEN now() - interval '75 min' - s.g % 1200 * interval '1 s'
         WHEN s.state = 'running' AND s.g BETWEEN 1021 AND 1030 THEN now() - interval '3 hours'
         WHEN s.state = 'running' THEN now() - (s.g % 240) * interval '1 s'
         WHEN s.state IN ('completed', 'discarded', 'retryable') OR s.g BETWEEN 1031 AND 1330 THEN s.ins + interval '1 s'
         END AS att) AS x
"""

# Ground truth from River's source (timestamptz: any session zone reads it right).
# JobGetStuck at the preset's timeout: the truth's stuck_leases and the ids it counts.
STUCK = "state = 'running' AND attempted_at < now() - make_interval(secs => {lease})"
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


@pytest.fixture(scope="module")
def river(lab: Lab) -> Iterator[str]:
    """River's table at production size, moved by River's own queries, analyzed; built once."""
    name = f"river_{uuid.uuid4().hex[:8]}"
    s = f'"{name}"'
    started = time.monotonic()
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        for step in migrations(s):
            conn.execute(step)
        conn.execute(SHAPE.format(s=s, n=N, m=MAX_ATTEMPTS))
        fetched: list[int] = []
        for _ in range(2):
            fetched += [r[0] for r in conn.execute(query("JobGetAvailable", s), {
                "queue": "default", "max_to_lock": 50, "now": None, "max_attempted_by": 100,
                "attempted_by": "client_b"})]
        assert len(fetched) == 100
        assert len(_set_state(conn, s, fetched[:30], "completed")) == 30
        retry_at = datetime.now(UTC) + timedelta(seconds=60)
        assert len(_set_state(conn, s, fetched[30:40], "retryable", scheduled_at=retry_at)) == 10
        staged = len(conn.execute(query("JobSchedule", s), {"now": None, "max": 10_000}).fetchall())
        assert 500 < staged < 5000, staged
        # the leader's rescuer ran once, long ago at a 2 h horizon: the 3-hour-old jobs only
        rescued = _rescue(conn, s, datetime.now(UTC) - timedelta(hours=2))
        assert len(rescued) == 10 and set(rescued.values()) == {"retryable"}
        common.analyze(conn, f"{s}.river_job")
    print(f"\nRIVER build {time.monotonic() - started:.1f} s")
    yield name
    with lab.connect() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _cfg(lab: Lab, schema: str, zone: str) -> Any:
    return common.make_config(lab.url, Path(lab.server.password_file), zone,
                              [{"name": "river", "preset": "river", "schema": schema}])


def _truth(lab: Lab, schema: str) -> dict[str, float | None]:
    with lab.connect() as conn:
        return common.truth(conn, TRUTH.format(s=f'"{schema}"', stuck=STUCK.format(lease=LEASE_S)))


def test_figures_are_rivers_own_in_every_zone(lab: Lab, river: str) -> None:
    _, truth = common.in_every_zone("river", UPSTREAM, lab.url, lab.password, "river",
                                    lambda zone: _cfg(lab, river, zone), lambda: _truth(lab, river))
    assert truth["depth"] > common.CAP and truth["stuck_leases"] == 20 and truth["rows_total"] == N  # type: ignore[operator]


def test_the_stuck_list_is_what_stuck_leases_counts(lab: Lab, river: str) -> None:
    """The items drill-down's stuck list (queueops.items, as the console reads it) holds exactly
    the 20 jobs JobGetStuck returns at the preset's timeout, in every zone."""
    ids = common.truth_ids(lab.connect, f'SELECT id FROM "{river}".river_job WHERE {STUCK.format(lease=LEASE_S)}')  # noqa: S608
    common.assert_stuck_list_is_the_count(lambda zone: _cfg(lab, river, zone), "river", ids,
                                          _truth(lab, river)["stuck_leases"])


def test_reads_are_bounded_by_the_cap_and_the_live_check_says_seek(lab: Lab, river: str) -> None:
    """Item 5: the state values from unnest walked River's primary key (~8,700 buffers at 200,000
    rows); read through river_job_prioritized_fetching_index each statement stays under the bound."""
    cfg = _cfg(lab, river, "UTC")
    with lab.connect() as conn:
        reads = common.measured_reads(cfg, "river", conn)
    for r in reads:
        print(f"\nRIVER reads {r.collector}: {r.buffers} buffers of {r.relpages} pages via {r.read_by}")
    assert {r.collector for r in reads} == set(common.FAST_COLLECTORS)
    assert all(r.buffers <= common.BUFFER_BOUND < r.relpages for r in reads), reads
    report = livecheck.report_live(cfg)
    scans = [f for f in report.findings if "scan" in f.reason or "not counted" in f.reason]
    assert not scans, scans


def test_discover_recognises_the_preset_on_the_librarys_ddl(lab: Lab, river: str) -> None:
    """Item 6: ``discover`` proposes the river preset for river_job as River's migrations 002-007 leave it (the state enum with 'pending', bit(8) unique_states), and none of the
    library's other tables as a queue of its own."""
    found = common.proposed(_cfg(lab, river, "UTC"), river)
    assert found == [("river_job", "river")], found


def test_requeue_is_refused_and_the_preset_says_when_river_rescues(lab: Lab, river: str) -> None:
    """Item 4: River's JobRescuer takes stuck jobs back itself (every 30 s, after RescueStuckJobsAfter,
    1 h by default): requeue is refused with that reason, and the rescuer's own pass at the default
    horizon takes exactly the jobs queueops counts stuck (at the preset's longer timeout) and more."""
    with pytest.raises(actions.NotOffered, match="JobRescuer"):
        actions.plan(_cfg(lab, river, "UTC"), "requeue", "river", {})
    rescue = presets.get("river").rescue
    assert rescue.by_itself and rescue.stale_after_s == 3600 and "1 hour" in rescue.how and "30 s" in rescue.how
    s = f'"{river}"'
    with lab.connect() as conn:
        stuck = {r[0] for r in conn.execute(
            f"SELECT id FROM {s}.river_job WHERE state = 'running' "  # noqa: S608
            f"AND attempted_at < now() - make_interval(secs => {LEASE_S})")}
        decided = _rescue(conn, s, datetime.now(UTC) - timedelta(seconds=rescue.stale_after_s))
        assert stuck <= set(decided)
        assert not set(decided) & {r[0] for r in conn.execute(
            f"SELECT id FROM {s}.river_job WHERE attempted_at >= now() - interval '10 min'")}  # noqa: S608
        assert sorted(k for k, v in decided.items() if v == "discarded") == [1001, 1002, 1003, 1004, 1005]
