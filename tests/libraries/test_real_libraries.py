"""Real queue libraries, real workers, a SIGKILL mid-job, and queueops' view against the library's own.

For each library (procrastinate, pgqueuer, pg-boss 10, 11 and 12): its own schema (installed by its own tool,
conftest), JOBS jobs sent with its own API, its real worker processing them two at a time, each
task recording its own job id and holding; the worker SIGKILLed while two jobs run. Then:
``queueops collect --once`` with the library's preset reports depth and processing equal to the
library's own table, and stuck equal to it once the (test-shortened) lease timeout has passed;
the jobs are released by ``act requeue`` where the preset allows it, or else by the library's own
rescue; a fresh worker finishes every job; each job ended exactly once (``qo_runs``), while the
killed jobs started twice (the library's at-least-once re-run, counted apart from queueops').
The figures are printed (``pytest -s``). graphile-worker 0.17.3, whose stale locks are reset after
4 hours: a test of its own at the end (its locks back-dated, its own resetLockedAt frees them).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, wait_for
from tests.libraries.conftest import BIN, NODE_DIR, LibServer, pgboss_db, pgboss_on

JOBS = 6
KILLED = 2  # the workers run two jobs at a time
LEASE_S = 2  # the test's lease timeout override: the presets' defaults sit above each library's own rescue


@dataclass
class Library:
    name: str  # as recorded in qo_runs
    preset: str
    count_sql: str  # (ready, processing) from the library's own table
    defer: Callable[[LibServer], list[str]]
    worker: Callable[[LibServer], list[str]]
    worker_cwd: Path
    finished: Callable[[LibServer, list[str]], bool]  # every job done per the library's own records
    rescue: str  # "requeue" (queueops) or "library"
    database: str = ""  # the database it is installed in, when not the package's own


def _procrastinate_defer(lib: LibServer) -> list[str]:
    out = lib.run([sys.executable, "-c", (
        "import json; from tests.libraries.apps.procrastinate_app import app, record\n"
        "with app.open():\n"
        f"    print(json.dumps([record.defer(n=i) for i in range({JOBS})]))")])
    return [str(i) for i in json.loads(out.strip().splitlines()[-1])]


def _procrastinate_rescue(lib: LibServer) -> int:
    """procrastinate's own recipe for jobs of a dead worker: get_stalled_jobs, then retry_job."""
    os.environ.setdefault("QO_LIB_DSN", lib.url)
    code = ("import asyncio, json\nfrom tests.libraries.apps.procrastinate_app import app\n"
            "async def main():\n    async with app.open_async():\n"
            "        stalled = list(await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=1))\n"
            "        for job in stalled:\n            await app.job_manager.retry_job(job)\n"
            "        print(len(stalled))\nasyncio.run(main())")
    return int(lib.run([sys.executable, "-c", code]).strip().splitlines()[-1])


def _pgqueuer_defer(lib: LibServer) -> list[str]:
    code = ("import asyncio, json, os, psycopg\nfrom pgqueuer.db import PsycopgDriver\n"
            "from pgqueuer.queries import Queries\n"
            "async def main():\n"
            "    conn = await psycopg.AsyncConnection.connect(os.environ['QO_LIB_DSN'], autocommit=True)\n"
            f"    ids = await Queries(PsycopgDriver(conn)).enqueue(['record'] * {JOBS}, [None] * {JOBS}, [0] * {JOBS})\n"
            "    print(json.dumps([int(i) for i in ids]))\nasyncio.run(main())")
    return [str(i) for i in json.loads(lib.run([sys.executable, "-c", code]).strip().splitlines()[-1])]


def _pgqueuer_finished(lib: LibServer, ids: list[str]) -> bool:
    with lib.connect() as conn:
        left = conn.execute("SELECT count(*) FROM public.pgqueuer").fetchone()[0]
        ok = conn.execute("SELECT count(DISTINCT job_id) FROM public.pgqueuer_log WHERE status = 'successful' "
                          "AND job_id = ANY(%s::bigint[])", ([int(i) for i in ids],)).fetchone()[0]
    return left == 0 and ok == len(ids)


def _status_finished(table: str, column: str, done: str, cast: str) -> Callable[[LibServer, list[str]], bool]:
    def finished(lib: LibServer, ids: list[str]) -> bool:
        with lib.connect() as conn:
            n = conn.execute(f"SELECT count(*) FROM {table} WHERE {column}::text = %s "  # noqa: S608 (constants)
                             f"AND id = ANY(%s::{cast}[])", (done, ids)).fetchone()[0]
        return n == len(ids)
    return finished


def _pgboss_defer(lib: LibServer) -> list[str]:
    return json.loads(lib.run(["node", "boss.mjs", "send", str(JOBS)], cwd=NODE_DIR).strip().splitlines()[-1])


def _pgboss_on_defer(major: int) -> Callable[[LibServer], list[str]]:
    def defer(lib: LibServer) -> list[str]:
        return json.loads(lib.run(pgboss_on(major, "send", str(JOBS)), cwd=NODE_DIR).strip().splitlines()[-1])
    return defer


LIBRARIES = {
    "procrastinate": Library(
        "procrastinate", "procrastinate",
        "SELECT count(*) FILTER (WHERE status = 'todo'), count(*) FILTER (WHERE status = 'doing') "
        "FROM public.procrastinate_jobs",
        _procrastinate_defer,
        lambda lib: [str(BIN / "procrastinate"), "--app=tests.libraries.apps.procrastinate_app.app", "worker",
                     "--queues=qo", "--concurrency=2", "--wait"],
        ROOT, _status_finished("public.procrastinate_jobs", "status", "succeeded", "bigint"), "library"),
    "pgqueuer": Library(
        "pgqueuer", "pgqueuer",
        "SELECT count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status = 'picked') "
        "FROM public.pgqueuer",
        _pgqueuer_defer,
        lambda lib: [sys.executable, "-m", "tests.libraries.apps.pgqueuer_app"],
        ROOT, _pgqueuer_finished, "requeue"),
    "pgboss": Library(
        "pgboss", "pgboss",
        "SELECT count(*) FILTER (WHERE state IN ('created', 'retry')), count(*) FILTER (WHERE state = 'active') "
        "FROM pgboss.job",
        _pgboss_defer,
        lambda lib: ["node", "boss.mjs", "work"],
        NODE_DIR, _status_finished("pgboss.job", "state", "completed", "uuid"), "library"),
    # pg-boss 11: its jobs expire after their own expire_seconds (5 s here), failed to retry by the
    # supervisor's monitor.
    "pgboss11": Library(
        "pgboss11", "pgboss11",
        "SELECT count(*) FILTER (WHERE state IN ('created', 'retry')), count(*) FILTER (WHERE state = 'active') "
        "FROM pgboss.job",
        _pgboss_on_defer(11),
        lambda lib: pgboss_on(11, "work"),
        NODE_DIR, _status_finished("pgboss.job", "state", "completed", "uuid"), "library", pgboss_db(11)),
    # pg-boss 12: its jobs expire after 300 s but beat every 5 s (heartbeatSeconds 10): a killed
    # worker's jobs are stuck, and failed to retry by pg-boss, once their own heartbeat is 10 s old.
    "pgboss12": Library(
        "pgboss12", "pgboss12",
        "SELECT count(*) FILTER (WHERE state IN ('created', 'retry') AND NOT blocked), "
        "count(*) FILTER (WHERE state = 'active') FROM pgboss.job",
        _pgboss_on_defer(12),
        lambda lib: pgboss_on(12, "work"),
        NODE_DIR, _status_finished("pgboss.job", "state", "completed", "uuid"), "library", pgboss_db(12)),
}


def _config(lib: LibServer, tmp: Path, library: Library) -> Path:
    secret = tmp / "pg.secret"
    secret.write_text(lib.password + "\n")
    secret.chmod(0o600)
    path = tmp / "queueops.toml"
    path.write_text(f'[[targets]]\nname = "libs"\ndialect = "postgresql"\nurl = "{lib.url}"\n'
                    f'password = "file:{secret}"\n\n[store]\nurl = "sqlite:///{tmp}/store.db"\n\n'
                    f'[identity]\nuser = "test"\ndefault_role = "operator"\n\n'
                    f'[[queues]]\nname = "{library.name}"\ntarget = "libs"\npreset = "{library.preset}"\n'
                    f'lease_timeout_s = {LEASE_S}\n')
    return path


def _collect(config: Path, queue: str) -> dict[str, float | None]:
    done = subprocess.run([sys.executable, "-m", "queueops.cli", "collect", "--once", "--json", "--config",
                           str(config)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert rows, done.stderr
    return {r["metric"]: r["value"] for r in rows if r.get("queue") == queue and "metric" in r}


def _library_counts(lib: LibServer, library: Library) -> tuple[int, int]:
    with lib.connect() as conn:
        ready, processing = conn.execute(library.count_sql).fetchone()
    return int(ready), int(processing)


@pytest.mark.parametrize("name", list(LIBRARIES))
def test_real_library_killed_worker(installed: LibServer, tmp_path: Path, name: str) -> None:
    library = LIBRARIES[name]
    lib = installed.on_database(library.database) if library.database else installed
    lib.set_gate(library.name, False)
    ids = library.defer(lib)
    assert len(ids) == JOBS
    worker = lib.spawn(library.worker(lib), tmp_path / "worker1.log", cwd=library.worker_cwd)
    started = lib.wait_started(library.name, KILLED)
    lib.kill(worker)
    assert len(started) == KILLED, f"the workers hold two jobs at a time, {len(started)} started"

    # queueops' view against the library's own table, once the lease timeout has passed.
    config = _config(lib, tmp_path, library)
    ready, processing = _library_counts(lib, library)
    assert (ready, processing) == (JOBS - KILLED, KILLED)

    def stuck_seen() -> dict[str, float | None] | None:
        m = _collect(config, library.name)
        return m if m.get("stuck_leases") == KILLED else None

    metrics = wait_for(stuck_seen, 60, interval=1, what="stuck_leases == killed")
    if name == "pgboss12":  # stuck by their own heartbeat (10 s), long before their own expiry (300 s)
        with lib.connect() as conn:
            expire, beat, running = conn.execute(
                "SELECT min(expire_seconds), max(heartbeat_seconds), max(extract(epoch FROM now() - started_on)) "
                "FROM pgboss.job WHERE state = 'active'").fetchone()
        assert (expire, beat) == (300, 10) and 10 <= running < 120, (expire, beat, running)
    assert metrics["depth"] == ready
    assert metrics["count_processing"] == processing
    assert metrics.get("oldest_age_s") is not None  # procrastinate's from its events table (times_from)
    stuck = metrics.get("stuck_leases")

    # Release: queueops' requeue where the preset allows it, else the library's own rescue.
    requeued = rescued = 0
    if library.rescue == "requeue":
        done = subprocess.run([sys.executable, "-m", "queueops.cli", "act", "requeue", "--queue", library.name,
                               "--config", str(config), "--yes", "--json"], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads(done.stdout)
        requeued = int(result["rows_affected"])
        assert requeued == KILLED
        assert any(library.preset in w for w in result["preview"]["warnings"]), "the preset's requeue warning"
        assert _library_counts(lib, library) == (JOBS - KILLED + KILLED, 0)
    else:
        refused = subprocess.run([sys.executable, "-m", "queueops.cli", "act", "requeue", "--queue", library.name,
                                  "--config", str(config), "--dry-run"], cwd=ROOT, capture_output=True, text=True,
                                 timeout=120)
        assert refused.returncode != 0 and "refused" in (refused.stdout + refused.stderr)
        if name == "procrastinate":
            rescued = asyncio.run(asyncio.to_thread(_procrastinate_rescue, lib))
            assert rescued == KILLED

    lib.set_gate(library.name, True)
    fresh = lib.spawn(library.worker(lib), tmp_path / "worker2.log", cwd=library.worker_cwd)
    try:
        wait_for(lambda: library.finished(lib, ids), 180, interval=0.5, what=f"every {name} job finished")
    finally:
        lib.stop(fresh)
    if name.startswith("pgboss"):  # pg-boss's own expiry (12: heartbeat) moved the killed jobs to retry
        with lib.connect() as conn:
            rescued = conn.execute("SELECT count(*) FROM pgboss.job WHERE id = ANY(%s::uuid[]) AND retry_count > 0",
                                   (ids,)).fetchone()[0]
        assert rescued == KILLED
    ends, starts = lib.runs(library.name, "end"), lib.runs(library.name, "start")
    duplicates = sum(n - 1 for n in ends.values() if n > 1)
    reruns = sum(n - 1 for n in starts.values() if n > 1)
    figures = {"library": name, "jobs": JOBS, "killed": KILLED, "stuck_seen": stuck, "requeued": requeued,
               "rescued_by_library": rescued,
               "finished": len(ends), "duplicates": duplicates, "library_reruns_of_killed_jobs": reruns}
    print(f"\nREAL-LIBRARY FIGURES {json.dumps(figures)}")
    assert sorted(ends) == sorted(ids), "every job ended, under its own id"
    assert duplicates == 0, f"a job ran to its end twice: {ends}"
    assert set(started) <= {k for k, n in starts.items() if n == 2}, "each killed job was re-run once"


GRAPHILE = "graphile_worker"
GRAPHILE_COUNTS = ("SELECT count(*) FILTER (WHERE locked_at IS NULL AND attempts < max_attempts AND run_at <= now()), "
                   "count(*) FILTER (WHERE locked_at IS NOT NULL) FROM graphile_worker._private_jobs")


def test_real_graphile_worker_killed_worker_reset_by_its_own_stale_lock_reset(installed: LibServer,
                                                                              tmp_path: Path) -> None:
    """graphile-worker 0.17.3 (its own runMigrations, quickAddJob and run(), Node.js 22): a worker
    pool SIGKILLed with two jobs running leaves them locked (locked_at, locked_by). queueops with the
    graphile_worker preset and its default lease timeout (15,000 s: graphile's 4 hours and the 10
    minutes between two resets of a pool; no override) counts them stuck once their locks are
    back-dated 4 h 11 min, and refuses requeue naming
    force_unlock_workers. A fresh pool's own resetLockedAt (src/sql/resetLockedAt.ts, run within its
    first 2 s here) unlocks them, seen while the gate still holds the fresh pool's two slots; then
    every job ends exactly once and graphile deletes each."""
    from tests.libraries.conftest import GRAPHILE_DB, graphile

    lib = installed.on_database(GRAPHILE_DB)
    lib.set_gate(GRAPHILE, False)
    ids = json.loads(lib.run(graphile("add", str(JOBS)), cwd=NODE_DIR).strip().splitlines()[-1])
    assert len(ids) == JOBS
    worker = lib.spawn(graphile("work"), tmp_path / "worker1.log", cwd=NODE_DIR)
    started = lib.wait_started(GRAPHILE, KILLED)
    lib.kill(worker)
    assert len(started) == KILLED, f"the pool holds two jobs at a time, {len(started)} started"
    with lib.connect() as conn:
        assert conn.execute(GRAPHILE_COUNTS).fetchone() == (JOBS - KILLED, KILLED)
        dead = conn.execute("SELECT DISTINCT locked_by FROM graphile_worker._private_jobs "
                            "WHERE locked_at IS NOT NULL").fetchall()
    assert len(dead) == 1, dead

    config = _config(lib, tmp_path, Library(GRAPHILE, GRAPHILE, GRAPHILE_COUNTS, lambda _: [], lambda _: [],
                                            NODE_DIR, lambda *_: True, "library"))
    config.write_text(config.read_text().replace(f"lease_timeout_s = {LEASE_S}\n", ""))  # the preset's 15,000 s
    fresh = _collect(config, GRAPHILE)
    assert (fresh["depth"], fresh["count_leased"], fresh["stuck_leases"]) == (JOBS - KILLED, KILLED, 0), fresh
    with lib.connect() as conn:  # the dead pool's locks, 4 h 11 min old
        conn.execute("UPDATE graphile_worker._private_jobs SET locked_at = locked_at - interval '4 hours 11 minutes' "
                     "WHERE locked_at IS NOT NULL")
        conn.execute("UPDATE graphile_worker._private_job_queues SET locked_at = locked_at - interval '4 hours 11 minutes' "
                     "WHERE locked_at IS NOT NULL")
    metrics = _collect(config, GRAPHILE)
    assert metrics["stuck_leases"] == KILLED, metrics
    assert metrics["depth"] == JOBS - KILLED and metrics["count_leased"] == KILLED, metrics
    assert metrics.get("oldest_age_s") is not None
    refused = subprocess.run([sys.executable, "-m", "queueops.cli", "act", "requeue", "--queue", GRAPHILE,
                              "--config", str(config), "--dry-run"], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "refused" in out and "force_unlock_workers" in out, out

    # graphile's own reset, by a fresh pool whose two slots the closed gate holds: the killed jobs
    # are unlocked (and left for later) by resetLockedAt, not taken by anything else.
    fresh_pool = lib.spawn(graphile("work"), tmp_path / "worker2.log", cwd=NODE_DIR)
    try:
        def unlocked() -> int | None:
            with lib.connect() as conn:
                n = conn.execute("SELECT count(*) FROM graphile_worker._private_jobs WHERE id = ANY(%s::bigint[]) "
                                 "AND locked_at IS NULL", ([int(i) for i in started],)).fetchone()[0]
            return n if n == KILLED else None

        rescued = wait_for(unlocked, 60, interval=0.5, what="graphile's resetLockedAt unlocked the killed jobs")
        after = _collect(config, GRAPHILE)
        assert after["stuck_leases"] == 0, after
        lib.set_gate(GRAPHILE, True)

        def finished() -> bool:
            with lib.connect() as conn:
                left = conn.execute("SELECT count(*) FROM graphile_worker._private_jobs WHERE id = ANY(%s::bigint[])",
                                    ([int(i) for i in ids],)).fetchone()[0]
            return left == 0 and len(lib.runs(GRAPHILE, "end")) == JOBS

        wait_for(finished, 180, interval=0.5, what="every graphile job finished (deleted by graphile)")
    finally:
        lib.stop(fresh_pool)
    ends, starts = lib.runs(GRAPHILE, "end"), lib.runs(GRAPHILE, "start")
    duplicates = sum(n - 1 for n in ends.values() if n > 1)
    reruns = sum(n - 1 for n in starts.values() if n > 1)
    figures = {"library": GRAPHILE, "jobs": JOBS, "killed": KILLED, "stuck_seen": metrics["stuck_leases"],
               "requeued": 0, "rescued_by_library": rescued, "finished": len(ends), "duplicates": duplicates,
               "library_reruns_of_killed_jobs": reruns}
    print(f"\nREAL-LIBRARY FIGURES {json.dumps(figures)}")
    assert sorted(ends) == sorted(ids), "every job ended, under its own id"
    assert duplicates == 0, f"a job ran to its end twice: {ends}"
    assert set(started) <= {k for k, n in starts.items() if n == 2}, "each killed job was re-run once"
