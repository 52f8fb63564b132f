"""Issue 29: depth at production size on the preset shapes (tests/presets/shapes.py), against SQL
ground truth written from each library's own definition.

* Oban's depth above the cap was 'at least' the cap; it is now an estimate. (Its status counts still
  walk the primary key: typed constants served Oban and River but made a sequential scan of a table
  with no status index, procrastinate's; sql/postgresql/depth.sql says what is open.)
* PGMQ: the estimate ignored the most common values of vt (-22 % when a batch shares one vt).
* Que's worker holds pg_try_advisory_lock(id) while it works a job: below the cap such a job was
  counted as waiting (600 "exact" against 420); a two-key lock is not Que's.

GoodJob and Que above the cap (the open rows less the not-due and locked ones, within 10 %) are
checked on their own schemas and statements in tests/conformance/test_good_job.py and test_que.py.

Each shape is built once per module with set-based SQL and ANALYZEd.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from collectors import runner
from collectors.registry import COLLECTORS
from queueops import config
from tests.conftest import Lab
from tests.presets.shapes import SHAPES

CAP = runner.COUNT_CAP
ROWS = 200_000
UTC = "timezone('UTC', now())"

# Set-based builds: ~5,000 waiting (above the cap), some scheduled ahead, some running, the rest
# finished (kept, as the library keeps them). {s}: the schema.
BUILD = {
    # PGMQ: 20,000 messages; a batch of 6,000 sent together shares one vt (visible since a minute),
    # 4,000 more visible at distinct times, 10,000 read and invisible for another 30 s to 2 h.
    "pgmq": """
INSERT INTO {s}.q_orders (read_ct, enqueued_at, vt, message)
SELECT CASE WHEN g <= 10000 THEN 0 ELSE 1 END, now() - interval '3 hours',
       CASE WHEN g <= 6000 THEN date_trunc('second', now()) - interval '1 min'
            WHEN g <= 10000 THEN now() - g * interval '1 s'
            ELSE now() + interval '30 s' + (g - 10000) * interval '0.7 s' END, '{{}}'
FROM generate_series(1, 20000) AS g""",
    # Oban and River: 1 in 60 available, 1 in 60 executing / running, 1 in 60 scheduled, the rest completed.
    "oban": """
INSERT INTO {s}.oban_jobs (state, worker, attempt, max_attempts, inserted_at, scheduled_at)
SELECT (CASE g % 60 WHEN 0 THEN 'available' WHEN 1 THEN 'executing' WHEN 2 THEN 'scheduled'
        ELSE 'completed' END)::{s}.oban_job_state, 'W', 1, 20, {u} - interval '1 hour', {u} - interval '1 hour'
FROM generate_series(1, {n}) AS g""",
    "river": """
INSERT INTO {s}.river_job (state, attempt, max_attempts, kind)
SELECT (CASE g % 60 WHEN 0 THEN 'available' WHEN 1 THEN 'running' WHEN 2 THEN 'scheduled'
        ELSE 'completed' END)::{s}.river_job_state, 1, 25, 'K'
FROM generate_series(1, {n}) AS g""",
}
TABLE = {"pgmq": "q_orders", "oban": "oban_jobs", "river": "river_job"}

# Ground truth: each library's own definition of a waiting job (Que: unfinished, unexpired, due and
# not advisory-locked, as its job_stats reads pg_locks; PGMQ: vt passed), computed in SQL.
QUE_LOCKED = ("SELECT (classid::bigint << 32) + objid::bigint FROM pg_locks WHERE locktype = 'advisory' "
              "AND objsubid = 1 AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
TRUTH = {
    "que": "SELECT count(*) FROM {s}.que_jobs WHERE finished_at IS NULL AND expired_at IS NULL AND run_at <= now() "
           "AND id NOT IN ({locked})",
    "pgmq": "SELECT count(*) FROM {s}.q_orders WHERE vt <= now()",
    # Oban's fetch: available and below its attempt limit (before: 'at least' the cap, 1,000).
    "oban": "SELECT count(*) FROM {s}.oban_jobs WHERE state = 'available' AND attempt < max_attempts",
}


@pytest.fixture(scope="module")
def built(lab: Lab) -> Iterator[str]:
    """One schema with every shape, built and analyzed once for the module."""
    name = f"prod_{uuid.uuid4().hex[:8]}"
    s = f'"{name}"'
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        for preset, build in BUILD.items():
            conn.execute(SHAPES[preset].format(s=s))
            conn.execute(build.format(s=s, u=UTC, n=ROWS))
            # The insert's live-row count reaches the statistics before ANALYZE sets it (flushed
            # after, it would be added again: 2 x the rows in n_live_tup until the next ANALYZE).
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.execute("SELECT 1")
            # ANALYZE reads a sample of 300 x default_statistics_target rows: at the default (30,000 of
            # 200,000) a partial index's row count and a value's share carry a sampling error of a few
            # per cent, which PostgreSQL adds, not queueops; sampling every row keeps the 10 % bound
            # about the estimate's method, not a 1-in-100 chance of a red CI.
            conn.execute("SET default_statistics_target = 1000")
            conn.execute(f"ANALYZE {s}.{TABLE[preset]}")
            conn.execute("RESET default_statistics_target")
    yield name
    with lab.connect() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _config(lab: Lab, schema: str, preset: str) -> config.Config:
    secret = str(Path(lab.server.password_file).resolve())
    queue: dict[str, Any] = {"name": preset, "target": "lab", "preset": preset, "schema": schema}
    if preset == "pgmq":
        queue["table"] = "q_orders"
    return config.parse({"targets": [{"name": "lab", "dialect": "postgresql", "url": lab.url,
                                      "password": f"file:{secret}"}], "queues": [queue]})


def _depth(cfg: config.Config, queue: str) -> dict[str, tuple[float | None, str]]:
    depth = [c for c in COLLECTORS if c.name == "depth"]
    result = runner.run_collectors(cfg, cfg.targets[0], depth)
    errors = [s.error for s in result.status if not s.ok]
    assert not errors, errors
    return {r.metric: (r.value, r.note) for r in result.rows if r.queue == queue}


def _truth(lab: Lab, schema: str, preset: str) -> int:
    with lab.connect() as conn:
        return int(conn.execute(TRUTH[preset].format(s=f'"{schema}"', locked=QUE_LOCKED)).fetchone()[0])


@pytest.mark.parametrize("preset", ["pgmq", "oban"])
def test_depth_above_the_cap_is_a_labelled_estimate_within_ten_percent(lab: Lab, built: str, preset: str) -> None:
    truth = _truth(lab, built, preset)
    assert truth > CAP
    rows = _depth(_config(lab, built, preset), preset)
    value, note = rows["depth"]
    print(f"\nDEPTH {preset}: truth {truth}, depth {value} ({note}); rows_total {rows.get('rows_total')}")
    assert note.startswith("estimate"), rows
    assert value is not None and abs(value - truth) <= 0.1 * truth, (truth, rows)


def test_que_below_the_cap_counts_only_jobs_no_worker_holds(lab: Lab) -> None:
    """600 due jobs, 180 of them locked by a worker's session: depth 420, exact (was 600)."""
    name = f"que_{uuid.uuid4().hex[:8]}"
    s = f'"{name}"'
    with lab.connect() as conn:
        conn.execute(f"CREATE SCHEMA {s}")
        conn.execute(SHAPES["que"].format(s=s))
        conn.execute(f"INSERT INTO {s}.que_jobs (job_class, run_at, finished_at) "  # noqa: S608
                     "SELECT 'A', now() - interval '1 min', CASE WHEN g > 600 THEN now() END "
                     "FROM generate_series(1, 900) AS g")
    try:
        with lab.connect() as holder:
            holder.execute(f"SELECT pg_advisory_lock(id) FROM {s}.que_jobs WHERE finished_at IS NULL "  # noqa: S608
                           "ORDER BY id LIMIT 180")
            # A two-key advisory lock (classid 0, objid 400, objsubid 2) is not Que's: job 400 waits.
            holder.execute("SELECT pg_advisory_lock(0, 400)")
            rows = _depth(_config(lab, name, "que"), "que")
            truth = _truth(lab, name, "que")
        assert truth == 420
        assert rows["depth"] == (420, "exact"), rows
        assert rows["rows_total"] == (420, "exact"), rows
        # the locks gone with the worker's session: all 600 waiting
        assert _depth(_config(lab, name, "que"), "que")["depth"] == (600, "exact")
    finally:
        with lab.connect() as conn:
            conn.execute(f"DROP SCHEMA {s} CASCADE")


def test_advisory_lock_is_refused_on_sql_server() -> None:
    raw = {"targets": [{"name": "t", "dialect": "mssql", "url": "mssql+pyodbc://u@h/db"}],
           "queues": [{"name": "q", "target": "t", "kind": "due", "table": "jobs", "key": "id", "due_column": "run_at",
                       "advisory_lock": True}]}
    with pytest.raises(config.ConfigError, match="advisory_lock.*PostgreSQL"):
        config.parse(raw)
