"""Alert hysteresis (issue 32, item 5): a firing alert resolves only after its condition has been
clear for ``clear_for_s``, and with a ``clear_value`` only once the value is past that line; the
threshold rules get both by default, so a metric hovering at its line fires once, not every cycle.
Pure: the state machine and the rules from config, no database, no clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from queueops import config as config_mod
from queueops.alerts.evaluate import AlertState, evaluate
from queueops.alerts.rules import effective_rules
from queueops.rows import SnapshotRow

T0 = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
BASE = {
    "targets": [{"name": "a", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
    "queues": [{"name": "jobs", "target": "a", "kind": "lease", "table": "jobs", "key": "id",
                "lease_column": "taken_at", "thresholds": {"depth": {"warn": 10, "crit": 100}}}],
}


def cfg(**alerts: object) -> config_mod.Config:
    return config_mod.parse({**BASE, "alerts": alerts})


def row(metric: str, value: float | None, queue: str = "jobs") -> SnapshotRow:
    return SnapshotRow(T0, "a", "d", queue, metric, value)


def run(rules, cycles):  # noqa: ANN001, ANN202 - [(seconds, rows)] -> transitions, states
    states: dict = {}
    out = []
    for sec, rows in cycles:
        changes, transitions = evaluate(rules, rows, states, T0 + timedelta(seconds=sec))
        for k, v in changes.items():
            if v is None:
                states.pop(k, None)
            else:
                states[k] = v
        out += [(sec, t.rule.name, t.state, t.value) for t in transitions]
    return out, states


def explicit(**rule: object) -> list:
    return effective_rules(cfg(thresholds=False, rules=[{"metric": "depth", "op": ">=", "value": 10, **rule}]))


def test_a_flapping_metric_fires_once_and_resolves_once_after_clear_for() -> None:
    rules = explicit(name="deep", clear_for_s=60)
    # on, off, on, off every 5 s for a minute, then off for good
    flaps = [(s, [row("depth", 12 if (s // 5) % 2 == 0 else 3)]) for s in range(0, 60, 5)]
    quiet = [(s, [row("depth", 2)]) for s in range(60, 200, 5)]
    transitions, states = run(rules, flaps + quiet)
    # the last time the condition held was at 50 s; clear from 55 s; resolved 60 s later
    assert transitions == [(0, "deep", "firing", 12), (115, "deep", "resolved", 2)]
    assert states[("deep", "a", "jobs")].state == "resolved"


def test_without_hysteresis_the_same_metric_flaps_every_cycle() -> None:
    """The behaviour issue 32 measured (lock_waiters flapping 4 times in 5 minutes): the control."""
    rules = explicit(name="deep")
    flaps = [(s, [row("depth", 12 if (s // 5) % 2 == 0 else 3)]) for s in range(0, 60, 5)]
    transitions, _ = run(rules, flaps)
    assert [t[2] for t in transitions] == ["firing", "resolved"] * 6


def test_clear_value_keeps_it_firing_between_the_lines() -> None:
    rules = explicit(name="deep", clear_value=8)
    transitions, states = run(rules, [(0, [row("depth", 11)]), (5, [row("depth", 9)]), (10, [row("depth", 10)]),
                                      (15, [row("depth", 8.5)]), (20, [row("depth", 7)])])
    assert transitions == [(0, "deep", "firing", 11), (20, "deep", "resolved", 7)]
    assert states[("deep", "a", "jobs")].value == 7


def test_the_clearing_count_starts_anew_when_the_value_comes_back() -> None:
    rules = explicit(name="deep", clear_value=8, clear_for_s=30)
    cycles = [(0, [row("depth", 11)]), (10, [row("depth", 2)]), (30, [row("depth", 2)]),
              (35, [row("depth", 9)]),  # back between the lines: clearing restarts
              (40, [row("depth", 2)]), (65, [row("depth", 2)]), (70, [row("depth", 1)])]
    transitions, states = run(rules, cycles)
    assert transitions == [(0, "deep", "firing", 11), (70, "deep", "resolved", 1)]


def test_clearing_is_kept_in_the_state_and_a_missing_metric_changes_nothing() -> None:
    rules = explicit(name="deep", clear_for_s=30)
    transitions, states = run(rules, [(0, [row("depth", 11)]), (10, [row("depth", 1)]), (20, [row("age", 1)])])
    st = states[("deep", "a", "jobs")]
    assert st.state == "firing" and st.clearing_since == T0 + timedelta(seconds=10)
    # a restarted service reads the state back and resolves on time, not 30 s after its restart
    prev = {st.key: AlertState(st.rule, st.target, st.queue, st.state, st.since, st.value, None, st.clearing_since)}
    _, more = evaluate(rules, [row("depth", 0)], prev, T0 + timedelta(seconds=40))
    assert [(t.state, t.active_since) for t in more] == [("resolved", T0)]


def test_threshold_rules_have_hysteresis_by_default() -> None:
    rules = {r.name: r for r in effective_rules(cfg()) if r.metric == "depth"}
    warn = rules["threshold:depth:warn"]
    assert (warn.clear_for_s, warn.clear_value) == (60.0, 8.0)
    assert rules["threshold:depth:crit"].clear_value == 80.0
    drift = next(r for r in effective_rules(cfg()) if r.metric == "watermark_drift")
    assert (drift.op, drift.value, drift.clear_value) == ("<", 0.0, 0.0)
    # lock_waiters (warn 1) at 1 and 0 every other 5 s sample: never two samples in a row, never paged;
    # without the hold it fires once, not every cycle (hysteresis)
    flaps = [(s, [row("lock_waiters", float((s // 5) % 2 == 0))]) for s in range(0, 300, 5)]
    lw = [r for r in effective_rules(cfg()) if r.metric == "lock_waiters" and r.severity == "warn"]
    assert run(lw, flaps)[0] == []
    lw = [r for r in effective_rules(cfg(thresholds_for_s=0)) if r.metric == "lock_waiters" and r.severity == "warn"]
    assert [t[2] for t in run(lw, flaps)[0]] == ["firing"]


def test_threshold_rules_hold_for_one_interval_by_default_stuck_leases_do_not() -> None:
    rules = {(r.metric, r.severity): r for r in effective_rules(cfg()) if r.queues == frozenset({"jobs"})}
    assert rules[("depth", "warn")].for_s == 15.0  # [schedule] fast_s: two consecutive samples
    assert rules[("fragmentation_pct", "warn")].for_s == 300.0  # a slow collector's interval
    assert rules[("stuck_leases", "crit")].for_s == 0.0  # red on the console's sample
    assert {r.for_s for r in effective_rules(cfg(thresholds_for_s=7))} == {7.0}
    # a one-sample blip (the due-queue alert that fired and resolved within 5 s) is not paged
    depth = [rules[("depth", "warn")]]
    assert run(depth, [(0, [row("depth", 50)]), (5, [row("depth", 2)]), (15, [row("depth", 2)])])[0] == []
    assert [t[2] for t in run(depth, [(0, [row("depth", 50)]), (15, [row("depth", 50)])])[0]] == ["firing"]


def test_defaults_can_be_switched_off() -> None:
    rules = {r.name: r for r in effective_rules(cfg(thresholds_clear_for_s=0, thresholds_clear_margin=0))
             if r.metric == "depth"}
    assert (rules["threshold:depth:warn"].clear_for_s, rules["threshold:depth:warn"].clear_value) == (0.0, 10.0)


@pytest.mark.parametrize(("rule", "message"), [
    ({"op": ">=", "value": 10, "clear_value": 12}, "must not be above value"),
    ({"op": "<", "value": 0, "clear_value": -1}, "must not be below value"),
    ({"op": "==", "value": 1, "clear_value": 0}, "needs an ordering op"),
    ({"op": ">", "value": 1, "clear_for_s": -1}, "clear_for_s"),
])
def test_a_clear_value_on_the_wrong_side_is_refused(rule: dict, message: str) -> None:
    with pytest.raises(config_mod.ConfigError, match=message):
        cfg(rules=[{"metric": "depth", **rule}])
