"""Notifiers against a real local HTTP receiver: the JSON body, retries with a stable id, and
the AlertManager persisting states and announcing each transition once."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqlalchemy import select

from queueops.alerts.evaluate import Transition
from queueops.alerts.manager import AlertManager
from queueops.alerts.notify import WebhookSender
from queueops.alerts.rules import Rule
from queueops.rows import SnapshotRow
from queueops.store import open_engine
from queueops.store.schema import alert_state

T0 = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
RULE = Rule("stuck", "stuck_leases", ">", 0.0)


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
    sender = WebhookSender(rx.url, timeout=2, on_result=lambda t, ok, err: results.append((t.state, ok)),
                           delays=(0.05, 0.05, 0.05))
    try:
        sender.send(Transition(RULE, "lab", "lease", "firing", 3.0, T0, T0))
        deadline = time.monotonic() + 10
        while not results and time.monotonic() < deadline:
            time.sleep(0.05)
        sender.close()
    finally:
        rx.close()
    assert len(rx.bodies) == 3 and len({b["id"] for b in rx.bodies}) == 1
    b = rx.bodies[0]
    assert (b["alert"], b["state"], b["target"], b["queue"], b["value"], b["condition"]) == (
        "stuck", "firing", "lab", "lease", 3.0, "stuck_leases > 0")
    assert "queueops act requeue --queue lease" in b["advice"]  # the judge's advice, as on the console
    assert results == [("firing", True)]


def test_a_receiver_that_never_answers_is_given_up_and_reported() -> None:
    results: list[tuple[str, bool, str]] = []
    sender = WebhookSender("http://127.0.0.1:9/", timeout=0.5, delays=(0.05,),
                           on_result=lambda t, ok, err: results.append((t.state, ok, err)))
    sender.send(Transition(RULE, "lab", "lease", "resolved", 0.0, T0, T0))
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
    assert [(b["state"], b["value"]) for b in rx.bodies] == [("firing", 2.0), ("resolved", 0.0)]
    with engine.connect() as conn:
        row = conn.execute(select(alert_state)).mappings().one()
    assert (row["rule"], row["queue"], row["state"], row["value"]) == ("stuck", "lease", "resolved", 0.0)
    assert row["notified_at"] is not None
