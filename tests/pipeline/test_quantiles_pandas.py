"""The rollups' quantiles against an exact computation in pandas, on a sample lake shaped like the
benchmark's (15-second samples, so ~20 per 5-minute window and ~240 per hour, as a real collector
gives): every 5-minute p95, every hour's p95 and every point of every hour's ``quantiles`` is the
nearest-rank value, the ``ceil(q * n)``-th of the window's sorted samples.

Why a second check beside the gold reference: the reference pins the values the job gave before
(whatever they were); this one pins what they must be, computed independently of Spark, so a
change in how the rollups sort or merge values (issue 34) cannot drift unnoticed.
"""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipeline import rollups as ru
from pipeline.params import Params
from tests.pipeline.lakes import T0, row, write_lake

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]  # Spark on a busy 2-core machine

STEP_S, HOURS = 15, 3


def _lake_rows() -> list:
    """Six series over three hours: continuous values (gamma), heavy ties (small integers), a
    series with nulls (not samples) and one whose samples thin out (fewer per window)."""
    rng = np.random.default_rng(34)
    n = HOURS * 3600 // STEP_S
    rows = []
    for q, kind in [("q1", "gamma"), ("q2", "ties"), ("q3", "nulls"), ("q4", "sparse"), ("q5", "gamma"),
                    ("q6", "ties")]:
        for i in range(n):
            if kind == "sparse" and rng.random() < 0.6:
                continue
            v: float | None = float(rng.integers(0, 6)) if kind == "ties" else float(rng.gamma(2.0, 50.0))
            if kind == "nulls" and rng.random() < 0.2:
                v = None
            rows.append(row(T0 + timedelta(seconds=i * STEP_S), q, "depth", v,
                            target="srv1" if q < "q4" else "srv2"))
    return rows


def _nearest_rank(values: np.ndarray, q: float) -> float | None:
    """The exact nearest-rank quantile: the ceil(q * n)-th smallest sample (None: no samples)."""
    v = np.sort(values[~np.isnan(values)])
    return float(v[math.ceil(q * v.size) - 1]) if v.size else None


@pytest.fixture(scope="module")
def both(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = _lake_rows()
    lake: Path = tmp_path_factory.mktemp("quantiles") / "lake"
    write_lake(lake, rows)
    files = [str(p) for p in sorted(lake.rglob("*.parquet"))]
    got = ru.rollups(ru.prepare(ru.read_lake(spark, files)), Params()).toPandas()
    raw = pd.DataFrame(rows, columns=["ts", "target", "database", "queue", "metric", "value", "note"])
    raw["value"] = raw["value"].astype(float)
    return got, raw


def _expected(raw: pd.DataFrame, freq: str, points: list[float]) -> dict[tuple, list[float | None]]:
    out = {}
    for (target, queue, start), g in raw.groupby(["target", "queue", raw["ts"].dt.floor(freq)]):
        out[(target, queue, pd.Timestamp(start).tz_convert("UTC"))] = [
            _nearest_rank(g["value"].to_numpy(), q) for q in points]
    return out


def _key(r: Any) -> tuple:
    return (r.target, r.queue, pd.Timestamp(r.window_start).tz_localize("UTC")
            if pd.Timestamp(r.window_start).tzinfo is None else pd.Timestamp(r.window_start).tz_convert("UTC"))


def test_five_minute_p95_equals_pandas_exact(both: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    got, raw = both
    want = _expected(raw, "5min", [0.95])
    five = got[got["window"] == "5m"]
    assert len(five) == len(want) == 6 * HOURS * 12
    have = {_key(r): [None if pd.isna(r.p95) else r.p95] for r in five.itertuples()}
    assert have == want


def test_hour_p95_and_every_quantile_point_equal_pandas_exact(both: tuple[pd.DataFrame, pd.DataFrame]) -> None:
    got, raw = both
    points = ru.sketch_points(Params())
    assert len(points) > 90 and 0.95 in points
    want = _expected(raw, "1h", points)
    hours = got[got["window"] == "1h"]
    assert len(hours) == len(want) == 6 * HOURS
    for r in hours.itertuples():
        exact = want[_key(r)]
        assert list(r.quantiles) == exact, _key(r)
        assert r.p95 == exact[points.index(0.95)], _key(r)
    # The sample is not trivial: ties and thinned-out windows are in it, and windows differ.
    sizes = hours.set_index("queue")["samples"]
    assert sizes.loc["q1"].min() == 240 and sizes.loc["q4"].max() < 150
