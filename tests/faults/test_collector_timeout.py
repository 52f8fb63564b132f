"""A collector statement that exceeds its statement timeout, inside the running service.

An ACCESS EXCLUSIVE lock on a queue table (what ALTER TABLE, VACUUM FULL or a careless
``LOCK TABLE`` take) makes every statement reading that table wait. The target's lock timeout is
set above its statement timeout here, so the statement timeout is what ends the wait. Each
cycle must give up on its own -- the affected collectors become status rows flagged as timeouts,
the others still report, no collector session piles up behind the lock -- and the service goes
on at its interval and recovers the moment the lock is gone.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from sqlalchemy import select

from queueops.store import open_engine
from queueops.store.schema import collector_status, snapshots
from tests.faults.conftest import FaultLab, wait_for

STATEMENT_TIMEOUT_MS = 300
COLLECTORS = ("depth", "oldest_age_s", "lock_waits", "blocking_chains", "lock_timeouts")


def _utc(ts: datetime) -> datetime:
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts


def test_a_collector_statement_exceeding_its_timeout(busy_lab: FaultLab, services) -> None:  # noqa: ANN001
    lab = busy_lab
    store_path = lab.state_dir / "timeout" / "store.db"
    config = lab.write_config("timeout", store_url=f"sqlite:///{store_path}", lake=lab.state_dir / "timeout" / "lake",
                              statement_timeout_ms=STATEMENT_TIMEOUT_MS, lock_timeout_ms=5000,
                              schedule="fast_s = 1\nslow_s = 2")
    engine = open_engine(f"sqlite:///{store_path}")

    def status(since: datetime) -> list[dict]:
        with engine.connect() as conn:
            rows = conn.execute(select(collector_status).where(collector_status.c.ts >= since)
                                .order_by(collector_status.c.ts)).mappings().all()
        return [{**r, "ts": _utc(r["ts"])} for r in rows]

    svc = services(config, *[a for c in COLLECTORS for a in ("--collector", c)])
    started = datetime.now(UTC)
    wait_for(lambda: sum(r["ok"] for r in status(started) if r["collector"] == "depth") >= 2, 60, 0.2,
             "two good cycles")

    holder = lab.connect(autocommit=False)
    holder.execute("LOCK TABLE lab.q_lease IN ACCESS EXCLUSIVE MODE")
    locked = datetime.now(UTC)
    waiting = []
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            # Collector statements stuck behind the lock, at any moment: never more than one cycle's.
            waiting.append(lab.one("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                                   "WHERE NOT l.granted AND a.application_name = 'queueops-collect'"))
            time.sleep(0.1)
        wait_for(lambda: sum(r["timeout"] for r in status(locked) if r["collector"] == "depth") >= 3, 20, 0.2,
                 "three timed-out depth statements")
    finally:
        holder.close()
    released = datetime.now(UTC)
    wait_for(lambda: any(r["ok"] for r in status(released) if r["collector"] == "depth"), 20, 0.2,
             "a good depth statement after the lock went")
    assert svc.alive()
    assert svc.terminate() == 0, svc.text()

    assert max(waiting) <= 1, waiting
    during = [r for r in status(locked) if r["ts"] < released]
    cycles = sorted({r["ts"] for r in during})
    assert len(cycles) >= 3
    for ts in cycles:
        by = {r["collector"]: r for r in during if r["ts"] == ts}
        assert set(by) == set(COLLECTORS), by
        for name in ("depth", "oldest_age_s"):  # they read the locked table: cut by the statement timeout
            if not by[name]["ok"]:
                assert by[name]["timeout"] and "statement timeout" in by[name]["error"], by[name]
        for name in ("lock_waits", "blocking_chains", "lock_timeouts"):  # catalog reads: unaffected
            assert by[name]["ok"], by[name]
    timed_out = [r for r in during if r["timeout"]]
    assert {r["collector"] for r in timed_out} == {"depth", "oldest_age_s"}
    # The cycles kept their interval: a cut statement costs its timeout, not the lock's duration.
    gaps = [(b - a).total_seconds() for a, b in zip(cycles, cycles[1:], strict=False)]
    assert max(gaps) < 3.5, gaps  # (waiting for the 5 s lock timeout instead: 10 s and more)
    cut_ms = sorted(r["duration_ms"] for r in timed_out)
    print(f"FIGURE collector-timeout: {len(timed_out)} statements cut; duration {cut_ms[0]:.0f}-{cut_ms[-1]:.0f} ms "
          f"(statement timeout {STATEMENT_TIMEOUT_MS} ms, lock timeout 5000 ms); cycle gaps max {max(gaps):.2f} s")
    with engine.connect() as conn:
        rows = conn.execute(select(snapshots.c.ts, snapshots.c.queue, snapshots.c.metric, snapshots.c.value)
                            .where(snapshots.c.ts >= locked, snapshots.c.ts < released)).all()
    # The console's own probe counts its timeouts (PostgreSQL has no lock-timeout counter) ...
    probes = [v for _ts, _q, m, v in rows if m == "probe_lock_timeouts"]
    assert probes and max(probes) == 2
    # ... and the root-cause collectors saw the blocker: the session holding the lock.
    assert any(m.startswith("blocked") or m.startswith("blocking") for _ts, _q, m, _v in rows), \
        sorted({m for *_x, m, _v in rows})
    engine.dispose()
    lab.assert_ledger_clean()  # the dequeuers the lock held up lost nothing
