"""``queueops collect`` as a real process against the embedded PostgreSQL lab.

Two runs: a normal one (a PostgreSQL store, a second target that is down, an alert on stuck
leases with a webhook, /metrics scraped, SIGTERM while a cycle is blocked in flight, then a
restart), and an outage (the lab's server stopped and started again mid-run).
"""

from __future__ import annotations

import json
import re
import signal
import statistics
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from sqlalchemy import Engine, select, text

from collectors import registry
from queueops.lab import control
from queueops.rows import SnapshotRow
from queueops.store import open_engine
from queueops.store.schema import alert_state, collector_status, lake_exports, snapshots
from queueops.store.writer import StoreWriter
from tests.service.conftest import free_port, http_get, pg_store_ref, write_config

LAB_QUEUES = ("delete", "status", "lease", "due", "ring")
FAST_S, SLOW_S, WATERMARK_S = 1.0, 3.0, 2.0
LEASE_TIMEOUT_S = 3

def status_rows(engine: Engine, target: str) -> list[dict]:
    with engine.connect() as conn:
        rows = conn.execute(select(collector_status).where(collector_status.c.target == target)
                            .order_by(collector_status.c.ts)).mappings().all()
    return [{**r, "ts": r["ts"].replace(tzinfo=UTC) if r["ts"].tzinfo is None else r["ts"]} for r in rows]

def cycles_of(rows: list[dict], collector: str) -> list[datetime]:
    return sorted({r["ts"] for r in rows if r["collector"] == collector})

def gaps(stamps: list[datetime]) -> list[float]:
    return [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:], strict=False)]

def interval_of(name: str) -> float:
    if name == "watermark_drift":
        return WATERMARK_S
    return FAST_S if registry.by_name(name).cadence == "fast" else SLOW_S

def wait_until(pred, timeout: float, step: float = 0.2) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())

def test_service_collects_alerts_serves_metrics_and_stops_after_the_cycle_in_flight(
        clean_lab, tmp_path: Path, pg_store: str, webhook, service_process) -> None:  # noqa: ANN001
    lab = clean_lab
    store = open_engine(pg_store)
    with store.begin() as conn:
        for t in ("snapshots", "collector_status", "alert_state", "lake_exports", "service_state"):
            conn.execute(text(f'TRUNCATE "{t}"'))
    # An hour of history from before this run: the service's export job must write it to the lake.
    old_hour = (datetime.now(UTC) - timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    StoreWriter(store, 100).write([SnapshotRow(old_hour + timedelta(minutes=m), "lab", "queueops_lab", "delete",
                                               "depth", float(m)) for m in range(7)])
    down_port = free_port()
    secret = Path(lab.server.password_file).resolve()
    down = (f'[[targets]]\nname = "down"\ndialect = "postgresql"\n'
            f'url = "postgresql://queueops@127.0.0.1:{down_port}/nothing"\npassword = "file:{secret}"\n'
            f'connect_timeout_s = 2\n\n[[queues]]\nname = "down_q"\ntarget = "down"\nkind = "delete"\n'
            f'schema = "lab"\ntable = "q_delete"\nkey = "id"\n')
    config = write_config(
        lab, tmp_path / "svc.toml", store_url=pg_store_ref(pg_store, tmp_path), lake=tmp_path / "lake",
        schedule=f"fast_s = {FAST_S}\nslow_s = {SLOW_S}\ncollectors = {{ watermark_drift = {WATERMARK_S} }}",
        alerts=f'[alerts]\nwebhook_url = "{webhook.url}"\n'
               '[[alerts.rules]]\nname = "stuck"\nmetric = "stuck_leases"\nop = ">"\nvalue = 0\n',
        extra=down, lease_timeout_s=LEASE_TIMEOUT_S)
    # The lab's real workload, whose dead-consumer fault takes leases and never finishes them.
    control.start_workload(lab.state_dir, config)
    try:
        run_and_check(lab, store, config, old_hour, webhook, service_process, tmp_path)
    finally:
        control.stop_workload(lab.state_dir)
        set_fault(lab, "dead-consumer", False)


def set_fault(lab, name: str, on: bool) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        conn.execute("UPDATE lab.faults SET enabled = %s, changed_at = clock_timestamp() WHERE name = %s", (on, name))


def run_and_check(lab, store: Engine, config: Path, old_hour: datetime, webhook, service_process,  # noqa: ANN001
                  tmp_path: Path) -> None:
    port = free_port()
    started = datetime.now(UTC)
    svc = service_process(config, "--metrics-port", str(port))
    assert svc.wait_log("queueops collect started", 30), svc.text()
    set_fault(lab, "dead-consumer", True)

    def alerts(calls: list[dict]) -> list[dict]:
        """Each transition of every notification (one per queue and cycle) the webhook received."""
        return [a for c in calls for a in c.get("alerts", ())]

    def stuck(state: str, queue: str = "lease"):  # noqa: ANN202
        return lambda calls: any(a["alert"] == "stuck" and a["state"] == state and a["queue"] == queue
                                 for a in alerts(calls))

    assert webhook.wait_for(stuck("firing"), 3 * LEASE_TIMEOUT_S + 30), svc.text()

    code, metrics = http_get(f"http://127.0.0.1:{port}/metrics")
    assert code == 200
    for q in LAB_QUEUES:
        assert re.search(rf'^queueops_depth{{queue="{q}",target="lab"}} [0-9.e+]+$', metrics, re.M), q
        assert f'queueops_oldest_age_s{{queue="{q}",target="lab"}}' in metrics
    assert re.search(r'^queueops_stuck_leases{queue="lease",target="lab"} [1-9]', metrics, re.M)
    assert 'queueops_collector_duration_seconds_count{collector="depth",target="lab"}' in metrics
    assert re.search(r'^queueops_collector_errors_total{collector="depth",target="down"} [1-9]', metrics, re.M)
    assert 'queueops_alert_firing{alert="stuck",queue="lease",severity="crit",target="lab"} 1.0' in metrics
    assert 'queueops_target_up{target="down"} 0.0' in metrics and 'queueops_target_up{target="lab"} 1.0' in metrics
    assert wait_until(lambda: http_get(f"http://127.0.0.1:{port}/healthz")[0] == 503, 15)
    code, body = http_get(f"http://127.0.0.1:{port}/healthz")

    jobs = {j: v["healthy"] for j, v in json.loads(body)["jobs"].items()}
    assert set(jobs) == {f"collect:{t}:{s}s" for t in ("lab", "down") for s in (1, 2, 3)}
    assert jobs["collect:down:1s"] is False  # the 2 s and 3 s jobs turn unhealthy after 6 s and 9 s
    assert all(ok for j, ok in jobs.items() if j.startswith("collect:lab"))

    # The fault goes off, and what it left behind is released (what 'act requeue' does): resolved.
    set_fault(lab, "dead-consumer", False)
    time.sleep(2)  # the workload polls its switches every second
    with lab.connect() as conn:
        conn.execute("UPDATE lab.q_lease SET processing_started_at = NULL "
                     "WHERE processing_started_at < now() - interval '1 second'")
        conn.execute("UPDATE lab.q_status_meta SET status = 0, status_changed_at = now() "
                     "WHERE status = 1 AND status_changed_at < now() - interval '1 second'")
    fired = {a["queue"] for a in alerts(webhook.calls) if a["alert"] == "stuck"}
    assert "lease" in fired and fired <= {"lease", "status"}
    for queue in fired:
        assert webhook.wait_for(stuck("resolved", queue), 20), svc.text()
    # More cycles with the same conditions (no more notifications), and enough of them for the
    # slow job to show its interval.
    time.sleep(max(2.5, 15 - (datetime.now(UTC) - started).total_seconds()))

    # Block the fast cycle on a lock, then SIGTERM while it waits: that cycle must complete and be stored.
    with lab.connect(autocommit=False) as locker, lab.connect() as watcher:
        locker.execute("LOCK TABLE lab.q_delete IN ACCESS EXCLUSIVE MODE")
        assert wait_until(lambda: watcher.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'queueops-collect' "
            "AND wait_event_type = 'Lock'").fetchone()[0] > 0, 15)
        # The first waiter may be a slower job's collector: two fast intervals more and the fast job's
        # depth cycle has met the lock too (CI once sent SIGTERM before it had).
        time.sleep(2 * FAST_S + 0.5)
        signalled = datetime.now(UTC)
        svc.proc.send_signal(signal.SIGTERM)
        rc = svc.wait(60)
        locker.rollback()
    log = svc.text()
    assert rc == 0, log
    assert "received SIGTERM: stopping after the cycle in flight" in log and "queueops collect stopped" in log

    # Every collector of the registry ran at its own interval on the lab, and produced rows.
    lab_status = status_rows(store, "lab")
    assert {r["collector"] for r in lab_status} == {c.name for c in registry.COLLECTORS}
    for c in registry.COLLECTORS:
        stamps = [ts for ts in cycles_of(lab_status, c.name) if ts < signalled - timedelta(seconds=3)]
        assert len(stamps) >= 3, c.name
        median = statistics.median(gaps(stamps))
        assert 0.75 * interval_of(c.name) <= median <= 1.5 * interval_of(c.name), (c.name, median)
        assert any(r["ok"] for r in lab_status if r["collector"] == c.name), c.name
    with store.connect() as conn:
        snaps = conn.execute(select(snapshots.c.ts, snapshots.c.queue, snapshots.c.metric)
                             .where(snapshots.c.target == "lab", snapshots.c.ts >= started)).all()
    by_ts = defaultdict(set)
    for ts, q, m in snaps:
        by_ts[ts].add((q, m))
    # A cycle whose statement timed out for one queue (the table locked above) still answers for the
    # others (issue 33, item 3): its status names the queue that has no figure.
    for r in (r for r in lab_status if r["collector"] == "depth" and r["ok"]):
        missing = {q for q in LAB_QUEUES if (q, "depth") not in by_ts[r["ts"]]}
        assert all(f"{q}: " in (r["error"] or "") for q in missing), (r["ts"], missing, r["error"])
    for r in lab_status:  # every row a collector reported is in the store
        if r["ok"] and r["rows"]:
            assert by_ts[r["ts"]], r
    # The cycle in flight at SIGTERM (blocked on the lock: timeouts) finished and was stored whole.
    fast = [c.name for c in registry.COLLECTORS if interval_of(c.name) == FAST_S]
    blocked = [r for r in lab_status if r["collector"] == "depth" and r["timeout"] and r["ts"] < signalled]
    assert blocked, "the cycle blocked by the lock is not in the store"
    last = max(r["ts"] for r in blocked)
    assert {r["collector"] for r in lab_status if r["ts"] == last} == set(fast)

    # The target that is down: error rows every interval, backing off, and it never held up the lab.
    down_status = status_rows(store, "down")
    assert down_status and not any(r["ok"] for r in down_status)
    down_cycles = cycles_of(down_status, "depth")
    assert max(gaps(down_cycles)) <= max(3 * FAST_S, 5.0)
    assert any("backing off" in r["error"] for r in down_status)
    # the healthy target kept its schedule while the other one was down (slack for a busy machine)
    assert len(cycles_of(lab_status, "depth")) >= max(3, len(down_cycles) * 2 // 3)

    # Each transition announced once, in its queue's notification, through both notifiers; the state
    # is in the store.
    for queue in fired:
        calls = [(a["state"], a["target"], a["value"] > 0) for a in alerts(webhook.calls)
                 if a["alert"] == "stuck" and a["queue"] == queue]
        assert calls == [("firing", "lab", True), ("resolved", "lab", False)], queue
        assert all(c["queue"] == a["queue"] for c in webhook.calls for a in c.get("alerts", ()))
        assert len(re.findall(rf"ALERT on lab/{queue} \(queue \w+\): [^\n]*FIRING stuck \[crit\]", log)) == 1
        assert len(re.findall(rf"ALERT on lab/{queue} \(queue \w+\): [^\n]*RESOLVED stuck \[crit\]", log)) == 1
    with store.connect() as conn:
        states = conn.execute(select(alert_state).where(alert_state.c.rule == "stuck")).mappings().all()
    assert {(st["target"], st["queue"], st["state"]) for st in states} == {("lab", q, "resolved") for q in fired}
    assert all(st["notified_at"] for st in states)

    # The hour of history went to the lake.
    part = tmp_path / f"lake/snapshots/date={old_hour:%Y-%m-%d}/hour={old_hour:%H}/part-0.parquet"
    assert pq.read_table(part).num_rows == 7
    with store.connect() as conn:
        exports_before = conn.execute(select(lake_exports).order_by(lake_exports.c.hour)).all()
    mtime = part.stat().st_mtime_ns

    # A restart: nothing exported twice, no alert announced again.
    again = service_process(config, "--duration", "4")
    assert again.wait(60) == 0, again.text()
    with store.connect() as conn:
        exports_after = conn.execute(select(lake_exports).order_by(lake_exports.c.hour)).all()
    # Nothing exported twice; an hour that closed (past the export's grace) between the two runs
    # may be exported by the restart, and only such an hour.
    assert exports_after[:len(exports_before)] == exports_before
    assert all(r.hour > exports_before[-1].hour for r in exports_after[len(exports_before):])
    assert part.stat().st_mtime_ns == mtime
    assert len([a for a in alerts(webhook.calls) if a["alert"] == "stuck"]) == 2 * len(fired)

def test_the_service_rides_out_a_database_outage(lab, tmp_path: Path, service_process) -> None:  # noqa: ANN001
    store_path = tmp_path / "store.db"
    config = write_config(lab, tmp_path / "outage.toml", store_url=f"sqlite:///{store_path}", lake=tmp_path / "lake",
                          schedule=f"fast_s = {FAST_S}\nslow_s = 2")
    port = free_port()
    svc = service_process(config, "--metrics-port", str(port), "--collector", "depth", "--collector", "oldest_age_s",
                          "--collector", "ghost_records")
    store = open_engine(f"sqlite:///{store_path}")
    health = lambda: http_get(f"http://127.0.0.1:{port}/healthz")[0]  # noqa: E731
    assert wait_until(lambda: sum(r["ok"] for r in status_rows(store, "lab") if r["collector"] == "depth") >= 3, 30), \
        svc.text()
    assert health() == 200
    # A kept connection cut while idle (an idle timeout, a proxy, a restart): replaced within the
    # cycle that finds it dead, without error rows.
    cut = datetime.now(UTC)
    with lab.connect() as conn:
        assert conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE application_name = 'queueops-collect'").fetchone()[0] >= 1
    time.sleep(3)
    after_cut = [r for r in status_rows(store, "lab") if r["ts"] > cut]
    assert len({r["ts"] for r in after_cut if r["collector"] == "depth"}) >= 2
    assert all(r["ok"] for r in after_cut), [r["error"] for r in after_cut if not r["ok"]]
    went_down = datetime.now(UTC)
    try:
        lab.server.stop()
        assert wait_until(lambda: health() == 503, 20), svc.text()
        time.sleep(max(0.0, 6 - (datetime.now(UTC) - went_down).total_seconds()))
    finally:
        lab.server.start()
    back = datetime.now(UTC)
    assert wait_until(lambda: health() == 200, 20), svc.text()
    time.sleep(2)
    svc.proc.send_signal(signal.SIGTERM)
    assert svc.wait(60) == 0, svc.text()
    assert re.search(r"lab: up again after \d+ s", svc.text()), svc.text()

    rows = [r for r in status_rows(store, "lab") if r["collector"] == "depth"]
    stamps = [r["ts"] for r in rows]
    # error rows cover the outage: no hole longer than a couple of intervals anywhere in the run
    # (at least 5 s of slack: a 1 s schedule on a busy 2-core machine can slip a few seconds)
    assert max(gaps(stamps)) <= max(2.5 * FAST_S, 5.0), gaps(stamps)
    during = [r for r in rows if went_down + timedelta(seconds=1) < r["ts"] < back - timedelta(seconds=1)]
    assert len(during) >= 3 and not any(r["ok"] for r in during)
    assert any("backing off" in r["error"] for r in during)
    # collection resumed within one interval of the server's return (plus scheduling slack)
    first_ok = min(r["ts"] for r in rows if r["ok"] and r["ts"] > went_down)
    assert first_ok - back <= timedelta(seconds=FAST_S + 1.0), (first_ok, back)
    assert sum(r["ok"] for r in rows if r["ts"] > back) >= 2
    with store.connect() as conn:
        assert conn.execute(select(snapshots.c.id).where(snapshots.c.ts >= first_ok).limit(1)).first()

@pytest.fixture(autouse=True)
def _lab_is_up_after(lab):  # noqa: ANN001, ANN202 - the lab is shared with the rest of the session
    yield
    if not lab.server.running():
        lab.server.start()


def test_a_schedule_naming_an_unknown_collector_stops_the_start(lab, tmp_path: Path) -> None:  # noqa: ANN001
    config = write_config(lab, tmp_path / "bad.toml", store_url=f"sqlite:///{tmp_path / 's.db'}", lake=tmp_path / "l",
                          schedule="fast_s = 1\ncollectors = { depht = 5 }")
    proc = lab.cli("collect", "--config", str(config), "--duration", "5", timeout=60)
    assert proc.returncode == 2
    assert "schedule.collectors: unknown collector(s) 'depht'" in proc.stderr and "depth" in proc.stderr
    assert "queueops collect started" not in proc.stderr
