"""Issue 29: naive UTC times read in any server time zone.

Oban, GoodJob and Solid Queue write ``timestamp without time zone`` columns in UTC. Compared with
``now()`` PostgreSQL reads such a value in the session's TimeZone, so under Asia/Tokyo every job
looked 9 h older (Oban: live jobs stuck, and in the requeue preview) and under America/New_York 5 h
younger (GoodJob depth 0, negative ages). Their presets say ``naive_times = "utc"`` and every
statement compares with the UTC wall clock instead. The three libraries are checked in UTC,
Asia/Tokyo and America/New_York at production size on their own schemas and statements
(tests/conformance/test_oban.py, with its requeue preview in every zone, test_good_job.py,
test_solid_queue.py). Here: a hand-rolled naive table written with a local ``now()`` keeps today's
reading (the default: the session's zone) and stays right, and the mapping's rules.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql

from collectors import runner
from queueops import actions, coltypes, config, fragments
from tests.conftest import Lab

AGE_SLACK_S = 30.0  # the zones are read a few seconds apart

@pytest.fixture()
def schema(lab: Lab) -> Iterator[str]:
    name = f"naive_{uuid.uuid4().hex[:8]}"
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    yield name
    with lab.connect() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _zone_url(lab: Lab, zone: str) -> str:
    """The lab's URL for a session whose TimeZone is ``zone`` (libpq options)."""
    return f"{lab.url}?options={quote(f'-c TimeZone={zone}', safe='')}"


def _config(lab: Lab, zone: str, queues: list[dict[str, Any]]) -> config.Config:
    secret = str(Path(lab.server.password_file).resolve())
    return config.parse({"targets": [{"name": "lab", "dialect": "postgresql", "url": _zone_url(lab, zone),
                                      "password": f"file:{secret}"}],
                         "queues": [{"target": "lab", **q} for q in queues]})


def _collect(cfg: config.Config, queue: str) -> dict[str, float | None]:
    result = runner.run_collectors(cfg, cfg.targets[0])
    errors = [s.error for s in result.status if not s.ok]
    assert not errors, errors
    return {r.metric: r.value for r in result.rows if r.queue == queue}


HAND_ROLLED = """
CREATE TABLE {s}.jobs (id bigserial PRIMARY KEY, payload text, enqueued_at timestamp NOT NULL DEFAULT now(),
                       leased_at timestamp);
CREATE INDEX ON {s}.jobs (leased_at) WHERE leased_at IS NOT NULL;
CREATE INDEX ON {s}.jobs (enqueued_at, id) WHERE leased_at IS NULL;
INSERT INTO {s}.jobs (enqueued_at, leased_at)
SELECT now() - interval '10 min', NULL FROM generate_series(1, 3)
UNION ALL SELECT now() - interval '5 min', now() - interval '1 min' FROM generate_series(1, 2)
UNION ALL SELECT now() - interval '2 hours', now() - interval '1 hour' FROM generate_series(1, 2)
"""


def test_hand_rolled_local_naive_table_keeps_the_session_zone_by_default(lab: Lab, schema: str) -> None:
    """A table written with a local now() (no naive_times: the server's zone, today's reading): written
    and read under America/New_York, its figures are those of the rows, and the requeue preview holds
    the stale leases only."""
    zone = "America/New_York"
    with psycopg.connect(_zone_url(lab, zone), password=lab.password, autocommit=True) as conn:
        conn.execute(HAND_ROLLED.format(s=f'"{schema}"'))
    queue = {"name": "jobs", "kind": "lease", "schema": schema, "table": "jobs", "key": "id",
             "enqueued_at": "enqueued_at", "lease_column": "leased_at", "lease_timeout_s": 300}
    cfg = _config(lab, zone, [queue])
    assert cfg.queues[0].naive_times is None
    rows = _collect(cfg, "jobs")
    assert rows["depth"] == 3 and rows["stuck_leases"] == 2, rows
    assert abs(rows["oldest_age_s"] - 600) <= AGE_SLACK_S, rows
    assert abs(rows["oldest_lease_age_s"] - 3600) <= AGE_SLACK_S, rows
    plan = actions.plan(cfg, "requeue", "jobs", {})
    assert plan.preview.row_count == 2, plan.preview.summary


def _queue(**kw: Any) -> config.Queue:
    return config.Queue.model_validate({"name": "q", "target": "t", "kind": "lease", "table": "jobs", "key": "id",
                                        "lease_column": "leased_at", **kw})


def test_clock_fragment_converts_the_clock_never_the_column() -> None:
    assert fragments.clock(_queue(), "postgresql") == "now()"
    assert fragments.clock(_queue(naive_times="server"), "postgresql") == "now()"
    utc = _queue(naive_times="utc", runnable_at="run_at", lease_ready="past")
    f = fragments.fragments_for(utc, "postgresql")
    assert f["clock"] == "(now() AT TIME ZONE 'UTC')"
    assert f["free"] == "(\"leased_at\" IS NULL OR \"leased_at\" <= (now() AT TIME ZONE 'UTC'))"
    assert fragments.clock(utc, "mssql") == "SYSUTCDATETIME()"


def test_naive_times_server_is_refused_on_sql_server() -> None:
    raw = {"targets": [{"name": "t", "dialect": "mssql", "url": "mssql+pyodbc://u@h/db"}],
           "queues": [{"name": "q", "target": "t", "kind": "lease", "table": "jobs", "key": "id",
                       "lease_column": "leased_at", "naive_times": "server"}]}
    with pytest.raises(config.ConfigError, match="naive_times.*SYSUTCDATETIME"):
        config.parse(raw)


def test_naive_times_utc_on_a_timestamptz_column_is_a_mapping_error() -> None:
    q = _queue(naive_times="utc")
    table = coltypes.qualified(None, "jobs", "postgresql")
    types = {(table, "leased_at"): coltypes.ColumnType(table, "leased_at", "pg_catalog", "timestamptz",
                                                       "timestamp with time zone", "timestamp")}
    found = [p for p in coltypes.problems(q, types, "postgresql") if p.field == "lease_column"]
    assert found and "naive_times" in found[0].fix
    assert not [p for p in coltypes.problems(_queue(), types, "postgresql") if p.field == "lease_column"]

