"""The lab workload, running for real: depth moves, and every fault shows in the database and goes away.

One workload process for the whole module (see ``conftest.workload``), with the test config's
lease timeout of 3 s. Each test switches one fault on, waits for its effect to be visible in the
database the way a DBA (or a collector) would see it, switches it off, and checks what remains.
"""

from __future__ import annotations

import time

from queueops import config as config_mod
from tests.lab.conftest import Running, counter, counters_flushed, fault_switched_on, log_text, one, wait_for

DEPTH = {
    "delete": "SELECT count(*) FROM lab.q_delete",
    "status": "SELECT count(*) FROM lab.q_status_meta WHERE status = 0",
    "lease": "SELECT count(*) FROM lab.q_lease WHERE processing_started_at IS NULL",
    "due": "SELECT count(*) FROM lab.q_due WHERE due_at <= now()",
    "ring": "SELECT push_seq - pop_seq FROM lab.q_ring_seq",
}


def test_depth_changes_over_time(workload: Running) -> None:
    lab = workload.lab
    seen: dict[str, set[int]] = {q: set() for q in DEPTH}
    processed = {q: counter(lab, f"processed.{q}") for q in DEPTH}

    def moved() -> bool:
        for queue, sql in DEPTH.items():
            seen[queue].add(int(one(lab, sql)))
        return all(len(values) >= 2 for values in seen.values())

    wait_for(moved, 20, interval=0.2, what="every queue's depth to take two different values")
    wait_for(lambda: all(counter(lab, f"processed.{q}") > processed[q] for q in DEPTH), 10,
             what="every queue's consumers to process items")
    ring_full = one(lab, "SELECT push_seq - pop_seq FROM lab.q_ring_seq")
    assert 0 <= ring_full <= 1024


def test_dead_consumer_leaves_stuck_leases(workload: Running) -> None:
    lab = workload.lab
    cfg = config_mod.load(workload.config_path)
    lease_s, status_s = cfg.queue("lease").lease_timeout_s, cfg.queue("status").lease_timeout_s
    stuck_lease = ("SELECT count(*) FROM lab.q_lease "
                   "WHERE processing_started_at < now() - make_interval(secs => %s)")
    stuck_status = ("SELECT count(*) FROM lab.q_status_meta "
                    "WHERE status = 1 AND status_changed_at < now() - make_interval(secs => %s)")
    assert one(lab, stuck_lease, lease_s) == 0
    offs = log_text(workload).count("fault dead-consumer: off")
    with fault_switched_on(lab, "dead-consumer"):
        wait_for(lambda: one(lab, stuck_lease, lease_s) >= 2 and one(lab, stuck_status, status_s) >= 2,
                 lease_s + status_s + 15, what="leases and processing rows older than the lease timeout")
    off_at = one(lab, "SELECT now()")

    def taken() -> int:
        return counter(lab, "dead_consumer.lease") + counter(lab, "dead_consumer.status")

    wait_for(lambda: log_text(workload).count("fault dead-consumer: off") > offs, 15,
             what="the workload to stop the dead consumer")
    counters_flushed(lab)
    before = taken()
    time.sleep(3)
    counters_flushed(lab)
    assert taken() == before, "the dead consumer kept taking items after it was switched off"
    # Nothing taken after the switch went off (plus polling) is held longer than a normal item.
    late = ("SELECT count(*) FROM lab.{t} WHERE {c} > %s + interval '3 s' AND {c} < now() - interval '1 s'")
    assert one(lab, late.format(t="q_lease", c="processing_started_at"), off_at) == 0
    assert one(lab, late.format(t="q_status_meta", c="status_changed_at") + " AND status = 1", off_at) == 0
    # The stuck ones stay stuck: that is what 'act requeue' is for.
    assert one(lab, stuck_lease, lease_s) >= 2
    assert one(lab, stuck_status, status_s) >= 2


def test_snapshot_hold_pins_dead_tuples(workload: Running) -> None:
    lab = workload.lab
    holder = ("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'queueops-lab-snapshot-hold' "
              "AND state = 'idle in transaction' AND backend_xmin IS NOT NULL")
    dead = "SELECT dead_tuple_count FROM pgstattuple('lab.q_delete')"
    with fault_switched_on(lab, "snapshot-hold"):
        wait_for(lambda: one(lab, holder) == 1, 10, what="an idle REPEATABLE READ session holding backend_xmin")
        # Dequeues done before the snapshot must not be counted among the ones done under it.
        counters_flushed(lab)
        start = counter(lab, "processed.delete")
        wait_for(lambda: counter(lab, "processed.delete") >= start + 15, 20, what="15 more dequeues")

        def dead_after_vacuum() -> int:
            with lab.connect() as conn:
                conn.execute("VACUUM lab.q_delete")
            return int(one(lab, dead))

        # Every row deleted under the snapshot survives VACUUM; a released snapshot would leave ~0.
        held_dead = wait_for(lambda: (n := dead_after_vacuum()) >= 10 and n, 20,
                             what="VACUUM to leave at least 10 dead tuples the held snapshot still sees")
        # The oldest xmin in the database belongs to the fault's session.
        oldest = one(lab, "SELECT application_name FROM pg_stat_activity WHERE backend_xmin IS NOT NULL "
                          "AND pid <> pg_backend_pid() ORDER BY age(backend_xmin) DESC LIMIT 1")
        assert oldest == "queueops-lab-snapshot-hold"

    wait_for(lambda: one(lab, holder) == 0, 10, what="the snapshot to be released")
    with lab.connect() as conn:
        conn.execute("VACUUM lab.q_delete")
    assert one(lab, dead) < held_dead


def test_watermark_jump_strands_items(workload: Running) -> None:
    lab = workload.lab
    stranded = ("SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM lab.q_delete "
                "WHERE id < (SELECT low_key FROM lab.q_delete_watermark)")
    assert one(lab, stranded) == []
    with fault_switched_on(lab, "watermark-jump"):
        first = wait_for(lambda: one(lab, stranded), 15, what="rows below the watermark")
        drift = one(lab, "SELECT min(id) - (SELECT low_key FROM lab.q_delete_watermark) FROM lab.q_delete")
        assert drift < 0  # the lowest ready key is below the watermark: stranded
        time.sleep(2)
        assert set(first) <= set(one(lab, stranded)), "stranded rows must stay stranded while the fault is on"
    time.sleep(2)
    remaining = one(lab, stranded)
    assert set(first) <= set(remaining), "switching off does not release stranded rows"
    # What 'act watermark-reset' does: the consumers then take the stranded rows.
    with lab.connect() as conn:
        conn.execute("UPDATE lab.q_delete_watermark SET low_key = 0")
    wait_for(lambda: one(lab, "SELECT count(*) FROM lab.q_delete WHERE id = ANY(%s)", remaining) == 0, 30,
             what="the released items to be consumed")


def test_lock_hold_makes_dequeuers_time_out(workload: Running) -> None:
    lab = workload.lab
    held = ("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            "WHERE l.relation = 'lab.q_lease'::regclass AND l.mode = 'ExclusiveLock' AND l.granted "
            "AND a.application_name = 'queueops-lab-lock-hold'")
    waiting = "SELECT count(*) FROM pg_locks WHERE relation = 'lab.q_lease'::regclass AND NOT granted"
    timeouts = counter(lab, "lock_timeouts.lease")
    with fault_switched_on(lab, "lock-hold"):
        wait_for(lambda: one(lab, held) == 1, 10, what="the lock-hold session's EXCLUSIVE lock")
        wait_for(lambda: one(lab, waiting) > 0, 10, interval=0.05, what="a session waiting for the lock")
        wait_for(lambda: counter(lab, "lock_timeouts.lease") >= timeouts + 3, 15, what="lock timeouts counted")
        # Readers are not blocked (collectors keep working), only writers and dequeuers.
        with lab.connect() as conn:
            conn.execute("SET lock_timeout = '100ms'")
            conn.execute("SELECT count(*) FROM lab.q_lease").fetchone()
    wait_for(lambda: one(lab, held) == 0, 10, what="the lock to be released")
    processed = counter(lab, "processed.lease")
    wait_for(lambda: counter(lab, "processed.lease") > processed, 15, what="lease consumers to resume")


def test_churn_bloats_and_fragments_the_index(workload: Running) -> None:
    lab = workload.lab
    index = "SELECT avg_leaf_density, leaf_fragmentation, leaf_pages FROM pgstatindex('lab.q_status_meta_pkey')"
    dead = "SELECT dead_tuple_count FROM pgstattuple('lab.q_status_meta')"
    with lab.connect() as conn:
        conn.execute("REINDEX TABLE lab.q_status_meta")
        base_density, _, base_pages = conn.execute(index).fetchone()
    offs = log_text(workload).count("fault churn: off")
    with fault_switched_on(lab, "churn"):
        wait_for(lambda: one(lab, dead) >= 1000, 20, what="dead tuples from churn")
        wait_for(lambda: one(lab, "SELECT leaf_pages FROM pgstatindex('lab.q_status_meta_pkey')")
                 >= base_pages + 10, 20, what="the index to grow")
    # This run's log only: the lab's log also holds earlier modules' "off" lines.
    wait_for(lambda: log_text(workload).count("fault churn: off") > offs, 15, what="churn to stop")
    counters_flushed(lab)
    churned = counter(lab, "churn.rows")
    with lab.connect() as conn:
        conn.execute("VACUUM lab.q_status_meta")
        density, fragmentation, _ = conn.execute(index).fetchone()
    assert one(lab, dead) < 100, "vacuum removes the dead tuples once churn stops"
    assert density < base_density / 2 and fragmentation > 10, "the sparse, fragmented index stays"
    time.sleep(2.5)
    counters_flushed(lab)
    assert counter(lab, "churn.rows") == churned
