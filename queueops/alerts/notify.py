"""Notifiers: a JSON webhook (urllib, no extra dependency) and a log line, one notification per
queue and cycle.

One fault pages several rules at once (a session holding a queue's table: the cause and its
symptoms, lock waiters, stuck leases, the oldest age), and a notification per transition woke
the on-call engineer six times for one problem (issue 32). :func:`group` makes a cycle's
transitions one :class:`Notification` per (target, queue), the root causes first, and each
notifier sends that: one webhook body listing every transition (:func:`payload`), one log line.
Target-wide alerts (queue ``''``) are a group of their own.

Webhook deliveries run on one background thread in order, so a slow or dead receiver never
delays a collection cycle. A failed delivery is retried a few times with a growing pause; every
payload carries an ``id`` that is the same on each retry, so a receiver can drop a duplicate if a
response got lost after it had been handled.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from queueops import judge, secrets
from queueops.alerts.evaluate import Transition

log = logging.getLogger("queueops.alerts")

RETRY_DELAYS_S = (1.0, 3.0, 10.0, 30.0)


@dataclass(frozen=True)
class Notification:
    """One queue's transitions of one cycle, announced together."""

    target: str
    queue: str             # '' for target-wide alerts
    at: datetime
    queue_state: str       # the queue's one state after the cycle (every transition of it carries it)
    transitions: tuple[Transition, ...]  # root causes first, then symptoms; firing before resolved

    @property
    def id(self) -> str:
        return f"{self.target}|{self.queue}|{self.at.isoformat()}"

    @property
    def firing(self) -> int:
        return sum(t.state == "firing" for t in self.transitions)


def _order(t: Transition) -> tuple[int, int, int]:
    """Causes before symptoms, then firing before resolved, then crit before warn."""
    return (0 if t.rule.is_cause else 1, 0 if t.state == "firing" else 1, 0 if t.rule.severity == "crit" else 1)


def group(transitions: Iterable[Transition]) -> list[Notification]:
    """One notification per (target, queue) of a cycle's transitions, in the order each queue first
    appears; within one, the root causes' transitions first (:attr:`Rule.is_cause`), then the
    symptoms', each kind firing before resolved and crit before warn, otherwise in the rules' order."""
    by_queue: dict[tuple[str, str], list[Transition]] = {}
    for t in transitions:
        by_queue.setdefault((t.target, t.queue), []).append(t)
    out = []
    for (target, q), ts in by_queue.items():
        ts.sort(key=_order)  # stable: the rules' order within each rank
        out.append(Notification(target, q, ts[0].at, ts[0].queue_state, tuple(ts)))
    return out


def alert_payload(t: Transition) -> dict[str, Any]:
    """One transition's detail, as an element of a notification's ``alerts``."""
    return {
        "id": f"{t.rule.name}|{t.target}|{t.queue}|{t.state}|{t.at.isoformat()}",
        "alert": t.rule.name,
        "state": t.state,
        "severity": t.rule.severity,
        "cause": t.rule.is_cause,
        "target": t.target,
        "queue": t.queue,
        "metric": t.rule.metric,
        "condition": t.rule.describe(),
        "value": t.value,
        "for_s": t.rule.for_s,
        "at": t.at.isoformat(),
        "active_since": t.active_since.isoformat(),
        "source": t.rule.source,
        "advice": _advice(t) if t.state == "firing" else "",
        "queue_state": t.queue_state,
    }


def payload(n: Notification) -> dict[str, Any]:
    """The webhook body: the queue, its state after the cycle, a one-line summary, the counts and
    every transition's detail (:func:`alert_payload`) in :func:`group`'s order."""
    return {
        "id": n.id,
        "target": n.target,
        "queue": n.queue,
        "at": n.at.isoformat(),
        "queue_state": n.queue_state,
        "summary": summary(n),
        "firing": n.firing,
        "resolved": len(n.transitions) - n.firing,
        "alerts": [alert_payload(t) for t in n.transitions],
    }


def _advice(t: Transition) -> str:
    """The judge's advice for the alert's finding (a root cause), else for its metric's rule."""
    if t.rule.finding in judge.RULES:
        return judge.advice(t.rule.finding, t.queue)
    return judge.metric_advice(t.rule.metric, t.queue)


def _where(n: Notification) -> str:
    return f"{n.target}/{n.queue}" if n.queue else n.target


def _one(t: Transition) -> str:
    value = "n/a" if t.value is None else f"{t.value:g}"
    return f"{t.state.upper()} {t.rule.name} [{t.rule.severity}]: {t.rule.describe()} (value {value})"


def summary(n: Notification) -> str:
    """The notification in one line: 'lab/lease crit: 3 firing, 1 resolved; cause cause:table_lock:warn'
    (its first transition's rule, named 'cause' when it is a root cause's)."""
    counts = ", ".join(f"{k} {w}" for k, w in ((n.firing, "firing"), (len(n.transitions) - n.firing, "resolved"))
                       if k)
    state = f" {n.queue_state}" if n.queue_state else ""
    first = n.transitions[0].rule
    return f"{_where(n)}{state}: {counts}; {'cause' if first.is_cause else 'first'} {first.name}"


def log_line(n: Notification) -> None:
    """One line per notification, WARNING when anything fires, INFO when all resolved: the queue,
    its state, then each transition in the notification's order, separated by '; '."""
    level = logging.WARNING if n.firing else logging.INFO
    state = f" (queue {n.queue_state})" if n.queue_state else ""
    log.log(level, "ALERT on %s%s: %s", _where(n), state, "; ".join(_one(t) for t in n.transitions))


def post_json(url: str, body: dict[str, Any], timeout: float) -> None:
    data = json.dumps(body, default=str).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "queueops"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the operator's configured URL
        if resp.status >= 300:
            raise urllib.error.HTTPError(url, resp.status, resp.reason, resp.headers, None)


class WebhookSender:
    """Deliver notifications in order on one daemon thread; ``on_result(notification, ok, error)`` after each."""

    def __init__(self, url: str, timeout: float,
                 on_result: Callable[[Notification, bool, str], None] | None = None,
                 delays: tuple[float, ...] = RETRY_DELAYS_S):
        self.url = url
        self.timeout = timeout
        self.on_result = on_result
        self.delays = delays
        self._q: queue.Queue[Notification | None] = queue.Queue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="queueops-webhook", daemon=True)
        self._thread.start()

    def send(self, n: Notification) -> None:
        self._q.put(n)

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued (retries cut short), then stop."""
        self._stopping.set()
        self._q.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            n = self._q.get()
            if n is None:
                return
            self._deliver(n)

    def _deliver(self, n: Notification) -> None:
        body = payload(n)
        error = ""
        for attempt in range(len(self.delays) + 1):
            try:
                post_json(self.url, body, self.timeout)
                if self.on_result:
                    self.on_result(n, True, "")
                return
            except Exception as exc:  # noqa: BLE001 - a receiver problem is logged, never raised
                error = secrets.mask(f"{type(exc).__name__}: {exc}")
            if attempt < len(self.delays) and not self._stopping.wait(self.delays[attempt]):
                continue
            break
        log.error("webhook delivery of %s failed: %s", body["summary"], error)
        if self.on_result:
            self.on_result(n, False, error)
