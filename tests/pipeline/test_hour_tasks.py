"""Each shuffle task of the rollups holds whole hours, HOURS_PER_TASK of them (rollups.hour_tasks)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from pipeline import rollups as ru
from tests.pipeline.lakes import T0

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

H = timedelta(hours=1)


def test_murmur3_is_sparks_hash(spark: Any) -> None:
    """The driver's Murmur3 equals Spark's ``hash()`` of an INT, negatives and extremes included."""
    ints = [*range(-50, 200), 2**31 - 1, -(2**31), 123_456_789]
    got = {r["i"]: r["h"] for r in spark.createDataFrame([(i,) for i in ints], "i int")
           .selectExpr("i", "hash(i) AS h").collect()}
    assert {i: ru._murmur3_int(i) for i in ints} == got


@pytest.mark.parametrize("per_task", [1, 2])
def test_each_task_holds_whole_hours(spark: Any, per_task: int) -> None:
    # 30 hours with a gap (an incremental run's scope need not be contiguous), 3 rows per hour.
    hours = [T0 + i * H for i in [*range(0, 20), *range(25, 35)]]
    key, n = ru.hour_tasks(hours, per_task)
    assert n == -(-len(hours) // per_task)
    rows = [(h + timedelta(minutes=m),) for h in hours for m in (0, 20, 59)]
    df = (spark.createDataFrame(rows, "ts timestamp")
          .selectExpr("ts", f"{ru.floor_sql('ts', 3600)} AS hour_start")
          .selectExpr("*", f"{key} AS task").repartition(n, "task")
          .selectExpr("hour_start", "spark_partition_id() AS p"))
    by_hour = {}
    for r in df.collect():
        by_hour.setdefault(r["hour_start"], set()).add(r["p"])
    assert all(len(ps) == 1 for ps in by_hour.values())  # an hour is never split
    tasks: dict[int, list] = {}
    for h, ps in by_hour.items():
        tasks.setdefault(ps.pop(), []).append(h)
    assert len(tasks) == n  # no task is empty, none holds more than its share
    assert sorted(len(v) for v in tasks.values())[-1] == per_task


def test_unknown_or_scattered_hours_fall_back() -> None:
    assert ru.hour_tasks(None) is None
    assert ru.hour_tasks([]) is None
    assert ru.hour_tasks([T0, T0 + ru.MAX_HOUR_SPAN * H]) is None
