"""Forecasts: the right crossing time on a linear series; no forecast where data cannot support one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from pipeline.forecasts import forecasts
from pipeline.params import Params
from pipeline.rollups import ROLLUP_COLUMNS, ROLLUP_SCHEMA
from pipeline.thresholds import Thresholds
from tests.pipeline.lakes import T0, utc

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]  # Spark on a busy 2-core machine

AS_OF = T0 + timedelta(hours=6)


def windows(queue: str, metric: str, value_at, n: int = 72) -> list[tuple]:  # noqa: ANN001 - a function of hours
    """5-minute rollup rows of the n windows before AS_OF, each sampled every 15 s from its start."""
    out = []
    for i in range(72 - n, 72):
        start = T0 + timedelta(minutes=5 * i)
        first, last = start, start + timedelta(seconds=285)
        mid_h = ((first - T0).total_seconds() + 142.5) / 3600
        v = float(value_at(mid_h, i))
        row = dict.fromkeys(ROLLUP_COLUMNS)
        row.update(window="5m", window_start=start, window_end=start + timedelta(minutes=5), target="t1",
                   database="db", queue=queue, metric=metric, samples=20, mean=v, last=v, first_ts=first,
                   last_ts=last, date=start.strftime("%Y-%m-%d"), hour=start.strftime("%H"))
        out.append(tuple(row[c] for c in ROLLUP_COLUMNS))
    return out


@pytest.fixture(scope="module")
def result(spark: Any) -> dict[tuple[str, str], dict]:
    rows = []
    rows += windows("linear", "depth", lambda h, i: 1000 + 2000 * h)
    rows += windows("noisy", "depth", lambda h, i: 100 * i + (3000 if i % 2 else -3000))
    rows += windows("short", "depth", lambda h, i: 1000 + 2000 * h, n=3)
    rows += windows("falling", "depth", lambda h, i: 10_000 - 10 * i)
    rows += windows("above", "fragmentation_pct", lambda h, i: 70 + h)
    rows += windows("far", "depth", lambda h, i: 1000 + h)
    rows += windows("ghosts", "ghost_records", lambda h, i: 1000 + 40_000 * h)
    rows += windows("other", "oldest_age_s", lambda h, i: 10 * h)  # not a forecast metric
    df = spark.createDataFrame(rows, ROLLUP_SCHEMA)
    th = Thresholds(overrides={("t1", "linear", "depth"): (15_000.0, 20_000.0, "above")})
    got = forecasts(df, th, Params(), AS_OF).collect()
    return {(r["queue"], r["metric"]): r.asDict() for r in got}


def test_linear_series_crossing_time(result: dict) -> None:
    f = result[("linear", "depth")]
    assert f["status"] == "ok" and f["points"] == 72
    assert f["r2"] == pytest.approx(1.0) and f["slope_per_h"] == pytest.approx(2000.0)
    assert f["fitted_now"] == pytest.approx(13_000.0)
    # 1000 + 2000 h reaches 20,000 at 9.5 h and 15,000 at 7 h after T0.
    assert abs((utc(f["eta_crit"]) - (T0 + timedelta(hours=9.5))).total_seconds()) < 1
    assert abs((utc(f["eta_warn"]) - (T0 + timedelta(hours=7))).total_seconds()) < 1
    assert f["hours_to_crit"] == pytest.approx(3.5)
    assert (f["warn"], f["crit"]) == (15_000.0, 20_000.0)
    assert utc(f["as_of"]) == AS_OF and utc(f["window_start"]) == T0


@pytest.mark.parametrize(("queue", "metric", "status"), [
    ("noisy", "depth", "poor_fit"),
    ("short", "depth", "insufficient_data"),
    ("falling", "depth", "not_rising"),
    ("above", "fragmentation_pct", "above"),
    ("far", "depth", "beyond_horizon"),
])
def test_no_forecast_without_support(result: dict, queue: str, metric: str, status: str) -> None:
    f = result[(queue, metric)]
    assert f["status"] == status
    assert f["eta_crit"] is None and f["eta_warn"] is None and f["hours_to_crit"] is None
    assert f["points"] >= 3  # the fit's quality is reported even without a forecast
    if status == "poor_fit":
        assert f["r2"] < 0.6


def test_ghosts_use_ghost_thresholds_and_only_forecast_metrics(result: dict) -> None:
    g = result[("ghosts", "ghost_records")]
    assert (g["warn"], g["crit"]) == (50_000.0, 500_000.0) and g["status"] == "ok"
    assert ("other", "oldest_age_s") not in result
