"""Pure parts of the service: job planning, alert rules and their state machine, back-off,
health, metric names, and which lake hours are due. No database, no clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from collectors.registry import Collector
from queueops import config as config_mod
from queueops.alerts.evaluate import AlertState, evaluate
from queueops.alerts.rules import RuleError, effective_rules
from queueops.lake.export import hours_to_export
from queueops.rows import SnapshotRow
from queueops.service.backoff import Backoff
from queueops.service.health import Health
from queueops.service.metrics import ServiceMetrics, SnapshotGauges, metric_name
from queueops.service.plan import PlanError, plan_jobs

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
BASE = {
    "targets": [{"name": "a", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"},
                {"name": "b", "dialect": "postgresql", "url": "postgresql://u@h:5433/d"}],
    "queues": [{"name": "jobs", "target": "a", "kind": "lease", "table": "jobs", "key": "id",
                "lease_column": "taken_at", "thresholds": {"depth": {"warn": 5, "crit": 50}}},
               {"name": "mail", "target": "a", "kind": "delete", "table": "mail", "key": "id",
                "watermark": {"table": "wm", "column": "low"}}],
}
COLLECTORS = (Collector("depth", "fast"), Collector("stuck_leases", "fast"), Collector("ghost_records", "slow"),
              Collector("oldest_snapshot", "fast", "target"))


def cfg(**sections: object) -> config_mod.Config:
    return config_mod.parse({**BASE, **sections})


def row(metric: str, value: float | None, queue: str = "jobs", target: str = "a") -> SnapshotRow:
    return SnapshotRow(T0, target, "d", queue, metric, value)


# -- plan ----------------------------------------------------------------------------------------
def test_each_collector_runs_on_its_own_interval_grouped_per_target() -> None:
    plans = plan_jobs(cfg(schedule={"fast_s": 10, "slow_s": 600, "collectors": {"stuck_leases": 30}}), COLLECTORS)
    got = {(p.target, p.interval_s): [c.name for c in p.collectors] for p in plans}
    assert got == {
        ("a", 10): ["depth", "oldest_snapshot"], ("a", 30): ["stuck_leases"], ("a", 600): ["ghost_records"],
        ("b", 10): ["depth", "oldest_snapshot"], ("b", 30): ["stuck_leases"], ("b", 600): ["ghost_records"],
    }
    assert len({p.id for p in plans}) == len(plans)


def test_defaults_are_15_s_and_5_min() -> None:
    plans = plan_jobs(cfg(), COLLECTORS)
    assert {p.interval_s for p in plans} == {15, 300}


def test_unknown_collector_in_schedule_is_a_clear_error() -> None:
    with pytest.raises(PlanError, match=r"unknown collector\(s\) 'depht'.*known: .*depth"):
        plan_jobs(cfg(schedule={"collectors": {"depht": 5}}), COLLECTORS)


# -- rules ---------------------------------------------------------------------------------------
def test_thresholds_become_rules_and_an_explicit_rule_replaces_them() -> None:
    rules = effective_rules(cfg(alerts={"rules": [{"metric": "stuck_leases", "op": ">", "value": 0}]}))
    names = {(r.name, tuple(sorted(r.queues)), r.op, r.value) for r in rules}
    assert ("stuck_leases > 0", (), ">", 0.0) in names
    # explicit rule covers every queue: no threshold rule for stuck_leases anywhere
    assert not any(r.metric == "stuck_leases" and r.source == "threshold" for r in rules)
    # the queue's own depth thresholds, and the defaults for the other queue
    assert ("threshold:depth:warn", ("jobs",), ">=", 5.0) in names
    assert ("threshold:depth:crit", ("jobs",), ">=", 50.0) in names
    assert ("threshold:depth:crit", ("mail",), ">=", 100_000.0) in names
    # watermark drift is critical below 0, and has no warn level
    drift = [r for r in rules if r.metric == "watermark_drift" and "mail" in r.queues]
    assert [(r.op, r.value, r.severity) for r in drift] == [("<", 0.0, "crit")]


def test_equal_warn_and_crit_make_one_rule() -> None:
    rules = effective_rules(cfg())
    stuck = [r for r in rules if r.metric == "stuck_leases" and "jobs" in r.queues]
    assert [(r.name, r.severity) for r in stuck] == [("threshold:stuck_leases:crit", "crit")]


def test_thresholds_can_be_switched_off_and_rule_errors_are_named() -> None:
    assert effective_rules(cfg(alerts={"thresholds": False})) == []
    with pytest.raises(RuleError, match="duplicate rule name"):
        effective_rules(cfg(alerts={"rules": [{"metric": "depth", "value": 1, "name": "x"},
                                              {"metric": "oldest_age_s", "value": 1, "name": "x"}]}))
    with pytest.raises(RuleError, match="unknown queue"):
        effective_rules(cfg(alerts={"rules": [{"metric": "depth", "value": 1, "queues": ["nope"]}]}))


# -- state machine ----------------------------------------------------------------------------------
def _run(rules, cycles):  # noqa: ANN001, ANN202 - tiny driver: [(seconds, rows)] -> transitions
    states: dict = {}
    out = []
    for sec, rows in cycles:
        changes, transitions = evaluate(rules, rows, states, T0 + timedelta(seconds=sec))
        for k, v in changes.items():
            if v is None:
                states.pop(k, None)
            else:
                states[k] = v
        out += [(sec, t.state, t.queue, t.value) for t in transitions]
    return out, states


def test_fires_once_after_for_and_resolves_once() -> None:
    rules = effective_rules(cfg(alerts={"thresholds": False,
                                        "rules": [{"metric": "stuck_leases", "value": 0, "for_s": 60}]}))
    cycles = [(0, [row("stuck_leases", 2)]), (30, [row("stuck_leases", 3)]), (60, [row("stuck_leases", 3)]),
              (90, [row("stuck_leases", 4)]), (120, [row("depth", 1)]),  # metric absent: no change
              (150, [row("stuck_leases", 0)]), (180, [row("stuck_leases", 0)])]
    transitions, states = _run(rules, cycles)
    assert transitions == [(60, "firing", "jobs", 3), (150, "resolved", "jobs", 0)]
    assert next(iter(states.values())).state == "resolved"


def test_a_condition_that_clears_before_for_is_never_announced() -> None:
    rules = effective_rules(cfg(alerts={"thresholds": False,
                                        "rules": [{"metric": "depth", "value": 10, "for_s": 60}]}))
    transitions, states = _run(rules, [(0, [row("depth", 20)]), (30, [row("depth", 5)]), (100, [row("depth", 5)])])
    assert transitions == [] and states == {}


def test_queues_filter_and_none_values() -> None:
    rules = effective_rules(cfg(alerts={"thresholds": False,
                                        "rules": [{"metric": "depth", "value": 10, "queues": ["mail"]}]}))
    transitions, _ = _run(rules, [(0, [row("depth", 20, "jobs"), row("depth", None, "mail")]),
                                  (1, [row("depth", 20, "mail")])])
    assert transitions == [(1, "firing", "mail", 20)]


def test_each_rule_sees_its_metric_and_queues_in_the_rows_order() -> None:
    """evaluate() indexes the rows by metric and queue; a rule must still see exactly the rows a
    scan would give it (its metric; its queues, or all), and its transitions come in row order."""
    from queueops.alerts.rules import Rule

    rules = [Rule("all", "depth", ">", 0.0), Rule("two", "depth", ">", 0.0, queues=frozenset({"q3", "q1"})),
             Rule("one", "depth", ">", 0.0, queues=frozenset({"q2"})), Rule("other", "age", ">", 0.0),
             Rule("none", "depth", ">", 0.0, queues=frozenset({"q9"}))]
    rows = [SnapshotRow(T0, t, "db", q, m, 1.0) for t in ("b", "a") for q in ("q4", "q1", "q3", "q2")
            for m in ("depth", "lag")]
    _, transitions = evaluate(rules, rows, {}, T0)
    got = [(t.rule.name, t.target, t.queue) for t in transitions]
    assert got == [("all", t, q) for t in ("b", "a") for q in ("q4", "q1", "q3", "q2")] \
        + [("two", t, q) for t in ("b", "a") for q in ("q1", "q3")] + [("one", "b", "q2"), ("one", "a", "q2")]


def test_fragmentation_alerts_only_above_the_rebuild_page_floor() -> None:
    """A small index is never rebuilt (below 1000 pages the action does nothing), so its
    fragmentation must not fire an alert that no action can resolve."""
    # No hysteresis here (tests/service/test_alert_hysteresis.py has it): the guard alone resolves.
    rules = [r for r in effective_rules(cfg(alerts={"thresholds_for_s": 0, "thresholds_clear_for_s": 0}))
             if r.metric == "fragmentation_pct" and r.queues == frozenset({"jobs"})]
    assert rules and all(r.guards[0] == ("page_count", ">=", 1000.0) for r in rules)
    small = [row("fragmentation_pct", 90), row("page_count", 40)]
    big = [row("fragmentation_pct", 90), row("page_count", 5000)]
    shrunk = [row("fragmentation_pct", 90), row("page_count", 900)]
    transitions, _ = _run(rules, [(0, small), (10, big), (20, shrunk)])
    assert [(s, st) for s, st, *_ in transitions] == [(10, "firing"), (10, "firing"), (20, "resolved"),
                                                       (20, "resolved")]
    # Without a page count in the cycle the rule is not suppressed.
    transitions, _ = _run(rules, [(0, [row("fragmentation_pct", 90)])])
    assert len(transitions) == 2


def test_a_firing_alert_loaded_from_the_store_is_not_announced_again() -> None:
    rules = effective_rules(cfg(alerts={"thresholds": False, "rules": [{"metric": "depth", "value": 10}]}))
    prev = {("depth > 10", "a", "jobs"): AlertState("depth > 10", "a", "jobs", "firing", T0, 20, T0)}
    changes, transitions = evaluate(rules, [row("depth", 30)], prev, T0 + timedelta(seconds=5))
    assert transitions == [] and changes[("depth > 10", "a", "jobs")].value == 30


# -- back-off --------------------------------------------------------------------------------------
def test_backoff_grows_to_its_cap_and_the_port_reopening_cuts_it_short() -> None:
    b = Backoff(interval_s=10, max_s=60)
    delays = []
    for _ in range(5):
        b.failed(0, reachable=False)
        delays.append(b.delay())
    assert delays == [10, 20, 40, 60, 60]
    assert b.should_attempt(30, lambda: False)[0] is False          # still closed: wait
    attempt, why = b.should_attempt(31, lambda: False)
    assert not attempt and "port closed" in why and "next attempt in" in why
    assert b.should_attempt(32, lambda: True) == (True, "")          # port back: attempt now
    assert b.failures == 0


def test_backoff_never_says_next_attempt_in_0s_for_a_cycle_that_does_not_attempt() -> None:
    """Failures count from the failed cycle's start, so the next attempt falls on a cycle; one that
    starts a little early still attempts, and a cycle that does not attempt names a real wait."""
    b = Backoff(interval_s=1, max_s=30)
    b.failed(0.0, reachable=False)
    assert b.should_attempt(0.98, lambda: False) == (True, "")      # one interval later, a bit early
    b.failed(0.98, reachable=False)                                  # delay 2: next attempt at 2.98
    attempt, why = b.should_attempt(1.99, lambda: False)
    assert not attempt and "next attempt in 1s" in why, why
    assert b.should_attempt(2.9, lambda: False) == (True, "")       # used to say "next attempt in 0s"


def test_backoff_does_not_hammer_a_server_that_refuses_logins() -> None:
    b = Backoff(interval_s=10, max_s=300)
    b.failed(0, reachable=True)   # port open, login refused
    b.failed(10, reachable=True)
    assert b.should_attempt(15, lambda: True)[0] is False           # port open is no news
    assert b.should_attempt(30, lambda: True) == (True, "")          # delay (20 s) elapsed


# -- health ----------------------------------------------------------------------------------------
def test_health_turns_unhealthy_after_three_intervals_without_success() -> None:
    h = Health(started=0)
    h.register("j", "a", 5)
    assert h.report(now=14)[0] is True
    assert h.report(now=16)[0] is False           # never succeeded, 3 intervals since start
    h.record("j", True, now=16)
    h.record("j", False, "boom", now=20)
    ok, body = h.report(now=30)
    assert ok and body["jobs"]["j"]["consecutive_failures"] == 1
    ok, body = h.report(now=31.5)
    assert not ok and body["status"] == "unhealthy" and body["jobs"]["j"]["last_error"] == "boom"


# -- metrics ---------------------------------------------------------------------------------------
def test_metric_names_are_sanitised_and_values_expire() -> None:
    assert metric_name("oldest_age_s") == "queueops_oldest_age_s"
    assert metric_name("x-y.z µ") == "queueops_x_y_z__"
    g = SnapshotGauges(reserved={"queueops_target_up"})
    g.update([row("depth", 3), row("target_up", 1), row("depth", None, "mail")], ttl_s=10, now=0)
    fams = {f.name: f for f in g.collect(now=5)}
    assert set(fams) == {"queueops_depth", "queueops_target_up_value"}
    assert [(s.labels, s.value) for s in fams["queueops_depth"].samples] == [({"target": "a", "queue": "jobs"}, 3)]
    assert list(g.collect(now=11)) == []


def test_service_metrics_render() -> None:
    from prometheus_client import generate_latest

    m = ServiceMetrics()
    m.snapshots.update([row("depth", 7)], ttl_s=60)
    m.observe_store(buffered=5, bound=100, dropped_total=3, ok=False)
    text = generate_latest(m.registry).decode()
    assert 'queueops_depth{queue="jobs",target="a"} 7.0' in text
    assert "queueops_store_dropped_rows_total 3.0" in text and "queueops_store_buffer_bound_rows 100.0" in text


# -- lake hours ------------------------------------------------------------------------------------
def test_hours_to_export_closed_not_exported_within_retention_and_changed() -> None:
    now = datetime(2026, 11, 21, 12, 0, 30, tzinfo=UTC)
    h = lambda hh: datetime(2026, 11, 21, hh, tzinfo=UTC)  # noqa: E731
    got = hours_to_export(first_row=h(8) + timedelta(minutes=17), exported={h(8), h(9)}, dirty={h(9), h(11), h(12)},
                          now=now, retention_days=14, close_grace_s=60)
    # 11:00-12:00 is not closed until 12:01 (grace); 9 changed; 12 is the current hour
    assert got == [(h(9), "changed"), (h(10), "new")]
    got = hours_to_export(first_row=h(8), exported=set(), dirty=set(), now=now + timedelta(minutes=1),
                          retention_days=14, close_grace_s=60)
    assert [x for x, _ in got] == [h(8), h(9), h(10), h(11)]
    # never older than retention: the store may hold only part of such an hour
    got = hours_to_export(first_row=h(0), exported=set(), dirty=set(), now=now, retention_days=0.25, close_grace_s=0)
    assert [x for x, _ in got] == [h(7), h(8), h(9), h(10), h(11)]  # 06:00-07:00 is partly past the cutoff
