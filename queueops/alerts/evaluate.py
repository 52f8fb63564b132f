"""The alert state machine, as a pure function of (rules, one cycle's rows, previous states, now).

States per (rule, target, queue): absent -> ``pending`` (condition true, ``for`` not yet elapsed)
-> ``firing`` -> ``resolved``. A firing alert whose condition stops holding resolves only once it
has stayed clear for the rule's ``clear_for_s`` (``clearing_since`` says since when) and, with a
``clear_value``, only while the value is past that line: a value between the two lines, or a
condition true again, keeps it firing and starts the clearing count anew (hysteresis). Notifications happen on exactly two transitions: to ``firing``
and from ``firing`` to ``resolved``. A pending condition that clears before its ``for`` elapses
just disappears (nothing was announced). A metric missing from the cycle (its collector failed,
or belongs to another cadence) changes nothing: no data is not "resolved".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from queueops import causes
from queueops.alerts.rules import Rule
from queueops.rows import SnapshotRow

Key = tuple[str, str, str]  # rule name, target, queue


@dataclass(frozen=True)
class AlertState:
    rule: str
    target: str
    queue: str
    state: str  # pending | firing | resolved
    since: datetime
    value: float | None
    notified_at: datetime | None = None
    clearing_since: datetime | None = None  # firing, but its condition has been clear since then

    @property
    def key(self) -> Key:
        return (self.rule, self.target, self.queue)


@dataclass(frozen=True)
class Transition:
    rule: Rule
    target: str
    queue: str
    state: str            # firing | resolved
    value: float | None
    at: datetime
    active_since: datetime  # when the condition was first seen (start of pending/firing)
    queue_state: str = ""   # the queue's one state after this cycle (judge.queue_state of its firing alerts)

    @property
    def key(self) -> Key:
        return (self.rule.name, self.target, self.queue)


def evaluate(rules: Iterable[Rule], rows: Iterable[SnapshotRow], states: Mapping[Key, AlertState],
             now: datetime) -> tuple[dict[Key, AlertState | None], list[Transition]]:
    """Return the states that changed (``None`` = delete) and the transitions to announce. The
    cycle's rows are judged together with the root-cause rows derived from them
    (:func:`queueops.causes.cause_rows`)."""
    rows = list(rows)
    latest: dict[tuple[str, str, str], float] = {}
    for r in (*rows, *causes.cause_rows(rows)):
        if r.value is not None:
            latest[(r.target, r.queue, r.metric)] = r.value
    # Each rule reads only the rows it applies to: its metric's, and of its queues when it names
    # some (the judge's thresholds are a rule per queue: rules x rows was most of a 100-queue
    # cycle's CPU). In the rows' order, as a scan of all of them would visit them.
    by_metric: dict[str, list[tuple[int, str, str, float]]] = {}
    by_queue: dict[tuple[str, str], list[tuple[int, str, str, float]]] = {}
    for i, ((target, queue, metric), value) in enumerate(latest.items()):
        entry = (i, target, queue, value)
        by_metric.setdefault(metric, []).append(entry)
        by_queue.setdefault((metric, queue), []).append(entry)

    def rows_of(rule: Rule) -> Iterable[tuple[int, str, str, float]]:
        if not rule.queues:
            return by_metric.get(rule.metric, ())
        if len(rule.queues) == 1:
            return by_queue.get((rule.metric, next(iter(rule.queues))), ())
        return sorted(e for q in rule.queues for e in by_queue.get((rule.metric, q), ()))

    changes: dict[Key, AlertState | None] = {}
    transitions: list[Transition] = []
    for rule in rules:
        for _, target, queue, value in rows_of(rule):
            key = (rule.name, target, queue)
            prev = states.get(key)
            guards_ok = rule.guards_hold(lambda m, t=target, q=queue: latest.get((t, q, m)))
            holds = rule.holds(value) and guards_ok
            current = prev.state if prev else None
            if holds:
                if current in (None, "resolved"):
                    if rule.for_s <= 0:
                        changes[key] = AlertState(rule.name, target, queue, "firing", now, value)
                        transitions.append(Transition(rule, target, queue, "firing", value, now, now))
                    else:
                        changes[key] = AlertState(rule.name, target, queue, "pending", now, value)
                elif current == "pending":
                    assert prev is not None
                    if (now - prev.since).total_seconds() >= rule.for_s:
                        changes[key] = AlertState(rule.name, target, queue, "firing", now, value)
                        transitions.append(Transition(rule, target, queue, "firing", value, now, prev.since))
                    elif prev.value != value:
                        changes[key] = replace(prev, value=value)
                elif current == "firing" and prev is not None and (prev.value != value or prev.clearing_since):
                    changes[key] = replace(prev, value=value, clearing_since=None)
            else:
                if current == "pending":
                    changes[key] = None
                elif current == "firing":
                    assert prev is not None
                    if guards_ok and rule.still_active(value):  # between the lines: still firing
                        if prev.value != value or prev.clearing_since:
                            changes[key] = replace(prev, value=value, clearing_since=None)
                        continue
                    clearing = prev.clearing_since or now
                    if (now - clearing).total_seconds() >= rule.clear_for_s:
                        changes[key] = AlertState(rule.name, target, queue, "resolved", now, value)
                        transitions.append(Transition(rule, target, queue, "resolved", value, now, prev.since))
                    elif prev.value != value or prev.clearing_since != clearing:
                        changes[key] = replace(prev, value=value, clearing_since=clearing)
    return changes, transitions
