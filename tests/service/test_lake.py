"""The Parquet lake: closed hours only, the documented layout and types, re-exports that replace
(never duplicate), late rows re-exported, restarts that write nothing twice, readable by pandas
and by Spark."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs as pafs
from sqlalchemy import Engine, select

from queueops import config as config_mod
from queueops.lake import fs as lakefs
from queueops.lake.export import SNAPSHOT_SCHEMA, STATUS_SCHEMA, export_hours
from queueops.rows import SnapshotRow, StatusRow
from queueops.store import open_engine
from queueops.store.schema import lake_exports
from queueops.store.writer import StoreWriter

NOW = datetime(2026, 11, 21, 12, 10, tzinfo=UTC)
H = [datetime(2026, 11, 21, h, tzinfo=UTC) for h in range(24)]


def make_cfg(tmp_path: Path, lake: str | None = None) -> config_mod.Config:
    return config_mod.parse({
        "targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h:1/d"}],
        "store": {"url": f"sqlite:///{tmp_path / 'store.db'}"},
        "lake": {"path": lake or str(tmp_path / "lake")},
    })


def fill(engine: Engine, hour: datetime, cycles: int, queues: int = 4) -> int:
    """``cycles`` cycles spread over ``hour``; returns snapshot rows written."""
    w = StoreWriter(engine, bound=1000)
    n = 0
    for c in range(cycles):
        ts = hour + timedelta(seconds=c * 3600 / cycles + 0.123456)
        rows = [SnapshotRow(ts, "t", "db", f"q{q}", "depth", float(c * 10 + q), "exact") for q in range(queues)]
        rows.append(SnapshotRow(ts, "t", "db", "", "oldest_snapshot_age_s", None, '{"pid": 1}'))
        assert w.write(rows, [StatusRow(ts, "t", "depth", True, 2.0, queues)]).ok
        n += len(rows)
    return n


def lake_rows(root: Path, kind: str = "snapshots") -> pd.DataFrame:
    return pd.read_parquet(root / kind)


@pytest.fixture()
def setup(tmp_path: Path):  # noqa: ANN201
    cfg = make_cfg(tmp_path)
    engine = open_engine(cfg)
    counts = {h: fill(engine, h, 6) for h in (H[9], H[10], H[11])}
    counts[H[12]] = fill(engine, H[12], 2)  # the current hour: not closed
    return cfg, engine, counts, tmp_path / "lake"


def test_closed_hours_are_exported_with_the_documented_layout_and_types(setup) -> None:  # noqa: ANN001
    cfg, engine, counts, root = setup
    res = export_hours(cfg, engine, now=NOW)
    assert [(e["hour"], e["rows"], e["status_rows"], e["reason"]) for e in res.exported] == [
        ("2026-11-21T09", 30, 6, "new"), ("2026-11-21T10", 30, 6, "new"), ("2026-11-21T11", 30, 6, "new")]
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet"))
    assert files == [f"{kind}/date=2026-11-21/hour={h:02d}/part-0.parquet" for kind in ("snapshots", "status")
                     for h in (9, 10, 11)]
    f = pq.read_schema(root / "snapshots/date=2026-11-21/hour=10/part-0.parquet")
    assert f.equals(SNAPSHOT_SCHEMA, check_metadata=False)
    assert f.field("ts").type == pa.timestamp("us", tz="UTC")
    assert pq.read_schema(root / "status/date=2026-11-21/hour=10/part-0.parquet").equals(STATUS_SCHEMA,
                                                                                          check_metadata=False)
    df = lake_rows(root)
    assert len(df) == 90 and str(df["ts"].dtype) == "datetime64[us, UTC]"
    assert df["ts"].min() == pd.Timestamp("2026-11-21 09:00:00.123456", tz="UTC")  # microseconds kept
    assert df["value"].isna().sum() == 18  # nullable values stay null
    assert set(df.columns) >= {"ts", "target", "database", "queue", "metric", "value", "note"}
    assert (df[df["metric"] == "oldest_snapshot_age_s"]["queue"] == "").all()


def test_an_hour_exported_twice_holds_its_rows_once(setup) -> None:  # noqa: ANN001
    cfg, engine, _counts, root = setup
    export_hours(cfg, engine, now=NOW)
    first = lake_rows(root).sort_values(["ts", "queue"]).reset_index(drop=True)
    again = export_hours(cfg, engine, now=NOW, hours=[H[10]])
    assert [(e["hour"], e["reason"], e["how"]) for e in again.exported] == [("2026-11-21T10", "requested",
                                                                             "exchange/exchange")]
    second = lake_rows(root).sort_values(["ts", "queue"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(first, second)
    assert not list(root.rglob(".hour=*"))  # no temp or old folders left behind


def test_a_restart_writes_nothing_twice_and_late_rows_re_export_their_hour(setup, tmp_path: Path) -> None:  # noqa: ANN001
    cfg, engine, _counts, root = setup
    export_hours(cfg, engine, now=NOW)
    part = root / "snapshots/date=2026-11-21/hour=10/part-0.parquet"
    stamp = part.stat().st_mtime_ns
    # a restarted service: a new engine, the same store and lake
    engine2 = open_engine(cfg)
    assert export_hours(cfg, engine2, now=NOW + timedelta(minutes=5)).exported == []
    assert part.stat().st_mtime_ns == stamp
    # rows for 10:xx arrive late (a store outage flushed from the buffer): only that hour is redone
    StoreWriter(engine2, 10).write([SnapshotRow(H[10] + timedelta(minutes=59), "t", "db", "q0", "depth", 1.0)])
    res = export_hours(cfg, engine2, now=NOW + timedelta(minutes=10))
    assert [(e["hour"], e["rows"], e["reason"]) for e in res.exported] == [("2026-11-21T10", 31, "changed")]
    assert len(lake_rows(root)) == 91
    # ...and once only
    assert export_hours(cfg, engine2, now=NOW + timedelta(minutes=15)).exported == []
    # the next hour closes (after the grace): exported as new
    res = export_hours(cfg, engine2, now=H[13] + timedelta(minutes=2))
    assert [(e["hour"], e["rows"], e["reason"]) for e in res.exported] == [("2026-11-21T12", 10, "new")]
    with engine2.connect() as conn:
        assert conn.execute(select(lake_exports.c.rows).order_by(lake_exports.c.hour)).scalars().all() == [30, 31, 30, 10]


def test_requests_for_open_or_pruned_hours_are_refused(setup) -> None:  # noqa: ANN001
    cfg, engine, _counts, root = setup
    res = export_hours(cfg, engine, now=NOW, hours=[H[12], NOW - timedelta(days=20)])
    assert res.exported == [] and [s["reason"][:12] for s in res.skipped] == ["older than t", "not closed y"]
    assert not root.exists() or not list(root.rglob("*.parquet"))


def test_leftovers_of_a_crashed_export_are_cleaned_and_a_half_swapped_hour_restored(setup) -> None:  # noqa: ANN001
    cfg, engine, _counts, root = setup
    export_hours(cfg, engine, now=NOW)
    date_dir = root / "snapshots/date=2026-11-21"
    (date_dir / ".hour=09.tmp-abc").mkdir()
    (date_dir / ".hour=09.tmp-abc/part-0.parquet").write_bytes(b"partial")
    os.rename(date_dir / "hour=11", date_dir / ".hour=11.old-def")  # crash between the two moves
    res = export_hours(cfg, engine, now=NOW)
    assert res.cleaned == 2 and res.exported == []
    assert sorted(p.name for p in date_dir.iterdir()) == ["hour=09", "hour=10", "hour=11"]
    assert len(lake_rows(root)) == 90


def test_a_filesystem_without_atomic_exchange_moves_the_old_hour_aside(tmp_path: Path) -> None:
    """Object stores and HDFS: pyarrow's generic filesystem API (here a SubTreeFileSystem)."""
    base = tmp_path / "remote"
    base.mkdir()
    lake = lakefs.Lake(pafs.SubTreeFileSystem(str(base), pafs.LocalFileSystem()), "lake")
    assert not lake.local
    for version in ("v1", "v2"):
        _date, final = lake.partition("snapshots", H[9])
        temp = lakefs.temp_sibling(final)
        lake.fs.create_dir(temp)
        with lake.fs.open_output_stream(f"{temp}/part-0.parquet") as fh:
            fh.write(version.encode())
        how = lakefs.publish(lake, temp, final)
    assert how == "move-aside"
    folder = base / "lake/snapshots/date=2026-11-21"
    assert [p.name for p in folder.iterdir()] == ["hour=09"]
    assert (folder / "hour=09/part-0.parquet").read_text() == "v2"


def test_lake_export_command(lab, tmp_path: Path) -> None:  # noqa: ANN001
    cfg = make_cfg(tmp_path)
    engine = open_engine(cfg)
    hour = (datetime.now(UTC) - timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    fill(engine, hour, 3)
    conf = tmp_path / "q.toml"
    conf.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "store.db"}"\n[lake]\npath = "{tmp_path / "lake"}"\n'
                    '[[targets]]\nname = "t"\ndialect = "postgresql"\nurl = "postgresql://u@h:1/d"\n')
    proc = lab.cli("lake", "export", "--json", "--config", str(conf))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [(e["hour"], e["rows"]) for e in out["exported"] if e["rows"]] == [(hour.strftime("%Y-%m-%dT%H"), 15)]
    proc = lab.cli("lake", "export", "--config", str(conf))
    assert proc.returncode == 0 and "nothing to export" in proc.stdout
    proc = lab.cli("lake", "export", "--hour", datetime.now(UTC).strftime("%Y-%m-%dT%H"), "--config", str(conf))
    assert proc.returncode == 1 and "not closed yet" in proc.stdout
    proc = lab.cli("lake", "export", "--hour", "yesterday", "--config", str(conf))
    assert proc.returncode == 2 and "not an hour" in proc.stderr


@pytest.mark.spark
def test_spark_reads_the_lake(setup) -> None:  # noqa: ANN001
    from pipeline.spark import get_session

    cfg, engine, _counts, root = setup
    export_hours(cfg, engine, now=NOW)
    export_hours(cfg, engine, now=NOW, hours=[H[10]])  # a re-export must not show twice to Spark either
    spark = get_session("local[2]", app_name="queueops-lake-test")
    df = spark.read.parquet(str(root / "snapshots"))
    types = dict(df.dtypes)
    assert types["ts"] == "timestamp" and types["value"] == "double" and types["metric"] == "string"
    assert df.count() == 90
    per_hour = {(r["date"], str(r["hour"])): r["count"] for r in df.groupBy("date", "hour").count().collect()}
    assert {k[1].lstrip("0") or "0": v for k, v in per_hour.items()} == {"9": 30, "10": 30, "11": 30}
    first = df.orderBy("ts").first()
    assert first["ts"].replace(tzinfo=UTC) == datetime(2026, 11, 21, 9, 0, 0, 123456, tzinfo=UTC)
    status = spark.read.parquet(str(root / "status"))
    assert status.count() == 18 and dict(status.dtypes)["ok"] == "boolean"
