"""requeue on the real PostgreSQL: exact preview, compare-and-set, SKIP LOCKED, live consumers."""

from __future__ import annotations

import threading
import time
from collections import Counter

import psycopg
import pytest

from queueops import actions
from queueops.actions import audit
from queueops.store import open_engine


def _stuck(acts, n: int, age_s: int = 60) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @lease (processing_started_at) SELECT now() - make_interval(secs => %s) "
             "FROM generate_series(1, %s)", (age_s, n))


def test_lease_preview_count_is_exactly_what_runs(acts) -> None:  # noqa: ANN001
    _stuck(acts, 1234)
    acts.sql("INSERT INTO @lease (processing_started_at) SELECT now() FROM generate_series(1, 10)")  # live leases
    acts.sql("INSERT INTO @lease (processing_started_at) SELECT NULL FROM generate_series(1, 20)")  # ready
    cfg = acts.config()
    plan = actions.plan(cfg, "requeue", "lease", {"batch_size": 100})
    p = plan.preview
    assert p.row_count == 1234 and len(p.rows) == 100 and p.details["batches"] == 13
    assert "FOR UPDATE SKIP LOCKED" in p.sql and '"qa äct"."lease q"' in p.sql
    assert p.params[1] == 100 and p.params[0] == plan.observed["cutoff"].isoformat()
    seen: list[actions.Progress] = []
    result = actions.execute(cfg, plan, progress=seen.append)
    assert result.outcome == "ok", result.error
    assert result.rows_affected == p.row_count == 1234
    assert sum(r["rows"] for r in result.rows if "rows" in r) == 1234
    assert acts.sql("SELECT count(*) FROM @lease WHERE processing_started_at IS NULL")[0][0] == 1254
    assert acts.sql("SELECT count(*) FROM @lease WHERE processing_started_at > now() - interval '10 s'")[0][0] == 10
    assert acts.sql("SELECT max(attempts) FROM @lease")[0][0] == 0  # no --bump-attempts
    batches = [s for s in seen if s.phase == "batches"]
    assert batches[0].done == 0 and batches[-1].done == 13 and batches[-1].rows == 1234
    rec = audit.entry(open_engine(cfg), result.audit_id)
    assert rec["outcome"] == "ok" and rec["rows_affected"] == 1234 and rec["user_name"] == "olga"
    assert rec["action"] == "requeue" and rec["queue"] == "lease" and "SKIP LOCKED" in rec["command"]
    assert rec["end_time"] >= rec["start_time"]


def test_status_requeue_cap_and_attempts(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @meta (status, status_changed_at) SELECT 1, now() - interval '5 minutes' "
             "FROM generate_series(1, 50)")
    acts.sql("INSERT INTO @meta (status, status_changed_at) SELECT 1, now() FROM generate_series(1, 5)")
    acts.sql("INSERT INTO @meta (status, status_changed_at) SELECT 2, now() - interval '5 minutes' "
             "FROM generate_series(1, 5)")
    cfg = acts.config()
    plan = actions.plan(cfg, "requeue", "status", {"max_items": 20, "bump_attempts": True, "batch_size": 7})
    assert plan.preview.row_count == 20
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 20)
    assert acts.sql("SELECT count(*) FROM @meta WHERE status = 0 AND attempts = 1")[0][0] == 20
    assert acts.sql("SELECT count(*) FROM @meta WHERE status = 1")[0][0] == 35
    # The oldest go first; a re-run takes the rest and nothing else (fresh and done rows stay).
    plan = actions.plan(cfg, "requeue", "status")
    assert plan.preview.row_count == 30
    assert actions.execute(cfg, plan).rows_affected == 30
    assert acts.sql("SELECT status, count(*) FROM @meta GROUP BY status ORDER BY status") == [(0, 50), (1, 5), (2, 5)]


def test_rows_changed_after_the_preview_are_not_touched(acts) -> None:  # noqa: ANN001
    _stuck(acts, 40)
    cfg = acts.config()
    plan = actions.plan(cfg, "requeue", "lease", {"batch_size": 8})
    assert plan.preview.row_count == 40
    # Meanwhile: 3 leases renewed (heartbeat), 2 items finished (deleted), 1 re-leased by a consumer.
    acts.sql("UPDATE @lease SET processing_started_at = clock_timestamp() WHERE id IN (1, 2, 3)")
    acts.sql("DELETE FROM @lease WHERE id IN (4, 5)")
    acts.sql("UPDATE @lease SET processing_started_at = clock_timestamp(), attempts = attempts + 1 WHERE id = 6")
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 34)
    kept = acts.sql("SELECT id FROM @lease WHERE processing_started_at IS NOT NULL ORDER BY id")
    assert [k[0] for k in kept] == [1, 2, 3, 6]


def test_locked_rows_are_skipped_never_waited_for(acts) -> None:  # noqa: ANN001
    _stuck(acts, 30)
    cfg = acts.config()
    plan = actions.plan(cfg, "requeue", "lease", {"batch_size": 10})
    with acts.connect(autocommit=False) as holder:
        # A consumer is in the middle of finishing item 1 (holds its row lock) ...
        holder.execute("SELECT 1 FROM @lease WHERE id = 1 FOR UPDATE")
        r = actions.execute(cfg, plan)
        # ... and the requeue finished while that lock is still held: it skipped, never waited.
        assert holder.execute("SELECT count(*) FROM @lease WHERE id = 1 AND processing_started_at IS NOT NULL"
                              ).fetchone()[0] == 1
        holder.rollback()
    assert (r.outcome, r.rows_affected) == ("ok", 29)
    assert r.rows[-1]["left"] == 1 and "skipped" in r.rows[-1]["note"]


def test_kinds_without_leases_are_refused_clearly(acts) -> None:  # noqa: ANN001
    cfg = acts.config()
    with pytest.raises(actions.ActionError, match="lease and status queues; 'delete' is a delete queue"):
        actions.plan(cfg, "requeue", "delete")
    with pytest.raises(actions.ActionError, match="no queue named 'nope'"):
        actions.plan(cfg, "requeue", "nope")
    with pytest.raises(actions.ActionError, match="max_items"):
        actions.plan(cfg, "requeue", "lease", {"max_items": -1})
    with pytest.raises(actions.ActionError, match="Extra inputs"):
        actions.plan(cfg, "requeue", "lease", {"older_than_s": 5})


def test_dead_consumer_items_come_back_and_are_processed_once(acts) -> None:  # noqa: ANN001
    """SQL-built version of the dead-consumer acceptance test: consumers that lease, record and
    finish with a compare-and-set on the lease; a dead one leased 120 items and vanished."""
    acts.sql("INSERT INTO @lease (payload) SELECT 'item ' || g FROM generate_series(1, 600) AS g")
    acts.sql("UPDATE @lease SET processing_started_at = now() - interval '2 minutes', attempts = 1 "
             "WHERE id IN (SELECT id FROM @lease ORDER BY id LIMIT 120)")
    processed: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[str] = []

    def consumer() -> None:
        with acts.connect() as conn:
            conn.execute("SET lock_timeout = '500ms'")  # the lab target's lock timeout
            while not stop.is_set():
                try:
                    row = conn.execute(
                        "UPDATE @lease SET processing_started_at = clock_timestamp(), attempts = attempts + 1 "
                        "WHERE id = (SELECT id FROM @lease WHERE processing_started_at IS NULL "
                        "ORDER BY created_at, id FOR UPDATE SKIP LOCKED LIMIT 1) "
                        "RETURNING id, processing_started_at").fetchone()
                    if row is None:
                        time.sleep(0.01)
                        continue
                    done = conn.execute("DELETE FROM @lease WHERE id = %s AND processing_started_at = %s "
                                        "RETURNING id", row).fetchone()
                    if done:
                        with lock:
                            processed.append(done[0])
                except psycopg.Error as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=consumer, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and acts.sql("SELECT count(*) FROM @lease WHERE processing_started_at "
                                                   "IS NULL")[0][0] > 0:
        time.sleep(0.05)
    cfg = acts.config()
    plan = actions.plan(cfg, "requeue", "lease", {"batch_size": 25, "pause_s": 0.02})
    assert plan.preview.row_count == 120  # exactly the dead consumer's items: live leases are seconds old
    result = actions.execute(cfg, plan)
    assert (result.outcome, result.rows_affected) == ("ok", 120)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and acts.sql("SELECT count(*) FROM @lease")[0][0] > 0:
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(10)
    counts = Counter(processed)
    assert errors == []  # no consumer ever waited past its lock timeout
    assert acts.sql("SELECT count(*) FROM @lease")[0][0] == 0  # nothing lost: every item finished
    assert sorted(counts) == list(range(1, 601)) and max(counts.values()) == 1  # each exactly once


def test_rows_entering_the_set_after_the_preview_never_exceed_the_confirmed_count(acts) -> None:  # noqa: ANN001
    """A lease does not always move forward: an application that claims a status item without
    setting status_changed_at moves a long-ready item straight into 'processing since before the
    cutoff'. The execution takes at most the preview's count."""
    acts.sql("INSERT INTO @meta (status, status_changed_at) SELECT 1, now() - interval '10 minutes' "
             "FROM generate_series(1, 20)")
    acts.sql("INSERT INTO @meta (status, status_changed_at) SELECT 0, now() - interval '5 minutes' "
             "FROM generate_series(1, 5)")
    cfg = acts.config()
    plan = actions.plan(cfg, "requeue", "status", {"batch_size": 6})
    assert plan.preview.row_count == 20
    acts.sql("UPDATE @meta SET status = 1 WHERE status = 0")  # claimed, status_changed_at left as it was
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 20), r.error  # not 25
    assert [b["rows"] for b in r.rows if "batch" in b] == [6, 6, 6, 2]
    # The oldest first: exactly the 20 previewed items were released, the 5 claimed later are left.
    assert acts.sql("SELECT id FROM @meta WHERE status = 1 ORDER BY id") == [(i,) for i in range(21, 26)]
    assert r.rows[-1]["left"] == 5 and "after the preview" in r.rows[-1]["note"] and r.notes == []


def test_fewer_rows_than_previewed_is_said_in_the_result_and_the_audit(acts) -> None:  # noqa: ANN001
    _stuck(acts, 12)
    cfg = acts.config()
    plan = actions.plan(cfg, "requeue", "lease", {"batch_size": 5})
    acts.sql("UPDATE @lease SET processing_started_at = clock_timestamp() WHERE id IN (2, 7)")  # renewed
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 10), r.error
    assert r.notes == ["the preview counted 12 item(s), 10 were released: 2 no longer qualified (renewed, "
                       "finished or re-leased since the preview) or were held by other sessions (skipped)"]
    rec = audit.entry(open_engine(cfg), r.audit_id)
    assert rec["outcome"] == "ok" and rec["error"] == f"note: {r.notes[0]}"
