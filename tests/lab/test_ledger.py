"""A whole run of the workload: a database restart in the middle, a clean stop, then the audit.

The ledger must prove that no item was lost or processed twice: every processed item was
produced, none was processed twice, and every produced item is either processed or still queued
(including the leases the dead consumer took and never finished).
"""

from __future__ import annotations

import time

from queueops import sqlfiles
from queueops.lab.config import write_lab_config
from tests.lab.conftest import counter, log_text, set_fault, start, stop, wait_for, workload_sessions

QUEUES = ("delete", "status", "lease", "due", "ring")


def failed_count(lab) -> int:  # noqa: ANN001 - the session's Lab
    with lab.connect() as conn:
        return int(conn.execute("SELECT count(*) FROM lab.ledger WHERE event = 'failed'").fetchone()[0])


def test_restart_clean_stop_and_ledger(lab) -> None:  # noqa: ANN001 - the session's Lab
    running = start(lab, lab.config_path, {"produce_per_s": "6", "consume_per_s": "8", "due_delay_s": "1",
                                           "dead_consumer_per_s": "4", "fail_pct": "20"})
    try:
        set_fault(lab, "dead-consumer", True)
        wait_for(lambda: counter(lab, "dead_consumer.lease") + counter(lab, "dead_consumer.status") > 0, 15,
                 what="the dead consumer to take something")
        set_fault(lab, "dead-consumer", False)

        # Restart the database under the running workload (fast shutdown: sessions are terminated).
        lab.server.stop()
        time.sleep(1.5)
        info = lab.server.start()
        if info.port != lab.info.port:  # the lab moved: lab start would rewrite lab.toml; do the same
            write_lab_config(lab.state_dir, info.url(), info.port)
        lab.info = info
        produced = {q: counter(lab, f"produced.{q}") for q in QUEUES}
        wait_for(lambda: all(counter(lab, f"produced.{q}") > produced[q] for q in QUEUES), 40,
                 what="every producer to produce again after the restart")
        wait_for(lambda: "database reachable again" in log_text(running), 40,
                 what="every worker to reconnect (back-off up to 10 s)")
        wait_for(lambda: counter(lab, "reconnects") > 0, 10, what="the reconnects to be counted")
        # fail_pct is a probability: on a slow run few items may finish before this point (CI once
        # stopped with none failed), so wait for a failure rather than hope for one.
        wait_for(lambda: failed_count(lab) > 0, 30, what="an item to fail (and be put back for a retry)")
    finally:
        stop(running)  # asserts that no workload process is left
    wait_for(lambda: workload_sessions(lab) == 0, 5, what="the workload's sessions to close")

    log = log_text(running)
    assert "database connection lost" in log
    assert "SIGTERM: stopping" in log and log.rstrip().endswith("workload stopped")

    assert failed_count(lab) > 0  # failures happened; the audit below shows they were retried, not lost
    assert_ledger_clean(lab)
    lab.reset()


def test_several_producers_and_consumers_per_queue_lose_nothing(lab) -> None:  # noqa: ANN001
    """The load benchmark's setting: three producers and four consumers per queue, no think time.
    The delete queue's producers serialise their key draws, so its watermark strands nothing."""
    lab.reset()
    running = start(lab, lab.config_path, {"producers": "3", "consumers": "4", "produce_per_s": "150",
                                           "consume_per_s": "200", "work_ms": "0", "wave": "0",
                                           "due_delay_s": "0.5", "watermark_every": "2", "watermark_buffer": "0"})
    def processed_everywhere() -> bool:  # from the ledger (emptied by start): counters outlive a test
        with lab.connect() as conn:
            done = dict(conn.execute("SELECT queue, count(*) FROM lab.ledger WHERE event = 'processed' "
                                     "GROUP BY queue").fetchall())
        return all(done.get(q, 0) >= 300 for q in QUEUES)

    try:
        wait_for(processed_everywhere, 120, interval=0.5, what="every queue to process 300 items")
    finally:
        stop(running)
    with lab.connect() as conn:
        producers = dict(conn.execute(
            "SELECT queue, count(DISTINCT worker) FROM lab.ledger WHERE event = 'produced' GROUP BY queue").fetchall())
    assert producers == {q: 3 for q in QUEUES}, producers
    assert_ledger_clean(lab)
    lab.reset()


def assert_ledger_clean(lab) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        cur = conn.execute(sqlfiles.load("postgresql", "lab/ledger_check").text)
        cols = [d.name for d in cur.description]
        audit = {row[0]: dict(zip(cols, row, strict=True)) for row in cur.fetchall()}
    assert set(audit) == set(QUEUES)
    for queue, row in audit.items():
        assert row["produced"] > 0 and row["processed"] > 0, row
        assert row["produced_twice"] == 0, row
        assert row["processed_twice"] == 0, row
        assert row["processed_unproduced"] == 0, row
        assert row["queued_unproduced"] == 0, row
        assert row["queued_after_processed"] == 0, row
        assert row["lost"] == 0, row
        assert row["produced"] == row["processed"] + row["queued"], (queue, row)
