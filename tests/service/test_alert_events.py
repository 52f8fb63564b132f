"""The alert history (issue 32): every transition the manager announces is appended to
``alert_events`` with the states, and a firing alert's clearing time survives a restart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select

from queueops.alerts.manager import AlertManager
from queueops.alerts.rules import Rule
from queueops.rows import SnapshotRow
from queueops.store import open_engine
from queueops.store.schema import alert_events, alert_state

T0 = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)


def row(value: float) -> SnapshotRow:
    return SnapshotRow(T0, "a", "d", "jobs", "depth", value)


def test_transitions_go_to_alert_events_and_clearing_since_to_alert_state(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'store.db'}")
    rule = Rule("deep", "depth", ">=", 10.0, severity="warn", clear_for_s=30.0, clear_value=8.0)
    m = AlertManager([rule], engine, log_lines=False)
    m.on_cycle([row(12)], T0)
    m.on_cycle([row(3)], T0 + timedelta(seconds=10))
    with engine.connect() as conn:
        st = conn.execute(select(alert_state)).mappings().one()
    assert st["state"] == "firing" and st["clearing_since"] is not None
    m.close()
    again = AlertManager([rule], engine, log_lines=False)  # a restart: clearing goes on from 10 s
    assert again.on_cycle([row(3)], T0 + timedelta(seconds=25)) == []
    assert [t.state for t in again.on_cycle([row(2)], T0 + timedelta(seconds=41))] == ["resolved"]
    again.close()
    with engine.connect() as conn:
        events = conn.execute(select(alert_events).order_by(alert_events.c.id)).mappings().all()
    assert [(e["rule"], e["state"], e["value"], e["severity"], e["metric"]) for e in events] == [
        ("deep", "firing", 12.0, "warn", "depth"), ("deep", "resolved", 2.0, "warn", "depth")]
    assert events[1]["condition"] == "depth >= 10"
    engine.dispose()
