"""Outages tell the truth (issue 18): what a database, service, exporter or action crash leaves
behind, read as an on-call engineer reads it afterwards.

Each test crashes something real on the fault lab (its PostgreSQL killed with ``-m immediate``,
``queueops collect`` / ``queueops lake export`` / ``queueops act`` SIGKILLed) and asserts what the
signals say: the config check, the store's snapshot and status rows, the service log, the lake,
the audit log and the console's gap reading.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import psycopg
from sqlalchemy import func, select

from console import gaps as console_gaps
from queueops.config import load as load_config
from queueops.lake import export as lake_export
from queueops.lake import fs as lakefs
from queueops.lake.export import MARKS
from queueops.rows import SnapshotRow, StatusRow
from queueops.store import open_engine
from queueops.store.schema import alert_state, audit_log, service_state, snapshots
from queueops.store.timeutil import HOUR, floor_hour, to_utc
from queueops.store.writer import OUTAGE, SERVICE_RUN, SERVICE_TARGET, StoreWriter
from tests.faults.conftest import FaultLab, StoreServer, cli, popen_cli, wait_for
from tests.faults.test_database_killed import _status
from tests.faults.test_service_killed import PER_HOUR, _lake_hours, _seed_history, _store_counts

FAST_S, SLOW_S = 1.0, 3.0


def _snapshots(store_path: Path) -> list[dict]:
    engine = open_engine(f"sqlite:///{store_path}", create=False)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(snapshots.c.ts, snapshots.c.target, snapshots.c.metric)).mappings().all()
    finally:
        engine.dispose()
    return [{**r, "ts": to_utc(r["ts"])} for r in rows]


# ---------------------------------------------------------------------------------------------
# 1. A relative file: secret is resolved and checked by plain `config check`


def test_config_check_resolves_a_relative_file_secret_and_names_the_file(flab: FaultLab, tmp_path: Path) -> None:
    good = cli("config", "check", "--config", str(flab.config_path))
    assert good.returncode == 0, good.stderr
    resolved = (flab.state_dir / "lab.secret").absolute()
    assert f"secret read from {resolved}" in good.stdout

    # The same config copied to another folder: `file:lab.secret` now means a file that is not there.
    copied = tmp_path / "elsewhere" / "lab.toml"
    copied.parent.mkdir()
    shutil.copy(flab.config_path, copied)
    bad = cli("config", "check", "--config", str(copied))
    assert bad.returncode == 1, (bad.stdout, bad.stderr)
    assert "ok" not in bad.stdout  # no "ok" for a config whose secret cannot be read
    missing = copied.parent / "lab.secret"
    assert f"{copied}: targets[0](name='lab').password = 'file:lab.secret': cannot read secret file " \
           f"'{missing}'" in bad.stderr, bad.stderr
    # An empty secret file is as broken as a missing one.
    missing.write_text("\n")
    empty = cli("config", "check", "--config", str(copied))
    assert empty.returncode == 1 and f"secret file '{missing}' is empty" in empty.stderr, empty.stderr


# ---------------------------------------------------------------------------------------------
# 2 + 3 + 7 (back-off message). The database killed under the running service


def test_database_killed_under_the_service_invents_no_value_and_is_told_once(busy_lab: FaultLab,
                                                                             services) -> None:  # noqa: ANN001
    lab = busy_lab
    folder = lab.state_dir / "outage-told"
    store_path = folder / "store.db"
    config = lab.write_config("outage-told", store_url=f"sqlite:///{store_path}", lake=folder / "lake",
                              schedule=f"fast_s = {FAST_S:g}\nslow_s = {SLOW_S:g}\nbackoff_max_s = 4")
    svc = services(config, "--collector", "depth", "--collector", "lock_timeouts", "--collector", "ghost_records")
    wait_for(lambda: sum(r["ok"] for r in _status(store_path) if r["collector"] == "ghost_records") >= 2, 60, 0.2,
             "two good slow cycles")
    killed = datetime.now(UTC)
    lab.kill()
    # Both jobs have missed cycles: the fast one and the slow one.
    wait_for(lambda: {r["collector"] for r in _status(store_path) if r["ts"] > killed and not r["ok"]}
             >= {"depth", "lock_timeouts", "ghost_records"}, 60, 0.2, "failed cycles of both jobs")
    wait_for(lambda: sum(1 for r in _status(store_path) if r["ts"] > killed and r["collector"] == "depth"
                         and not r["ok"]) >= 4, 60, 0.2, "a few failed fast cycles")
    lab.restart()
    up = datetime.now(UTC)
    wait_for(lambda: {r["collector"] for r in _status(store_path) if r["ts"] > up and r["ok"]}
             >= {"depth", "ghost_records"}, 60, 0.2, "good cycles of both jobs after the restart")
    assert svc.terminate() == 0, svc.text()
    log = svc.text()

    status = [r for r in _status(store_path) if r["target"] == "lab"]
    cycles: dict[datetime, list[dict]] = {}
    for r in status:
        if r["collector"] != OUTAGE:
            cycles.setdefault(r["ts"], []).append(r)
    failed = {ts for ts, rows in cycles.items() if not any(r["ok"] or r["timeout"] for r in rows)}
    assert failed, "no cycle failed: the kill missed"
    # No value is stored for a cycle whose collection failed (probe_lock_timeouts = 0 was one).
    invented = [r for r in _snapshots(store_path) if r["target"] == "lab" and r["ts"] in failed]
    assert invented == [], invented[:5]
    probes = [r for r in _snapshots(store_path) if r["metric"] == "probe_lock_timeouts"]
    assert probes, "probe_lock_timeouts is still written in good cycles"

    # One outage, told once per target: one down row and one up row, in the log and in the store.
    outage = [r for r in status if r["collector"] == OUTAGE]
    assert [r["ok"] for r in outage] == [False, True], outage
    down, upr = outage
    assert down["error"].startswith("down since ") and down["ts"] <= min(failed)
    assert re.match(r"up again after \d+ s \(down since ", upr["error"]), upr["error"]
    assert abs(upr["duration_ms"] / 1000 - (upr["ts"] - down["ts"]).total_seconds()) < 0.01
    # ... naming which collectors missed which cycles, per job, with the exact count.
    fast_missed = sum(1 for ts in failed if any(r["collector"] == "depth" for r in cycles[ts]))
    slow_missed = sum(1 for ts in failed if any(r["collector"] == "ghost_records" for r in cycles[ts]))
    assert f"collect:lab:1s (depth, lock_timeouts) missed {fast_missed} cycles" in upr["error"], upr["error"]
    assert f"collect:lab:3s (ghost_records) missed {slow_missed} cycle" in upr["error"], upr["error"]
    assert len(re.findall(r"lab: down since", log)) == 1, log
    assert len(re.findall(r"lab: up again after \d+ s", log)) == 1, log
    assert "cannot collect" not in log and "reachable again" not in log
    # The back-off never claims an attempt "in 0s" on a cycle that does not attempt.
    assert not any("next attempt in 0s" in r["error"] for r in status)
    print(f"FIGURE outage-told-once: {fast_missed} fast and {slow_missed} slow cycles missed; "
          f"outage rows {down['ts']:%H:%M:%S} -> {upr['ts']:%H:%M:%S} ({upr['duration_ms'] / 1000:.1f} s); "
          f"server down {(up - killed).total_seconds():.1f} s")
    lab.assert_ledger_clean()


# ---------------------------------------------------------------------------------------------
# 4 + 7 (SQLite URL, notified_at). The service SIGKILLed between cycles, restarted


def test_service_killed_leaves_a_recorded_gap_the_console_draws(busy_lab: FaultLab, services) -> None:  # noqa: ANN001
    lab = busy_lab
    folder = lab.state_dir / "service-gap"
    store_path = folder / "store.db"
    store_url = f"sqlite:///{store_path}"  # an absolute path: four slashes
    assert store_url.startswith("sqlite:////")
    rule = '[alerts]\nthresholds = false\nrules = [{ metric = "rows_total", op = ">=", value = 0 }]\n'
    config = lab.write_config("service-gap", store_url=store_url, lake=None, extra=rule)
    first = services(config, "--collector", "depth", "--no-lake")
    first.wait_log(re.escape(f"store {store_url};"), 30)  # printed as configured
    wait_for(lambda: sum(r["ok"] for r in _status(store_path) if r["collector"] == "depth") >= 3, 60, 0.2,
             "good cycles")
    first.sigkill()
    last_alive = max(r["ts"] for r in _status(store_path) if r["target"] == "lab")
    wait_for(lambda: datetime.now(UTC) > last_alive + timedelta(seconds=4), 10, 0.2, "a gap of four seconds")
    again = services(config, "--collector", "depth", "--no-lake")
    restarted = datetime.now(UTC)
    wait_for(lambda: any(r["ok"] and r["ts"] > restarted for r in _status(store_path) if r["collector"] == "depth"),
             60, 0.2, "a good cycle after the restart")
    assert again.terminate() == 0, again.text()

    own = [r for r in _status(store_path) if r["target"] == SERVICE_TARGET and r["collector"] == SERVICE_RUN]
    texts = [r["error"] for r in own]
    assert len(own) == 4, texts
    start1, gap, start2, stop = own
    assert start1["ok"] and start1["error"].startswith(f"service started (pid {first.pid} ")
    # The gap row: from the killed run's last row to the restart, not ok.
    assert not gap["ok"] and gap["ts"] == last_alive, (gap, last_alive)
    assert gap["error"].startswith(f"service was not running from {last_alive.isoformat(timespec='seconds')} to ")
    assert f"pid {first.pid} stopped without a clean stop" in gap["error"]
    gap_end = gap["ts"] + timedelta(milliseconds=gap["duration_ms"])
    assert last_alive + timedelta(seconds=4) < gap_end <= start2["ts"] + timedelta(seconds=1)
    assert start2["ok"] and "after an unclean stop (1 gap recorded)" in start2["error"]
    assert stop["ok"] and stop["error"].startswith(f"service stopped cleanly (pid {again.pid})")
    assert "service was not running from" in again.text()
    print(f"FIGURE service-gap: gap row {gap['ts']:%H:%M:%S.%f} + {gap['duration_ms'] / 1000:.1f} s; the killed "
          f"run's last row {last_alive:%H:%M:%S.%f}; restart row {start2['ts']:%H:%M:%S.%f}")
    engine = open_engine(store_url, create=False)
    with engine.connect() as conn:  # a clean stop leaves no run record behind
        assert conn.execute(select(func.count()).select_from(service_state)
                            .where(service_state.c.name.like("service.run.%"))).scalar_one() == 0
        # The log lines announcing the alert are notifications: notified_at says when.
        states = conn.execute(select(alert_state)).mappings().all()
    assert states and all(s["notified_at"] is not None for s in states), states

    # The console reads it as a gap, not as healthy silence, and its charts break and shade there.
    now = datetime.now(UTC)
    found = console_gaps.read_gaps(engine, "lab", now - timedelta(hours=1), now)
    assert [(g.reason, g.start) for g in found] == [("service not running", last_alive)], found
    with engine.connect() as conn:
        rows = conn.execute(select(snapshots.c.ts, snapshots.c.metric, snapshots.c.value).where(
            snapshots.c.target == "lab", snapshots.c.queue == "delete", snapshots.c.metric == "depth")).all()
    df = pd.DataFrame([(to_utc(t), m, v) for t, m, v in rows], columns=["ts", "metric", "value"])
    drawn = console_gaps.break_lines(df, found)
    inside = drawn[(drawn["ts"] > found[0].start) & (drawn["ts"] < found[0].end)]
    assert len(inside) == 1 and inside["value"].isna().all(), inside  # the line stops inside the gap
    fig = go.Figure()
    console_gaps.shade(fig, found, now - timedelta(hours=1))
    assert [a.text for a in fig.layout.annotations] == ["no data: service not running"]
    engine.dispose()


# ---------------------------------------------------------------------------------------------
# 5. The lake: an hour's two kinds published together; a cut publishing repaired at start


def _pg(store: StoreServer) -> psycopg.Connection:
    return psycopg.connect(store.url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)


def _lock_waiters(store: StoreServer) -> int:
    with _pg(store) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchone()[0]


def test_exporter_killed_publishes_neither_kind_and_a_cut_publish_is_repaired(
        busy_lab: FaultLab, pg_store: StoreServer, services) -> None:  # noqa: ANN001
    lab = busy_lab
    folder = lab.state_dir / "lake-both"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    lake = folder / "lake"
    now = datetime.now(UTC)
    big, cut = floor_hour(now) - 3 * HOUR, floor_hour(now) - 2 * HOUR
    # The first hour holds many snapshot rows (writing them takes seconds), the second a normal run's.
    engine = open_engine(pg_store.url)
    rows = [SnapshotRow(big + timedelta(microseconds=i * 15_000), "lab", "queueops_lab", "delete", "depth", float(i))
            for i in range(200_000)]
    assert StoreWriter(engine, bound=10**6).write(rows, [StatusRow(big + timedelta(seconds=1), "lab", "depth", True,
                                                                    1.0, 1)]).ok
    _seed_history(pg_store.url, [cut])
    config = lab.write_config("lake-both", store_url=pg_store.ref, lake=lake)

    # The exporter SIGKILLed after writing the first hour's snapshots, while it waits to read that
    # hour's status rows (locked by another session as soon as the snapshots are being written).
    exporter = popen_cli("lake", "export", "--config", str(config))
    snap_dir = lake / "snapshots" / f"date={big:%Y-%m-%d}"
    wait_for(lambda: any(snap_dir.glob(".hour=*.tmp-*/part-0.parquet")) or (snap_dir / f"hour={big:%H}").exists(),
             60, 0.02, "the first hour's snapshots being written")
    locker = _pg(pg_store)
    locker.execute("BEGIN")
    locker.execute("LOCK TABLE collector_status IN ACCESS EXCLUSIVE MODE")
    try:
        wait_for(lambda: _lock_waiters(pg_store), 60, 0.1, "the exporter waiting for the status rows")
        exporter.send_signal(signal.SIGKILL)
        exporter.wait(10)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    # Both or neither: the snapshots are not visible without their status rows.
    assert _lake_hours(lake) == {} and _lake_hours(lake, "status") == {}, "half an hour published"

    # A publishing cut between the two swaps (built with the exporter's own steps): the hour is
    # half-published, its publish record left behind. The restarted service completes it at start.
    the_lake = lakefs.resolve(str(lake), folder)
    token = "cut-publish-test"
    staged = []
    for kind, table, schema, cols in lake_export.KINDS:
        date_dir, final = the_lake.partition(kind, cut)
        _n, temp = lake_export._stage_kind(engine, the_lake, table, schema, cols, cut, date_dir, final, token)
        staged.append((temp, final))
    lakefs._write_record(the_lake, f"{the_lake.root}/{lakefs.PUBLISHING}/{cut:%Y-%m-%dT%H}.json",
                         {"hour": f"{cut:%Y-%m-%dT%H}", "token": token, "parts": [list(p) for p in staged]})
    lakefs.publish(the_lake, *staged[0])  # the snapshots swapped in; the crash came before the status
    assert cut in _lake_hours(lake) and cut not in _lake_hours(lake, "status")

    svc = services(config, "--collector", "depth")
    restarted = datetime.now(UTC)

    def export_ran() -> bool:
        with engine.connect() as conn:
            at = conn.execute(select(service_state.c.updated_at).where(service_state.c.name == MARKS)).scalar()
        return at is not None and to_utc(at) > restarted

    wait_for(export_ran, 120, 0.2, "the restarted service's first export")
    assert svc.terminate() == 0, svc.text()
    assert f"lake: hour {cut:%Y-%m-%dT%H} was half-published" in svc.text()
    counts = _store_counts(pg_store.url, [big, cut])
    snap, stat = _lake_hours(lake), _lake_hours(lake, "status")
    for h in (big, cut):  # every hour whole, exactly the store's rows, once
        assert (snap[h], stat[h]) == counts[h], h
    assert counts[big] == (200_000, 1) and counts[cut] == (PER_HOUR * 10, PER_HOUR)
    print(f"FIGURE lake-both-or-neither: exporter killed with the first hour's snapshots staged: 0 of 2 "
          f"partitions visible; cut publish repaired by the restarted service's first export "
          f"{(to_utc(datetime.now(UTC)) - restarted).total_seconds():.1f} s after its start (at most)")
    assert not list(lake.rglob(".hour=*")) and not list((lake / lakefs.PUBLISHING).glob("*")), \
        "temp folders or publish records left behind"
    engine.dispose()


# ---------------------------------------------------------------------------------------------
# 6 + 7 (requeue with nothing to do). Actions


def test_a_killed_action_reads_interrupted_at_once_with_both_times(busy_lab: FaultLab) -> None:
    lab = busy_lab
    config = lab.write_config("act-killed", store_url=f"sqlite:///{lab.state_dir / 'act-killed.db'}",
                              lease_timeout_s=1800)
    cfg = load_config(config)
    store = open_engine(cfg)
    n, batch = 400, 25
    lab.one("WITH i AS (INSERT INTO lab.q_lease (payload, processing_started_at, attempts) "
            "SELECT 'act-killed', now() - interval '1 hour', 1 FROM generate_series(1, %s) RETURNING id) "
            "INSERT INTO lab.ledger (queue, item, event, worker) "
            "SELECT 'lease', id, 'produced', 'fault-suite-act-killed' FROM i RETURNING 1", n)
    proc = popen_cli("act", "requeue", "--queue", "lease", "--config", str(config), "--yes",
                     "--batch-size", str(batch), "--pause-s", "0.3")
    try:
        def progressed() -> dict | None:
            with store.connect() as conn:
                row = conn.execute(select(audit_log).where(audit_log.c.outcome == "running")).mappings().first()
            return dict(row) if row and row["rows_affected"] >= 2 * batch else None

        rec = wait_for(progressed, 60, 0.05, "two committed batches")
        os.kill(proc.pid, signal.SIGKILL)
        # Not reaped: the process is a zombie until proc.wait(). It is gone all the same.
        wait_for(lambda: open(f"/proc/{proc.pid}/stat").read().split(")")[1].split()[0] == "Z", 10, 0.02,
                 "the killed process to be dead")
        out = cli("audit", "--json", "--config", str(config), "--queue", "lease", "--limit", "1")
        assert out.returncode == 0, out.stderr
        listed = json.loads(out.stdout.splitlines()[0])
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    assert listed["id"] == rec["id"] and listed["outcome"] == "interrupted", listed
    heard, noticed = (datetime.fromisoformat(listed[k]) for k in ("last_heard", "noticed_at"))
    assert datetime.fromisoformat(listed["end_time"]) == heard < noticed  # it died between the two
    assert f"last heard of at {heard.isoformat(timespec='seconds')}" in listed["error"]
    assert f"found gone at {noticed.isoformat(timespec='seconds')}" in listed["error"]
    released = n - lab.one("SELECT count(*) FROM lab.q_lease WHERE payload = 'act-killed' "
                           "AND processing_started_at < now() - interval '30 minutes'")
    assert listed["rows_affected"] <= released <= listed["rows_affected"] + batch
    print(f"FIGURE action-killed: interrupted with {listed['rows_affected']} rows; last heard "
          f"{(noticed - heard).total_seconds():.2f} s before the death was noticed (unreaped)")

    # What is left, requeued; then a requeue with nothing to do runs nothing: no audit record, no bar.
    assert cli("act", "requeue", "--queue", "lease", "--config", str(config), "--yes").returncode == 0
    with store.connect() as conn:
        before = conn.execute(select(func.count()).select_from(audit_log)).scalar_one()
    idle = cli("act", "requeue", "--queue", "lease", "--config", str(config), "--yes", "--lease-timeout-s", "86400")
    assert idle.returncode == 0, idle.stderr
    assert "touches: 0" in idle.stdout and "ok: 0 row(s)/object(s) affected (no audit record: not run)" in idle.stdout
    assert "nothing to do" in idle.stderr and "[" not in idle.stderr, idle.stderr  # no progress bar drawn
    with store.connect() as conn:
        assert conn.execute(select(func.count()).select_from(audit_log)).scalar_one() == before
    store.dispose()
    lab.assert_ledger_clean()
