"""A dropped connection or a killed process mid-action: every row done or untouched, audit says so."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from queueops import actions
from queueops.actions import audit
from queueops.store import open_engine

ROOT = Path(__file__).resolve().parents[2]


def _kill_action_backend(acts, action: str) -> int:  # noqa: ANN001
    """pg_terminate_backend of the action's session, found by its application_name."""
    rows = acts.sql("SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s "
                    "AND application_name NOT LIKE '%%-preview' AND application_name NOT LIKE '%%-progress'",
                    (f"queueops-action-{action}-%",))
    assert len(rows) == 1, rows
    acts.sql("SELECT pg_terminate_backend(%s)", (rows[0][0],))
    return rows[0][0]


def _run_and_kill(acts, cfg, plan, action: str, after_batches: int) -> actions.Result:  # noqa: ANN001
    reached = threading.Event()
    box: dict[str, actions.Result] = {}

    def progress(p: actions.Progress) -> None:
        if p.phase == "batches" and (p.done or 0) >= after_batches:
            reached.set()

    t = threading.Thread(target=lambda: box.setdefault("r", actions.execute(cfg, plan, progress=progress)))
    t.start()
    assert reached.wait(30), "the action never reached the batch to kill it at"
    _kill_action_backend(acts, action)
    t.join(60)
    return box["r"]


def _lists_its_committed_batches(r: actions.Result, batch_size: int) -> None:
    """An interrupted result lists the batches it committed before it stopped, as they were
    reported (issue 30): one summary each, adding up to rows_affected."""
    batches = [b for b in r.rows if "batch" in b]
    assert batches and [b["batch"] for b in batches] == list(range(1, len(batches) + 1))
    assert all(b["rows"] == batch_size for b in batches) and sum(b["rows"] for b in batches) == r.rows_affected
    assert r.to_json()["rows"] == r.rows


def test_connection_killed_mid_requeue(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @lease (processing_started_at) SELECT now() - interval '1 minute' "
             "FROM generate_series(1, 3000)")
    original = dict(acts.sql("SELECT id, processing_started_at FROM @lease"))
    cfg = acts.config()
    plan = actions.plan(cfg, "requeue", "lease", {"batch_size": 100, "pause_s": 0.1, "bump_attempts": True})
    r = _run_and_kill(acts, cfg, plan, "requeue", after_batches=5)
    assert r.outcome == "interrupted" and "connection" in r.error
    rows = acts.sql("SELECT id, processing_started_at, attempts FROM @lease")
    done = [i for i, lease, attempts in rows if lease is None and attempts == 1]
    untouched = [i for i, lease, attempts in rows if lease == original[i] and attempts == 0]
    assert len(done) + len(untouched) == 3000  # nothing half-done
    assert len(done) % 100 == 0 and 500 <= len(done) < 3000  # whole batches only
    assert r.rows_affected <= len(done) <= r.rows_affected + 100
    _lists_its_committed_batches(r, 100)
    rec = audit.entry(open_engine(cfg), r.audit_id)
    assert rec["outcome"] == "interrupted" and rec["rows_affected"] == r.rows_affected and rec["end_time"]
    # Re-running continues with exactly what is left.
    again = actions.plan(cfg, "requeue", "lease", {"batch_size": 500})
    assert again.preview.row_count == len(untouched)
    assert actions.execute(cfg, again).rows_affected == len(untouched)


def test_connection_killed_mid_archive(acts) -> None:  # noqa: ANN001
    with acts.connect() as conn:
        conn.execute("INSERT INTO @meta (status, status_changed_at) SELECT 2, now() - interval '2 hours' "
                     "FROM generate_series(1, 1500)")
        conn.execute("INSERT INTO @data (id, payload) SELECT id, 'p' || id FROM @meta")
    cfg = acts.config()
    plan = actions.plan(cfg, "archive", "status", {
        "older_than_s": 3600, "mode": "move", "archive_table": "status_meta_archive",
        "archive_data_table": "status_data_archive", "batch_size": 50, "pause_s": 0.1})
    r = _run_and_kill(acts, cfg, plan, "archive", after_batches=4)
    assert r.outcome == "interrupted"
    in_queue = {i for (i,) in acts.sql("SELECT m.id FROM @meta m JOIN @data d USING (id)")}
    archived = {i for (i,) in acts.sql("SELECT m.id FROM @meta_arch m JOIN @data_arch d USING (id)")}
    counts = [acts.sql("SELECT count(*) FROM " + t)[0][0] for t in ("@meta", "@data", "@meta_arch", "@data_arch")]  # noqa: S608
    # Every item is whole on exactly one side: queue row + payload, or archive row + payload.
    assert in_queue.isdisjoint(archived) and len(in_queue) + len(archived) == 1500
    assert counts == [len(in_queue), len(in_queue), len(archived), len(archived)]
    assert len(archived) % 50 == 0 and len(archived) >= 200
    assert r.rows_affected <= len(archived) <= r.rows_affected + 50
    _lists_its_committed_batches(r, 50)
    assert audit.entry(open_engine(cfg), r.audit_id)["outcome"] == "interrupted"
    # Resumable: the next run moves the rest.
    rest = actions.execute(cfg, actions.plan(cfg, "archive", "status", {
        "older_than_s": 3600, "mode": "move", "archive_table": "status_meta_archive",
        "archive_data_table": "status_data_archive", "batch_size": 500, "pause_s": 0}))
    assert rest.rows_affected == len(in_queue)
    assert acts.sql("SELECT count(*), count(DISTINCT id) FROM @meta_arch")[0] == (1500, 1500)


def test_killed_process_leaves_running_then_reads_as_interrupted(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @lease (processing_started_at) SELECT now() - interval '1 minute' "
             "FROM generate_series(1, 2000)")
    cfg = acts.config()
    store = open_engine(cfg)
    proc = subprocess.Popen(
        [sys.executable, "-m", "queueops.cli", "act", "requeue", "--queue", "lease", "--config",
         str(acts.configs["operator"]), "--yes", "--batch-size", "50", "--pause-s", "0.2"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        rec = None
        while time.monotonic() < deadline:
            running = audit.entries(store, queue="lease", outcome="running", limit=1)
            if running and running[0]["rows_affected"] >= 100:
                rec = running[0]
                break
            time.sleep(0.05)
        assert rec is not None, "the action never got going"
        assert rec["pid"] == proc.pid  # the record names its process
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    # The record stays 'running' until someone reads the log; reading it proves the process is gone.
    out = acts.cli("audit", "--json", "--queue", "lease", "--limit", "1")
    assert out.returncode == 0, out.stderr
    listed = json.loads(out.stdout.splitlines()[0])
    assert listed["id"] == rec["id"] and listed["outcome"] == "interrupted"
    assert f"pid {proc.pid}" in listed["error"]
    done = acts.sql("SELECT count(*) FROM @lease WHERE processing_started_at IS NULL")[0][0]
    assert done % 50 == 0 and listed["rows_affected"] <= done <= listed["rows_affected"] + 50


def test_a_live_process_is_never_marked_interrupted(acts) -> None:  # noqa: ANN001
    cfg = acts.config()
    store = open_engine(cfg)
    plan = actions.plan(cfg, "requeue", "lease")
    from queueops import roles

    rid = audit.begin(store, roles.resolve(cfg), plan)  # this very process: alive
    try:
        assert rid not in audit.reconcile(store)
        assert audit.entry(store, rid)["outcome"] == "running"
    finally:
        audit.finish(store, rid, "failed", 0, "test record")
