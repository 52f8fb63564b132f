"""`queueops collect --once --json` on the lab config: every metric of design.md for every queue
kind where it applies, plus one status row per collector (the real CLI, the real database)."""

from __future__ import annotations

import json

from collectors import registry

ALL_KINDS = {"depth", "rows_total", "oldest_age_s", "lock_waiters", "lock_wait_max_s",
             "ghost_records", "dead_tuples", "dead_tuple_pct", "vacuum_age_s",
             "fragmentation_pct", "page_count", "page_density_pct", "table_bloat_pct", "table_pages"}
BY_KIND = {
    "delete": {"watermark_drift", "stranded_count", "watermark"},  # the lab's delete queue has a watermark
    "status": {"count_processing", "count_done", "count_other", "stuck_leases", "oldest_lease_age_s", "missing_index"},
    "lease": {"count_leased", "count_failed", "stuck_leases", "oldest_lease_age_s", "missing_index"},
    "due": {"count_not_due"},
    "ring": {"occupancy", "occupancy_pct", "free_slots", "pop_ahead_of_push", "slots_in_use"},
}
TARGET = {"deadlocks_total", "stats_reset", "lock_waiters_total", "probe_lock_timeouts",
          "oldest_snapshot_age_s", "oldest_xmin_age_xids", "snapshot_transactions",
          "blocked_sessions", "blocking_max_wait_s", "head_blockers"}


def test_collect_once_prints_every_metric_for_every_kind(clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_delete (enqueued_at) SELECT now() FROM generate_series(1, 20)")
        conn.execute("INSERT INTO lab.q_status_meta (status) VALUES (0), (1), (2)")
        conn.execute("INSERT INTO lab.q_lease (processing_started_at) VALUES (NULL), (now())")
        conn.execute("INSERT INTO lab.q_due (due_at) VALUES (now())")
        conn.execute("UPDATE lab.q_ring_seq SET push_seq = 3, pop_seq = 1")
    proc = clean_lab.cli("collect", "--once", "--json", "--config", str(clean_lab.config_path))
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    rows = [r for r in lines if r.get("kind") != "status"]
    status = [r for r in lines if r.get("kind") == "status"]
    seen: dict[str, set[str]] = {}
    for r in rows:
        seen.setdefault(r["queue"], set()).add(r["metric"])
        assert r["target"] == "lab" and r["database"] == "queueops_lab"
    for kind, extra in BY_KIND.items():  # the lab names each queue after its kind
        missing = (ALL_KINDS | extra) - seen.get(kind, set())
        assert not missing, f"{kind}: missing {sorted(missing)}"
    assert TARGET <= seen[""], sorted(TARGET - seen[""])
    # exactly one row per (queue, metric): narrow rows a chart can key on
    keys = [(r["queue"], r["metric"]) for r in rows]
    assert len(keys) == len(set(keys))
    # every emitted metric is declared by its collector in the registry
    declared = {m for c in registry.COLLECTORS for m in c.metrics}
    assert {r["metric"] for r in rows} <= declared
    # a status row per collector, each ok, with its duration and row count
    assert sorted(s["collector"] for s in status) == sorted(c.name for c in registry.COLLECTORS)
    assert all(s["ok"] and s["rows"] > 0 and s["duration_ms"] >= 0 for s in status), status
    values = {(r["queue"], r["metric"]): r["value"] for r in rows}
    assert values[("delete", "depth")] == 20 and values[("ring", "occupancy")] == 2
    assert values[("delete", "watermark_drift")] == 1  # lowest key 1, watermark 0
