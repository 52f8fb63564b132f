"""The gold tables' layout under ``--out``: paths, and how a computed DataFrame is written.

::

    <out>/rollups/window=5m/date=YYYY-MM-DD/hour=HH/part-*.parquet   5-minute rollups of that hour
    <out>/rollups/window=1h/date=YYYY-MM-DD/hour=HH/part-*.parquet   the hour's rollup (+ its quantiles)
    <out>/rollups/window=1d/date=YYYY-MM-DD/hour=00/part-*.parquet   the day (derived from its hours)
    <out>/findings/date=YYYY-MM-DD/hour=HH/part-*.parquet            findings of that hour
    <out>/forecasts/part-*.parquet                                   latest forecasts (one as_of)
    <out>/fleet/part-*.parquet                                       latest top-N per problem
    <out>/_state/pipeline.json                                       processed lake hours

``hour`` is the hour of the window's start, so a day row sits in ``hour=00``. A recomputed
partition is deleted and written again (one file per partition, rows sorted), so a rerun over the
same input yields the same rows and an incremental run rewrites only what it recomputed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from pipeline.metrics import KEYS
from pipeline.storage import Storage, join

if TYPE_CHECKING:  # pyspark loads only when a table is written or read, not for `queueops --help`
    from pyspark.sql import DataFrame

ROLLUPS, FINDINGS, FORECASTS, FLEET = "rollups", "findings", "forecasts", "fleet"
TABLES = (ROLLUPS, FINDINGS, FORECASTS, FLEET)


def _dh(hour: datetime) -> tuple[str, str]:
    return hour.strftime("%Y-%m-%d"), hour.strftime("%H")


def rollup_hour_path(out: str, window: str, hour: datetime) -> str:
    d, h = _dh(hour)
    return join(out, ROLLUPS, f"window={window}", f"date={d}", f"hour={h}")


def rollup_day_path(out: str, day: str) -> str:
    return join(out, ROLLUPS, "window=1d", f"date={day}")


def findings_hour_path(out: str, hour: datetime) -> str:
    d, h = _dh(hour)
    return join(out, FINDINGS, f"date={d}", f"hour={h}")


def hour_paths(out: str, hour: datetime) -> list[str]:
    """Every gold partition that belongs to one lake hour."""
    return [rollup_hour_path(out, "5m", hour), rollup_hour_path(out, "1h", hour), findings_hour_path(out, hour)]


def clear(storage: Storage, paths: Iterable[str]) -> list[str]:
    return [p for p in paths if storage.delete(p)]


def write_partitioned(df: DataFrame, path: str, parts: Sequence[str], order: Sequence[str]) -> None:
    """Append ``df`` under ``path`` partitioned by ``parts``: one sorted file per partition.

    The caller has deleted the partitions being replaced, so append == replace, partition by
    partition, and partitions not in ``df`` are left alone.
    """
    (df.repartition(*parts).sortWithinPartitions(*parts, *order)
     .write.mode("append").partitionBy(*parts).parquet(path))


def write_by_hour(df: DataFrame, path: str, parts: Sequence[str], order: Sequence[str]) -> None:
    """Append ``df``, whose tasks already hold whole hours (the rollups: one shuffle by ``hour_start``,
    :func:`pipeline.rollups.five_minute_rollups`), under ``path`` partitioned by ``parts`` (``date``
    and ``hour`` among them): one sorted file per partition without another shuffle, since no
    partition's rows span two tasks. As :func:`write_partitioned`, the caller has cleared them."""
    df.sortWithinPartitions(*parts, *order).write.mode("append").partitionBy(*parts).parquet(path)


def write_snapshot(df: DataFrame, path: str, order: Sequence[str]) -> None:
    """Replace a small, unpartitioned table (forecasts, fleet) with one sorted file."""
    df.coalesce(1).sortWithinPartitions(*order).write.mode("overwrite").parquet(path)


def read_partitions(spark, base: str, paths: Sequence[str], storage: Storage, schema: str) -> DataFrame:  # noqa: ANN001
    """Read only these partition folders of a gold table (no listing of the whole table, no schema
    inference job); an empty DataFrame of ``schema`` when none exists yet."""
    existing = [p for p in paths if storage.exists(p)]
    if not existing:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).option("basePath", base).parquet(*existing)


ROLLUP_ORDER = [*KEYS, "window_start"]
FINDING_ORDER = ["rule", "target", "queue", "metric", "hour_start"]
