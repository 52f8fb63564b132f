"""`queueops collect --once --json` against the real embedded PostgreSQL lab."""

from __future__ import annotations

import json

LAB_QUEUES = {"delete", "status", "lease", "due", "ring"}


def _rows(proc) -> list[dict]:  # noqa: ANN001
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def test_depth_and_age_for_every_lab_queue(clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_delete (enqueued_at) SELECT now() - interval '90 seconds' FROM generate_series(1, 7)")
        conn.execute("INSERT INTO lab.q_status_meta (status, enqueued_at) SELECT 0, now() - interval '40 seconds' "
                     "FROM generate_series(1, 3)")
        conn.execute("INSERT INTO lab.q_status_meta (status) VALUES (1), (2)")
        conn.execute("INSERT INTO lab.q_lease (created_at) SELECT now() - interval '30 seconds' FROM generate_series(1, 4)")
        conn.execute("INSERT INTO lab.q_lease (processing_started_at) VALUES (now())")
        conn.execute("INSERT INTO lab.q_due (due_at) VALUES (now() - interval '50 seconds'), (now() + interval '1 hour')")
        conn.execute("UPDATE lab.q_ring_slot SET message_id = slot, enqueued_at = now() - interval '10 seconds', "
                     "reference_count = 1 WHERE slot < 6")
        conn.execute("UPDATE lab.q_ring_seq SET push_seq = 6, pop_seq = 0")
    proc = clean_lab.cli("collect", "--once", "--json", "--config", str(clean_lab.config_path))
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc)
    data = {(r["queue"], r["metric"]): r for r in rows if "metric" in r}
    for q in LAB_QUEUES:
        assert (q, "depth") in data and (q, "oldest_age_s") in data, q
    assert data[("delete", "depth")]["value"] == 7
    assert data[("status", "depth")]["value"] == 3
    assert data[("lease", "depth")]["value"] == 4
    assert data[("due", "depth")]["value"] == 1
    assert data[("ring", "depth")]["value"] == 6
    assert data[("delete", "depth")]["note"] == "exact"
    assert 85 <= data[("delete", "oldest_age_s")]["value"] < 200
    assert 35 <= data[("status", "oldest_age_s")]["value"] < 200
    assert 25 <= data[("lease", "oldest_age_s")]["value"] < 200
    assert 45 <= data[("due", "oldest_age_s")]["value"] < 200
    assert 5 <= data[("ring", "oldest_age_s")]["value"] < 200
    first = rows[0]
    assert set(first) >= {"ts", "target", "database", "queue", "metric", "value"}
    assert first["target"] == "lab" and first["database"] == "queueops_lab"
    status = [r for r in rows if r.get("kind") == "status"]
    assert {s["collector"] for s in status} >= {"depth", "oldest_age_s"} and all(s["ok"] for s in status)


def test_unreachable_target_becomes_status_rows(lab, tmp_path) -> None:  # noqa: ANN001
    text = lab.config_path.read_text().replace(f":{lab.info.port}/", ":1/")
    path = lab.config_path.parent / "down.toml"
    path.write_text(text)
    proc = lab.cli("collect", "--once", "--json", "--config", str(path))
    assert proc.returncode == 1
    rows = _rows(proc)
    assert rows and all(r.get("kind") == "status" and not r["ok"] for r in rows)
    assert lab.password not in proc.stdout + proc.stderr
