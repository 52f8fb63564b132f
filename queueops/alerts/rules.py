"""Alert rules from config: explicit ``[alerts] rules`` plus each queue's thresholds as defaults.

A queue's thresholds (its own, else :data:`queueops.config.DEFAULT_THRESHOLDS`) become rules
``threshold:<metric>:<warn|crit>`` for that queue, unless an explicit rule already covers the
same metric for that queue: an explicit rule replaces the defaults, it does not add to them.
Levels: ``direction = "above"`` means value >= level, ``"below"`` means value < level (so
``watermark_drift`` with crit 0 fires on stranded items). When warn equals crit only the crit
rule exists (one condition, one alert).

A rule may carry a guard on another metric of the same queue and cycle: the default
``fragmentation_pct`` rules hold only while the key index has at least
:data:`~queueops.actions.decide.MIN_PAGES` pages, the floor below which the rebuild action does
nothing -- otherwise a small fragmented index would alert forever with no action that clears it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

from queueops.config import Config

OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
}


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
    # (metric, op, value) that must also hold for the same queue in the same cycle; a cycle
    # without that metric does not suppress the rule.
    guard: tuple[str, str, float] | None = None

    def applies(self, queue: str) -> bool:
        return not self.queues or queue in self.queues

    def holds(self, value: float) -> bool:
        return OPS[self.op](value, self.value)

    def guard_holds(self, value: float | None) -> bool:
        if self.guard is None or value is None:
            return True
        return OPS[self.guard[1]](value, self.guard[2])

    def describe(self) -> str:
        text = f"{self.metric} {self.op} {self.value:g}"
        if self.guard:
            text += f" (while {self.guard[0]} {self.guard[1]} {self.guard[2]:g})"
        return text


def _guards() -> dict[str, tuple[str, str, float]]:
    from queueops.actions.decide import MIN_PAGES

    return {"fragmentation_pct": ("page_count", ">=", float(MIN_PAGES))}


GUARDS = _guards()


class RuleError(ValueError):
    """Rules that cannot work together (duplicate names); the message names them."""


def rule_name(metric: str, op: str, value: float) -> str:
    return f"{metric} {op} {value:g}"


def effective_rules(cfg: Config) -> list[Rule]:
    explicit = [Rule(r.name or rule_name(r.metric, r.op, r.value), r.metric, r.op, float(r.value), float(r.for_s),
                     frozenset(r.queues), r.severity) for r in cfg.alerts.rules]
    names = [r.name for r in explicit]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RuleError(f"alerts.rules: duplicate rule name(s) {', '.join(map(repr, dupes))}; give each rule a "
                        "distinct name")
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
        metrics = set(q.thresholds) | set(_default_metrics())
        for metric in sorted(metrics - covered):
            th = q.threshold(metric)
            if th is None:
                continue
            op = "<" if th.direction == "below" else ">="
            levels = [("crit", th.crit), ("warn", th.warn)]
            if th.warn is not None and th.warn == th.crit:
                levels = [("crit", th.crit)]
            for severity, level in levels:
                if level is None:
                    continue
                out.append(Rule(f"threshold:{metric}:{severity}", metric, op, float(level),
                                float(cfg.alerts.thresholds_for_s), frozenset({q.name}), severity, "threshold",
                                GUARDS.get(metric)))
    return out


def _default_metrics() -> tuple[str, ...]:
    from queueops.config import DEFAULT_THRESHOLDS

    return tuple(DEFAULT_THRESHOLDS)
