"""The pipeline's bookkeeping without Spark: lake listing, change detection, parameters, --since."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipeline import state
from pipeline.params import Params
from pipeline.run import PipelineError, parse_since
from pipeline.storage import LocalStorage
from queueops import config as config_mod
from tests.pipeline.lakes import T0, series, write_hour

H = timedelta(hours=1)


def test_listing_takes_closed_hours_only(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_hour(lake, T0, series(T0, 60, [1.0, 2.0], "q", "depth"))
    write_hour(lake, T0 + H, series(T0 + H, 60, [1.0], "q", "depth"))
    snap = lake / "snapshots" / "date=2026-11-20"
    (snap / ".hour=02.tmp-abc").mkdir()  # an export in flight (the exporter's staging folder)
    (snap / ".hour=02.tmp-abc" / "part-0.parquet").write_bytes(b"x")
    (snap / "hour=03").mkdir()  # an empty folder: no data file
    (snap / "hour=01" / "_SUCCESS").write_text("")
    (snap / "hour=99").mkdir()
    (lake / "snapshots" / "notes.txt").write_text("not a partition")
    parts = LocalStorage().list_partitions(str(lake / "snapshots"))
    assert [p.key for p in parts] == ["2026-11-20T00", "2026-11-20T01"]
    assert all(len(p.files) == 1 and p.files[0].endswith("part-0.parquet") for p in parts)


def test_diff_finds_new_changed_and_removed_hours(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    for h in range(3):
        write_hour(lake, T0 + h * H, series(T0 + h * H, 60, [1.0], "q", "depth"))
    st = state.State()
    parts = LocalStorage().list_partitions(str(lake / "snapshots"))
    assert state.diff(st, parts).new == [T0, T0 + H, T0 + 2 * H]
    state.record(st, parts, {p.hour for p in parts})
    assert state.diff(st, parts).touched == []
    # re-export hour 01 (same size, new file), drop hour 02 (retention), add hour 03
    f = write_hour(lake, T0 + H, series(T0 + H, 60, [2.0], "q", "depth"))
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 5_000_000))
    for p in (lake / "snapshots" / "date=2026-11-20" / "hour=02").iterdir():
        p.unlink()
    write_hour(lake, T0 + 3 * H, series(T0 + 3 * H, 60, [1.0], "q", "depth"))
    ch = state.diff(st, LocalStorage().list_partitions(str(lake / "snapshots")))
    assert (ch.new, ch.changed, ch.removed) == ([T0 + 3 * H], [T0 + H], [T0 + 2 * H])


def test_state_round_trips_and_survives_garbage(tmp_path: Path) -> None:
    fs = LocalStorage()
    st = state.State({"2026-11-20T00": {"files": 1}}, "abc", {"mode": "full"})
    state.save(fs, str(tmp_path), st)
    assert state.load(fs, str(tmp_path)) == st
    (tmp_path / "_state" / "pipeline.json").write_text("{not json")
    assert state.load(fs, str(tmp_path)) == state.State()


def test_params_overrides_are_checked() -> None:
    p = Params().with_overrides({"stuck_cycles": 5, "snapshot_age_s": 30})
    assert (p.stuck_cycles, p.snapshot_age_s) == (5, 30.0)
    with pytest.raises(ValueError, match="unknown pipeline parameter"):
        Params().with_overrides({"stuck_cylces": 5})
    with pytest.raises(ValueError, match="max_gap_s"):
        Params(max_gap_s=7200)


def test_config_section_rejects_unknown_params() -> None:
    raw = {"targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h/db"}],
           "pipeline": {"out": "gold", "params": {"no_such_knob": 1}}}
    with pytest.raises(config_mod.ConfigError, match="no_such_knob"):
        config_mod.parse(raw)
    raw["pipeline"]["params"] = {"top_n": 3}
    assert config_mod.parse(raw).pipeline.params == {"top_n": 3}


def test_parse_since() -> None:
    now = datetime(2026, 11, 21, 10, 30, tzinfo=UTC)
    assert parse_since("2026-11-20") == datetime(2026, 11, 20, tzinfo=UTC)
    assert parse_since("2026-11-20T13") == datetime(2026, 11, 20, 13, tzinfo=UTC)
    assert parse_since("2026-11-20T13:45:00+02:00") == datetime(2026, 11, 20, 11, tzinfo=UTC)
    assert parse_since("36h", now) == datetime(2026, 11, 19, 22, tzinfo=UTC)
    assert parse_since("2d", now) == datetime(2026, 11, 19, 10, tzinfo=UTC)
    assert parse_since(None) is None
    with pytest.raises(PipelineError, match="--since"):
        parse_since("yesterday")


def test_spark_settings() -> None:
    from pipeline.spark import LOG4J, session_conf

    local = session_conf()
    assert local["spark.ui.enabled"] == "false" and local["spark.sql.session.timeZone"] == "UTC"
    assert local["spark.sql.parquet.outputTimestampType"] == "TIMESTAMP_MICROS"
    assert local["spark.driver.bindAddress"] == local["spark.driver.host"] == "127.0.0.1"
    assert local["spark.driver.memory"] == "1g" and str(LOG4J) in local["spark.driver.extraJavaOptions"]
    assert "rootLogger.level = error" in LOG4J.read_text()
    assert not any("packages" in k or "ivy" in k for k in local)
    cluster = session_conf(local=False)  # --master spark://...: never bind the driver to loopback
    assert "spark.driver.host" not in cluster and cluster["spark.driver.memory"] == "1g"
    submitted = session_conf(local=False, launch=False)  # spark-submit owns the JVM's settings
    assert "spark.driver.memory" not in submitted and "spark.driver.extraJavaOptions" not in submitted
    # A standalone master on loopback (tests/pipeline/test_cluster.py): its executors are on this
    # machine, so the driver binds to loopback too; the JVM options stay those of a cluster driver.
    on_loopback = session_conf(local=False, loopback=True, extra={"spark.executor.memory": "512m"})
    assert on_loopback["spark.driver.bindAddress"] == on_loopback["spark.driver.host"] == "127.0.0.1"
    assert on_loopback["spark.executor.memory"] == "512m"
    assert "UseParallelGC" not in on_loopback["spark.driver.extraJavaOptions"]


def test_loopback_masters() -> None:
    from pipeline.spark import loopback_master

    for master in ("spark://127.0.0.1:7077", "spark://localhost:7077", "spark://[::1]:7077",
                   "spark://127.0.0.1:7077,127.0.0.1:7078"):
        assert loopback_master(master), master
    for master in ("spark://10.0.0.5:7077", "spark://127.0.0.1:7077,spark-2:7077", "spark://", "local[*]",
                   "yarn", None):
        assert not loopback_master(master), master


def test_conf_and_object_store_paths_from_the_command_line_and_config(tmp_path: Path) -> None:
    """``--conf KEY=VALUE`` reaches the session; a lake on object storage in the config (a pyarrow
    URI, as the exporter writes it) is handed to Spark under Hadoop's scheme, not made a local path."""
    import argparse

    from pipeline.run import add_arguments, resolve
    from pipeline.storage import hadoop_uri

    conf = tmp_path / "queueops.toml"
    conf.write_text('[lake]\npath = "s3://bucket/queueops/lake?region=eu-west-1"\n\n[pipeline]\nout = "gold"\n\n'
                    '[[targets]]\nname = "t"\ndialect = "postgresql"\nurl = "postgresql://u@h/db"\n')
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    r = resolve(parser.parse_args(["--config", str(conf), "--conf", "spark.executor.memory=512m",
                                   "--conf", "spark.cores.max=2"]))
    assert r["lake"] == "s3a://bucket/queueops/lake" and r["out"] == str(tmp_path / "gold")
    assert r["conf"] == {"spark.executor.memory": "512m", "spark.cores.max": "2"}
    with pytest.raises(PipelineError, match="KEY=VALUE"):
        resolve(parser.parse_args(["--lake", "l", "--out", "o", "--conf", "spark.executor.memory"]))
    assert hadoop_uri("gcs://b/lake") == "gs://b/lake" and hadoop_uri("hdfs://nn/lake") == "hdfs://nn/lake"
    assert hadoop_uri("/srv/lake") == "/srv/lake"


def test_hours_to_read_is_known_before_spark_starts(tmp_path: Path) -> None:
    """The hourly run (one new hour after three processed) reads two lake hours, so it gets the light
    JVM of a small run; a full run reads them all; a remote lake is not listed without Spark."""
    from pipeline.run import SMALL_RUN_HOURS, hours_to_read, settings_fingerprint
    from pipeline.spark import (
        LARGE_RUN_JVM_OPTIONS,
        SMALL_RUN_JVM_OPTIONS,
        SMALL_RUN_SPLIT_BYTES,
        session_conf,
    )
    from pipeline.thresholds import Thresholds

    lake, out = tmp_path / "lake", tmp_path / "gold"
    for i in range(4):
        write_hour(lake, T0 + i * H, series(T0 + i * H, 60, [1.0, 2.0], "q", "depth"))
    assert hours_to_read(str(lake), str(out)) == 4  # nothing processed yet
    parts = LocalStorage().list_partitions(str(lake / "snapshots"))
    st = state.State(settings=settings_fingerprint(Params(), Thresholds()))
    state.record(st, parts[:3], {p.hour for p in parts[:3]})
    state.save(LocalStorage(), str(out), st)
    assert hours_to_read(str(lake), str(out)) == 2 <= SMALL_RUN_HOURS  # the new hour and its margin
    assert hours_to_read(str(lake), str(out), full=True) == 4
    assert hours_to_read("hdfs://nn/lake", str(out)) is None
    small = session_conf(small=True)
    assert SMALL_RUN_JVM_OPTIONS in small["spark.driver.extraJavaOptions"]
    assert LARGE_RUN_JVM_OPTIONS not in small["spark.driver.extraJavaOptions"]  # one collector, not two
    assert LARGE_RUN_JVM_OPTIONS in session_conf()["spark.driver.extraJavaOptions"]
    assert small["spark.sql.adaptive.enabled"] == "false"
    # An hour's file (five row groups from the exporter) is read in several tasks, not one.
    assert small["spark.sql.files.maxPartitionBytes"] == str(SMALL_RUN_SPLIT_BYTES)
    assert "spark.sql.files.maxPartitionBytes" not in session_conf()
    assert "-XX:SharedArchiveFile=x.jsa" in session_conf(small=True, jvm_options="-XX:SharedArchiveFile=x.jsa")[
        "spark.driver.extraJavaOptions"]
    for small_run in (True, False):  # a cluster's driver keeps its own JVM options
        remote = session_conf(local=False, small=small_run)["spark.driver.extraJavaOptions"]
        assert SMALL_RUN_JVM_OPTIONS not in remote and LARGE_RUN_JVM_OPTIONS not in remote
    assert session_conf()["spark.sql.adaptive.enabled"] == "true"
