"""Notifiers against a real local HTTP receiver: the JSON body, retries with a stable id, the
AlertManager persisting states and announcing each transition once, and one notification per
queue and cycle (the root cause first, then its symptoms; target-wide alerts apart), by webhook
and by log line alike."""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from queueops import config as config_mod
from queueops import judge
from queueops.alerts.evaluate import Transition
from queueops.alerts.manager import AlertManager
from queueops.alerts.notify import Notification, WebhookSender, group
from queueops.alerts.rules import Rule, effective_rules
from queueops.rows import SnapshotRow
from queueops.store import open_engine
from queueops.store.schema import alert_state

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
RULE = Rule("stuck", "stuck_leases", ">", 0.0)


def one(t: Transition) -> Notification:
    [n] = group([t])
    return n


class Receiver:
    """Answers 500 to the first ``fail`` requests, then 204; records every body."""

    def __init__(self, fail: int = 0):
        self.bodies: list[dict[str, Any]] = []
        self.fail = fail
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                outer.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(500 if len(outer.bodies) <= outer.fail else 204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_failed_delivery_is_retried_with_the_same_id() -> None:
    rx = Receiver(fail=2)
    results: list[tuple[str, bool]] = []
    sender = WebhookSender(rx.url, timeout=2, on_result=lambda n, ok, err: results.append((n.transitions[0].state, ok)),
                           delays=(0.05, 0.05, 0.05))
    try:
        sender.send(one(Transition(RULE, "lab", "lease", "firing", 3.0, T0, T0, "crit")))
        deadline = time.monotonic() + 10
        while not results and time.monotonic() < deadline:
            time.sleep(0.05)
        sender.close()
    finally:
        rx.close()
    assert len(rx.bodies) == 3 and len({b["id"] for b in rx.bodies}) == 1
    n = rx.bodies[0]
    assert (n["target"], n["queue"], n["queue_state"], n["firing"], n["resolved"]) == ("lab", "lease", "crit", 1, 0)
    assert n["summary"] == "lab/lease crit: 1 firing; first stuck"
    [b] = n["alerts"]
    assert (b["alert"], b["state"], b["target"], b["queue"], b["value"], b["condition"], b["cause"]) == (
        "stuck", "firing", "lab", "lease", 3.0, "stuck_leases > 0", False)
    assert "queueops act requeue --queue lease" in b["advice"]  # the judge's advice, as on the console
    assert results == [("firing", True)]


def test_a_receiver_that_never_answers_is_given_up_and_reported() -> None:
    results: list[tuple[str, bool, str]] = []
    sender = WebhookSender("http://127.0.0.1:9/", timeout=0.5, delays=(0.05,),
                           on_result=lambda n, ok, err: results.append((n.transitions[0].state, ok, err)))
    sender.send(one(Transition(RULE, "lab", "lease", "resolved", 0.0, T0, T0)))
    sender.close()
    assert results and results[0][:2] == ("resolved", False) and "URLError" in results[0][2]


def test_manager_announces_each_transition_once_and_keeps_state_across_restarts(tmp_path: Path) -> None:
    rx = Receiver()
    engine = open_engine(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        m = AlertManager([RULE], engine, webhook_url=rx.url)
        for s, v in [(0, 2), (1, 3), (2, 3)]:
            m.on_cycle([SnapshotRow(T0, "lab", "db", "lease", "stuck_leases", v)], T0 + timedelta(seconds=s))
        m.close()
        # a restart: the firing state is read back, so nothing is announced again...
        m2 = AlertManager([RULE], engine, webhook_url=rx.url)
        assert [s.state for s in m2.firing()] == ["firing"]
        m2.on_cycle([SnapshotRow(T0, "lab", "db", "lease", "stuck_leases", 1)], T0 + timedelta(seconds=3))
        # ...until it resolves, once
        for s in (4, 5):
            m2.on_cycle([SnapshotRow(T0, "lab", "db", "lease", "stuck_leases", 0)], T0 + timedelta(seconds=s))
        m2.close()
    finally:
        rx.close()
    assert [[(a["state"], a["value"]) for a in b["alerts"]] for b in rx.bodies] == [[("firing", 2.0)],
                                                                                   [("resolved", 0.0)]]
    with engine.connect() as conn:
        row = conn.execute(select(alert_state)).mappings().one()
    assert (row["rule"], row["queue"], row["state"], row["value"]) == ("stuck", "lease", "resolved", 0.0)
    assert row["notified_at"] is not None


# --- One notification per queue and cycle -------------------------------------------------------
# The lab's lock-hold fault in rows: a session holds 'jobs''s table (66 s into its transaction),
# two dequeues wait on it and three leases are stuck; 'mail' is deep; the target's oldest snapshot
# (no session named, so no root cause) passes an explicit target-wide rule. Every rule holds from
# the second cycle (the thresholds' hold is one 5 s interval; stuck_leases fires on its sample).
CFG = config_mod.parse({
    "schedule": {"fast_s": 5},
    "alerts": {"rules": [{"name": "snapshot-age", "metric": "oldest_snapshot_age_s", "op": ">=", "value": 60,
                          "severity": "warn"}]},
    "targets": [{"name": "a", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
    "queues": [{"name": q, "target": "a", "kind": "lease", "table": q, "key": "id", "lease_column": "taken_at"}
               for q in ("jobs", "mail")],
})


def lock_hold(on: bool, stuck: int = 0, snapshot_s: float = 0) -> list[SnapshotRow]:
    def r(queue: str, metric: str, value: float, note: object = "") -> SnapshotRow:
        return SnapshotRow(T0, "a", "d", queue, metric, value, note if isinstance(note, str) else json.dumps(note))

    holders = {"holders": [{"pid": 5, "mode": "ExclusiveLock", "xact_age_s": 66}]}
    return [r("", "oldest_snapshot_age_s", snapshot_s, {}), r("", "head_blockers", 0, []),
            r("jobs", "lock_blockers", 1 if on else 0, holders if on else "exact"),
            r("jobs", "lock_waiters", 2 if on else 0, {"pids": [8, 9]} if on else "exact"),
            r("jobs", "stuck_leases", stuck), r("jobs", "depth", 3),
            r("mail", "lock_blockers", 0, "exact"), r("mail", "lock_waiters", 0, "exact"),
            r("mail", "stuck_leases", 0), r("mail", "depth", 200_000 if on else 3)]


def test_one_cycle_sends_one_notification_per_queue_the_cause_first(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    rx = Receiver()
    engine = open_engine(f"sqlite:///{tmp_path / 'store.db'}")
    caplog.set_level(logging.INFO, logger="queueops.alerts")
    try:
        m = AlertManager(effective_rules(CFG), engine, webhook_url=rx.url)
        assert m.on_cycle(lock_hold(True, snapshot_s=59), T0) == []  # held for less than one interval
        fired = m.on_cycle(lock_hold(True, stuck=3, snapshot_s=61), T0 + timedelta(seconds=5))
        assert len(fired) == 7
        cleared = m.on_cycle(lock_hold(False), T0 + timedelta(seconds=10))  # the explicit rule: at once
        resolved = m.on_cycle(lock_hold(False), T0 + timedelta(seconds=75))  # the thresholds: 60 s clear
        assert [t.rule.name for t in cleared] == ["snapshot-age"] and len(resolved) == 6
        m.close()
    finally:
        rx.close()
    by_queue = {(b["queue"], b["at"]): b for b in rx.bodies}
    # at 5 s the firings of 3 groups (jobs, mail, the target apart); at 10 s the target's resolution,
    # at 75 s the two queues'
    assert len(rx.bodies) == len(by_queue) == 6
    at5, at10, at75 = (f"{(T0 + timedelta(seconds=s)).isoformat()}" for s in (5, 10, 75))
    jobs = by_queue[("jobs", at5)]
    assert [(a["alert"], a["state"], a["cause"]) for a in jobs["alerts"]] == [
        ("cause:table_lock:crit", "firing", True), ("cause:table_lock:warn", "firing", True),
        ("threshold:stuck_leases:crit", "firing", False), ("threshold:lock_waiters:warn", "firing", False)]
    assert (jobs["target"], jobs["queue_state"], jobs["firing"], jobs["resolved"]) == ("a", "crit", 4, 0)
    assert jobs["summary"] == "a/jobs crit: 4 firing; cause cause:table_lock:crit"
    assert jobs["id"] == f"a|jobs|{at5}" and all(a["queue_state"] == "crit" for a in jobs["alerts"])
    # the per-transition detail is kept: the cause's advice is its finding's, a symptom's its metric's
    assert jobs["alerts"][0]["advice"] == judge.advice("blocker", "jobs")
    assert jobs["alerts"][2]["advice"] == judge.metric_advice("stuck_leases", "jobs")
    assert jobs["alerts"][3]["condition"] == "lock_waiters >= 1" and jobs["alerts"][3]["value"] == 2.0
    mail = by_queue[("mail", at5)]
    assert [a["alert"] for a in mail["alerts"]] == ["threshold:depth:crit", "threshold:depth:warn"]
    wide = by_queue[("", at5)]  # the target-wide alert is a group of its own
    assert [(a["alert"], a["queue"]) for a in wide["alerts"]] == [("snapshot-age", "")]
    assert wide["summary"] == "a warn: 1 firing; first snapshot-age"
    assert by_queue[("", at10)]["resolved"] == 1
    gone = by_queue[("jobs", at75)]
    assert (gone["firing"], gone["resolved"], gone["queue_state"]) == (0, 4, "ok")
    assert [a["alert"] for a in gone["alerts"]][:2] == ["cause:table_lock:crit", "cause:table_lock:warn"]
    assert all(a["advice"] == "" for a in gone["alerts"])
    # The log line is the same notification: one line per queue and cycle, in the same order.
    lines = [rec.getMessage() for rec in caplog.records if rec.getMessage().startswith("ALERT ")]
    assert len(lines) == 6
    [line] = [x for x in lines if x.startswith("ALERT on a/jobs (queue crit): ")]
    assert line.index("FIRING cause:table_lock:crit [crit]") < line.index("FIRING threshold:lock_waiters:warn [warn]")
    assert "FIRING threshold:stuck_leases:crit [crit]: stuck_leases >= 1 (value 3)" in line
    assert "ALERT on a (queue warn): FIRING snapshot-age [warn]: oldest_snapshot_age_s >= 60 (value 61)" in lines
    assert [rec.levelno for rec in caplog.records if "RESOLVED cause:table_lock:crit" in rec.getMessage()] == [
        logging.INFO]
    with engine.connect() as conn:  # every transition of a delivered notification is marked notified
        states = conn.execute(select(alert_state)).mappings().all()
    assert len(states) == 7 and all(s["state"] == "resolved" and s["notified_at"] for s in states)
    engine.dispose()


def test_a_failed_delivery_is_counted_once_per_notification(tmp_path: Path) -> None:
    """What the service's queueops_alert_notifications_total counts: a notification per queue and
    cycle, whatever the number of its transitions."""
    outcomes: list[tuple[str, str, int, bool]] = []
    engine = open_engine(f"sqlite:///{tmp_path / 'store.db'}")
    m = AlertManager(effective_rules(CFG), engine, webhook_url="http://127.0.0.1:9/",
                     on_notified=lambda notifier, n, ok: outcomes.append((notifier, n.queue, len(n.transitions), ok)))
    m.webhook.delays = ()  # type: ignore[union-attr]  # give up at the first refusal
    m.on_cycle(lock_hold(True), T0)
    m.on_cycle(lock_hold(True, stuck=3), T0 + timedelta(seconds=5))
    m.close()
    assert sorted(outcomes) == [("log", "jobs", 4, True), ("log", "mail", 2, True),
                                ("webhook", "jobs", 4, False), ("webhook", "mail", 2, False)]
    assert m.notifications == {"webhook_ok": 0, "webhook_failed": 2, "log": 2}
    engine.dispose()


def test_group_orders_causes_then_symptoms_firing_then_resolved() -> None:
    cause = Rule("cause:x:warn", "m", ">", 0.0, severity="warn", finding="blocker")
    crit, warn = Rule("c", "m", ">", 0.0, severity="crit"), Rule("w", "m", ">", 0.0, severity="warn")
    ts = [Transition(warn, "t", "q", "firing", 1, T0, T0), Transition(crit, "t", "q", "resolved", 0, T0, T0),
          Transition(crit, "t", "p", "firing", 1, T0, T0), Transition(cause, "t", "q", "firing", 1, T0, T0),
          Transition(crit, "t", "", "firing", 1, T0, T0)]
    notes = group(ts)
    assert [(n.queue, [(t.rule.name, t.state) for t in n.transitions]) for n in notes] == [
        ("q", [("cause:x:warn", "firing"), ("w", "firing"), ("c", "resolved")]),
        ("p", [("c", "firing")]), ("", [("c", "firing")])]
