"""The store (a PostgreSQL database of its own here) crashes while the service collects, before
an action, and while an action is running.

* During cycles: collection goes on at its interval; rows wait in memory up to
  ``store.buffer_rows``, the oldest beyond it are dropped and counted; when the store is back the
  buffer is written and the outage is recorded as a status row. Every row the service produced is
  either in the store or counted as dropped: nothing is written twice, nothing vanishes unsaid.
* Before an action: no audit record can be written, so the action does not run at all.
* During an action: the action finishes (its batches are on the target, not the store); the
  audit record's completion waits in a local journal and is written -- with the true outcome and
  row count -- as soon as anyone reads the audit log with the store back.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import func, select

from queueops import actions
from queueops.actions import audit
from queueops.config import load as load_config
from queueops.store import open_engine
from queueops.store.schema import audit_log, collector_status, snapshots
from tests.faults.conftest import FaultLab, StoreServer, cli, popen_cli, wait_for

BUFFER_ROWS = 60


def _utc(ts: datetime) -> datetime:
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts


def test_store_down_during_cycles_is_buffered_within_its_bound(busy_lab: FaultLab, pg_store: StoreServer,
                                                               services) -> None:  # noqa: ANN001
    lab = busy_lab
    config = lab.write_config("store-down", store_url=pg_store.ref, lake=lab.state_dir / "store-down-lake",
                              schedule="fast_s = 1\nslow_s = 2", store_extra=f"buffer_rows = {BUFFER_ROWS}")
    engine = open_engine(pg_store.url)

    def cycles_since(since: datetime) -> list[datetime]:
        with engine.connect() as conn:
            return sorted(conn.execute(select(collector_status.c.ts).where(
                collector_status.c.collector == "depth", collector_status.c.ts >= since)).scalars())

    svc = services(config, "--collector", "depth", "--collector", "oldest_age_s", "--no-lake")
    started = datetime.now(UTC)
    wait_for(lambda: len(cycles_since(started)) >= 2, 60, 0.2, "two cycles in the store")
    engine.dispose()
    pg_store.stop()
    down = datetime.now(UTC)
    svc.wait_log(r"store unavailable .*buffering rows in memory, at most 60", 20)
    svc.wait_log(r"store still unavailable: \d+ rows buffered \(bound 60\), \d+ dropped", 20)
    time.sleep(1)
    pg_store.start()
    up = datetime.now(UTC)
    svc.wait_log(r"store back: ", 40)
    assert svc.alive()
    wait_for(lambda: len(cycles_since(up)) >= 2, 20, 0.2, "two cycles after the store came back")
    assert svc.terminate() == 0, svc.text()

    summary = json.loads(re.search(r"queueops collect stopped: (\{.*\})", svc.text()).group(1))
    assert summary["buffered"] == 0 and summary["dropped"] > 0, summary
    with engine.connect() as conn:
        stored = conn.execute(select(func.count()).select_from(snapshots)).scalar_one()
        status = conn.execute(select(collector_status)).mappings().all()
        dupes = conn.execute(select(snapshots.c.ts, snapshots.c.queue, snapshots.c.metric)
                             .group_by(snapshots.c.ts, snapshots.c.queue, snapshots.c.metric)
                             .having(func.count() > 1)).all()
        depth_cycles = sorted(conn.execute(select(collector_status.c.ts).where(
            collector_status.c.collector == "depth")).scalars())
    # (the service's own start / clean-stop rows are checked in test_outages.py)
    own = [r for r in status if r["target"] == "(service)" and r["collector"] != "service"]
    collected = [r for r in status if r["target"] == "lab"]
    assert dupes == []
    # Every row the service produced is in the store or counted as dropped.
    assert stored + len(collected) + summary["dropped"] == summary["rows"] + summary["status_rows"], summary
    # The outage is on record, with the loss it caused.
    assert len(own) == 1 and own[0]["collector"] == "store" and not own[0]["ok"]
    assert f"dropped {summary['dropped']} oldest rows" in own[0]["error"] and "bound 60" in own[0]["error"]
    print(f"FIGURE store-outage: {(up - down).total_seconds():.1f} s down; {own[0]['error']}")
    # What was dropped is the oldest part of the outage: every cycle with rows missing is older
    # than every complete cycle from the outage on (the newest rows were kept).
    with engine.connect() as conn:
        per_cycle = dict(conn.execute(select(snapshots.c.ts, func.count()).group_by(snapshots.c.ts)).all())
    per_cycle = {_utc(ts): n for ts, n in per_cycle.items()}
    cycles = sorted(set(per_cycle) | {_utc(ts) for ts in depth_cycles})
    full = max(per_cycle.values())
    assert [per_cycle.get(ts) for ts in cycles if ts < down - timedelta(seconds=1.5)] == \
        [full] * len([ts for ts in cycles if ts < down - timedelta(seconds=1.5)])
    damaged = [ts for ts in cycles if per_cycle.get(ts, 0) < full]
    complete_since_down = [ts for ts in cycles if ts >= down and per_cycle.get(ts, 0) == full]
    assert damaged and complete_since_down and max(damaged) < min(complete_since_down), (damaged, complete_since_down)
    assert min(damaged) >= down - timedelta(seconds=1.5)
    engine.dispose()
    lab.assert_ledger_clean()


# ---------------------------------------------------------------------------------------------
# Actions and their audit records


def _stuck(lab: FaultLab, n: int, tag: str) -> None:
    lab.one("WITH i AS (INSERT INTO lab.q_lease (payload, processing_started_at, attempts) "
            "SELECT %s, now() - interval '1 hour', 1 FROM generate_series(1, %s) RETURNING id) "
            "INSERT INTO lab.ledger (queue, item, event, worker) "
            "SELECT 'lease', id, 'produced', 'fault-suite-' || %s FROM i RETURNING 1", tag, n, tag)


def _still_stuck(lab: FaultLab, tag: str) -> int:
    """Items of this test still leased an hour ago (consumers claim released ones again at once)."""
    return lab.one("SELECT count(*) FROM lab.q_lease WHERE payload = %s "
                   "AND processing_started_at < now() - interval '30 minutes'", tag)


def test_store_down_before_an_action_nothing_runs(busy_lab: FaultLab, pg_store: StoreServer) -> None:
    lab = busy_lab
    config = lab.write_config("audit-down-before", store_url=pg_store.ref, lease_timeout_s=1800)
    _stuck(lab, 50, "before")
    pg_store.stop()
    try:
        out = cli("act", "requeue", "--queue", "lease", "--config", str(config), "--yes", "--json")
        listing = cli("audit", "--config", str(config))
    finally:
        pg_store.start()
    # Reading the audit log with the store down says so in one line, without a traceback.
    assert listing.returncode == 1 and "Traceback" not in listing.stderr, listing.stderr
    assert "the audit log cannot be read" in listing.stderr, listing.stderr
    assert pg_store.server.password() not in listing.stderr
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    assert "audit" in out.stderr and "nothing was changed" in out.stderr, out.stderr
    assert pg_store.server.password() not in out.stderr and "queueops:" in out.stderr
    assert _still_stuck(lab, "before") == 50  # not run unaudited
    engine = open_engine(pg_store.url)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(audit_log)).scalar_one() == 0
    engine.dispose()
    # With the store back, the same action runs (and is audited).
    cfg = load_config(config)
    done = actions.execute(cfg, actions.plan(cfg, "requeue", "lease"))
    assert (done.outcome, done.rows_affected) == ("ok", 50) and done.audit_id is not None
    assert _still_stuck(lab, "before") == 0
    lab.assert_ledger_clean()


def test_store_down_during_an_actions_audit_write(busy_lab: FaultLab, pg_store: StoreServer) -> None:
    lab = busy_lab
    config = lab.write_config("audit-down-during", store_url=pg_store.ref, lease_timeout_s=1800)
    n, batch = 300, 25
    _stuck(lab, n, "during")
    engine = open_engine(pg_store.url)
    # The journal goes under XDG_STATE_HOME: the test's own folder, not the user's home.
    proc = popen_cli("act", "requeue", "--queue", "lease", "--config", str(config), "--yes", "--json",
                     "--batch-size", str(batch), "--pause-s", "0.15", env={"XDG_STATE_HOME": str(lab.state_dir)})

    def advanced() -> dict | None:
        assert proc.poll() is None, proc.communicate()
        try:
            with engine.connect() as conn:
                row = conn.execute(select(audit_log).where(audit_log.c.outcome == "running")).mappings().first()
        except Exception:  # noqa: BLE001 - the schema may not exist yet
            return None
        return dict(row) if row and row["rows_affected"] >= 3 * batch else None

    rec = wait_for(advanced, 60, 0.05, "the requeue to commit three batches")
    engine.dispose()
    pg_store.stop()  # the audit's progress updates and its completion now fail
    out, err = proc.communicate(timeout=120)
    assert _still_stuck(lab, "during") == 0, "the requeue did not finish"
    result = json.loads(out.strip().splitlines()[-1])
    assert result["outcome"] == "ok" and result["rows_affected"] == n, result
    assert proc.returncode == 0, err
    assert "audit record" in err and "could not be completed" in err, err
    store_back = datetime.now(UTC)
    pg_store.start()

    # Whoever reads the audit log next (queueops audit, the console: audit.entries) completes the
    # record with the truth: the outcome, the rows, and when the action really ended.
    engine = open_engine(pg_store.url)
    mine = [e for e in audit.entries(engine, limit=5) if e["id"] == rec["id"]]
    assert len(mine) == 1 and mine[0]["outcome"] == "ok" and mine[0]["rows_affected"] == n, mine
    assert "store was unavailable" in mine[0]["error"]
    assert mine[0]["start_time"] < mine[0]["end_time"] < store_back
    with engine.connect() as conn:
        preview = json.loads(conn.execute(select(audit_log.c.preview).where(audit_log.c.id == rec["id"])).scalar_one())
    engine.dispose()
    journal = Path(preview["runner"]["journal"])
    assert journal.parent == lab.state_dir / "queueops" / "audit-journal"
    assert not journal.exists(), "the journal was not cleared once written"
    lab.assert_ledger_clean()
