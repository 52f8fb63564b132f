"""The pipeline's gold output on a fixed lake equals the recorded output of the job before its
performance rework (issue 17: one pass over the lake, signals counted in the rollups' aggregation,
the day's p95 no longer quadratic). ``data/gold_reference.json`` was written by the code at the
parent commit of that rework; see :mod:`tests.pipeline.gold_reference`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline import gold_reference as ref

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]  # Spark on a busy 2-core machine


def test_gold_tables_equal_the_recorded_reference(spark: Any, tmp_path: Path) -> None:
    expected = json.loads(ref.REFERENCE.read_text())
    got = ref.compute(spark, tmp_path)
    assert expected["findings"]["rows"] > 10 and expected["forecasts"]["rows"] > 0  # the lake exercises the rules
    for table in ref.TABLES:
        assert got[table]["rows"] == expected[table]["rows"], table
        differing = sorted(c for c in expected[table]["columns"]
                           if got[table]["columns"].get(c) != expected[table]["columns"][c])
        assert not differing, f"{table}: columns differ from the reference: {differing}"
        assert set(got[table]["columns"]) == set(expected[table]["columns"]), table
        for column, want in expected[table]["values"].items():
            have = got[table]["values"][column]
            bad = [i for i, (a, b) in enumerate(zip(want, have, strict=True)) if not ref.close(a, b)]
            assert not bad, f"{table}.{column} differs from the reference in rows {bad[:5]}: {have[bad[0]]!r}"
