"""Issue 29: stuck jobs at production size, read through the library's own index.

procrastinate with 30,000 kept ``succeeded`` jobs and pgqueuer with a 20,000-job backlog (each
table well past the runner's small-table page limit), 3 jobs of a dead worker each (an old
``started`` event / heartbeat). Neither library has an index leading with its status column;
each has a partial index on exactly its running jobs (``procrastinate_jobs_lock_idx_v1 ...
WHERE status = 'doing'``, ``pgqueuer_picked_heartbeat_idx ... WHERE status = 'picked'``), which is
what requeue's preview reads. Before, stuck_leases was NULL ("not counted: no index on the status
column") with count_processing 3 on the same cycle, and ``config check --live`` said nothing.

Now: ``queueops collect --once`` gives stuck_leases 3, exact; the statement's ``EXPLAIN (ANALYZE,
BUFFERS)`` reads a bounded number of shared buffers (not the table's pages), with custom and
generic plans (the service's kept plans); and a table with no index that can serve the read is
still counted exactly (by reading it; the note says so) and gets a ``config check --live``
warning naming stuck_leases, the reason and the CREATE INDEX. The shapes
are built once for the module with set-based SQL and removed after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.libraries.conftest import LibServer

STUCK = 3
BUFFER_BOUND = 100


@pytest.fixture(scope="module")
def shaped(installed: LibServer) -> Iterator[LibServer]:
    lib = installed
    with lib.connect() as conn:
        p0 = conn.execute("SELECT coalesce(max(id), 0) FROM public.procrastinate_jobs").fetchone()[0]
        q0 = conn.execute("SELECT coalesce(max(id), 0) FROM public.pgqueuer").fetchone()[0]
        w = conn.execute("INSERT INTO public.procrastinate_workers (last_heartbeat) "
                         "VALUES (now() - interval '1 hour') RETURNING id").fetchone()[0]
        conn.execute("INSERT INTO public.procrastinate_jobs (queue_name, task_name, args, status, attempts) "
                     "SELECT 'qo_size', 'record', jsonb_build_object('n', g, 'pad', repeat('x', 60)), 'succeeded', 1 "
                     "FROM generate_series(1, 30000) AS g")
        doing = [r[0] for r in conn.execute(
            "INSERT INTO public.procrastinate_jobs (queue_name, task_name, args, status, attempts, worker_id, lock) "
            "SELECT 'qo_size', 'record', jsonb_build_object('n', g), 'doing', 1, %s, 'qo_size_' || g "
            "FROM generate_series(1, %s) AS g RETURNING id", (w, STUCK)).fetchall()]
        conn.execute("INSERT INTO public.procrastinate_events (job_id, type, at) "
                     "SELECT id, e.type::procrastinate_job_event_type, now() - e.ago "
                     "FROM unnest(%s::bigint[]) AS id, (VALUES ('deferred', interval '2 hours'), "
                     "('started', interval '1 hour')) AS e (type, ago)", (doing,))
        conn.execute("INSERT INTO public.pgqueuer (priority, entrypoint, status, payload) "
                     "SELECT 0, 'record', 'queued', convert_to(repeat('x', 100), 'UTF8') "
                     "FROM generate_series(1, 20000)")
        conn.execute("INSERT INTO public.pgqueuer (priority, entrypoint, status, heartbeat, updated, payload) "
                     "SELECT 0, 'record', 'picked', now() - interval '1 hour', now() - interval '1 hour', NULL "
                     "FROM generate_series(1, %s)", (STUCK,))
        # A table no index can serve (pgqueuer's columns, none of its indexes), for the live check.
        conn.execute("CREATE TABLE public.qo_unserved (LIKE public.pgqueuer INCLUDING DEFAULTS)")
        conn.execute("INSERT INTO public.qo_unserved SELECT * FROM public.pgqueuer WHERE id > %s", (q0,))
        for table in ("procrastinate_jobs", "procrastinate_events", "pgqueuer", "qo_unserved"):
            conn.execute(f"ANALYZE public.{table}")
    try:
        yield lib
    finally:
        with lib.connect() as conn:
            conn.execute("DROP TABLE public.qo_unserved")
            conn.execute("DELETE FROM public.pgqueuer WHERE id > %s", (q0,))
            conn.execute("DELETE FROM public.procrastinate_jobs WHERE id > %s", (p0,))
            conn.execute("DELETE FROM public.procrastinate_workers WHERE id = %s", (w,))


def _config(lib: LibServer, tmp: Path, queues: str) -> Path:
    secret = tmp / "pg.secret"
    secret.write_text(lib.password + "\n")
    secret.chmod(0o600)
    path = tmp / "queueops.toml"
    path.write_text(f'[[targets]]\nname = "libs"\ndialect = "postgresql"\nurl = "{lib.url}"\n'
                    f'password = "file:{secret}"\n\n[store]\nurl = "sqlite:///{tmp}/store.db"\n\n'
                    f'[identity]\nuser = "test"\ndefault_role = "operator"\n\n{queues}')
    return path


PRESETS = ('[[queues]]\nname = "procrastinate"\ntarget = "libs"\npreset = "procrastinate"\n\n'
           '[[queues]]\nname = "pgqueuer"\ntarget = "libs"\npreset = "pgqueuer"\n')
UNSERVED = '[[queues]]\nname = "unserved"\ntarget = "libs"\npreset = "pgqueuer"\ntable = "qo_unserved"\n'


def _collect(config: Path) -> dict[tuple[str, str], tuple[float | None, str]]:
    done = subprocess.run([sys.executable, "-m", "queueops.cli", "collect", "--once", "--json", "--config",
                           str(config)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert rows, done.stderr
    return {(r["queue"], r["metric"]): (r["value"], r.get("note") or "") for r in rows
            if r.get("queue") and "metric" in r}


@pytest.mark.parametrize("queue", ["procrastinate", "pgqueuer"])
def test_stuck_counted_through_the_library_index(shaped: LibServer, tmp_path: Path, queue: str) -> None:
    m = _collect(_config(shaped, tmp_path, PRESETS))
    assert m[(queue, "count_processing")][0] == STUCK
    assert m[(queue, "stuck_leases")] == (STUCK, "exact")
    assert m[(queue, "missing_index")][0] == 0
    assert m[(queue, "oldest_lease_age_s")][0] >= 3500


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _shared_buffers(plan: dict[str, Any]) -> int:
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("queue", ["procrastinate", "pgqueuer"])
def test_stuck_read_is_bounded(shaped: LibServer, tmp_path: Path, queue: str, mode: str) -> None:
    from collectors import registry, runner
    from queueops import coltypes, config, engine

    cfg = config.load(_config(shaped, tmp_path, PRESETS))
    target = cfg.targets[0]
    q = cfg.queue(queue)
    conn = engine.connect(target, "collect", cfg.base_dir)
    try:
        types = coltypes.read_types(conn, [q])
        stmt = runner.build_statement(registry.by_name("stuck_leases"), target, [q], types)
        assert stmt is not None
        with shaped.connect() as pg:
            pages = pg.execute("SELECT relpages FROM pg_class WHERE oid = %s::regclass",
                               (f"public.{q.table}",)).fetchone()[0]
            pg.execute(f"SET plan_cache_mode = {mode}")
            explain = pg.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + stmt.sql, stmt.params).fetchone()[0]
            rows = pg.execute(stmt.sql, stmt.params).fetchall()
    finally:
        conn.close()
    plan = explain[0]["Plan"]
    buffers = _shared_buffers(plan)
    used = sorted({n.get("Index Name") or n["Node Type"] for n in _nodes(plan) if n.get("Relation Name") == q.table})
    print(f"\nSTUCK-READ {queue} {mode}: {buffers} shared buffers, table {pages} pages, read by {used}")
    assert used and "Seq Scan" not in used, used
    assert pages > runner.SMALL_TABLE_PAGES
    assert buffers < BUFFER_BOUND, json.dumps(plan, indent=1)
    assert ("stuck_leases", STUCK) in {(r[1], r[2]) for r in rows}


def test_stuck_is_counted_when_nothing_serves_it_and_the_live_check_warns(shaped: LibServer, tmp_path: Path) -> None:
    """A table no index serves (past the small-table limit): the stuck count does not vanish (it was
    NULL, "not counted"); the processing items are found by reading the table, the note says so,
    and ``config check --live`` names stuck_leases as a scan, with the CREATE INDEX."""
    config = _config(shaped, tmp_path, PRESETS + "\n" + UNSERVED)
    done = subprocess.run([sys.executable, "-m", "queueops.cli", "config", "check", "--live", "--config",
                           str(config)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    lines = [ln for ln in out.splitlines() if "stuck_leases" in ln and "warning" in ln]
    print("\nLIVE-CHECK stuck_leases warnings:\n" + "\n".join(lines))
    unserved = [ln for ln in lines if "'unserved'" in ln and "scans instead of seeking" in ln]
    assert unserved, out
    assert 'CREATE INDEX CONCURRENTLY ON "public"."qo_unserved" ("status", "id")' in unserved[0], unserved[0]
    assert not [ln for ln in lines if "not counted" in ln], out
    # The presets' own tables are served by the library's index: no such warning for them.
    assert not [ln for ln in lines if ("'procrastinate'" in ln or "'pgqueuer'" in ln) and "stuck_leases = " in ln], out
    m = _collect(config)
    assert m[("unserved", "stuck_leases")] == (
        STUCK, "exact (read of every picked row: no index serves it; see config check --live)")
    assert m[("unserved", "missing_index")][0] == 1


def test_overview_cell_says_why_stuck_is_not_counted() -> None:
    from console.health import queue_health
    from console.views import overview
    from queueops import config

    cfg = config.parse({"targets": [{"name": "a", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
                        "queues": [{"name": "mail", "target": "a", "kind": "status", "table": "mail", "key": "id",
                                    "status_column": "status", "status_changed_at": "changed_at"}]})
    h = queue_health(cfg.queue("mail"), {"depth": 3.0, "stuck_leases": None})
    note = ("not counted: no index serves the read of processing items: none leads with the status column, "
            "none is partial on exactly the processing values (see missing_index)")
    df, _ = overview.table(cfg, [h], {}, notes={("a", "mail", "stuck_leases"): note})
    header = dict(overview.COLUMNS)["stuck_leases"]
    assert df.iloc[0][header] == "not counted: no index serves the read of processing items"
    df, _ = overview.table(cfg, [h], {})
    assert df.iloc[0][header] is None or df.iloc[0][header] != df.iloc[0][header]  # no note: an empty cell
