"""Health judgement: pure functions from metric values and thresholds to ok / warn / crit.

Kept free of Streamlit and of any I/O so that the overview, the queue page, the benchmarks and the
tests all judge a queue the same way. Thresholds come from :meth:`queueops.config.Queue.threshold`
(per-queue overrides, else :data:`queueops.config.DEFAULT_THRESHOLDS`).

``above`` thresholds fire at or above the level (one stuck lease with ``crit = 1`` is critical);
``below`` thresholds fire strictly under it (``watermark_drift < 0`` means stranded items, while a
drift of exactly 0 is healthy).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from queueops.alerts.rules import GUARDS, OPS
from queueops.config import Queue, Threshold

State = Literal["ok", "warn", "crit", "unknown"]

# Worst first. "unknown" (target unreachable, no sample) ranks right after critical: a queue
# nobody can see is the next most urgent thing at 3 a.m.
RANK: dict[str, int] = {"crit": 0, "unknown": 1, "warn": 2, "ok": 3}
LABEL: dict[str, str] = {"crit": "critical", "unknown": "unknown", "warn": "warning", "ok": "ok"}
# Material icons for Streamlit text (the headless browsers that take our screenshots, and many
# servers, have no colour emoji font).
ICON: dict[str, str] = {"crit": ":material/error:", "unknown": ":material/help:", "warn": ":material/warning:",
                        "ok": ":material/check_circle:"}
WORD: dict[str, str] = {"crit": "CRITICAL", "unknown": "UNKNOWN", "warn": "WARNING", "ok": "ok"}

# The metrics the overview judges a queue on, in the order an on-call engineer reads them.
JUDGED = ("stuck_leases", "watermark_drift", "oldest_age_s", "depth", "ghost_records",
          "fragmentation_pct", "lock_waiters")


def judge(value: float | None, threshold: Threshold | None) -> State:
    """The state of one value against one threshold (``ok`` when the metric has no threshold)."""
    if value is None:
        return "unknown"
    if threshold is None:
        return "ok"
    if threshold.direction == "below":
        if threshold.crit is not None and value < threshold.crit:
            return "crit"
        if threshold.warn is not None and value < threshold.warn:
            return "warn"
        return "ok"
    if threshold.crit is not None and value >= threshold.crit:
        return "crit"
    if threshold.warn is not None and value >= threshold.warn:
        return "warn"
    return "ok"


def severity(value: float, threshold: Threshold) -> float:
    """How far past its nearest level a value is (1.0 = exactly at it); orders equals worst first."""
    level = threshold.crit if threshold.crit is not None else threshold.warn
    if level is None:
        return 0.0
    if threshold.direction == "below":
        return float(level - value + 1)
    return float(value) / level if level > 0 else float(value) + 1


@dataclass(frozen=True)
class Finding:
    """One metric past a level: the evidence behind a queue's state."""

    metric: str
    value: float
    state: State
    level: float | None
    direction: str

    def text(self) -> str:
        """``stuck leases 7 ≥ 1``: the metric, its value and the level it passed."""
        op = "<" if self.direction == "below" else "≥"
        level = format_value(self.metric, self.level) if self.level is not None else "?"
        return f"{self.metric.removesuffix('_s').replace('_', ' ')} {format_value(self.metric, self.value)} {op} {level}"


@dataclass(frozen=True)
class QueueHealth:
    queue: str
    target: str
    state: State
    reasons: tuple[Finding, ...] = ()
    score: float = 0.0
    values: Mapping[str, float | None] = field(default_factory=dict)
    error: str = ""  # why the queue could not be read although its target answered

    @property
    def reason(self) -> str:
        return "; ".join([f.text() for f in self.reasons] + ([self.error] if self.error else []))


def _guard_holds(metric: str, values: Mapping[str, float | None]) -> bool:
    """The alert rules' guard (fragmentation counts only on an index the rebuild would act on)."""
    guard = GUARDS.get(metric)
    other = values.get(guard[0]) if guard else None
    return guard is None or other is None or OPS[guard[1]](other, guard[2])


def queue_health(queue: Queue, values: Mapping[str, float | None], reachable: bool = True,
                 error: str = "") -> QueueHealth:
    """Judge one queue from its latest values: the worst metric wins, every breach is a reason.

    A queue whose target is unreachable, or that has no sample at all, is ``unknown``: the console
    cannot vouch for it, and it must not look green. ``error`` (a missing or unreadable table while
    the target answers) is shown as the reason, so the console never blames the target for it.
    """
    if not reachable or not any(values.get(m) is not None for m in ("depth", "oldest_age_s")):
        return QueueHealth(queue.name, queue.target, "unknown", (), 0.0, dict(values), error)
    reasons: list[Finding] = []
    score = 0.0
    for metric in JUDGED:
        value = values.get(metric)
        thr = queue.threshold(metric)
        if value is None or thr is None or not _guard_holds(metric, values):
            continue
        state = judge(value, thr)
        if state in ("warn", "crit"):
            level = thr.crit if state == "crit" else thr.warn
            reasons.append(Finding(metric, float(value), state, level, thr.direction))
            score = max(score, severity(float(value), thr))
    reasons.sort(key=lambda f: (RANK[f.state], JUDGED.index(f.metric)))
    state: State = reasons[0].state if reasons else ("warn" if error else "ok")
    return QueueHealth(queue.name, queue.target, state, tuple(reasons), score, dict(values), error)


def worst_first(items: Iterable[QueueHealth]) -> list[QueueHealth]:
    """Critical first, then unknown, warning, ok; within a state the furthest past its level first."""
    return sorted(items, key=lambda h: (RANK[h.state], -h.score, h.target, h.queue))


def count_states(items: Iterable[QueueHealth]) -> dict[str, int]:
    out = {s: 0 for s in RANK}
    for h in items:
        out[h.state] += 1
    return out


def is_stale(last_seen: datetime | None, now: datetime, interval_s: float, intervals: float = 3) -> bool:
    """Data is stale when nothing arrived for ``intervals`` collection intervals (or ever)."""
    return last_seen is None or now - last_seen > timedelta(seconds=interval_s * intervals)


def format_age(seconds: float | None) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 10 min``, ``3 d 4 h``: what a human reads at a glance."""
    if seconds is None:
        return "—"
    s = int(round(max(0.0, float(seconds))))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def format_value(metric: str, value: float | None) -> str:
    if value is None:
        return "—"
    if metric.endswith("_s") and "per_s" not in metric:
        return format_age(value)
    if metric.endswith("_pct"):
        return f"{value:.1f} %"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}"
