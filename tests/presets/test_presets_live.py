"""The schema-only PostgreSQL presets against tables shaped as their libraries create them: the
mapping passes ``config check --live`` (columns, types, enum labels), every collector statement the
preset renders runs, and the live check's EXPLAIN verdicts (seek or scan, with the fix) are printed
so docs/presets.md can say which statements need an index the library does not create; a statement
that scans fails the test (issue 14: every preset seeks on its library's own indexes). Que's
finished and expired jobs and GoodJob's finished and running ones (``open_when_null``) are not
counted."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import sql

from queueops import presets
from tests.conftest import Lab
from tests.presets.shapes import SHAPES

# Jobs of each state, as the library writes them, for the presets whose counts the test checks.
SEEDED = {
    "que": "INSERT INTO {}.que_jobs (job_class, run_at, finished_at, expired_at) VALUES "
           "('A', now() - interval '1 min', NULL, NULL), ('B', now() - interval '1 min', now(), NULL), "
           "('C', now() - interval '1 min', NULL, now()), ('D', now() + interval '1 h', NULL, NULL)",
    # Waiting since 2 min (created 5 min ago: age counts from scheduled_at), finished, running (its
    # process holds it: not waiting), scheduled in an hour.
    "good_job": "INSERT INTO {}.good_jobs (job_class, created_at, scheduled_at, finished_at, locked_by_id, "
                "locked_at) VALUES "
                "('A', now() - interval '5 min', now() - interval '2 min', NULL, NULL, NULL), "
                "('B', now() - interval '1 h', now() - interval '1 h', now(), NULL, NULL), "
                "('C', now() - interval '1 h', now() - interval '1 h', NULL, gen_random_uuid(), now() - interval '30 min'), "
                "('D', now(), now() + interval '1 h', NULL, NULL, NULL)",
}


@pytest.fixture()
def schema(lab: Lab) -> Iterator[str]:
    name = f"preset_{uuid.uuid4().hex[:8]}"
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    yield name
    with lab.connect() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _preset_config(lab: Lab, tmp: Path, queue: str, preset: str, schema: str, extra: str = "") -> Path:
    """A config of the lab as its one target and one queue mapped by ``preset`` in ``schema``."""
    secret = Path(lab.server.password_file).resolve()
    cfg = tmp / "queueops.toml"
    cfg.write_text(f'[[targets]]\nname = "lab"\ndialect = "postgresql"\nurl = "{lab.url}"\n'
                   f'password = "file:{secret}"\n\n[[queues]]\nname = "{queue}"\ntarget = "lab"\n'
                   f'preset = "{preset}"\nschema = "{schema}"{extra}\n')
    return cfg


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_schema_only_preset_checks_live(lab: Lab, schema: str, tmp_path: Path, name: str) -> None:
    assert presets.get(name).engine == "postgresql"
    with lab.connect() as conn:
        conn.execute(SHAPES[name].format(s=f'"{schema}"'))
    table = '\ntable = "q_orders"' if name == "pgmq" else ""
    cfg = _preset_config(lab, tmp_path, name, name, schema, table)
    check = lab.cli("config", "check", "--live", "--config", str(cfg))
    out = check.stdout + check.stderr
    verdicts = [line.split(": ", 1)[1] for line in out.splitlines() if ": warning: " in line or ": error: " in line]
    print(f"\nPRESET {name}: exit {check.returncode}; " + (" | ".join(verdicts) or "ok"))
    assert check.returncode == 0, out
    assert not re.search(r": error: ", out), out
    scans = sorted(m.group(1) for m in re.finditer(r"queue '[^']+': (\w+) = '[^']+': scans instead of seeking", out))
    assert scans == [], out
    if name in SEEDED:
        with lab.connect() as conn:
            conn.execute(sql.SQL(SEEDED[name]).format(sql.Identifier(schema)))
    collect = lab.cli("collect", "--once", "--json", "--config", str(cfg))
    assert collect.returncode == 0, collect.stderr
    assert '"metric":"depth"' in collect.stdout.replace(" ", ""), collect.stdout
    if name in SEEDED:
        rows = {r["metric"]: r["value"] for r in map(json.loads, collect.stdout.splitlines()) if r.get("queue") == name}
        # one waiting, one not yet due; finished (and Que's expired, GoodJob's running) jobs in no count
        counts = {m: rows.get(m) for m in ("depth", "rows_total", "count_not_due")}
        assert counts == {"depth": 1, "rows_total": 2, "count_not_due": 1}, collect.stdout
    if name == "good_job":
        assert 115 <= rows["oldest_age_s"] < 180, collect.stdout  # A's 2 min, not C's hour nor A's 5 min
        assert "stuck_leases" not in rows and "count_leased" not in rows, collect.stdout  # [unavailable]


# Oban's fetch (Oban.Engines.Basic.fetch_jobs, lib/oban/engines/basic.ex, Oban 2.17-2.19): available
# jobs of one queue below their attempt limit, in priority / scheduled_at / id order, skipping locked.
OBAN_FETCH = """
UPDATE {s}.oban_jobs SET state = 'executing', attempted_at = timezone('UTC', now()), attempt = attempt + 1
WHERE id IN (SELECT id FROM {s}.oban_jobs WHERE state = 'available' AND queue = 'default'
             AND attempt < max_attempts ORDER BY priority, scheduled_at, id LIMIT %s FOR UPDATE SKIP LOCKED)
RETURNING id
"""


def test_oban_requeue_never_releases_a_job_at_its_limit_and_its_fetch_takes_the_rest(lab: Lab, schema: str,
                                                                                     tmp_path: Path) -> None:
    """Issue 29: requeue set every stuck job to 'available' whatever its attempt; a job with attempt >=
    max_attempts is never fetched by Oban again, sorts first, and Oban's fetch with demand 5 returned
    nothing with thousands waiting. The preset maps max_attempts: such a job is not counted as waiting
    nor released, and after the requeue Oban's own fetch takes each released job exactly once."""
    s = sql.Identifier(schema)
    with lab.connect() as conn:
        conn.execute(SHAPES["oban"].format(s=f'"{schema}"'))
        # 6 jobs of a dead worker, executing for 2 hours: 3 on their last attempt, 3 with attempts left
        conn.execute(sql.SQL(
            "INSERT INTO {}.oban_jobs (state, worker, attempt, max_attempts, attempted_at, scheduled_at, inserted_at) "
            "SELECT 'executing', 'W', CASE WHEN g <= 3 THEN 3 ELSE 1 END, 3, "
            "timezone('UTC', now()) - interval '2 hours', timezone('UTC', now()) - interval '3 hours', "
            "timezone('UTC', now()) - interval '3 hours' FROM generate_series(1, 6) AS g").format(s))
    secret = Path(lab.server.password_file).resolve()
    cfg = tmp_path / "queueops.toml"
    cfg.write_text(f'[[targets]]\nname = "lab"\ndialect = "postgresql"\nurl = "{lab.url}"\n'
                   f'password = "file:{secret}"\n\n[identity]\ndefault_role = "operator"\n\n[[queues]]\n'
                   f'name = "oban"\ntarget = "lab"\npreset = "oban"\nschema = "{schema}"\n')
    done = lab.cli("act", "requeue", "--queue", "oban", "--config", str(cfg), "--yes", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["rows_affected"] == 3, result
    with lab.connect() as conn:
        exhausted = conn.execute(sql.SQL("SELECT count(*) FROM {}.oban_jobs WHERE state = 'available' "
                                         "AND attempt >= max_attempts").format(s)).fetchone()[0]
        assert exhausted == 0, "a job at its limit was made available: Oban would never fetch it"
        taken = [r[0] for r in conn.execute(sql.SQL(OBAN_FETCH).format(s=s), (5,)).fetchall()]
        assert len(taken) == 3 and len(set(taken)) == 3
        assert conn.execute(sql.SQL(OBAN_FETCH).format(s=s), (5,)).fetchall() == []  # each taken once


# pg-boss 12's job table (pg-boss 12.38.0, dist/plans.js createTableJob / createEnumJobState), the
# columns the pgboss preset reads and the ones 11 and 12 put in their place: expire_seconds (int)
# for expire_in (interval), a per-job heartbeat, blocked jobs.
PGBOSS_12_JOB = """
CREATE TYPE {s}.job_state AS ENUM ('created', 'retry', 'active', 'completed', 'cancelled', 'failed');
CREATE TABLE {s}.job (
  id uuid NOT NULL DEFAULT gen_random_uuid() PRIMARY KEY, name text NOT NULL, priority integer NOT NULL DEFAULT 0,
  data jsonb, state {s}.job_state NOT NULL DEFAULT 'created', retry_limit integer NOT NULL DEFAULT 2,
  retry_count integer NOT NULL DEFAULT 0, expire_seconds int NOT NULL DEFAULT 900,
  start_after timestamp with time zone NOT NULL DEFAULT now(),
  created_on timestamp with time zone NOT NULL DEFAULT now(), started_on timestamp with time zone,
  completed_on timestamp with time zone, heartbeat_on timestamp with time zone, heartbeat_seconds int,
  blocked boolean NOT NULL DEFAULT false)
"""


def test_a_preset_on_another_major_version_of_its_library_is_named_as_such(lab: Lab, schema: str,
                                                                         tmp_path: Path) -> None:
    """The pgboss preset (pg-boss 10.x) on pg-boss 12's job table: ``config check --live`` fails on
    the column 12 renamed, says which versions the preset maps and which preset maps the others,
    and lists 12's column in its stead."""
    with lab.connect() as conn:
        conn.execute(PGBOSS_12_JOB.format(s=f'"{schema}"'))
    check = lab.cli("config", "check", "--live", "--config", str(_preset_config(lab, tmp_path, "jobs", "pgboss", schema)))
    out = check.stdout + check.stderr
    assert check.returncode != 0, out
    error = next(line for line in out.splitlines() if ": error: " in line)
    assert f"""timeout_column = 'expire_in': no such column in "{schema}"."job" (preset 'pgboss' maps pg-boss 10.x""" \
        in error, error
    assert "expire_seconds" in error, error
    assert "pg-boss 12.x (verified on 12.38.0): preset 'pgboss12'" in error, error  # the preset that maps it
