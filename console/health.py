"""Queue health for the console: the judge's verdicts (:mod:`queueops.judge`) per queue, ranked.

Kept free of Streamlit and of any I/O so that the overview, the queue page, the benchmarks and the
tests all judge a queue the same way. Thresholds come from :meth:`queueops.config.Queue.threshold`
(per-queue overrides, else :data:`queueops.config.DEFAULT_THRESHOLDS`); threshold semantics,
guards and samples required are the judge's, shared with the alerts and the pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from queueops import catalog
from queueops import judge as judge_mod
from queueops.config import Queue
from queueops.judge import State, judge, metric_state, samples_required, severity, streak

__all__ = ["State", "judge", "metric_state", "severity"]  # re-exported: the console's pages import them here

# Worst first. "unknown" (target unreachable, no sample) ranks right after critical: a queue
# nobody can see is the next most urgent thing at 3 a.m.
RANK: dict[str, int] = {"crit": 0, "unknown": 1, "warn": 2, "ok": 3}
LABEL: dict[str, str] = {"crit": "critical", "unknown": "unknown", "warn": "warning", "ok": "ok"}
# Material icons for Streamlit text (the headless browsers that take our screenshots, and many
# servers, have no colour emoji font).
ICON: dict[str, str] = {"crit": ":material/error:", "unknown": ":material/help:", "warn": ":material/warning:",
                        "ok": ":material/check_circle:"}
WORD: dict[str, str] = {"crit": "CRITICAL", "unknown": "UNKNOWN", "warn": "WARNING", "ok": "ok"}

# The metrics the overview judges a queue on first, in the order an on-call engineer reads them;
# every other metric with a level (a catalog default or the queue's own threshold) follows.
JUDGED = ("stuck_leases", "watermark_drift", "oldest_age_s", "depth", "ghost_records",
          "fragmentation_pct", "lock_waiters")


def judged_metrics(queue: Queue) -> tuple[str, ...]:
    """Every metric the queue is judged on: :data:`JUDGED`, then any other metric with a level."""
    extra = [m for m in (*catalog.thresholds(), *sorted(queue.thresholds)) if m not in JUDGED]
    return JUDGED + tuple(dict.fromkeys(extra))


def streaks(rows: Iterable[tuple[str, str, str, float | None]], queue: Queue) -> dict[str, int]:
    """Consecutive latest samples past the queue's level, per metric, from time-ordered
    ``(target, queue, metric, value)`` rows (the console's own recent samples)."""
    series: dict[str, list[float | None]] = {}
    for target, name, metric, value in rows:
        if target == queue.target and name == queue.name:
            series.setdefault(metric, []).append(value)
    return {m: streak(vals, queue.threshold(m)) for m, vals in series.items()}


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
    recent: Mapping[str, int] = field(default_factory=dict)  # consecutive samples past the level
    # The findings that weigh in the state: (severity, rule id, "title: evidence"), worst first.
    findings: tuple[tuple[str, str, str], ...] = ()
    # Values past a level that the judge leaves out, and why (the fragmentation page floor).
    ignored: Mapping[str, str] = field(default_factory=dict)

    @property
    def causes(self) -> list[str]:
        """The warn / crit findings that name a root cause (a session), worst first."""
        return [text for sev, rule, text in self.findings if sev in ("crit", "warn") and rule in CAUSE_RULES]

    @property
    def reason(self) -> str:
        """Why the queue has its state: root causes first, then every metric past a level, then the
        other findings that raise the state."""
        metric_rules = {catalog_rule(f.metric) for f in self.reasons}
        others = [text for sev, rule, text in self.findings
                  if sev in ("crit", "warn") and rule not in metric_rules and text not in self.causes]
        return "; ".join(self.causes + [f.text() for f in self.reasons] + others
                         + ([self.error] if self.error else []))


# Findings that name a root cause (a session): a queue's "Why" leads with them.
CAUSE_RULES = ("blocker", "ghosts_held_by_snapshot", "lock_waits")


def catalog_rule(metric: str) -> str | None:
    """The judge's rule a metric feeds (its catalog ``finding``)."""
    m = catalog.get(metric)
    return m.finding if m is not None else None


def queue_health(queue: Queue, values: Mapping[str, float | None], reachable: bool = True,
                 error: str = "", recent: Mapping[str, int] | None = None,
                 findings: Sequence[tuple[str, str, str]] = ()) -> QueueHealth:
    """Judge one queue from its latest values: the worst metric wins, every breach is a reason.

    The judge (:mod:`queueops.judge`) decides each metric: its guards (fragmentation only on an
    index the rebuild would act on) and the consecutive samples it needs (``recent``: per metric,
    how many latest samples were past the level, see :func:`streaks`; unknown means one).

    A queue whose target is unreachable, or that has no sample at all, is ``unknown``: the console
    cannot vouch for it, and it must not look green. ``error`` (a missing or unreadable table while
    the target answers) is shown as the reason, so the console never blames the target for it.
    """
    ranked = tuple(sorted(findings, key=lambda f: RANK.get(f[0], 3)))
    if not reachable or not any(values.get(m) is not None for m in ("depth", "oldest_age_s")):
        # Not sampled: unknown, unless a finding from its target (a session holding its table) is critical.
        state = judge_mod.queue_state((), [f[0] for f in ranked], known=False) if reachable else "unknown"
        return QueueHealth(queue.name, queue.target, state, (), 1.0 if state == "crit" else 0.0, dict(values), error,
                           dict(recent or {}), ranked)
    reasons: list[Finding] = []
    ignored: dict[str, str] = {}
    score = 0.0
    order = judged_metrics(queue)
    for metric in order:
        value = values.get(metric)
        thr = queue.threshold(metric)
        if value is None or thr is None:
            continue
        state = metric_state(metric, values, thr, (recent or {}).get(metric))
        why = judge_mod.ignored(metric, values, thr)
        if why:
            ignored[metric] = why
        if state in ("warn", "crit"):
            level = thr.crit if state == "crit" else thr.warn
            reasons.append(Finding(metric, float(value), state, level, thr.direction))
            score = max(score, severity(float(value), thr))
    reasons.sort(key=lambda f: (RANK[f.state], order.index(f.metric)))
    # One state: the worst of the metrics' verdicts and the findings' severities (the judge's rule).
    state: State = judge_mod.queue_state([f.state for f in reasons] + (["warn"] if error else []),
                                         [f[0] for f in ranked])
    if state != "ok" and not reasons:
        score = 1.0  # a finding alone (a session holding the table): ranked as just past a level
    return QueueHealth(queue.name, queue.target, state, tuple(reasons), score, dict(values), error,
                       dict(recent or {}), ranked, ignored)


def cell_state(queue: Queue, health: QueueHealth, metric: str) -> State:
    """The colour of one metric's cell: the judge's verdict, exactly as in the queue's state."""
    thr = queue.threshold(metric)
    if health.values.get(metric) is None or thr is None:
        return "ok"
    return metric_state(metric, health.values, thr, health.recent.get(metric))


def multi_sample_metrics() -> tuple[str, ...]:
    """Metrics the judge needs several consecutive samples of (their recent history is read)."""
    return tuple(m for m in catalog.names() if samples_required(m) > 1)


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
