"""Which collection jobs the service runs: pure functions of the config and the registry.

Each collector runs on its own interval (``schedule.collectors[name]``, else ``fast_s`` or
``slow_s`` by its cadence). Collectors of one target that share an interval share one job, one
connection and one cycle timestamp -- fewer connections, the same schedule. The registry is read
when the service starts, so a collector added to it is scheduled without changes here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collectors.registry import Collector
from queueops.config import Config, Schedule


class PlanError(ValueError):
    """The schedule names something that does not exist; the message says what is known."""


@dataclass(frozen=True)
class JobPlan:
    target: str
    interval_s: float
    collectors: tuple[Collector, ...]

    @property
    def id(self) -> str:
        return f"collect:{self.target}:{self.interval_s:g}s"

    def describe(self) -> str:
        return f"{self.target} every {self.interval_s:g}s: {', '.join(c.name for c in self.collectors)}"


def interval_for(collector: Collector, schedule: Schedule) -> float:
    if collector.name in schedule.collectors:
        return float(schedule.collectors[collector.name])
    return float(schedule.fast_s if collector.cadence == "fast" else schedule.slow_s)


def plan_jobs(cfg: Config, collectors: Sequence[Collector], known: Sequence[Collector] | None = None) -> list[JobPlan]:
    """One job per (target, interval), collectors in registry order, targets in config order."""
    names = {c.name for c in (known if known is not None else collectors)}
    unknown = sorted(set(cfg.schedule.collectors) - names)
    if unknown:
        raise PlanError(f"schedule.collectors: unknown collector(s) {', '.join(map(repr, unknown))} "
                        f"(known: {', '.join(sorted(names))})")
    bad = {n: v for n, v in cfg.schedule.collectors.items() if v <= 0}
    if bad:
        raise PlanError(f"schedule.collectors: intervals must be > 0 seconds: {bad}")
    plans: list[JobPlan] = []
    for target in cfg.targets:
        groups: dict[float, list[Collector]] = {}
        for c in collectors:
            groups.setdefault(interval_for(c, cfg.schedule), []).append(c)
        for interval in sorted(groups):
            plans.append(JobPlan(target.name, interval, tuple(groups[interval])))
    return plans
