"""The target database crashes (``pg_ctl stop -m immediate``) in the middle of a collection cycle,
a requeue, an archive and a rebuild, while the lab's workload runs throughout.

For each: the service or the action survives and says what happened, the lab ledger shows no
item lost or processed twice (checked after every crash, and once more after the workload
stopped), and the audit record of an action tells the truth: ``interrupted`` with the rows of
the batches that committed, never more than the database holds and at most one batch fewer.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError

from queueops import actions
from queueops.actions import audit
from queueops.config import Config
from queueops.config import load as load_config
from queueops.store import open_engine
from queueops.store.schema import collector_status
from tests.faults.conftest import FaultLab, drain, wait_for

BATCH = 25
N = 10 * BATCH
KILL_AFTER = 3 * BATCH  # committed rows before the crash


def _status(store_path: Path) -> list[dict]:
    """The service's status rows (none while it has not created its store yet)."""
    engine = open_engine(f"sqlite:///{store_path}", create=False)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(collector_status).order_by(collector_status.c.ts)).mappings().all()
    except OperationalError:
        return []
    finally:
        engine.dispose()
    return [{**r, "ts": r["ts"].replace(tzinfo=UTC) if r["ts"].tzinfo is None else r["ts"]} for r in rows]


def test_database_killed_mid_cycle(busy_lab: FaultLab, services) -> None:  # noqa: ANN001
    lab = busy_lab
    store_path = lab.state_dir / "killed-cycle" / "store.db"
    # A long lock timeout, so that a cycle blocked behind the test's lock is in flight for seconds.
    config = lab.write_config("killed-cycle", store_url=f"sqlite:///{store_path}",
                              lake=lab.state_dir / "killed-cycle" / "lake", lock_timeout_ms=6000,
                              statement_timeout_ms=8000, schedule="fast_s = 1\nslow_s = 2\nbackoff_max_s = 2")
    svc = services(config, "--collector", "depth", "--collector", "oldest_age_s", "--collector", "stuck_leases")
    wait_for(lambda: sum(r["ok"] for r in _status(store_path) if r["collector"] == "depth") >= 2, 60, 0.2,
             "two good cycles")

    # Catch a cycle in flight: an ACCESS EXCLUSIVE lock on a queue table (an ALTER TABLE, a
    # VACUUM FULL) makes the next cycle's statement wait; crash the server while it waits.
    holder = lab.connect(autocommit=False)
    holder.execute("LOCK TABLE lab.q_lease IN ACCESS EXCLUSIVE MODE")
    wait_for(lambda: lab.one("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'queueops-collect' "
                             "AND wait_event_type = 'Lock'"), 20, what="a collector statement waiting on the lock")
    killed = datetime.now(UTC)
    lab.kill()
    holder.close()
    time.sleep(3)
    assert svc.alive(), svc.text()
    back = datetime.now(UTC)  # from here a cycle may find the server up again
    lab.restart()
    up = datetime.now(UTC)
    wait_for(lambda: any(r["ok"] and r["ts"] > back for r in _status(store_path) if r["collector"] == "depth"), 30,
             what="a good cycle after the restart")
    assert svc.terminate() == 0, svc.text()
    assert "lab: up again after" in svc.text()

    # (the outage's own down / up rows are checked in test_outages.py)
    rows = [r for r in _status(store_path) if r["target"] == "lab" and r["collector"] != "(outage)"]
    # The cycle in flight became error rows (its statement was cut by the crash): data, not a crash.
    last_before = max(r["ts"] for r in rows if r["ts"] < killed)
    in_flight = {r["collector"]: r for r in rows if r["ts"] == last_before}
    assert set(in_flight) == {"depth", "oldest_age_s", "stuck_leases"}
    # (a collector that ran before the lock was taken may have finished fine)
    cut = [r for r in in_flight.values() if not r["ok"]]
    assert cut and any("server closed the connection" in r["error"] or "terminat" in r["error"] for r in cut), cut
    depth = [r for r in rows if r["collector"] == "depth"]
    outage = [r for r in depth if killed < r["ts"] < back - timedelta(seconds=0.5)]
    assert outage and not any(r["ok"] for r in outage)
    # One status row per collector per cycle (nothing written twice), and status rows cover the whole
    # run, outage included: no hole longer than an interval (plus scheduling slack), but after the
    # cycle in flight, which lasted until the crash (at most its three statements' lock timeouts).
    seen: dict[tuple[datetime, str], int] = {}
    for r in rows:
        seen[(r["ts"], r["collector"])] = seen.get((r["ts"], r["collector"]), 0) + 1
    assert set(seen.values()) == {1}
    stamps = sorted({r["ts"] for r in depth})
    holes = {a: (b - a).total_seconds() for a, b in zip(stamps, stamps[1:], strict=False)}
    assert holes.pop(last_before) < 3 * 6 + 2.5
    assert max(holes.values()) < 3.0, holes
    first_ok = min(r["ts"] for r in depth if r["ok"] and r["ts"] > back)
    print(f"FIGURE db-crash-mid-cycle: {len(outage)} error cycles during the outage; first good cycle "
          f"{(first_ok - up).total_seconds():+.2f} s after the server accepted connections again")
    lab.assert_ledger_clean()


# ---------------------------------------------------------------------------------------------
# Actions: run in a thread of this process (the real plan / execute the CLI and the console call),
# the server crashed from the test's thread once enough batches committed.


def _run_until(cfg: Config, plan: actions.Plan, rows: int) -> tuple[threading.Thread, dict[str, Any]]:
    reached = threading.Event()
    box: dict[str, Any] = {}

    def progress(p: actions.Progress) -> None:
        if p.rows >= rows:
            reached.set()

    def work() -> None:
        box["result"] = actions.execute(cfg, plan, progress=progress)
        reached.set()

    t = threading.Thread(target=work)
    t.start()
    assert reached.wait(60), "the action never got going"
    assert "result" not in box, f"the action ended before the crash: {box['result']}"
    return t, box


def _crash_during(lab: FaultLab, cfg: Config, plan: actions.Plan, rows: int) -> actions.Result:
    t, box = _run_until(cfg, plan, rows)
    lab.kill()
    t.join(60)
    assert not t.is_alive(), "the action hung after the crash"
    lab.restart()
    return box["result"]


def _store(config: Path) -> Engine:
    return open_engine(load_config(config))


def test_database_killed_mid_requeue(busy_lab: FaultLab) -> None:
    lab = busy_lab
    config = lab.write_config("killed-requeue", store_url=f"sqlite:///{lab.state_dir / 'killed-requeue.db'}",
                              lease_timeout_s=1800)
    cfg = load_config(config)
    # N lease items produced (with their ledger rows, as the producer writes them) and claimed an
    # hour ago by a consumer that died: stuck leases.
    lab.one("WITH i AS (INSERT INTO lab.q_lease (payload, processing_started_at, attempts) "
            "SELECT 'stuck-requeue', now() - interval '1 hour', 1 FROM generate_series(1, %s) RETURNING id) "
            "INSERT INTO lab.ledger (queue, item, event, worker) "
            "SELECT 'lease', id, 'produced', 'fault-suite-requeue' FROM i RETURNING 1", N)
    plan = actions.plan(cfg, "requeue", "lease", {"batch_size": BATCH, "pause_s": 0.2})
    assert plan.preview.row_count == N

    r = _crash_during(lab, cfg, plan, KILL_AFTER)

    assert r.outcome == "interrupted" and "connection" in r.error, r
    record = audit.entry(_store(config), r.audit_id)
    assert record["outcome"] == "interrupted" and record["end_time"] is not None
    assert record["rows_affected"] == r.rows_affected >= KILL_AFTER
    # The database agrees with the record: every released lease was released by a committed batch;
    # at most the batch in flight at the crash committed without its answer reaching the action.
    still = lab.one("SELECT count(*) FROM lab.q_lease WHERE payload = 'stuck-requeue' "
                    "AND processing_started_at < now() - interval '30 minutes'")
    released = N - still
    assert record["rows_affected"] <= released <= record["rows_affected"] + BATCH
    assert released % BATCH == 0, released  # whole batches only
    print(f"FIGURE db-crash-mid-requeue: audit rows {record['rows_affected']}, released in the database {released}")
    lab.assert_ledger_clean()

    # Re-running takes exactly what is left; the consumers (reconnected) process every released item once.
    again = actions.execute(cfg, actions.plan(cfg, "requeue", "lease", {"batch_size": 500}))
    assert (again.outcome, again.rows_affected) == ("ok", still)
    drain(lab)
    book = lab.assert_ledger_clean()
    # Every released item was processed, but for claims whose answer the crash cut (at most one
    # per consumer): leased again after the requeue, stuck, queued -- not lost.
    left = lab.one("SELECT count(*) FROM lab.q_lease WHERE payload = 'stuck-requeue'")
    assert left == lab.one("SELECT count(*) FROM lab.q_lease WHERE payload = 'stuck-requeue' "
                           "AND processing_started_at > now() - interval '10 minutes'") <= 2
    processed = lab.one("SELECT count(*) FROM lab.ledger WHERE queue = 'lease' AND event = 'processed' AND item IN "
                        "(SELECT item FROM lab.ledger WHERE queue = 'lease' AND worker = 'fault-suite-requeue')")
    assert processed == N - left, (processed, left, book["lease"])


def test_database_killed_mid_archive(busy_lab: FaultLab) -> None:
    lab = busy_lab
    config = lab.write_config("killed-archive", store_url=f"sqlite:///{lab.state_dir / 'killed-archive.db'}")
    cfg = load_config(config)
    # Finished items an hour old, produced and processed as the workload records them.
    lab.one("WITH m AS (INSERT INTO lab.q_status_meta (status, status_changed_at) "
            "SELECT 2, now() - interval '1 hour' FROM generate_series(1, %s) RETURNING id), "
            "d AS (INSERT INTO lab.q_status_data (id, payload) SELECT id, 'archive-me' FROM m) "
            "INSERT INTO lab.ledger (queue, item, event, worker) "
            "SELECT 'status', id, e, 'fault-suite' FROM m, unnest(ARRAY['produced', 'processed']) AS e RETURNING 1", N)
    options = {"older_than_s": 1800, "batch_size": BATCH, "pause_s": 0.2}
    plan = actions.plan(cfg, "archive", "status", options)
    assert plan.preview.row_count == N

    r = _crash_during(lab, cfg, plan, KILL_AFTER)

    record = audit.entry(_store(config), r.audit_id)
    assert r.outcome == record["outcome"] == "interrupted" and record["rows_affected"] == r.rows_affected, r
    left = lab.one("SELECT count(*) FROM lab.q_status_meta WHERE status = 2 "
                   "AND status_changed_at < now() - interval '30 minutes'")
    archived = N - left
    assert record["rows_affected"] <= archived <= record["rows_affected"] + BATCH and archived % BATCH == 0
    print(f"FIGURE db-crash-mid-archive: audit rows {record['rows_affected']}, archived in the database {archived}")
    # Whole items only: a payload row never outlives its queue row, nor the reverse.
    assert lab.one("SELECT count(*) FROM lab.q_status_data WHERE payload = 'archive-me'") == left
    lab.assert_ledger_clean()
    again = actions.execute(cfg, actions.plan(cfg, "archive", "status", {**options, "batch_size": 500, "pause_s": 0}))
    assert (again.outcome, again.rows_affected) == ("ok", left)
    assert lab.one("SELECT count(*) FROM lab.q_status_data WHERE payload = 'archive-me'") == 0
    lab.assert_ledger_clean()


def test_database_killed_mid_rebuild(busy_lab: FaultLab) -> None:
    lab = busy_lab
    config = lab.write_config("killed-rebuild", store_url=f"sqlite:///{lab.state_dir / 'killed-rebuild.db'}",
                              lock_timeout_ms=20000)
    cfg = load_config(config)
    # REINDEX CONCURRENTLY builds the new index, then waits for every older snapshot to end: a
    # REPEATABLE READ transaction left open (the snapshot-hold fault's shape) keeps it there.
    holder = psycopg.connect(lab.url, password=lab.password)
    holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    holder.execute("SELECT 1")
    options = {"indexes": ["q_status_meta_status"], "vacuum": False}
    plan = actions.plan(cfg, "rebuild", "status", options)
    box: dict[str, actions.Result] = {}
    t = threading.Thread(target=lambda: box.setdefault("r", actions.execute(cfg, plan)))
    t.start()
    wait_for(lambda: lab.one("SELECT count(*) FROM pg_stat_progress_create_index "
                             "WHERE phase LIKE 'waiting for old snapshots%%'"), 30,
             what="the REINDEX waiting for old snapshots")
    lab.kill()
    t.join(60)
    assert not t.is_alive(), "the rebuild hung after the crash"
    holder.close()
    lab.restart()

    r = box["r"]
    assert r.outcome == "interrupted" and "connection" in r.error, r
    store = _store(config)
    record = audit.entry(store, r.audit_id)
    assert record["outcome"] == "interrupted" and record["rows_affected"] == 0
    # The crash left the half-built index behind, invalid (the cleanup could not reach the server,
    # and says so): the next preview names it and drops it first.
    assert "could not drop the leftover index" in r.error
    leftovers = lab.one("SELECT array_agg(c.relname::text) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                        "WHERE i.indrelid = 'lab.q_status_meta'::regclass AND NOT i.indisvalid")
    assert leftovers == ["q_status_meta_status_ccnew"], leftovers
    again = actions.plan(cfg, "rebuild", "status", options)
    labels = [s.label for s in again.preview.steps]
    assert labels == ["drop_leftover q_status_meta_status_ccnew", "reindex_concurrently q_status_meta_status"], labels
    done = actions.execute(cfg, again)
    assert done.outcome == "ok", done.error
    assert audit.entry(store, done.audit_id)["outcome"] == "ok"
    assert lab.one("SELECT count(*) FROM pg_index WHERE indrelid = 'lab.q_status_meta'::regclass "
                   "AND NOT indisvalid") == 0
    lab.assert_ledger_clean()
