"""The workload's knobs: ``lab.settings`` rows parsed with defaults, overrides and clear warnings."""

from __future__ import annotations

import math

import pytest

from queueops.lab.settings import KNOBS, QUEUES, Settings, capacity_warnings, production_rate, queue_phase


def test_defaults_without_rows() -> None:
    s = Settings()
    assert s.get("produce_per_s") == KNOBS["produce_per_s"].default
    assert s.integer("consumers", "lease") == 2
    assert s.lock_hold_queue == "lease"
    assert s.warnings == []


def test_per_queue_row_wins_over_global() -> None:
    s = Settings({"produce_per_s": "7", "delete.produce_per_s": "50", "consumers": "3.0"})
    assert s.get("produce_per_s", "delete") == 50
    assert s.get("produce_per_s", "ring") == 7
    assert s.get("produce_per_s") == 7
    assert s.integer("consumers", "due") == 3  # 'lab start --rate consumers=3' writes "3.0"


@pytest.mark.parametrize(("name", "value", "fragment"), [
    ("produce_per_s", "fast", "is not a number"),
    ("consumers", "99", "outside 0..16"),
    ("produce_per_s", "nan", "outside"),
    ("no_such_knob", "1", "unknown setting"),
    ("nosuchqueue.produce_per_s", "1", "unknown setting"),
    ("delete.wave_period_s", "10", "unknown setting"),  # global only
    ("lock_hold_queue", "q_lease; DROP TABLE x", "not one of"),
])
def test_bad_rows_are_ignored_with_a_warning(name: str, value: str, fragment: str) -> None:
    s = Settings({name: value})
    assert len(s.warnings) == 1 and fragment in s.warnings[0] and name in s.warnings[0]
    assert s.values == {} and s.lock_hold_queue == "lease"


def test_production_wave_averages_to_the_base_rate() -> None:
    period = 120.0
    samples = [production_rate(t / 10, 4.0, 0.8, period, queue_phase("due")) for t in range(int(period * 10))]
    assert min(samples) >= 0
    assert math.isclose(sum(samples) / len(samples), 4.0, rel_tol=1e-3)
    assert max(samples) == pytest.approx(7.2, rel=1e-3) and min(samples) == pytest.approx(0.8, rel=1e-3)
    assert production_rate(0, 4.0, 1.0, period, -math.pi / 2) == 0  # never negative


def test_each_queue_has_its_own_phase() -> None:
    assert len({round(queue_phase(q), 6) for q in QUEUES}) == len(QUEUES)


def test_consumers_keep_ahead_of_producers_by_default() -> None:
    s = Settings({"produce_per_s": "40"})
    assert s.get("consume_per_s", "delete") == 50  # 1.25 x production unless set
    assert Settings({"produce_per_s": "40", "ring.consume_per_s": "3"}).get("consume_per_s", "ring") == 3
    assert capacity_warnings(Settings()) == []


def test_capacity_warning_names_the_queue_that_cannot_keep_up() -> None:
    warnings = capacity_warnings(Settings({"produce_per_s": "100", "work_ms": "1000"}))
    assert [w.split(":")[0] for w in warnings] == ["status", "lease"]
    assert "status.consumers" in warnings[0]
