"""``queueops config check``: validate a config file, optionally against the live databases."""

from __future__ import annotations

import argparse
import sys

from queueops import config as config_mod
from queueops.commands.common import add_config_arg, load_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="check a config file")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    c = csub.add_parser("check", help="validate the file; with --live, also that tables and columns exist",
                        description="Exits 0 when the config is valid. Every problem is printed as "
                                    "FILE: FIELD = VALUE: MESSAGE. Every env:/file: secret is resolved (relative "
                                    "file: paths against the config file's folder) and the file read is "
                                    "named. Nothing is executed against a database unless --live is given, "
                                    "and then only catalog lookups.")
    add_config_arg(c)
    c.add_argument("--live", action="store_true", help="connect to each target and check tables, columns, their types, "
                   "which metrics each queue can produce, and whether statements seek or scan")
    c.set_defaults(func=_check)


def _check(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    # Secrets first: "ok" is printed only for a config whose every env:/file: reference resolves
    # here (a copied config whose relative file: secret stayed behind is not ok).
    problems = config_mod.secret_problems(cfg)
    for p in problems:
        # Not through secrets.mask: its "password = ..." pattern would hide the reference itself,
        # which is no secret (env:NAME / file:PATH), and the message holds only the resolved path.
        print(p.render(cfg.source or "<config>"), file=sys.stderr)
    if problems:
        return 1
    # What the service builds at start from the file (its alert rules, its collection plan): a rule
    # naming an unknown queue or metric must fail here, not when the service starts.
    wiring = _service_problem(cfg)
    if wiring:
        print(f"{cfg.source or '<config>'}: {wiring}", file=sys.stderr)
        return 1
    # With --live the verdict comes last, after the servers were asked: no early "ok".
    # --live reports the presets' and the thresholds' among its findings
    warnings = (_silent_levels(cfg, thresholds=False) if args.live
                else [*config_mod.preset_warnings(cfg), *_silent_levels(cfg)])
    verdict = "valid" if args.live else "ok" if not warnings else f"ok with {len(warnings)} warning(s)"
    print(f"{cfg.source}: {verdict} ({len(cfg.targets)} targets, {len(cfg.queues)} queues)")
    source = cfg.source or "<config>"
    for w in warnings:
        print(w.render(source).replace(f"{source}: ", f"{source}: warning: ", 1))
    for field, path in config_mod.secret_files(cfg):
        print(f"  {field}: secret read from {path}")
    if not args.live:
        return 0
    from queueops.livecheck import print_live

    return print_live(cfg)  # one stream (stdout), one verdict for the file, exit 1 on errors


def _silent_levels(cfg: config_mod.Config, thresholds: bool = True) -> list[config_mod.Problem]:
    """Levels and policies that can never judge or do anything, as warnings naming the field: each
    queue's thresholds on a metric no collector reads for its mapping
    (:func:`queueops.livecheck.uncollected_thresholds`; ``thresholds=False`` leaves them to
    ``--live``, which tells them among its findings), each autopilot policy whose action the queue
    refuses or whose metric it never has, and each ``[[alerts.rules]]`` rule naming queues for a
    metric none of them carries (target-wide, or not collected for that queue)."""
    from collectors import runner
    from queueops import catalog
    from queueops.actions.core import refusal
    from queueops.livecheck import uncollected_thresholds

    out = [] if not thresholds else [
        config_mod.Problem(f"queues[{i}](name={q.name!r}).thresholds.{metric}",
                           q.thresholds[metric].model_dump(exclude_none=True), f"{why}; fix: {fix}")
        for i, q in enumerate(cfg.queues) for metric, why, fix in uncollected_thresholds(cfg.target(q.target), q)]
    names = {q.name: q for q in cfg.queues}
    for i, p in enumerate(cfg.autopilot):
        q = names.get(p.queue)
        if q is None or p.mode == "off":
            continue
        why = refusal(cfg, p.action, q.name, p.options)
        if why:
            out.append(config_mod.Problem(f"autopilot[{i}].action", p.action, f"refused on queue {q.name!r} every "
                                          f"time the policy fires: {why}; fix: another action, or mode = \"off\""))
        metric = p.condition.metric
        if catalog.target_wide(metric) is None and runner.uncollected(cfg.target(q.target), q, [metric]):
            out.append(config_mod.Problem(f"autopilot[{i}].when", p.when, f"no collector reads {metric} for queue "
                                          f"{q.name!r} (no block applies to its mapping), so the policy never "
                                          "fires; fix: a metric the queue has, or map what it needs (docs/metrics.md)"))
    for i, r in enumerate(cfg.alerts.rules):
        mine = [names[n] for n in r.queues if n in names]
        if not mine:
            continue
        collector = catalog.target_wide(r.metric)
        if collector is not None:
            out.append(config_mod.Problem(
                f"alerts.rules[{i}].queues", r.queues, f"{r.metric} is target-wide (the {collector} collector "
                "reads the server): no row of these queues carries it, so this rule never fires; fix: drop "
                "queues, and the rule judges each target's row"))
            continue
        dark = [q.name for q in mine if runner.uncollected(cfg.target(q.target), q, [r.metric])]
        if dark:
            out.append(config_mod.Problem(
                f"alerts.rules[{i}].queues", r.queues, f"no collector reads {r.metric} for "
                f"{', '.join(map(repr, dark))} (no block applies to the mapping), so this rule never fires "
                "there; fix: drop those queues, or map what the metric needs (docs/metrics.md)"))
    return out


def _service_problem(cfg: config_mod.Config) -> str:
    """Why the collector service would refuse this config at start ('' when it would not): its alert
    rules (:func:`queueops.alerts.rules.effective_rules`) and its plan of jobs."""
    from collectors import registry
    from queueops.alerts.rules import RuleError, effective_rules
    from queueops.service.plan import PlanError, plan_jobs

    try:
        effective_rules(cfg)
        plan_jobs(cfg, registry.COLLECTORS, known=registry.COLLECTORS)
    except (RuleError, PlanError) as exc:
        return str(exc)
    return ""
