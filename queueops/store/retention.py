"""Retention: delete snapshot and status rows older than ``store.retention_days``, in batches.

Small batches keep each transaction short, so the service's own writes (and SQLite's single
writer lock) never wait long behind a prune. The audit log is never pruned: it is the record of
what operators did. Alert states that resolved before the cutoff go too.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import Engine, delete, select

from queueops.store.schema import alert_events, alert_state, collector_status, snapshots
from queueops.store.timeutil import to_utc

log = logging.getLogger("queueops.store")


def prune(engine: Engine, retention_days: float, batch: int, now: datetime) -> dict[str, int]:
    """Delete rows older than ``now - retention_days``; return rows deleted per table (and batches)."""
    cutoff = to_utc(now) - timedelta(days=retention_days)
    out: dict[str, int] = {"batches": 0}
    for table in (snapshots, collector_status):
        total = 0
        while True:
            ids = select(table.c.id).where(table.c.ts < cutoff).limit(batch).scalar_subquery()
            with engine.begin() as conn:
                n = conn.execute(delete(table).where(table.c.id.in_(ids))).rowcount or 0
            out["batches"] += 1
            total += n
            if n < batch:
                break
        out[table.name] = total
    with engine.begin() as conn:
        out["alert_state"] = conn.execute(delete(alert_state).where(
            alert_state.c.state == "resolved", alert_state.c.since < cutoff)).rowcount or 0
        out["alert_events"] = conn.execute(delete(alert_events).where(alert_events.c.at < cutoff)).rowcount or 0
    if out["snapshots"] or out["collector_status"]:
        log.info("pruned rows older than %s: %s", cutoff.isoformat(), out)
    return out
