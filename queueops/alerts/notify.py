"""Notifiers: a JSON webhook (urllib, no extra dependency) and a log line.

Webhook deliveries run on one background thread in transition order, so a slow or dead
receiver never delays a collection cycle. A failed delivery is retried a few times with a
growing pause; every payload carries an ``id`` that is the same on each retry, so a receiver can
drop a duplicate if a response got lost after it had been handled.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from queueops import judge, secrets
from queueops.alerts.evaluate import Transition

log = logging.getLogger("queueops.alerts")

RETRY_DELAYS_S = (1.0, 3.0, 10.0, 30.0)


def payload(t: Transition) -> dict[str, Any]:
    return {
        "id": f"{t.rule.name}|{t.target}|{t.queue}|{t.state}|{t.at.isoformat()}",
        "alert": t.rule.name,
        "state": t.state,
        "severity": t.rule.severity,
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


def _advice(t: Transition) -> str:
    """The judge's advice for the alert's finding (a root cause), else for its metric's rule."""
    if t.rule.finding in judge.RULES:
        return judge.advice(t.rule.finding, t.queue)
    return judge.metric_advice(t.rule.metric, t.queue)


def log_line(t: Transition) -> None:
    """One line per transition: WARNING when firing, INFO when resolved."""
    level = logging.WARNING if t.state == "firing" else logging.INFO
    where = f"{t.target}/{t.queue}" if t.queue else t.target
    state = f"; queue {t.queue_state}" if t.queue_state else ""
    log.log(level, "ALERT %s %s [%s] on %s: %s (value %s%s)", t.state.upper(), t.rule.name, t.rule.severity,
            where, t.rule.describe(), "n/a" if t.value is None else f"{t.value:g}", state)


def post_json(url: str, body: dict[str, Any], timeout: float) -> None:
    data = json.dumps(body, default=str).encode()
    req = urllib.request.Request(url, data=data, method="POST",
                                 headers={"Content-Type": "application/json", "User-Agent": "queueops"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - the operator's configured URL
        if resp.status >= 300:
            raise urllib.error.HTTPError(url, resp.status, resp.reason, resp.headers, None)


class WebhookSender:
    """Deliver payloads in order on one daemon thread; ``on_result(transition, ok, error)`` after each."""

    def __init__(self, url: str, timeout: float,
                 on_result: Callable[[Transition, bool, str], None] | None = None,
                 delays: tuple[float, ...] = RETRY_DELAYS_S):
        self.url = url
        self.timeout = timeout
        self.on_result = on_result
        self.delays = delays
        self._q: queue.Queue[Transition | None] = queue.Queue()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="queueops-webhook", daemon=True)
        self._thread.start()

    def send(self, t: Transition) -> None:
        self._q.put(t)

    def close(self, timeout: float = 10.0) -> None:
        """Deliver what is queued (retries cut short), then stop."""
        self._stopping.set()
        self._q.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            t = self._q.get()
            if t is None:
                return
            self._deliver(t)

    def _deliver(self, t: Transition) -> None:
        body = payload(t)
        error = ""
        for attempt in range(len(self.delays) + 1):
            try:
                post_json(self.url, body, self.timeout)
                if self.on_result:
                    self.on_result(t, True, "")
                return
            except Exception as exc:  # noqa: BLE001 - a receiver problem is logged, never raised
                error = secrets.mask(f"{type(exc).__name__}: {exc}")
            if attempt < len(self.delays) and not self._stopping.wait(self.delays[attempt]):
                continue
            break
        log.error("webhook delivery of %s %s failed: %s", body["alert"], body["state"], error)
        if self.on_result:
            self.on_result(t, False, error)
