"""``queueops collect`` killed with SIGKILL -- in the middle of a lake export -- and restarted.

The store holds three closed hours from an earlier run when the service starts; its export job
writes the first hour's partition, then waits to record it (another process holds the SQLite
store's write lock: a console, a second scheduler). SIGKILL lands exactly there, between the
partition and its record. Then ``queueops lake export`` (the real command) and a restarted
service must leave every hour in the lake exactly once, with exactly the store's rows, and the
restarted service must collect as before, on the same store, writing nothing twice.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
from sqlalchemy import func, select

from queueops.lake.export import MARKS
from queueops.rows import SnapshotRow, StatusRow
from queueops.store import open_engine
from queueops.store.schema import collector_status, lake_exports, service_state, snapshots
from queueops.store.timeutil import HOUR, floor_hour, to_utc
from queueops.store.writer import StoreWriter
from tests.faults.conftest import FaultLab, cli, wait_for

PER_HOUR = 120  # cycles of history per seeded hour


def _seed_history(store_url: str, hours: list[datetime]) -> None:
    """Rows of an earlier run of the service (written by the store's real writer)."""
    engine = open_engine(store_url)
    w = StoreWriter(engine, bound=10**6)
    for h in hours:
        rows, status = [], []
        for c in range(PER_HOUR):
            ts = h + timedelta(seconds=c * 3600 / PER_HOUR, microseconds=123)
            rows += [SnapshotRow(ts, "lab", "queueops_lab", q, m, float(c), "exact")
                     for q in ("delete", "status", "lease", "due", "ring") for m in ("depth", "oldest_age_s")]
            status.append(StatusRow(ts, "lab", "depth", True, 1.5, 10))
        assert w.write(rows, status).ok
    engine.dispose()


def _lake_hours(lake: Path, kind: str = "snapshots") -> dict[datetime, int]:
    """Rows per hour partition in the lake, read back with pyarrow."""
    out = {}
    for part in sorted(lake.glob(f"{kind}/date=*/hour=*")):
        day = part.parent.name.removeprefix("date=")
        hour = datetime.fromisoformat(f"{day}T{part.name.removeprefix('hour=')}:00").replace(tzinfo=UTC)
        out[hour] = pq.read_table(part).num_rows
    return out


def _store_counts(store_url: str, hours: list[datetime]) -> dict[datetime, tuple[int, int]]:
    engine = open_engine(store_url)
    with engine.connect() as conn:
        out = {h: tuple(conn.execute(select(func.count()).select_from(t).where(t.c.ts >= h, t.c.ts < h + HOUR))
                        .scalar_one() for t in (snapshots, collector_status)) for h in hours}
    engine.dispose()
    return out  # type: ignore[return-value]


def _exported(store_url: str) -> list[datetime]:
    engine = open_engine(store_url)
    with engine.connect() as conn:
        hours = [to_utc(h) for h in conn.execute(select(lake_exports.c.hour).order_by(lake_exports.c.hour)).scalars()]
    engine.dispose()
    return hours


def test_service_killed_mid_export_and_restarted(busy_lab: FaultLab, services) -> None:  # noqa: ANN001
    lab = busy_lab
    folder = lab.state_dir / "sigkill"
    folder.mkdir(exist_ok=True)
    store_path, lake = folder / "store.db", folder / "lake"
    store_url = f"sqlite:///{store_path}"
    now = datetime.now(UTC)
    seeded = [floor_hour(now) - k * HOUR for k in (4, 3, 2)]
    _seed_history(store_url, seeded)
    config = lab.write_config("sigkill", store_url=store_url, lake=lake, schedule="fast_s = 1\nslow_s = 2")

    # Another writer holds the store's write lock: the export can write a partition but not record it.
    locker = sqlite3.connect(store_path, timeout=30, isolation_level=None)
    locker.execute("BEGIN IMMEDIATE")
    svc = services(config, "--collector", "depth", "--collector", "oldest_age_s")
    first = seeded[0]
    part = lake / "snapshots" / f"date={first:%Y-%m-%d}" / f"hour={first:%H}"
    wait_for(lambda: (part / "part-0.parquet").exists(), 60, 0.05, "the first hour's partition")
    svc.sigkill()
    locker.execute("ROLLBACK")
    locker.close()
    assert _exported(store_url) == [], "the export was recorded before the kill: the kill missed its window"

    # The real exporter after the crash: every closed hour once, the written-but-unrecorded one replaced.
    out = cli("lake", "export", "--config", str(config), "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert [e["hour"] for e in result["exported"]][:3] == [h.strftime("%Y-%m-%dT%H") for h in seeded]
    assert result["exported"][0]["how"].startswith("exchange")  # replaced in place, never side by side
    counts = _store_counts(store_url, seeded)
    lake_snap, lake_status = _lake_hours(lake), _lake_hours(lake, "status")
    for h in seeded:
        assert (lake_snap[h], lake_status[h]) == counts[h] == (PER_HOUR * 10, PER_HOUR), h
    assert not list(lake.rglob(".hour=*")), "temp or old partitions left behind"
    assert set(_exported(store_url)) >= set(seeded)
    mtimes = {p: p.stat().st_mtime_ns for p in lake.rglob("part-0.parquet")}

    # The restarted service: same store (SQLite after a SIGKILL), collects at once, exports nothing twice.
    again = services(config, "--collector", "depth", "--collector", "oldest_age_s")
    restarted = datetime.now(UTC)
    engine = open_engine(store_url)

    def ok_cycles() -> int:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(collector_status).where(
                collector_status.c.ok, collector_status.c.collector == "depth",
                collector_status.c.ts >= restarted)).scalar_one()

    def export_ran() -> bool:  # the exporter's scan marks are rewritten by every run
        with engine.connect() as conn:
            at = conn.execute(select(service_state.c.updated_at).where(service_state.c.name == MARKS)).scalar()
        return at is not None and to_utc(at) > restarted

    wait_for(lambda: ok_cycles() >= 2 and export_ran(), 60, 0.2, "good cycles and an export run of the restarted "
             "service")
    again.wait_log("queueops collect started", 5)
    assert again.terminate() == 0, again.text()
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes, "an hour was written twice"
    for h, n in _lake_hours(lake).items():  # every hour in the lake holds exactly the store's rows
        assert n == _store_counts(store_url, [h])[h][0], h
    with engine.connect() as conn:
        dupes = conn.execute(select(snapshots.c.ts, snapshots.c.queue, snapshots.c.metric)
                             .group_by(snapshots.c.ts, snapshots.c.queue, snapshots.c.metric)
                             .having(func.count() > 1)).all()
        assert dupes == []
        assert conn.execute(select(func.count()).select_from(snapshots).where(snapshots.c.ts >= restarted)).scalar_one()
    engine.dispose()
    lab.assert_ledger_clean()
