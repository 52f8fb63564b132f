"""benchmarks/soak.py's verdict on the webhook bodies it received, read from grouped notifications
(one body per queue and cycle, its transitions in ``alerts``: queueops.alerts.notify.payload). It
read a top-level ``alert`` / ``state`` after the grouping: 0 alerts fired, "every alert resolved"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from benchmarks.soak import alerts_summary
from queueops.alerts.evaluate import Transition
from queueops.alerts.notify import group, payload
from queueops.alerts.rules import Rule

T0 = datetime(2026, 11, 27, 1, 0, tzinfo=UTC)
CAUSE = Rule("cause:table_lock:crit", "lock_waiters", ">", 0.0, severity="crit", finding="table_lock")
STUCK = Rule("stuck_leases", "stuck_leases", ">", 0.0, severity="crit")


def _bodies(*cycles: list[Transition]) -> list[dict]:
    return [payload(n) for ts in cycles for n in group(ts)]


def test_fired_and_resolved_alerts_are_read_from_each_grouped_body() -> None:
    later = T0 + timedelta(minutes=2)
    fired = [Transition(CAUSE, "lab", "lease", "firing", 1.0, T0, T0), Transition(STUCK, "lab", "lease", "firing", 5.0, T0, T0),
             Transition(STUCK, "lab", "status", "firing", 2.0, T0, T0)]
    resolved = [Transition(CAUSE, "lab", "lease", "resolved", 0.0, later, T0),
                Transition(STUCK, "lab", "lease", "resolved", 0.0, later, T0)]
    got = alerts_summary(_bodies(fired, resolved), [])
    assert (got["notifications"], got["transitions"], got["alerts_fired"], got["distinct"]) == (3, 5, 3, 3)
    assert got["unresolved_at_end"] == ["stuck_leases on lab/status (value 2.0)"]
    assert got["every_alert_resolved"] is False
    everything = alerts_summary(_bodies(fired, resolved, [Transition(STUCK, "lab", "status", "resolved", 0.0, later, T0)]), [])
    assert everything["every_alert_resolved"] is True and everything["alerts_fired"] == 3


def test_a_body_without_alerts_fails_the_verdict() -> None:
    got = alerts_summary([{"id": "old", "alert": "stuck_leases", "state": "firing"}], [])
    assert got["unreadable_bodies"] == ["old"] and got["every_alert_resolved"] is False
