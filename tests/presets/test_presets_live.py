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


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_schema_only_preset_checks_live(lab: Lab, schema: str, tmp_path: Path, name: str) -> None:
    assert presets.get(name).engine == "postgresql"
    with lab.connect() as conn:
        conn.execute(SHAPES[name].format(s=f'"{schema}"'))
    secret = Path(lab.server.password_file).resolve()
    table = '\ntable = "q_orders"' if name == "pgmq" else ""
    cfg = tmp_path / "queueops.toml"
    cfg.write_text(f'[[targets]]\nname = "lab"\ndialect = "postgresql"\nurl = "{lab.url}"\n'
                   f'password = "file:{secret}"\n\n[[queues]]\nname = "{name}"\ntarget = "lab"\n'
                   f'preset = "{name}"\nschema = "{schema}"{table}\n')
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
