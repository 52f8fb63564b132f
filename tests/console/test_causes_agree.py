"""The Overview's root causes and the alerts' cause rules give each queue the same state (issue
32, one severity). The console names its causes itself (console.findings: the session, who it is,
its pid for "End session"), the alerts judge queueops.causes' per-queue ages; this checks the two
agree on every kind of cause, so that keeping them apart cannot let them drift. Pure."""

from __future__ import annotations

import json

import pytest

from console.data import LiveSample
from console.findings import assess
from console.views.overview import cause_state, causes_for
from queueops import causes, judge
from queueops import config as config_mod
from queueops.alerts.rules import effective_rules
from queueops.rows import SnapshotRow
from tests.console.test_overview_not_visible import SNAPSHOT_WHY, T0

CFG = config_mod.parse({
    "targets": [{"name": "a", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
    "queues": [{"name": q, "target": "a", "kind": "lease", "table": q, "key": "id", "lease_column": "taken_at"}
               for q in ("jobs", "mail")],
})
# The same queues, "mail" with its own old-snapshot levels (a queue whose transactions must stay short).
OWN = config_mod.parse({
    "targets": [{"name": "a", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
    "queues": [{"name": "jobs", "target": "a", "kind": "lease", "table": "jobs", "key": "id", "lease_column": "taken_at"},
               {"name": "mail", "target": "a", "kind": "lease", "table": "mail", "key": "id", "lease_column": "taken_at",
                "thresholds": {"oldest_snapshot_age_s": {"warn": 20, "crit": 120}}}],
})


def r(queue: str, metric: str, value: float, note: object = "") -> SnapshotRow:
    return SnapshotRow(T0, "a", "d", queue, metric, value, note if isinstance(note, str) else json.dumps(note))


def cycle(snapshot: object = "{}", snapshot_s: float = 0, heads: list | None = None,
          holders: list | None = None, waiters: list[int] | None = None) -> list[SnapshotRow]:
    rows = [r("", "oldest_snapshot_age_s", snapshot_s, snapshot), r("", "head_blockers", len(heads or []), heads or [])]
    for q in ("jobs", "mail"):
        mine = q == "jobs"
        rows += [r(q, "depth", 3),
                 r(q, "lock_waiters", len(waiters or []) if mine else 0,
                   {"pids": waiters} if mine and waiters else "exact (pg_locks now)"),
                 r(q, "lock_blockers", len(holders or []) if mine else 0,
                   {"holders": holders} if mine and holders else "exact (pg_locks now)")]
    return rows


def console_state(rows: list[SnapshotRow], queue: str, cfg: config_mod.Config = CFG) -> str:
    """The worst state the Overview's root causes give the queue: overview.cause_state, which its
    cause banners (overview.cause_rows) judge each cause by, on the queue's causes now."""
    q = cfg.queue(queue)
    return judge.worst_state(s for c in causes_for(LiveSample(T0, rows), q) if (s := cause_state(c, q)) is not None)


def page_state(rows: list[SnapshotRow], queue: str, cfg: config_mod.Config) -> str:
    """The severity of the queue's old-snapshot finding on its page and in its Overview State
    (console.findings.assess); ok without one."""
    sample = LiveSample(T0, rows)
    q = cfg.queue(queue)
    _, recs = assess(q, "postgresql", sample.values().get(("a", queue), {}), causes_for(sample, q))
    return judge.worst_state(r.severity for r in recs if r.rule == "ghosts_held_by_snapshot")


def alert_state(rows: list[SnapshotRow], queue: str, cfg: config_mod.Config = CFG) -> str:
    """The worst severity of the queue's cause:* alert rules (as the service builds them) whose
    condition holds (hold aside)."""
    values = {(x.queue, x.metric): x.value for x in (*rows, *causes.cause_rows(rows))}
    return judge.worst_state(r.severity for r in effective_rules(cfg)
                             if r.name.startswith("cause:") and r.applies(queue) and r.queues
                             and r.holds(values.get((queue, r.metric)) or 0))


HOLDER = {"pid": 5, "mode": "ExclusiveLock", "xact_age_s": 5.0}
SCENARIOS = {
    "calm": (cycle(), "ok", "ok"),
    "snapshot 90 s": (cycle({"kind": "backend", "pid": 42}, 90), "warn", "warn"),
    "snapshot 700 s": (cycle({"kind": "backend", "pid": 42}, 700), "crit", "crit"),
    "prepared transaction 700 s": (cycle({"kind": "prepared transaction", "pid": None}, 700), "crit", "crit"),
    "snapshot not visible": (cycle(SNAPSHOT_WHY, 0), "ok", "ok"),
    "table lock 5 s": (cycle(holders=[HOLDER]), "warn", "ok"),
    "table lock 90 s": (cycle(holders=[{**HOLDER, "xact_age_s": 90.0}]), "crit", "ok"),
    "head blocker 5 s": (cycle(heads=[{"pid": 9, "xact_age_s": 5.0, "waiters": [100]}], waiters=[100]), "ok", "ok"),
    "head blocker 20 s": (cycle(heads=[{"pid": 9, "xact_age_s": 20.0, "waiters": [100]}], waiters=[100]),
                          "warn", "ok"),
    "head blocker 90 s": (cycle(heads=[{"pid": 9, "xact_age_s": 90.0, "waiters": [100]}], waiters=[100]),
                          "crit", "ok"),
    "head also holding the table": (cycle(heads=[{"pid": 5, "xact_age_s": 30.0, "waiters": [100]}],
                                          holders=[{**HOLDER, "xact_age_s": 30.0}], waiters=[100]), "warn", "ok"),
}


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_overview_and_the_alerts_give_each_queue_the_same_root_cause_state(name: str) -> None:
    rows, jobs, mail = SCENARIOS[name]
    assert (console_state(rows, "jobs"), console_state(rows, "mail")) == (jobs, mail)
    assert (alert_state(rows, "jobs"), alert_state(rows, "mail")) == (jobs, mail)


OWN_LEVELS = {
    # jobs keeps the judge's 60 s / 600 s; mail warns from 20 s, critical from 120 s
    "snapshot 10 s": (cycle({"kind": "backend", "pid": 42}, 10), "ok", "ok"),
    "snapshot 30 s": (cycle({"kind": "backend", "pid": 42}, 30), "ok", "warn"),
    "snapshot 90 s": (cycle({"kind": "backend", "pid": 42}, 90), "warn", "warn"),
    "snapshot 150 s": (cycle({"kind": "backend", "pid": 42}, 150), "warn", "crit"),
    "snapshot 700 s": (cycle({"kind": "backend", "pid": 42}, 700), "crit", "crit"),
}


@pytest.mark.parametrize("name", OWN_LEVELS)
def test_a_queues_own_old_snapshot_levels_are_what_the_overview_and_its_alerts_judge_by(name: str) -> None:
    rows, jobs, mail = OWN_LEVELS[name]
    assert (console_state(rows, "jobs", OWN), console_state(rows, "mail", OWN)) == (jobs, mail)
    assert (page_state(rows, "jobs", OWN), page_state(rows, "mail", OWN)) == (jobs, mail)
    assert (alert_state(rows, "jobs", OWN), alert_state(rows, "mail", OWN)) == (jobs, mail)


def test_a_queues_old_snapshot_threshold_makes_no_rule_on_the_target_wide_metric() -> None:
    # Before, it made threshold:oldest_snapshot_age_s:* rules for the queue, which read the queue's
    # rows of a metric only the target's row ('' queue) carries: they could never fire.
    assert not [r for r in effective_rules(OWN) if r.metric == judge.OLD_SNAPSHOT]
    levels = {r.name: r.value for r in effective_rules(OWN) if r.name.startswith("cause:snapshot") and r.applies("mail")}
    assert levels == {"cause:snapshot:warn": 20.0, "cause:snapshot:crit": 120.0}
