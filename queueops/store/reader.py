"""Read the store back with UTC-aware timestamps (for the console, the lake and the tests).

Thin queries over :mod:`queueops.store.schema`; every ``ts`` is returned as an aware UTC
datetime whatever the backend (SQLite hands back naive ones, see :mod:`queueops.store.timeutil`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, Table, and_, func, select

from queueops.store.schema import collector_status, snapshots
from queueops.store.timeutil import to_utc

SNAPSHOT_COLUMNS = ("ts", "target", "database", "queue", "metric", "value", "note")
STATUS_COLUMNS = ("ts", "target", "collector", "ok", "duration_ms", "rows", "error", "timeout")


def _fix(row: dict[str, Any]) -> dict[str, Any]:
    if isinstance(row.get("ts"), datetime):
        row["ts"] = to_utc(row["ts"])
    return row


def rows_between(engine: Engine, table: Table, start: datetime, end: datetime, *,
                 columns: tuple[str, ...] | None = None, chunk: int = 50_000) -> Iterator[list[dict[str, Any]]]:
    """Rows with ``start <= ts < end`` ordered by time then insertion, in chunks (bounded memory)."""
    cols = columns or (SNAPSHOT_COLUMNS if table is snapshots else STATUS_COLUMNS)
    stmt = (select(*[table.c[c] for c in cols])
            .where(and_(table.c.ts >= to_utc(start), table.c.ts < to_utc(end)))
            .order_by(table.c.ts, table.c.id))
    with engine.connect() as conn:
        result = conn.execution_options(stream_results=True, yield_per=chunk).execute(stmt)
        for part in result.mappings().partitions(chunk):
            yield [_fix(dict(r)) for r in part]


def series(engine: Engine, target: str, queue: str, metric: str, since: datetime,
           until: datetime | None = None) -> list[dict[str, Any]]:
    """One metric of one queue over time: ``[{ts, value, note}]`` oldest first."""
    t = snapshots
    cond = [t.c.target == target, t.c.queue == queue, t.c.metric == metric, t.c.ts >= to_utc(since)]
    if until is not None:
        cond.append(t.c.ts < to_utc(until))
    with engine.connect() as conn:
        rows = conn.execute(select(t.c.ts, t.c.value, t.c.note).where(*cond).order_by(t.c.ts)).mappings()
        return [_fix(dict(r)) for r in rows]


def latest(engine: Engine, since: datetime) -> list[dict[str, Any]]:
    """The newest row of every (target, queue, metric) seen since ``since``."""
    t = snapshots
    newest = (select(t.c.target, t.c.queue, t.c.metric, func.max(t.c.ts).label("ts"))
              .where(t.c.ts >= to_utc(since)).group_by(t.c.target, t.c.queue, t.c.metric).subquery())
    stmt = (select(*[t.c[c] for c in SNAPSHOT_COLUMNS])
            .join(newest, and_(t.c.target == newest.c.target, t.c.queue == newest.c.queue,
                               t.c.metric == newest.c.metric, t.c.ts == newest.c.ts)))
    with engine.connect() as conn:
        return [_fix(dict(r)) for r in conn.execute(stmt).mappings()]


def status_since(engine: Engine, since: datetime, target: str | None = None) -> list[dict[str, Any]]:
    t = collector_status
    cond = [t.c.ts >= to_utc(since)]
    if target is not None:
        cond.append(t.c.target == target)
    with engine.connect() as conn:
        rows = conn.execute(select(*[t.c[c] for c in STATUS_COLUMNS]).where(*cond).order_by(t.c.ts, t.c.id))
        return [_fix(dict(r)) for r in rows.mappings()]
