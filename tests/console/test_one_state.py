"""Issue 32, item 1: one state per queue -- the worst of its metrics and its findings, root causes
included -- and the values the judge leaves out saying why. Pure functions, no database."""

from __future__ import annotations

import json

from console.data import parse_note
from console.findings import RootCause, assess, causes_of, recommend, root_causes
from console.health import queue_health
from console.views.overview import table
from queueops import judge
from queueops.config import Queue, Threshold


def _queue(kind: str = "lease", name: str = "lease", **kw: object) -> Queue:
    cols = {"lease": {"lease_column": "leased_at"}, "delete": {}}[kind]
    return Queue(name=name, target="t", kind=kind, table="tbl", key="id", **cols, **kw)  # type: ignore[arg-type]


OK = {"depth": 3, "oldest_age_s": 1, "stuck_leases": 0}
HOLDERS = json.dumps({"held": ["4242:ExclusiveLock"], "holders": [
    {"pid": 4242, "mode": "ExclusiveLock", "usename": "lab", "application_name": "lock-hold",
     "state": "idle in transaction", "backend_start": "2026-11-26T19:00:00+00:00", "xact_age_s": 75.0,
     "query": "LOCK TABLE lab.q_lease IN EXCLUSIVE MODE"}]})


def test_the_state_is_the_worst_of_metrics_and_findings() -> None:
    assert judge.queue_state(["ok", "warn"], ["info"]) == "warn"
    assert judge.queue_state(["ok"], ["crit", "info"]) == "crit"
    assert judge.queue_state([], ["info"]) == "ok"
    assert judge.queue_state([], ["warn"], known=False) == "unknown"  # never green, never hidden
    assert judge.queue_state([], ["crit"], known=False) == "crit"


def test_an_old_snapshot_makes_a_queue_with_healthy_metrics_a_warning_and_says_who() -> None:
    holder = RootCause("snapshot", "oldest_snapshot_age_s", 90, {"pid": 77, "usename": "lab",
                                                                  "application_name": "snapshot-hold"})
    health, recs = assess(_queue("delete", "delete"), "postgresql", OK, [holder])
    assert [r.rule for r in recs] == ["ghosts_held_by_snapshot"]
    assert health.state == "warn"  # the pill, the Overview's row: no more "ok" beside the finding
    assert health.reason.startswith("A long transaction holds cleanup back: session 77")
    assert judge.snapshot_state(700) == "crit"


def test_a_table_lock_holder_is_named_with_its_pid_and_outranks_its_symptom() -> None:
    q = _queue(thresholds={"oldest_age_s": Threshold(warn=20, crit=60)})
    rows = [("lock_blockers", 1.0, parse_note(HOLDERS)), ("lock_waiters", 0.0, None)]
    causes = causes_of([], "lease", rows)
    assert [(c.kind, c.pid, c.holds_table) for c in causes] == [("blocker", 4242, True)]
    assert causes[0].summary.startswith("session 4242 (lab, lock-hold) holds ExclusiveLock on queue lease's table")
    values = {**OK, "oldest_age_s": 90, "lock_blockers": 1, "lock_waiters": 0}
    health, recs = assess(q, "postgresql", values, causes)
    # The cause is red (it is past a minute, and so is its symptom); no red "poison message?" beside it.
    assert [(r.rule, r.severity) for r in recs] == [("blocker", "crit")]
    assert "the oldest item has waited 1 min 30 s" in recs[0].evidence
    assert health.state == "crit" and health.reason.startswith("A session blocks others: session 4242")
    # Young and without symptoms: a warning at once, a table lock stops every dequeue.
    young = RootCause("blocker", "lock_blockers", 2, {"pid": 1, "mode": "ExclusiveLock"})
    assert [(r.rule, r.severity) for r in recommend(q, "postgresql", OK, [young])] == [("blocker", "warn")]


def test_no_card_without_a_pid_and_a_head_blocker_belongs_to_the_queues_it_holds_up() -> None:
    # An older note without the sessions: not a root cause ("a session blocks other sessions for 1 s").
    assert root_causes([("lock_blockers", 1.0, {"held": ["12:ExclusiveLock"]})]) == []
    assert root_causes([("head_blockers", 1.0, {"items": [{"usename": "x", "blocked": 2}]})]) == []
    head = {"items": [{"pid": 9, "blocked": 2, "xact_age_s": 30, "waiters": [101, 102]}]}
    mine = causes_of([("head_blockers", 1.0, head)], "lease", [("lock_waiters", 1.0, {"pids": [101]})])
    other = causes_of([("head_blockers", 1.0, head)], "delete", [("lock_waiters", 0.0, None)])
    assert [c.pid for c in mine] == [9] and other == []
    # A brief row-lock head is ordinary on a busy queue; past 10 s it is a warning.
    assert judge.blocker_state(0.2, holds_table=False) == "ok"
    assert judge.blocker_state(12, holds_table=False) == "warn"


def test_fragmentation_under_the_page_floor_says_why_it_is_not_judged() -> None:
    q = _queue("delete", "delete")
    health = queue_health(q, {**OK, "fragmentation_pct": 42.9, "page_count": 312})
    assert health.state == "ok"
    assert "312 pages in the index, under the floor of 1,000" in health.ignored["fragmentation_pct"]
    assert judge.ignored("fragmentation_pct", {"fragmentation_pct": 42.9, "page_count": 5000},
                         Threshold(warn=30, crit=60)) == ""

    class Cfg:
        def queue(self, name: str) -> Queue:
            return q

    df, states = table(Cfg(), [health], {})  # type: ignore[arg-type]
    assert df["Fragmentation %"].iloc[0] == "42.9 · not judged: 312 pages < 1,000"
    assert states["Fragmentation %"].iloc[0] == "ignored"
