"""Alert rules from config: explicit ``[alerts] rules`` plus each queue's thresholds as defaults.

A queue's thresholds (its own, else :data:`queueops.config.DEFAULT_THRESHOLDS`) become rules
``threshold:<metric>:<warn|crit>`` for that queue, unless an explicit rule already covers the
same metric for that queue: an explicit rule replaces the defaults, it does not add to them.
Levels: ``direction = "above"`` means value >= level, ``"below"`` means value < level (so
``watermark_drift`` with crit 0 fires on stranded items). When warn equals crit only the crit
rule exists (one condition, one alert).

A rule may carry guards on other metrics of the same queue and cycle (:func:`queueops.judge.guards`):
the default ``fragmentation_pct`` rules hold only while the key index has at least
:data:`~queueops.judge.MIN_PAGES` pages, the floor below which the rebuild action does nothing --
otherwise a small fragmented index would alert forever with no action that clears it. A metric
the judge judges on several consecutive samples (stuck leases) gets a ``for`` of that many
collection intervals, so an alert fires on the sample the console and the pipeline turn red on.

Root causes (issue 32, one severity): for each queue, rules ``cause:snapshot:*``,
``cause:table_lock:*`` and ``cause:head_blocker:*`` judge the rows :mod:`queueops.causes` derives
from the target-wide snapshot and blocker rows, at the judge's own levels, so an old snapshot, a
session holding the queue's table or the head of its waiters pages with the severity the Overview
gives that queue (``snapshot-hold`` had no rule at all). They are threshold rules in all else
(the same hold and hysteresis) and are on whenever ``[alerts] thresholds`` is; an explicit rule
on the same metric for the queue replaces them.

Hysteresis (issue 32: 19 alerts fired and resolved in 30 minutes on the calm lab): a threshold
rule resolves only once its condition has been false for ``[alerts] thresholds_clear_for_s`` and
its value is ``thresholds_clear_margin`` of the level back past it; explicit rules set
``clear_for_s`` and ``clear_value`` themselves (default: resolve at once, at the firing value).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from queueops import catalog, causes, judge
from queueops.config import Config
from queueops.judge import OPS, Guard


@dataclass(frozen=True)
class Rule:
    name: str
    metric: str
    op: str
    value: float
    for_s: float = 0.0
    queues: frozenset[str] = frozenset()  # empty: every queue (and target-wide rows)
    severity: str = "crit"
    source: str = "config"  # config | threshold
    # The judge's guards: (metric, op, value) that must also hold for the same queue in the same
    # cycle; a cycle without that metric does not suppress the rule.
    guards: tuple[Guard, ...] = ()
    # Hysteresis: a firing alert resolves once the condition has been false for clear_for_s, and
    # (with clear_value) only while the value is past clear_value, not merely back across value.
    clear_for_s: float = 0.0
    clear_value: float | None = None
    # The judge's rule (queueops.judge.RULES) whose finding this alert is, for its advice: a root
    # cause's rule reads a row of queueops.causes, which the catalog does not know.
    finding: str | None = None

    def applies(self, queue: str) -> bool:
        return not self.queues or queue in self.queues

    def holds(self, value: float) -> bool:
        return OPS[self.op](value, self.value)

    def still_active(self, value: float) -> bool:
        """Whether a firing alert's value keeps it firing: the condition against ``clear_value``
        (a value between the two lines neither fires nor resolves), else against ``value``."""
        return OPS[self.op](value, self.value if self.clear_value is None else self.clear_value)

    def guards_hold(self, lookup: Callable[[str], float | None]) -> bool:
        """Every guard holds on the same queue's values of this cycle (``lookup(metric)``)."""
        for metric, op, level in self.guards:
            v = lookup(metric)
            if v is not None and not OPS[op](v, level):
                return False
        return True

    @property
    def is_cause(self) -> bool:
        """A root cause's rule (it reads a row of :mod:`queueops.causes` and has the judge's finding),
        as opposed to a metric's: the judge weighs it as a finding, a notification lists it first."""
        return self.finding is not None

    def describe(self) -> str:
        text = f"{self.metric} {self.op} {self.value:g}"
        for metric, op, level in self.guards:
            text += f" (while {metric} {op} {level:g})"
        return text


class RuleError(ValueError):
    """Rules that cannot work together (duplicate names); the message names them."""


def queue_states(alerts: Iterable[tuple[str, str, str, str]], rules: Mapping[str, Rule]
                 ) -> dict[tuple[str, str], judge.State]:
    """Each (target, queue)'s one state as its firing alerts give it: :func:`queueops.judge.queue_state`
    of their severities, a metric's rule as a metric verdict, a root cause's (:attr:`Rule.is_cause`)
    as a finding. ``alerts`` are (rule name, target, queue, state) as ``alert_state`` keeps them;
    an alert that is not firing, or whose rule is not in ``rules``, weighs nothing. A queue with no
    firing alert is absent (its state is ``ok``). The one computation behind the ``queue_state``
    every transition carries (the service) and the console's Alerts page, so the two cannot differ."""
    metric: dict[tuple[str, str], list[str]] = {}
    found: dict[tuple[str, str], list[str]] = {}
    for name, target, queue, state in alerts:
        rule = rules.get(name)
        if state == "firing" and rule is not None:
            (found if rule.is_cause else metric).setdefault((target, queue), []).append(rule.severity)
    return {k: judge.queue_state(metric.get(k, []), found.get(k, [])) for k in {*metric, *found}}


def rule_name(metric: str, op: str, value: float) -> str:
    return f"{metric} {op} {value:g}"


def effective_rules(cfg: Config) -> list[Rule]:
    explicit = [Rule(r.name or rule_name(r.metric, r.op, r.value), r.metric, r.op, float(r.value), float(r.for_s),
                     frozenset(r.queues), r.severity, clear_for_s=float(r.clear_for_s),
                     clear_value=None if r.clear_value is None else float(r.clear_value))
                for r in cfg.alerts.rules]
    names = [r.name for r in explicit]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RuleError(f"alerts.rules: duplicate rule name(s) {', '.join(map(repr, dupes))}; give each rule a "
                        "distinct name")
    unknown = [(i, r.metric) for i, r in enumerate(cfg.alerts.rules)
               if catalog.get(r.metric) is None and r.metric not in causes.METRICS]
    if unknown:
        raise RuleError("; ".join(f"alerts.rules[{i}].metric = {m!r}" for i, m in unknown)
                        + ": unknown metric: a rule on a metric no collector writes never fires ("
                        + catalog.accepted_names("a root cause's age: " + ", ".join(causes.METRICS)) + ")")
    known_queues = {q.name for q in cfg.queues}
    for r in explicit:
        unknown = sorted(r.queues - known_queues)
        if unknown:
            raise RuleError(f"alerts.rules: rule {r.name!r} names unknown queue(s) {', '.join(unknown)}")
    out = list(explicit)
    if not cfg.alerts.thresholds:
        return out
    for q in cfg.queues:
        covered = {r.metric for r in explicit if r.applies(q.name)}
        # The queue's old-snapshot threshold is not a rule of its own: the metric is target-wide (no
        # row of this queue carries it); it sets the levels of the queue's cause:snapshot rules.
        metrics = (set(q.thresholds) | set(_default_metrics())) - {judge.OLD_SNAPSHOT}
        for metric in sorted(metrics - covered):
            th = q.threshold(metric)
            if th is None:
                continue
            op = judge.op_for(th.direction)
            levels = [("crit", th.crit), ("warn", th.warn)]
            if th.warn is not None and th.warn == th.crit:
                levels = [("crit", th.crit)]
            for_s = max(_hold_s(cfg, metric), _samples_for_s(cfg, metric))
            for severity, level in levels:
                if level is None:
                    continue
                out.append(Rule(f"threshold:{metric}:{severity}", metric, op, float(level), for_s,
                                frozenset({q.name}), severity, "threshold", judge.guards(metric),
                                float(cfg.alerts.thresholds_clear_for_s),
                                _clear_level(op, float(level), cfg.alerts.thresholds_clear_margin)))
        for name, (metric, finding, severity, level) in causes.levels(q.threshold(judge.OLD_SNAPSHOT)).items():
            if metric in covered:
                continue
            out.append(Rule(name, metric, ">=", float(level), _hold_s(cfg, metric), frozenset({q.name}), severity,
                            "threshold", (), float(cfg.alerts.thresholds_clear_for_s),
                            _clear_level(">=", float(level), cfg.alerts.thresholds_clear_margin), finding))
    return out


def _hold_s(cfg: Config, metric: str) -> float:
    """``[alerts] thresholds_for_s``, or by default one interval of the metric's collector (two
    consecutive samples), except stuck_leases, which fires on the sample the console turns red on."""
    if cfg.alerts.thresholds_for_s is not None:
        return float(cfg.alerts.thresholds_for_s)
    if metric == judge.STUCK:
        return 0.0
    return _interval_s(cfg, metric)


def _interval_s(cfg: Config, metric: str) -> float:
    """The collection interval of ``metric`` (``[schedule] collectors`` when set, else the fast or
    slow interval of its collector's cadence)."""
    m = catalog.get(metric)
    names = m.collectors if m else ()
    intervals = [cfg.schedule.collectors[c] for c in names if c in cfg.schedule.collectors]
    if intervals:
        return float(max(intervals))
    slow = any(c.name in names and c.cadence == "slow" for c in catalog.collectors().values())
    return float(cfg.schedule.slow_s if slow else cfg.schedule.fast_s)


def _clear_level(op: str, level: float, margin: float) -> float:
    """Where a threshold rule resolves: ``margin`` of the level back past it (above 10, margin 0.2:
    below 8; a level of 0 at 0)."""
    return level - margin * abs(level) if op in (">", ">=") else level + margin * abs(level)


def _samples_for_s(cfg: Config, metric: str) -> float:
    """The judge's samples required, as a ``for`` duration: a metric that needs N consecutive
    samples fires once it has held for N - 1 intervals of its collector (``[schedule] collectors``
    when set, else the fast interval: such metrics come from fast collectors)."""
    n = judge.samples_required(metric)
    if n <= 1:
        return 0.0
    m = catalog.get(metric)
    intervals = [cfg.schedule.collectors[c] for c in (m.collectors if m else ()) if c in cfg.schedule.collectors]
    return (n - 1) * float(max(intervals) if intervals else cfg.schedule.fast_s)


def _default_metrics() -> tuple[str, ...]:
    from queueops.config import DEFAULT_THRESHOLDS

    return tuple(DEFAULT_THRESHOLDS)
