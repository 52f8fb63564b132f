"""Rollups on known inputs: exact numbers, a counter reset, an epoch restart, a gap, the day."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline import rollups as ru
from pipeline.params import Params
from tests.pipeline.lakes import T0, row, series, utc, write_lake

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]  # Spark on a busy 2-core machine

M = timedelta(minutes=1)


def _rows() -> list:
    rows = []
    # depth: one sample a minute, 00:00-00:09 and 00:20-00:29 (a gap from 00:10 to 00:20).
    depth = [1, 2, 3, 4, 100, 10, 10, 10, 10, 10] + [5] * 10
    for i, v in enumerate(depth):
        t = T0 + (i if i < 10 else i + 10) * M
        rows.append(row(t, "q1", "depth", float(v)))
    rows.append(row(T0 + 30 * M, "q1", "depth", None))  # a null value is not a sample
    # lock_timeouts_total (target-wide counter): a drop at 00:03 and a 16-minute gap.
    for minute, v in [(0, 100), (1, 110), (2, 130), (3, 5), (4, 15), (20, 40), (21, 50)]:
        rows.append(row(T0 + minute * M, "", "lock_timeouts_total", float(v)))
    # deadlocks_total restarts without dropping: the epoch (server start time) changes.
    for minute, v, epoch in [(30, 10, 1000), (31, 12, 1000), (32, 20, 2000)]:
        rows.append(row(T0 + minute * M, "", "deadlocks_total", float(v)))
        rows.append(row(T0 + minute * M, "", "sqlserver_start_time", float(epoch)))
    # A *_total that is a level (instant cntr_type), and rows_total: no deltas.
    for minute, v in [(40, 7), (41, 3)]:
        rows.append(row(T0 + minute * M, "", "version_rows_total", float(v), note='{"cntr_type": 65792}'))
        rows.append(row(T0 + minute * M, "q1", "rows_total", float(v)))
    return rows


@pytest.fixture(scope="module")
def computed(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict:
    lake: Path = tmp_path_factory.mktemp("rollups") / "lake"
    write_lake(lake, _rows())
    files = [str(p) for p in sorted(lake.rglob("*.parquet"))]
    params = Params()
    samples = ru.prepare(ru.read_lake(spark, files))
    rolled = ru.rollups(samples, params).cache()
    out = {(r["window"], r["queue"], r["metric"], utc(r["window_start"])): r.asDict() for r in rolled.collect()}
    day = ru.day_from_hours(rolled.where("window = '1h'")).collect()
    out.update({(r["window"], r["queue"], r["metric"], utc(r["window_start"])): r.asDict() for r in day})
    rolled.unpersist()
    return out


def _at(minutes: int) -> Any:
    return T0 + minutes * M


def test_gauge_five_minutes_exact(computed: dict) -> None:
    r = computed[("5m", "q1", "depth", _at(0))]
    assert (r["samples"], r["min"], r["max"], r["mean"], r["sum"]) == (5, 1.0, 100.0, 22.0, 110.0)
    assert r["p95"] == 100.0  # nearest rank: ceil(0.95 * 5) = 5th value
    assert (r["first"], r["last"]) == (1.0, 100.0)
    assert utc(r["first_ts"]) == _at(0) and utc(r["last_ts"]) == _at(4)
    assert r["delta"] is None and r["rate_per_s"] is None and r["resets"] is None
    assert utc(r["window_end"]) == _at(5)
    assert (r["date"], r["hour"]) == ("2026-11-20", "00")


def test_gap_has_no_rows_and_hour_counts_only_samples(computed: dict) -> None:
    assert ("5m", "q1", "depth", _at(10)) not in computed
    assert ("5m", "q1", "depth", _at(15)) not in computed
    assert computed[("5m", "q1", "depth", _at(20))]["samples"] == 5
    h = computed[("1h", "q1", "depth", _at(0))]
    assert h["samples"] == 20  # the null at 00:30 is not a sample
    assert (h["min"], h["max"], h["sum"]) == (1.0, 100.0, 110.0 + 50.0 + 50.0)
    assert h["mean"] == pytest.approx(210.0 / 20)
    assert h["p95"] == 10.0  # 19th of 20 sorted values: 1,2,3,4,5x10,10x5,100
    assert h["last"] == 5.0 and h["quantiles"] is not None and len(h["quantiles"]) == 99


def test_counter_deltas_reset_and_gap(computed: dict) -> None:
    w = computed[("5m", "", "lock_timeouts_total", _at(0))]
    # deltas 10, 20, then a drop 130 -> 5 (restart: +5, never negative), then 10; the first sample
    # has no previous one.
    assert w["delta"] == 45.0 and w["covered_s"] == 240.0 and w["resets"] == 1
    assert w["rate_per_s"] == pytest.approx(45.0 / 240.0)
    # 00:04 -> 00:20 is longer than max_gap_s (600 s): not attributed; 00:20 -> 00:21 is.
    w2 = computed[("5m", "", "lock_timeouts_total", _at(20))]
    assert w2["delta"] == 10.0 and w2["covered_s"] == 60.0 and w2["resets"] == 0
    h = computed[("1h", "", "lock_timeouts_total", _at(0))]
    assert (h["delta"], h["covered_s"], h["resets"], h["samples"]) == (55.0, 300.0, 1, 7)
    assert h["rate_per_s"] == pytest.approx(55.0 / 300.0)


def test_epoch_change_is_a_restart(computed: dict) -> None:
    w = computed[("5m", "", "deadlocks_total", _at(30))]
    assert w["delta"] == 2.0 + 20.0 and w["resets"] == 1


def test_levels_named_total_get_no_delta(computed: dict) -> None:
    assert computed[("5m", "", "version_rows_total", _at(40))]["delta"] is None
    assert computed[("5m", "q1", "rows_total", _at(40))]["delta"] is None
    assert computed[("5m", "q1", "rows_total", _at(40))]["samples"] == 2


def test_day_from_hours(computed: dict) -> None:
    d = computed[("1d", "", "lock_timeouts_total", _at(0))]
    h = computed[("1h", "", "lock_timeouts_total", _at(0))]
    assert (d["delta"], d["covered_s"], d["resets"], d["samples"]) == (h["delta"], h["covered_s"], 1, 7)
    dd = computed[("1d", "q1", "depth", _at(0))]
    assert dd["samples"] == 20 and dd["p95"] == 10.0 and utc(dd["window_end"]) == _at(24 * 60)
    assert (dd["date"], dd["hour"]) == ("2026-11-20", "00")


def test_day_p95_merges_hourly_sketches(spark: Any, tmp_path: Path) -> None:
    """Hour 0 holds 1..100 and hour 1 holds 101..200: the day's nearest-rank p95 is 190."""
    rows = series(T0, 36, [float(v) for v in range(1, 101)], "q", "depth")
    rows += series(T0 + timedelta(hours=1), 36, [float(v) for v in range(101, 201)], "q", "depth")
    write_lake(tmp_path / "lake", rows)
    files = [str(p) for p in sorted((tmp_path / "lake").rglob("*.parquet"))]
    hours = ru.rollup(ru.prepare(ru.read_lake(spark, files)), "1h", Params())
    (day,) = ru.day_from_hours(hours).collect()
    assert (day["samples"], day["min"], day["max"], day["mean"]) == (200, 1.0, 200.0, 100.5)
    assert day["p95"] == 190.0
    assert sorted(r["p95"] for r in hours.collect()) == [95.0, 195.0]


def test_quantiles_are_exact_nearest_ranks_at_any_count(spark: Any, tmp_path: Path) -> None:
    """A one-second collector's hour (3,600 samples, shuffled): every quantile is the exact
    ``ceil(q * n)``-th value, where a 1000-accuracy sketch is approximate past 500 samples; the
    hour, merged from its twelve 5-minute windows, equals the hour computed from its samples
    (its least-squares slope too, fitted here in Python on the samples themselves)."""
    import random
    from statistics import linear_regression

    values = [float(v) for v in range(1, 3601)]
    random.Random(3).shuffle(values)
    write_lake(tmp_path / "lake", series(T0, 1, values, "q", "depth"))
    files = [str(p) for p in sorted((tmp_path / "lake").rglob("*.parquet"))]
    rows = ru.rollups(ru.prepare(ru.read_lake(spark, files)), Params()).collect()
    (hour,) = [r for r in rows if r["window"] == "1h"]
    assert (hour["samples"], hour["min"], hour["max"], hour["sum"]) == (3600, 1.0, 3600.0, 3600 * 3601 / 2)
    assert hour["p95"] == 3420.0 and hour["quantiles"][0] == 36.0 and hour["quantiles"][-1] == 3564.0
    assert (hour["first"], hour["last"]) == (values[0], values[-1])
    first_window = sorted(values[:300])
    five = min((r for r in rows if r["window"] == "5m"), key=lambda r: r["window_start"])
    assert five["samples"] == 300 and five["p95"] == first_window[284]  # ceil(0.95 * 300) = 285th
    # Merged from the windows' sums of x, x² and x·value, the hour's slope is the fit of its samples.
    assert hour["slope_per_s"] == pytest.approx(linear_regression(range(3600), values).slope, rel=1e-9, abs=1e-12)
    assert five["slope_per_s"] == pytest.approx(linear_regression(range(300), values[:300]).slope, rel=1e-9)


def test_intervals_epochs_and_runs_across_hours(spark: Any, tmp_path: Path) -> None:
    """Counter deltas and stuck-lease runs are computed one hour per window partition (bounded memory):
    the margin from the hours before still gives an interval its previous sample (55 minutes back),
    that sample its epoch (65 minutes before the hour), and a run its first samples."""
    rows = [row(_at(55), "", "sqlserver_start_time", 1000.0),
            row(_at(90), "", "deadlocks_total", 10.0),  # epoch 1000, 35 minutes old
            row(_at(140), "", "sqlserver_start_time", 2000.0),
            row(_at(145), "", "deadlocks_total", 50.0)]  # a new epoch: counted from zero (50, not 40)
    rows += [row(_at(mn), "q1", "stuck_leases", v) for mn, v in [(70, 0.0), (110, 1.0), (115, 2.0), (125, 1.0)]]
    write_lake(tmp_path / "lake", rows)
    files = [str(p) for p in sorted((tmp_path / "lake").rglob("*.parquet"))]
    p = Params(max_gap_s=3600, stuck_cycles=3)
    got = {(r["window"], r["metric"], utc(r["window_start"])): r
           for r in ru.rollups_and_signals(ru.prepare(ru.read_lake(spark, files)), p).collect()}
    h = got[("1h", "deadlocks_total", _at(120))]
    assert (h["delta"], h["covered_s"], h["resets"]) == (50.0, 55 * 60.0, 1)
    assert got[("1h", "stuck_leases", _at(60))]["sig_samples"] == 0  # 01:10 was 0
    assert got[("1h", "stuck_leases", _at(120))]["sig_samples"] == 1  # 01:50, 01:55, 02:05 all > 0
