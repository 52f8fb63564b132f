"""The service's side of alerts: states loaded from and saved to ``alert_state``, transitions
announced through the notifiers, one notification per queue and cycle (:func:`notify.group`).

The in-memory states are authoritative while the service runs (evaluation must not depend on
the store being up); changes are written through, and changes that could not be written are
retried on the next cycle. On start the states are read back, so a restarted service does not
announce again an alert that is already firing. Every transition is also appended to
``alert_events`` (the console's alert history), in the same transaction as the states.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from sqlalchemy import Engine, bindparam, delete, insert, select, update

from queueops import judge
from queueops.alerts import notify
from queueops.alerts.evaluate import AlertState, Key, Transition, evaluate
from queueops.alerts.rules import Rule, queue_states
from queueops.rows import SnapshotRow, utcnow
from queueops.store.schema import alert_events, alert_state
from queueops.store.timeutil import to_utc

log = logging.getLogger("queueops.alerts")

_KEY = (alert_state.c.rule == bindparam("k_rule"), alert_state.c.target == bindparam("k_target"),
        alert_state.c.queue == bindparam("k_queue"))
_DELETE = delete(alert_state).where(*_KEY)
_UPDATE = update(alert_state).where(*_KEY).values(
    state=bindparam("v_state"), since=bindparam("v_since"), value=bindparam("v_value"),
    notified_at=bindparam("v_notified_at"), clearing_since=bindparam("v_clearing_since"))


class AlertManager:
    def __init__(self, rules: Sequence[Rule], engine: Engine, *, webhook_url: str | None = None,
                 webhook_timeout_s: float = 5.0, log_lines: bool = True,
                 on_transition: Callable[[Transition], None] | None = None,
                 on_notified: Callable[[str, notify.Notification, bool], None] | None = None):
        self.rules = list(rules)
        self._by_name = {r.name: r for r in self.rules}
        self.engine = engine
        self.log_lines = log_lines
        self._lock = threading.Lock()
        self.states: dict[Key, AlertState] = {}
        self._unsaved: dict[Key, AlertState | None] = {}
        self._events: list[dict[str, object]] = []  # transitions not yet written to alert_events
        self.notifications: dict[str, int] = {"webhook_ok": 0, "webhook_failed": 0, "log": 0}
        self._on_transition = on_transition
        # After each notification a notifier sent: (notifier 'log' | 'webhook', notification, delivered).
        self._on_notified = on_notified
        self.webhook = (notify.WebhookSender(webhook_url, webhook_timeout_s, self._delivered)
                        if webhook_url else None)
        self._load()

    def _load(self) -> None:
        try:
            with self.engine.connect() as conn:
                for r in conn.execute(select(alert_state)).mappings():
                    s = AlertState(r["rule"], r["target"], r["queue"], r["state"], to_utc(r["since"]), r["value"],
                                   to_utc(r["notified_at"]) if r["notified_at"] else None,
                                   to_utc(r["clearing_since"]) if r.get("clearing_since") else None)
                    self.states[s.key] = s
        except Exception as exc:  # noqa: BLE001 - a store that is away: start from no state
            log.warning("alert states could not be read from the store (%s); starting with none", exc)

    def firing(self) -> list[AlertState]:
        with self._lock:
            return [s for s in self.states.values() if s.state == "firing"]

    def queue_state(self, target: str, queue: str) -> judge.State:
        """The queue's one state as its alerts see it (:func:`queueops.alerts.rules.queue_states`:
        the severities of its firing alerts, metrics' and root causes' alike)."""
        return self._queue_states().get((target, queue), "ok")

    def _queue_states(self) -> dict[tuple[str, str], judge.State]:
        return queue_states(((s.rule, s.target, s.queue, s.state) for s in self.states.values()), self._by_name)

    def on_cycle(self, rows: Sequence[SnapshotRow], now: datetime | None = None) -> list[Transition]:
        """Evaluate every rule on one cycle's rows; persist, log and queue notifications. Each
        transition carries its queue's state after the cycle (:meth:`queue_state`)."""
        now = now or utcnow()
        with self._lock:
            changes, transitions = evaluate(self.rules, rows, self.states, now)
            for key, st in changes.items():
                if st is None:
                    self.states.pop(key, None)
                else:
                    self.states[key] = st
                self._unsaved[key] = st
            after = self._queue_states()
            transitions = [replace(t, queue_state=after.get((t.target, t.queue), "ok")) for t in transitions]
            self._events += [{"at": t.at, "rule": t.rule.name, "target": t.target, "queue": t.queue,
                              "state": t.state, "severity": t.rule.severity, "metric": t.rule.metric,
                              "value": t.value, "active_since": t.active_since, "condition": t.rule.describe(),
                              "queue_state": t.queue_state}
                             for t in transitions]
            self._save()
        if self._on_transition is not None:
            for t in transitions:
                self._on_transition(t)
        for n in notify.group(transitions):  # one notification per queue of this cycle
            if self.log_lines:
                notify.log_line(n)
                self.notifications["log"] += 1
                self._mark_notified(n)  # the log line is a notification: alert_state says when
                if self._on_notified is not None:
                    self._on_notified("log", n, True)
            if self.webhook:
                self.webhook.send(n)
        return transitions

    def close(self) -> None:
        if self.webhook:
            self.webhook.close()
        with self._lock:
            self._save()

    def _delivered(self, n: notify.Notification, ok: bool, error: str) -> None:
        self.notifications["webhook_ok" if ok else "webhook_failed"] += 1
        if self._on_notified is not None:
            self._on_notified("webhook", n, ok)
        if ok:
            self._mark_notified(n)

    def _mark_notified(self, n: notify.Notification) -> None:
        """Record in ``alert_state.notified_at`` that each transition of ``n`` was announced (a log
        line written or a webhook delivered), unless its alert has moved on to another state since."""
        with self._lock:
            now = utcnow()
            for t in n.transitions:
                st = self.states.get(t.key)
                if st is not None and st.state == t.state:
                    st = AlertState(st.rule, st.target, st.queue, st.state, st.since, st.value, now,
                                    st.clearing_since)
                    self.states[t.key] = st
                    self._unsaved[t.key] = st
            self._save()

    def _save(self) -> None:
        """Write the changed states in one transaction: one batched DELETE and one batched UPDATE
        (a firing alert's value changes every cycle, and one statement per alert was most of a
        100-queue cycle's CPU), then an INSERT for each state the UPDATE did not find."""
        if not self._unsaved and not self._events:
            return
        try:
            with self.engine.begin() as conn:
                gone = [{"k_rule": k[0], "k_target": k[1], "k_queue": k[2]}
                        for k, st in self._unsaved.items() if st is None]
                kept = [{"k_rule": k[0], "k_target": k[1], "k_queue": k[2], "v_state": st.state, "v_since": st.since,
                         "v_value": st.value, "v_notified_at": st.notified_at,
                         "v_clearing_since": st.clearing_since}
                        for k, st in self._unsaved.items() if st is not None]
                if gone:
                    conn.execute(_DELETE, gone)
                if kept and conn.execute(_UPDATE, kept).rowcount != len(kept):
                    # New states among them (or a driver that does not count a batch): row by row.
                    for values in kept:
                        if not conn.execute(_UPDATE, values).rowcount:
                            conn.execute(insert(alert_state).values(
                                rule=values["k_rule"], target=values["k_target"], queue=values["k_queue"],
                                state=values["v_state"], since=values["v_since"], value=values["v_value"],
                                notified_at=values["v_notified_at"], clearing_since=values["v_clearing_since"]))
                if self._events:
                    conn.execute(insert(alert_events), self._events)
            self._unsaved.clear()
            self._events.clear()
        except Exception as exc:  # noqa: BLE001 - kept in memory, saved with the next cycle
            log.debug("alert states not saved yet (%s)", exc)
