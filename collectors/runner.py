"""Run collectors against a target: one round trip per collector, whatever the number of queues.

The runner is the thin adapter between SQL files and snapshot rows. It never lets one failing
collector stop the others: a failure or a timeout becomes a :class:`~queueops.rows.StatusRow`
with the (masked) error, and the next collector runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from collectors.registry import COLLECTORS, Collector
from queueops import engine, sqlfiles
from queueops.config import Config, Queue, Target
from queueops.fragments import fragments_for, qualified_name
from queueops.rows import SnapshotRow, StatusRow, utcnow

# Exact counts are bounded: below the cap a count is exact (an index-only scan of at most `cap`
# entries); at the cap the collector reports the statistics' estimate instead and says so.
COUNT_CAP = 10_000


@dataclass
class CycleResult:
    rows: list[SnapshotRow] = field(default_factory=list)
    status: list[StatusRow] = field(default_factory=list)
    round_trips: int = 0


def queue_values(queue: Queue, dialect: str) -> dict[str, Any]:
    """Bound values every block may use (names of the queue and its table are values here)."""
    return {
        "queue": queue.name,
        "qualified_table": qualified_name(queue, dialect),
        "ready_values": list(queue.ready_values),
        "processing_values": list(queue.processing_values),
        "done_values": list(queue.done_values),
        "lease_timeout_s": float(queue.lease_timeout_s),
        "cap": COUNT_CAP,
        "watermark_buffer": queue.watermark.buffer if queue.watermark else 0,
    }


def build_statement(collector: Collector, target: Target, queues: Sequence[Queue]) -> sqlfiles.Statement | None:
    """The single statement that answers ``collector`` for every applicable queue of a target."""
    sqlf = sqlfiles.load(target.dialect, collector.name)
    if collector.scope == "target":
        return sqlf.render("main", {}, {"target": target.name})
    parts = []
    for q in queues:
        if not sqlf.has_block(q.kind):
            continue
        try:
            parts.append(sqlf.render(q.kind, fragments_for(q, target.dialect), queue_values(q, target.dialect)))
        except sqlfiles.MissingFragment:
            continue  # the queue does not declare what this metric needs: not applicable
    return sqlfiles.union_all(parts, collector.name)


def session_setup(target: Target) -> sqlfiles.Statement:
    """Short timeouts and a non-blocking isolation level for every collector session."""
    return sqlfiles.load(target.dialect, "session_collect").render(
        "main",
        {"lock_timeout_ms": str(int(target.lock_timeout_ms)),
         "statement_timeout_ms": str(int(target.statement_timeout_ms))},
        {"lock_timeout": f"{int(target.lock_timeout_ms)}ms",
         "statement_timeout": f"{int(target.statement_timeout_ms)}ms"},
    )


def _to_rows(raw: Iterable[dict[str, Any]], ts: datetime, target: str, database: str) -> list[SnapshotRow]:
    out = []
    for r in raw:
        value = r.get("value")
        out.append(SnapshotRow(ts, target, database, r.get("queue") or "", str(r["metric"]),
                               None if value is None else float(value), str(r.get("note") or "")))
    return out


def run_collectors(cfg: Config, target: Target, collectors: Sequence[Collector] | None = None,
                   conn: engine.Connection | None = None, ts: datetime | None = None) -> CycleResult:
    """Run ``collectors`` (default: all) for one target; never raises for a database problem."""
    collectors = list(collectors or COLLECTORS)
    ts = ts or utcnow()
    result = CycleResult()
    base = cfg.base_dir
    queues = cfg.queues_of(target.name)
    own = conn is None
    try:
        database = engine.database_name(target, base)
        if conn is None:
            conn = engine.connect(target, "collect", base)
            conn.execute(session_setup(target))
            result.round_trips += 1
    except Exception as exc:  # noqa: BLE001 - an unreachable target is data, not a crash
        err = engine.TargetError(target.name, str(exc)) if not isinstance(exc, engine.TargetError) else exc
        for c in collectors:
            result.status.append(StatusRow(ts, target.name, c.name, False, 0.0, 0, str(err)))
        return result
    try:
        for c in collectors:
            started = time.perf_counter()
            try:
                stmt = build_statement(c, target, queues)
                raw = [] if stmt is None else conn.execute(stmt)
                result.round_trips += stmt is not None
                rows = _to_rows(raw, ts, target.name, database)
                result.rows.extend(rows)
                result.status.append(StatusRow(ts, target.name, c.name, True,
                                               (time.perf_counter() - started) * 1000, len(rows)))
            except engine.TargetError as exc:
                result.round_trips += 1
                result.status.append(StatusRow(ts, target.name, c.name, False,
                                               (time.perf_counter() - started) * 1000, 0, str(exc), exc.timeout))
    finally:
        if own and conn is not None:
            conn.close()
    return result


def run_once(cfg: Config, collectors: Sequence[Collector] | None = None) -> CycleResult:
    """One cycle over every target of the config."""
    total = CycleResult()
    for target in cfg.targets:
        r = run_collectors(cfg, target, collectors)
        total.rows += r.rows
        total.status += r.status
        total.round_trips += r.round_trips
    return total


def sql_dir() -> Path:
    return Path(sqlfiles.__file__).resolve().parent.parent / "sql"
