"""Fixtures for the pipeline's tests: one real local SparkSession for the whole test run.

Spark takes 7-8 s (often more on a busy machine) to start, so the session is shared; every test
builds its own small lake in its own temporary folder.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.pipeline.lakes import T0, series, write_hour


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pipeline.spark import get_session

    session = get_session("local[2]", app_name="queueops-tests", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture()
def lake(tmp_path: Path) -> Path:
    return tmp_path / "lake"


H = timedelta(hours=1)
HOSTILE = "<script>alert('q')</script>"
TABLES = ("rollups", "findings", "forecasts", "fleet")


def hour_rows(h: int, *, bump: float = 0.0) -> list:
    """One lake hour: series that continue across hours (counters, stuck-lease runs, trends)."""
    start = T0 + h * H
    m = 60
    rows = []
    rows += series(start, m, [1000.0 * h + 10 * i + bump for i in range(60)], "", "lock_timeouts_total")
    rows += series(start, m, [200.0 + 50 * h + i * (50 / 60) + bump for i in range(60)], "q1", "depth")
    rows += series(start, m, [60.0 * h + i for i in range(60)], "q1", "oldest_age_s")
    # stuck leases > 0 from 00:58 to 01:01 only: a run that straddles the hour boundary.
    stuck = [1.0 if (h == 0 and i >= 58) or (h == 1 and i <= 1) else 0.0 for i in range(60)]
    rows += series(start, m, stuck, "q2", "stuck_leases")
    rows += series(start, m, [-3.0 if h == 3 else 4.0] * 60, "q3", "watermark_drift")
    if h == 3:  # a hostile queue name: the report must escape it
        rows += series(start, m, [-2.0] * 60, HOSTILE, "watermark_drift")
    return rows


def files_of(out: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(out)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in out.rglob("*.parquet")}


def table(out: Path, name: str) -> pd.DataFrame:
    """A gold table as pandas, partition columns as the strings they are written as, rows sorted."""
    from queueops.report.data import _read

    df = _read(out, name, None)
    for c in df.columns:
        if df[c].dtype == object and df[c].map(lambda v: hasattr(v, "__len__") and not isinstance(v, str)).any():
            df[c] = df[c].map(lambda v: None if v is None else tuple(v))
    return df.sort_values(list(df.columns)).reset_index(drop=True)


@pytest.fixture(scope="session")
def story(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("gold")
    lake, inc, full = base / "lake", base / "inc", base / "full"
    for h in range(3):
        write_hour(lake, T0 + h * H, hour_rows(h))
    s: dict[str, Any] = {"lake": lake, "inc": inc, "full": full}
    from pipeline.run import run

    s["first"] = run(spark, str(lake), str(inc))
    s["files_before"] = files_of(inc)
    s["noop"] = run(spark, str(lake), str(inc))
    write_hour(lake, T0 + 3 * H, hour_rows(3))
    s["new_hour"] = run(spark, str(lake), str(inc))
    s["files_after"] = files_of(inc)
    s["gold_after_new_hour"] = {n: table(inc, n) for n in TABLES}
    write_hour(lake, T0 + 1 * H, hour_rows(1, bump=0.5))  # the exporter re-exports hour 01
    s["reexport"] = run(spark, str(lake), str(inc))
    s["full1"] = run(spark, str(lake), str(full), full=True)
    s["gold_full1"] = {n: table(full, n) for n in TABLES}
    # a rerun over the same input: the last hour again (--full --since), every table compared after
    s["full2"] = run(spark, str(lake), str(full), full=True, since=T0 + 3 * H)
    return s
