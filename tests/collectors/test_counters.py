"""Cumulative counters become rates by delta; a drop or a new epoch is a restart, never negative."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from collectors.counters import CounterRates, Sample, is_cumulative, rate, rate_metric
from queueops.rows import SnapshotRow

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def test_rate_is_delta_over_seconds() -> None:
    r = rate(Sample(at(0), 100), Sample(at(10), 150))
    assert r.value == 5.0 and r.reason == "delta" and r.seconds == 10


def test_first_sample_has_no_rate() -> None:
    assert rate(None, Sample(at(0), 7)).value is None


def test_a_drop_is_a_reset_counted_from_zero_not_a_negative_rate() -> None:
    # The pipeline's deltas follow the same rule (queueops.judge.counter_increase): both agree.
    r = rate(Sample(at(0), 1000), Sample(at(15), 3))
    assert r.value == 3 / 15 and r.reason == "reset"


def test_a_changed_epoch_is_a_restart_even_when_the_total_grew() -> None:
    # The server restarted and the new total already passed the old one: without the epoch the
    # delta (40) would look like a plausible rate; with it, the new total counts from zero (50).
    r = rate(Sample(at(0), 10, epoch=1000.0), Sample(at(60), 50, epoch=2000.0))
    assert r.value == 50 / 60 and r.reason == "restart"


def test_no_time_elapsed_has_no_rate() -> None:
    assert rate(Sample(at(5), 1), Sample(at(5), 2)).value is None


def row(metric: str, value: float | None, s: float, note: str = "", queue: str = "") -> SnapshotRow:
    return SnapshotRow(at(s), "db1", "d", queue, metric, value, note)


def test_which_rows_are_cumulative() -> None:
    assert is_cumulative(row("deadlocks_total", 3, 0))
    assert is_cumulative(row("lock_timeouts_total", 3, 0, '{"cntr_type": 272696576}'))
    assert not is_cumulative(row("version_store_kb_total", 3, 0, '{"cntr_type": 65792}'))  # an instant counter
    assert not is_cumulative(row("depth", 3, 0))
    assert not is_cumulative(row("deadlocks_total", None, 0))
    assert rate_metric("lock_timeouts_gt0_total") == "lock_timeouts_gt0_per_s"


def test_counter_rates_across_cycles_with_a_restart() -> None:
    rates = CounterRates()
    cycle = [
        [row("lock_timeouts_total", 100, 0), row("sqlserver_start_time", 5000, 0)],
        [row("lock_timeouts_total", 130, 15), row("sqlserver_start_time", 5000, 15)],
        # restart: start time changes; total restarted low
        [row("lock_timeouts_total", 2, 30), row("sqlserver_start_time", 9000, 30)],
        [row("lock_timeouts_total", 32, 45), row("sqlserver_start_time", 9000, 45)],
    ]
    out = [rates.derive(rows) for rows in cycle]
    assert [r[0].metric for r in out] == ["lock_timeouts_per_s"] * 4
    assert out[0][0].value is None and out[0][0].note == "first sample"
    assert out[1][0].value == 2.0 and out[1][0].note.startswith("delta over 15.0")
    assert out[2][0].value == 2 / 15 and out[2][0].note == "restart: counted from zero over 15.0 s"
    assert out[3][0].value == 2.0


def test_counter_rates_keep_queues_apart_and_remember_the_epoch() -> None:
    rates = CounterRates()
    rates.derive([row("row_lock_waits_total", 10, 0, queue="a"), row("row_lock_waits_total", 500, 0, queue="b"),
                  row("stats_reset", 1.0, 0)])
    # The epoch row is absent this cycle (another collector ran): the remembered one applies.
    out = {r.queue: r.value for r in rates.derive([row("row_lock_waits_total", 20, 10, queue="a"),
                                                    row("row_lock_waits_total", 400, 10, queue="b")])}
    assert out == {"a": 1.0, "b": 40.0}  # b dropped from 500 to 400: a reset, counted from zero
