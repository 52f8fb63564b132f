"""Acceptance: ``queueops discover --url ... --write found.toml`` on the lab's five queues plus the
three real libraries' schemas (installed by their own tools) finds every one with the right kind and
preset, writes a config whose every queue carries its evidence, and ``config check --live`` on that
config exits 0. Appending again adds nothing. pg-boss 11 and 12, each in a database of its own: the last tests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.libraries.conftest import LibServer, pgboss_db

EXPECTED = {
    ("lab", "q_delete"): ("delete", None), ("lab", "q_status_meta"): ("status", None),
    ("lab", "q_lease"): ("lease", None), ("lab", "q_due"): ("due", None), ("lab", "q_ring_slot"): ("ring", None),
    ("public", "procrastinate_jobs"): ("status", "procrastinate"), ("public", "pgqueuer"): ("status", "pgqueuer"),
    ("pgboss", "job"): ("status", "pgboss"),
}


def _cli(*args: str, password: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QO_TEST_DISCOVER_PW": password}
    return subprocess.run([sys.executable, "-m", "queueops.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=180, env=env)


def test_discover_finds_lab_and_libraries(installed: LibServer, tmp_path: Path) -> None:
    found = tmp_path / "found.toml"
    listed = _cli("discover", "--url", installed.url, "--password", "env:QO_TEST_DISCOVER_PW", "--json",
                  password=installed.password)
    assert listed.returncode == 0, listed.stderr
    every = [json.loads(line) for line in listed.stdout.splitlines()]
    rows = [r for r in every if r["proposed"]]
    got = {(r["schema"], r["table"]): (r["kind"], r["preset"]) for r in rows}
    print("\nDISCOVERED " + json.dumps([[r["rank"], r["schema"], r["table"], r["kind"], r["preset"], r["score"]]
                                         for r in rows]))
    print("NOT PROPOSED " + json.dumps([[r["schema"], r["table"], r["rejected_because"]] for r in every
                                        if not r["proposed"]]))
    assert got == EXPECTED, f"found {got}"
    assert all(r["evidence"] for r in rows)
    ranks = [r["rank"] for r in rows if r["preset"]]
    assert ranks == [1, 2, 3], "preset matches rank first"
    # issue 31: every table read is listed; each one not proposed says why, and a library's own
    # tables and the lab's side tables name the queue table they serve
    assert [r["rank"] for r in every] == list(range(1, len(every) + 1)) and len(every) > len(rows)
    assert all(r["rejected_because"] for r in every if not r["proposed"])
    side = {(r["schema"], r["table"]): r["side_of"] for r in every if r["side_of"]}
    assert side[("public", "procrastinate_events")] == "public.procrastinate_jobs"
    assert side[("lab", "q_status_data")] == "lab.q_status_meta" and side[("lab", "q_ring_seq")] == "lab.q_ring_slot"
    assert side[("lab", "q_delete_watermark")] == "lab.q_delete"

    written = _cli("discover", "--url", installed.url, "--password", "env:QO_TEST_DISCOVER_PW", "--write", str(found),
                   password=installed.password)
    assert written.returncode == 0, written.stderr
    text = found.read_text()
    cfg = tomllib.loads(text)
    assert len(cfg["queues"]) == len(EXPECTED)
    assert text.count("# discovered: ") == len(EXPECTED), "every proposed queue carries its evidence"
    status = next(q for q in cfg["queues"] if q.get("table") == "q_status_meta")
    assert (status["data_table"], status["data_key"]) == ("q_status_data", "id")
    ring = next(q for q in cfg["queues"] if q.get("table") == "q_ring_slot")
    assert (ring["sequence_table"], ring["capacity"]) == ("q_ring_seq", 1024)
    delete = next(q for q in cfg["queues"] if q.get("table") == "q_delete")
    assert delete["watermark"] == {"table": "q_delete_watermark", "column": "low_key"}
    # issue 31: a new config says how to act from the command line (it acts as viewer until then),
    # and uncommenting that block as written makes the named user an operator
    assert "identity" not in cfg and "# [identity]" in text
    enabled = text.replace('# [identity]\n# user = "alice"\n# roles = { alice = "operator" }',
                           '[identity]\nuser = "alice"\nroles = { alice = "operator" }')
    from queueops import config as config_mod
    from queueops import roles

    assert roles.resolve(config_mod.parse(tomllib.loads(enabled))).role == "operator"

    check = _cli("config", "check", "--live", "--config", str(found), password=installed.password)
    print(check.stdout)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "(0 error(s)" in check.stdout or check.stdout.rstrip().endswith(": ok")
    # issue 13's EXPLAIN check of every frequent statement: the presets' statements seek on the
    # libraries' own schemas (and the lab's tables), except those no index of the library can
    # serve, which the check names with the index that would (issue 29: the oldest age follows the
    # fetch's runnable time, procrastinate's scheduled_at, which it does not index after its status;
    # measured at 200,000 rows in tests/libraries/test_conformance_*.py, over the read bound there
    # too). depth no longer: it reads each status value through the library's partial index on it
    # (at most the cap), and not at all the values no index serves (their estimate).
    scans = {re.sub(r"^.*queue '(\w+)': (\w+) = .*fix: (.*)$", r"\1 \2 \3", ln)
             for ln in check.stdout.splitlines() if "scans instead of seeking" in ln}
    assert scans == {'procrastinate oldest_age_s CREATE INDEX CONCURRENTLY ON "public"."procrastinate_jobs" '
                     '("status", "scheduled_at")'}, scans

    again = _cli("discover", "--url", installed.url, "--password", "env:QO_TEST_DISCOVER_PW", "--write", str(found),
                 password=installed.password)
    assert again.returncode == 0 and f"{found}: 0 queue(s) written" in again.stdout
    assert found.read_text() == text, "appending finds nothing new and leaves the file as it was"

    # appending to a config that already maps pgqueuer through its preset adds the other seven only
    mine = tmp_path / "mine.toml"
    mine.write_text(f'[[targets]]\nname = "discovered"\ndialect = "postgresql"\nurl = "{installed.url}"\n'
                    'password = "env:QO_TEST_DISCOVER_PW"\n\n[[queues]]\nname = "jobs"\ntarget = "discovered"\n'
                    'preset = "pgqueuer"\n')
    appended = _cli("discover", "--url", installed.url, "--password", "env:QO_TEST_DISCOVER_PW", "--write", str(mine),
                    password=installed.password)
    assert appended.returncode == 0 and f"{mine}: {len(EXPECTED) - 1} queue(s) written" in appended.stdout
    assert _cli("config", "check", "--live", "--config", str(mine), password=installed.password).returncode == 0


@pytest.mark.parametrize("major", [11, 12])
def test_discover_tells_each_pg_boss_version_apart_and_its_config_checks_live(installed: LibServer, tmp_path: Path,
                                                                              major: int) -> None:
    """pg-boss 11's and 12's job tables (each installed by its own start(), in a database of its
    own) are proposed with their own preset (pgboss11, pgboss12), not pg-boss 10's (expire_in), and
    not 11's for 12's table, whose columns fit both (12 has more: heartbeat_on, blocked), and
    ``config check --live`` on what discover wrote passes: every column, type and enum label of the
    preset, and each frequent statement's plan, on the library's own schema and indexes."""
    db = installed.on_database(pgboss_db(major))
    listed = _cli("discover", "--url", db.url, "--password", "env:QO_TEST_DISCOVER_PW", "--json",
                  password=db.password)
    assert listed.returncode == 0, listed.stderr
    rows = [r for r in map(json.loads, listed.stdout.splitlines()) if r["proposed"]]
    print(f"\nDISCOVERED pg-boss {major} "
          + json.dumps([[r["schema"], r["table"], r["kind"], r["preset"]] for r in rows]))
    assert {(r["schema"], r["table"]): (r["kind"], r["preset"]) for r in rows} == \
        {("pgboss", "job"): ("status", f"pgboss{major}")}
    found = tmp_path / "found.toml"
    assert _cli("discover", "--url", db.url, "--password", "env:QO_TEST_DISCOVER_PW", "--write", str(found),
                password=db.password).returncode == 0
    check = _cli("config", "check", "--live", "--config", str(found), password=db.password)
    print(check.stdout)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "scans instead of seeking" not in check.stdout, check.stdout


def test_an_older_versions_preset_on_pg_boss_12s_table_is_warned_with_the_right_one(installed: LibServer,
                                                                                    tmp_path: Path) -> None:
    """A config that still says ``preset = "pgboss11"`` after pg-boss was upgraded to 12: every
    column it maps is there (12 kept them), so no error, but its figures would count blocked jobs
    ready and never see a silent heartbeat. ``config check --live`` warns, names the columns it does
    not read and the preset that does; with ``pgboss12`` the warning is gone."""
    db = installed.on_database(pgboss_db(12))
    warnings = {}
    for preset in ("pgboss11", "pgboss12"):
        path = tmp_path / f"{preset}.toml"
        path.write_text(f'[[targets]]\nname = "t"\ndialect = "postgresql"\nurl = "{db.url}"\n'
                        f'password = "env:QO_TEST_DISCOVER_PW"\n\n[[queues]]\nname = "jobs"\ntarget = "t"\n'
                        f'preset = "{preset}"\n')
        check = _cli("config", "check", "--live", "--config", str(path), password=db.password)
        assert check.returncode == 0, check.stdout + check.stderr
        warnings[preset] = [line for line in (check.stdout + check.stderr).splitlines() if "queue 'jobs': preset" in line]
    print("\nWARNED " + json.dumps(warnings))
    assert len(warnings["pgboss11"]) == 1, warnings
    line = warnings["pgboss11"][0]
    assert "preset 'pgboss11' maps pg-boss 11.x" in line and "pg-boss 12.x (verified on 12.38.0) (preset 'pgboss12')" in line
    assert "heartbeat_on, heartbeat_seconds, blocked" in line and "fix: preset = 'pgboss12'" in line
    assert warnings["pgboss12"] == []


def test_discover_proposes_graphile_worker_and_its_config_checks_live(installed: LibServer, tmp_path: Path) -> None:
    """graphile-worker 0.17.3's schema (its own runMigrations, in a database of its own): discover
    proposes graphile_worker._private_jobs with the graphile_worker preset and nothing else (its
    _private_job_queues, _private_tasks, migrations and known crontabs tables are the library's own,
    listed as side tables), and ``config check --live`` on what discover wrote passes: every column
    and the ready flag's type on the library's own table, no error; the one scan it names is
    stuck_leases' (graphile indexes no locked_at), with the index."""
    from tests.libraries.conftest import GRAPHILE_DB

    db = installed.on_database(GRAPHILE_DB)
    listed = _cli("discover", "--url", db.url, "--password", "env:QO_TEST_DISCOVER_PW", "--json",
                  password=db.password)
    assert listed.returncode == 0, listed.stderr
    every = [json.loads(line) for line in listed.stdout.splitlines()]
    rows = [r for r in every if r["proposed"]]
    print("\nDISCOVERED graphile-worker " + json.dumps([[r["schema"], r["table"], r["kind"], r["preset"]] for r in rows]))
    print("NOT PROPOSED " + json.dumps([[r["schema"], r["table"], r["side_of"], r["rejected_because"]] for r in every
                                        if not r["proposed"]]))
    assert {(r["schema"], r["table"]): (r["kind"], r["preset"]) for r in rows} == \
        {("graphile_worker", "_private_jobs"): ("lease", "graphile_worker")}
    side = {r["table"] for r in every if r["schema"] == "graphile_worker" and not r["proposed"]}
    assert {"_private_job_queues", "_private_tasks"} <= side, side
    found = tmp_path / "found.toml"
    assert _cli("discover", "--url", db.url, "--password", "env:QO_TEST_DISCOVER_PW", "--write", str(found),
                password=db.password).returncode == 0
    assert 'preset = "graphile_worker"' in found.read_text()
    check = _cli("config", "check", "--live", "--config", str(found), password=db.password)
    print(check.stdout)
    assert check.returncode == 0, check.stdout + check.stderr
    scans = {re.sub(r"^.*queue '(\w+)': (\w+) = .*fix: (.*)$", r"\1 \2 \3", ln)
             for ln in check.stdout.splitlines() if "scans instead of seeking" in ln}
    assert scans == {'graphile_worker stuck_leases CREATE INDEX CONCURRENTLY ON "graphile_worker"."_private_jobs" '
                     '("locked_at") WHERE "locked_at" IS NOT NULL'}, scans
