"""Cumulative counters to rates: pure functions plus a small memory of the previous sample.

Servers expose many figures as running totals (SQL Server's ``Lock Timeouts/sec`` is a total in
``sys.dm_os_performance_counters`` despite its name; ``sys.dm_db_index_operational_stats`` and
PostgreSQL's ``pg_stat_database.deadlocks`` too). The collectors store those raw values as their
own metrics; a rate is the difference between two samples divided by the seconds between them.

A total that went *down*, or a changed *epoch* (``sqlserver_start_time``, ``pg_stat_database``'s
``stats_reset``), means the server restarted or the statistics were reset: the increase over that
interval is the new total counted from zero (:func:`queueops.judge.counter_increase`, the rule the
pipeline's deltas follow too), never a negative rate. The next interval is a normal delta again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from queueops import catalog, judge
from queueops.rows import SnapshotRow

# Instant cntr_type values (a level although the catalog says counter): see queueops.catalog.
INSTANT_CNTR_TYPES = catalog.INSTANT_CNTR_TYPES


@dataclass(frozen=True)
class Sample:
    """One observation of a cumulative total, with the epoch it belongs to (``None``: unknown)."""

    ts: datetime
    value: float
    epoch: float | None = None


@dataclass(frozen=True)
class Rate:
    """The rate between two samples, or ``None`` with the reason it cannot be computed."""

    value: float | None
    reason: str  # "delta" | "first sample" | "restart" | "reset" | "no time elapsed"
    seconds: float = 0.0


def rate(prev: Sample | None, cur: Sample) -> Rate:
    """Per-second rate from ``prev`` to ``cur``; a drop or a new epoch is a restart, counted from zero."""
    if prev is None:
        return Rate(None, "first sample")
    seconds = (cur.ts - prev.ts).total_seconds()
    if seconds <= 0:
        return Rate(None, "no time elapsed", seconds)
    restarted = prev.epoch is not None and cur.epoch is not None and prev.epoch != cur.epoch
    reason = "restart" if restarted else "reset" if cur.value < prev.value else "delta"
    return Rate(judge.counter_increase(prev.value, cur.value, restarted) / seconds, reason, seconds)


def is_cumulative(row: SnapshotRow) -> bool:
    """Whether a stored row is a running total: a catalog ``counter`` and not an instant counter type.

    The catalog decides, not the name: ``rows_total`` and ``lock_waiters_total`` are levels.
    """
    if row.value is None or not catalog.is_counter(row.metric):
        return False
    cntr_type = note_field(row.note, "cntr_type")
    return not (isinstance(cntr_type, (int, float)) and int(cntr_type) in INSTANT_CNTR_TYPES)


def rate_metric(metric: str) -> str:
    """``lock_timeouts_total`` -> ``lock_timeouts_per_s``."""
    return catalog.rate_name(metric)


def note_field(note: str, key: str) -> object:
    """A field of a JSON note, or ``None`` when the note is not JSON or lacks it."""
    if not note or not note.startswith("{"):
        return None
    try:
        data = json.loads(note)
    except ValueError:
        return None
    return data.get(key) if isinstance(data, dict) else None


# Metrics that mark an epoch (catalog kind ``epoch``): when they change the totals restarted.
EPOCH_METRICS = catalog.names("epoch")


@dataclass
class CounterRates:
    """Remembers the previous sample of every cumulative row and derives ``*_per_s`` rows.

    One instance lives as long as a scheduler (or a console cache). ``derive`` is called with
    each cycle's rows of one target; it returns the rate rows to add. A row whose rate cannot be
    known (first sample) yields a rate row with ``value=None`` and the reason in ``note``, so a
    chart shows a gap with an explanation rather than a spike; after a restart or reset the
    note says the rate was counted from zero.
    """

    _last: dict[tuple[str, str, str], Sample] = field(default_factory=dict)
    _epoch: dict[str, float | None] = field(default_factory=dict)

    def derive(self, rows: Iterable[SnapshotRow]) -> list[SnapshotRow]:
        rows = list(rows)
        epochs = _epochs(rows)
        out: list[SnapshotRow] = []
        for row in rows:
            if not is_cumulative(row):
                continue
            epoch = epochs.get(row.target, self._epoch.get(row.target))
            key = (row.target, row.queue, row.metric)
            cur = Sample(row.ts, float(row.value or 0.0), epoch)
            r = rate(self._last.get(key), cur)
            self._last[key] = cur
            note = (f"delta over {r.seconds:.1f} s" if r.reason == "delta" else
                    f"{r.reason}: counted from zero over {r.seconds:.1f} s" if r.reason in ("restart", "reset")
                    else r.reason)
            out.append(replace(row, metric=rate_metric(row.metric), value=r.value, note=note))
        for target, epoch in epochs.items():
            self._epoch[target] = epoch
        return out


def _epochs(rows: Iterable[SnapshotRow]) -> Mapping[str, float | None]:
    out: dict[str, float | None] = {}
    for row in rows:
        if row.metric in EPOCH_METRICS and row.queue == "":
            out[row.target] = row.value
    return out
