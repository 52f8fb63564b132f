"""What ``config check`` tells of a config without connecting, beyond its own validation: what the
collector service would refuse at start, and the levels and policies that can never judge or do
anything (a silent hole is worse than a warning). ``queueops config check`` prints them; the
console's Settings page shows them, so an on-call engineer sees a dead level where the levels are.
"""

from __future__ import annotations

from collectors import registry, runner
from queueops import catalog
from queueops.actions.core import refusal
from queueops.alerts.rules import RuleError, effective_rules
from queueops.config import Config, Problem, preset_warnings
from queueops.livecheck import uncollected_thresholds
from queueops.service.plan import PlanError, plan_jobs


def warnings(cfg: Config, live: bool = False) -> list[Problem]:
    """Everything told but not refused: the presets' lease timeouts and :func:`silent_levels`. With
    ``live`` (``config check --live``), the presets' and the thresholds' are left to its findings."""
    return silent_levels(cfg, thresholds=False) if live else [*preset_warnings(cfg), *silent_levels(cfg)]


def silent_levels(cfg: Config, thresholds: bool = True) -> list[Problem]:
    """Levels and policies that can never judge or do anything, as warnings naming the field: each
    queue's thresholds on a metric no collector reads for its mapping
    (:func:`queueops.livecheck.uncollected_thresholds`; ``thresholds=False`` leaves them to
    ``--live``, which tells them among its findings), each autopilot policy whose action the queue
    refuses or whose metric it never has, and each ``[[alerts.rules]]`` rule naming queues for a
    metric none of them carries (target-wide, or not collected for that queue)."""
    out = [] if not thresholds else [
        Problem(f"queues[{i}](name={q.name!r}).thresholds.{metric}",
                q.thresholds[metric].model_dump(exclude_none=True), f"{why}; fix: {fix}")
        for i, q in enumerate(cfg.queues) for metric, why, fix in uncollected_thresholds(cfg.target(q.target), q)]
    names = {q.name: q for q in cfg.queues}
    for i, p in enumerate(cfg.autopilot):
        q = names.get(p.queue)
        if q is None or p.mode == "off":
            continue
        why = refusal(cfg, p.action, q.name, p.options)
        if why:
            out.append(Problem(f"autopilot[{i}].action", p.action, f"refused on queue {q.name!r} every "
                               f"time the policy fires: {why}; fix: another action, or mode = \"off\""))
        metric = p.condition.metric
        if catalog.target_wide(metric) is None and runner.uncollected(cfg.target(q.target), q, [metric]):
            out.append(Problem(f"autopilot[{i}].when", p.when, f"no collector reads {metric} for queue "
                               f"{q.name!r} (no block applies to its mapping), so the policy never "
                               "fires; fix: a metric the queue has, or map what it needs (docs/metrics.md)"))
    for i, r in enumerate(cfg.alerts.rules):
        mine = [names[n] for n in r.queues if n in names]
        if not mine:
            continue
        collector = catalog.target_wide(r.metric)
        if collector is not None:
            out.append(Problem(
                f"alerts.rules[{i}].queues", r.queues, f"{r.metric} is target-wide (the {collector} collector "
                "reads the server): no row of these queues carries it, so this rule never fires; fix: drop "
                "queues, and the rule judges each target's row"))
            continue
        dark = [q.name for q in mine if runner.uncollected(cfg.target(q.target), q, [r.metric])]
        if dark:
            out.append(Problem(
                f"alerts.rules[{i}].queues", r.queues, f"no collector reads {r.metric} for "
                f"{', '.join(map(repr, dark))} (no block applies to the mapping), so this rule never fires "
                "there; fix: drop those queues, or map what the metric needs (docs/metrics.md)"))
    return out


def service_problem(cfg: Config) -> str:
    """Why the collector service would refuse this config at start ('' when it would not): its alert
    rules (:func:`queueops.alerts.rules.effective_rules`) and its plan of jobs."""
    try:
        effective_rules(cfg)
        plan_jobs(cfg, registry.COLLECTORS, known=registry.COLLECTORS)
    except (RuleError, PlanError) as exc:
        return str(exc)
    return ""
