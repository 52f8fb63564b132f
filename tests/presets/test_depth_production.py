"""Issue 29: Que's advisory locks below the count cap, and advisory_lock refused on SQL Server.

* Que's worker holds pg_try_advisory_lock(id) while it works a job: below the cap such a job was
  counted as waiting (600 "exact" against 420); a two-key lock is not Que's.

Depth at production size (200,000 rows, above the cap) is checked per library on its own schema and
statements in tests/conformance: GoodJob and Que (open rows less the not-due and locked ones), Oban
(the ready values' MCV share x the share below max_attempts) and River in test_good_job.py,
test_que.py, test_oban.py and test_river.py; PGMQ (the most common values of vt: a batch sharing one
vt) on PGMQ's own install in tests/libraries/test_conformance_pgmq.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from collectors import runner
from collectors.registry import COLLECTORS
from queueops import config
from tests.conftest import Lab
from tests.presets.shapes import SHAPES

# Ground truth: Que's own definition of a waiting job (unfinished, unexpired, due and not
# advisory-locked, as its job_stats reads pg_locks), computed in SQL.
QUE_LOCKED = ("SELECT (classid::bigint << 32) + objid::bigint FROM pg_locks WHERE locktype = 'advisory' "
              "AND objsubid = 1 AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
TRUTH = {
    "que": "SELECT count(*) FROM {s}.que_jobs WHERE finished_at IS NULL AND expired_at IS NULL AND run_at <= now() "
           "AND id NOT IN ({locked})",
}


def _config(lab: Lab, schema: str, preset: str) -> config.Config:
    secret = str(Path(lab.server.password_file).resolve())
    queue: dict[str, Any] = {"name": preset, "target": "lab", "preset": preset, "schema": schema}
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
