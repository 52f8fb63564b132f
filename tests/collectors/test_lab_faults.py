"""Acceptance: each lab fault, switched on for real in the running workload, moves its metric the
right way as the collectors see it, and the metric comes back after the fault is switched off.

One workload process for the module (the lab's own, ``control.start_workload``), with lease
timeouts of 3 s; faults are switched with ``control.set_fault`` exactly as ``queueops lab fault``
does. Where a fault leaves damage behind on purpose (stuck items, stranded items, a fragmented
index), the test repairs it the way the matching action would, and the metric recovers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from queueops import config as config_mod
from queueops.lab import control
from tests.collectors.conftest import Collected, collect
from tests.lab.conftest import TEST_SETTINGS, Running, log_text, start, stop, wait_for, write_test_config


@pytest.fixture(scope="module")
def running(lab) -> Iterator[tuple[Running, config_mod.Config]]:  # noqa: ANN001
    path = write_test_config(lab, "collectors-faults.toml", 3)
    run = start(lab, path, TEST_SETTINGS)
    try:
        yield run, config_mod.load(path)
    finally:
        stop(run)
        lab.reset()


def switched(run: Running, name: str, on: bool) -> None:
    """Flip a fault switch; switching off waits until the workload says the fault stopped, so a
    last round of it cannot land after the test moved on."""
    seen = log_text(run).count(f"fault {name}: off")
    control.set_fault(name, on, run.lab.state_dir)
    if not on:
        wait_for(lambda: log_text(run).count(f"fault {name}: off") > seen, 15, what=f"the workload to stop {name}")


def sample(cfg: config_mod.Config, *names: str) -> Collected:
    c = collect(cfg, *names)
    assert all(s.ok for s in c.status), [s for s in c.status if not s.ok]
    return c


def test_dead_consumer_gives_stuck_leases_after_the_timeout(running) -> None:  # noqa: ANN001
    run, cfg = running
    assert sample(cfg, "stuck_leases").value("lease", "stuck_leases") == 0
    switched(run, "dead-consumer", True)
    try:
        c = wait_for(lambda: (s := sample(cfg, "stuck_leases")).value("lease", "stuck_leases") > 0
                     and s.value("status", "stuck_leases") > 0 and s, 30, what="stuck leases in the collectors")
        assert c.value("lease", "oldest_lease_age_s") > 3 and c.value("status", "oldest_lease_age_s") > 3
    finally:
        switched(run, "dead-consumer", False)
    # The dead consumer's items stay stuck until released (what 'act requeue' does); then back to 0.
    with run.lab.connect() as conn:
        conn.execute("UPDATE lab.q_lease SET processing_started_at = NULL "
                     "WHERE processing_started_at < now() - interval '3 seconds'")
        conn.execute("UPDATE lab.q_status_meta SET status = 0, status_changed_at = now() "
                     "WHERE status = 1 AND status_changed_at < now() - interval '3 seconds'")
    wait_for(lambda: sample(cfg, "stuck_leases").value("lease", "stuck_leases") == 0, 15, what="no stuck lease")


def test_snapshot_hold_keeps_dead_tuples_and_the_root_cause_names_the_session(running) -> None:  # noqa: ANN001
    run, cfg = running
    switched(run, "snapshot-hold", True)
    try:
        def holder() -> dict | None:
            note = sample(cfg, "oldest_snapshot").row("", "oldest_snapshot_age_s").note
            detail = json.loads(note) if note.startswith("{") else {}
            ok = detail.get("application_name") == "queueops-lab-snapshot-hold" and detail["state"] == "idle in transaction"
            return detail if ok else None

        detail = wait_for(holder, 15, what="the snapshot-hold session as the oldest snapshot")
        with run.lab.connect() as conn:
            pid = conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'queueops-lab-snapshot-hold'"
                               ).fetchone()[0]
        assert detail["pid"] == pid and detail["kind"] == "backend"

        def dead_after_vacuum() -> float:
            with run.lab.connect() as conn:
                conn.execute("VACUUM lab.q_delete")
            return sample(cfg, "ghost_records").value("delete", "ghost_records") or 0

        held = wait_for(lambda: (d := dead_after_vacuum()) >= 10 and d, 30,
                        what="dead tuples that vacuum cannot remove while the snapshot is held")
        assert sample(cfg, "oldest_snapshot").value("", "oldest_snapshot_age_s") > 0
    finally:
        switched(run, "snapshot-hold", False)
    wait_for(lambda: json.loads(sample(cfg, "oldest_snapshot").row("", "oldest_snapshot_age_s").note or "{}"
                                ).get("application_name") != "queueops-lab-snapshot-hold", 15,
             what="the snapshot to be released")
    wait_for(lambda: dead_after_vacuum() < held / 2, 15, what="vacuum to remove the dead tuples again")


def test_watermark_jump_strands_items_negative_drift(running) -> None:  # noqa: ANN001
    run, cfg = running
    switched(run, "watermark-jump", True)
    try:
        c = wait_for(lambda: (s := sample(cfg, "watermark_drift")).value("delete", "watermark_drift") < 0 and s, 30,
                     what="a negative watermark drift")
        assert c.value("delete", "stranded_count") > 0
        assert c.row("delete", "watermark_drift").note.startswith("stranded")
    finally:
        switched(run, "watermark-jump", False)
    # Stranded items stay below the watermark until it is reset (what 'act watermark-reset' does).
    with run.lab.connect() as conn:
        conn.execute("UPDATE lab.q_delete_watermark SET low_key = coalesce((SELECT min(id) FROM lab.q_delete), 0)")
    c = wait_for(lambda: (s := sample(cfg, "watermark_drift")).value("delete", "stranded_count") == 0 and s, 15,
                 what="no stranded item after the reset")
    assert c.value("delete", "watermark_drift") >= 0


def test_lock_hold_shows_lock_waits_on_that_queue_and_the_blocker(running) -> None:  # noqa: ANN001
    run, cfg = running
    switched(run, "lock-hold", True)
    try:
        c = wait_for(lambda: (s := sample(cfg, "lock_waits", "blocking_chains")).value("lease", "lock_waiters") >= 1
                     and s, 30, interval=0.05, what="a dequeuer waiting on the lease queue's lock")
        assert c.value("lease", "lock_wait_max_s") > 0
        assert c.value("delete", "lock_waiters") == 0  # only the locked queue
        heads = json.loads(c.row("", "head_blockers").note)
        assert any(h["application_name"] == "queueops-lab-lock-hold" for h in heads), heads
    finally:
        switched(run, "lock-hold", False)
    wait_for(lambda: all(sample(cfg, "lock_waits").value("lease", "lock_waiters") == 0 for _ in range(5)), 15,
             what="no more lock waiters")


def test_churn_raises_ghosts_and_fragmentation(running) -> None:  # noqa: ANN001
    run, cfg = running
    with run.lab.connect() as conn:
        conn.execute("VACUUM lab.q_status_meta")
    before = sample(cfg, "fragmentation_pct", "ghost_records")
    switched(run, "churn", True)
    try:
        after = wait_for(lambda: (s := sample(cfg, "fragmentation_pct", "ghost_records")).value(
            "status", "ghost_records") > before.value("status", "ghost_records") + 1000
            and s.value("status", "fragmentation_pct") > before.value("status", "fragmentation_pct") + 5 and s,
            30, what="churn's dead tuples and page splits")
        assert json.loads(after.row("status", "fragmentation_pct").note)["source"] == "pgstatindex"
    finally:
        switched(run, "churn", False)
    # Dead tuples go with the next vacuum; the sparse, fragmented index stays until a rebuild.
    with run.lab.connect() as conn:
        conn.execute("VACUUM lab.q_status_meta")
    wait_for(lambda: sample(cfg, "ghost_records").value("status", "ghost_records")
             < after.value("status", "ghost_records") / 2, 15, what="vacuum to remove the churn's dead tuples")
    with run.lab.connect() as conn:
        conn.execute("REINDEX INDEX CONCURRENTLY lab.q_status_meta_pkey")
    rebuilt = sample(cfg, "fragmentation_pct")
    assert rebuilt.value("status", "fragmentation_pct") < after.value("status", "fragmentation_pct")
