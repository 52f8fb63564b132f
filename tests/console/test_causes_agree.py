"""The Overview's root causes and the alerts' cause rules give each queue the same state (issue
32, one severity). The console names its causes itself (console.findings: the session, who it is,
its pid for "End session"), the alerts judge queueops.causes' per-queue ages; this checks the two
agree on every kind of cause, so that keeping them apart cannot let them drift. Pure."""

from __future__ import annotations

import json

import pytest

from console.data import LiveSample
from console.views.overview import causes_for
from queueops import causes, judge
from queueops import config as config_mod
from queueops.rows import SnapshotRow
from tests.console.test_overview_not_visible import SNAPSHOT_WHY, T0

CFG = config_mod.parse({
    "targets": [{"name": "a", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
    "queues": [{"name": q, "target": "a", "kind": "lease", "table": q, "key": "id", "lease_column": "taken_at"}
               for q in ("jobs", "mail")],
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


def console_state(rows: list[SnapshotRow], queue: str) -> str:
    """The worst state the Overview's root causes give the queue (as its cause banners judge them)."""
    sample = LiveSample(T0, rows)
    return judge.worst_state(
        judge.snapshot_state(c.age_s) if c.kind == "snapshot" else judge.blocker_state(c.age_s, c.holds_table)
        for c in causes_for(sample, CFG.queue(queue)) if c.kind in ("snapshot", "blocker"))


def alert_state(rows: list[SnapshotRow], queue: str) -> str:
    """The worst severity of the cause:* rules whose condition holds for the queue (hold aside)."""
    values = {(x.queue, x.metric): x.value for x in (*rows, *causes.cause_rows(rows))}
    return judge.worst_state(sev for metric, _rule, sev, level in causes.levels().values()
                             if (values.get((queue, metric)) or 0) >= level)


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
