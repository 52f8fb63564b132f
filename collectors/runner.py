"""Run collectors against a target: one round trip per collector, whatever the number of queues.

The runner is the thin adapter between SQL files and snapshot rows. It never lets one failing
collector stop the others: a failure or a timeout becomes a :class:`~queueops.rows.StatusRow`
with the (masked) error, and the next collector runs.

Each collector is its own short statement on an autocommit connection (PostgreSQL) or with
autocommit and READ UNCOMMITTED (SQL Server). A statement cancelled by ``lock_timeout`` or
``statement_timeout`` ends only that statement: there is no open transaction to poison, so the
next collector runs on the same connection at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from collectors.counters import CounterRates
from collectors.registry import COLLECTORS, Collector
from queueops import engine, sqlfiles
from queueops.config import Config, Queue, Target
from queueops.fragments import fragments_for, qualified_name
from queueops.rows import SnapshotRow, StatusRow, utcnow

# Exact counts are bounded: below the cap a count is exact (an index-only scan of at most `cap`
# entries); at the cap the collector reports the statistics' estimate instead and says so.
# 1,000 entries cost ~0.2-0.4 ms per count; 10,000 cost ~2-4 ms, which for 100 queues of a few
# counts each made one cycle ~1 s (benchmarks/collect_cycle.py): not "every few seconds".
COUNT_CAP = 1_000
# A table this small (pg_class.relpages, 8 kB pages: 1 MB) is read whole even without the index
# a collector would like: cheaper than telling the operator to add one.
SMALL_TABLE_PAGES = 128


@dataclass
class CycleResult:
    rows: list[SnapshotRow] = field(default_factory=list)
    status: list[StatusRow] = field(default_factory=list)
    round_trips: int = 0


def _text(values: Iterable[Any]) -> list[str]:
    return [str(v) for v in values]


def queue_values(queue: Queue, dialect: str) -> dict[str, Any]:
    """Bound values every block may use (names of the queue, its table and columns are values here).

    Catalog lookups (``to_regclass``, ``pg_stats``, ``OBJECT_ID``) take names as *values*, so a
    hostile-looking name is data, never SQL text.
    """
    return {
        "queue": queue.name,
        "qualified_table": qualified_name(queue, dialect),
        "schema_name": queue.schema_ or ("public" if dialect == "postgresql" else "dbo"),
        "table_name": queue.table,
        "key_name": queue.key,
        "status_name": queue.status_column or "",
        "lease_name": queue.lease_column or "",
        "due_name": queue.due_column or "",
        "error_name": queue.error_column or "",
        "ready_values": list(queue.ready_values),
        "processing_values": list(queue.processing_values),
        "done_values": list(queue.done_values),
        "ready_values_text": _text(queue.ready_values),
        "processing_values_text": _text(queue.processing_values),
        "done_values_text": _text(queue.done_values),
        "lease_timeout_s": float(queue.lease_timeout_s),
        "cap": COUNT_CAP,
        "small_pages": SMALL_TABLE_PAGES,
        "watermark_buffer": queue.watermark.buffer if queue.watermark else 0,
    }


def target_lists(queues: Sequence[Queue], dialect: str) -> dict[str, list[str]]:
    """Every queue of a target as aligned lists of bound values (for ``all`` and ``prelude`` blocks)."""
    vals = [queue_values(q, dialect) for q in queues]
    return {
        "queue_names": [v["queue"] for v in vals],
        "queue_tables": [v["qualified_table"] for v in vals],
        "schema_names": [v["schema_name"] for v in vals],
        "table_names": [v["table_name"] for v in vals],
        "key_names": [v["key_name"] for v in vals],
        "status_names": [v["status_name"] for v in vals],
        "lease_names": [v["lease_name"] for v in vals],
        "due_names": [v["due_name"] for v in vals],
        "error_names": [v["error_name"] for v in vals],
    }


def _render_queue(sqlf: sqlfiles.SqlFile, queue: Queue, dialect: str) -> sqlfiles.Statement | None:
    """The block for this queue: its kind's, else ``<kind>_basic``, else ``any``; None if none applies."""
    frags = fragments_for(queue, dialect)
    values = queue_values(queue, dialect)
    for block in (queue.kind, f"{queue.kind}_basic", "any"):
        if not sqlf.has_block(block):
            continue
        try:
            return sqlf.render(block, frags, values)
        except sqlfiles.MissingFragment:
            continue  # the queue does not declare what this block needs: try the next one
    return None


def build_statement(collector: Collector, target: Target, queues: Sequence[Queue]) -> sqlfiles.Statement | None:
    """The single statement that answers ``collector`` for every applicable queue of a target."""
    sqlf = sqlfiles.load(target.dialect, collector.name)
    if collector.scope == "target":
        return sqlf.render("main", {}, {"target": target.name})
    if sqlf.has_block("all"):
        # One statement over every queue at once (e.g. one read of pg_locks for all tables).
        if not queues:
            return None
        return sqlf.render("all", {}, target_lists(queues, target.dialect))
    parts = [s for q in queues if (s := _render_queue(sqlf, q, target.dialect)) is not None]
    joined = sqlfiles.union_all(parts, collector.name)
    if joined is None or not sqlf.has_block("prelude"):
        return joined
    # A 'prelude' block (a WITH clause) does the catalog and statistics lookups for every queue
    # of the target once; the per-queue blocks read its rows by queue name. Planning those
    # lookups once instead of once per queue is most of a 100-queue cycle's cost.
    values = {**target_lists(queues, target.dialect), "cap": COUNT_CAP, "small_pages": SMALL_TABLE_PAGES}
    return sqlf.render("prelude", {}, values) + joined


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
                   conn: engine.Connection | None = None, ts: datetime | None = None,
                   rates: CounterRates | None = None) -> CycleResult:
    """Run ``collectors`` (default: all) for one target; never raises for a database problem.

    With ``rates`` (a :class:`~collectors.counters.CounterRates` kept by the caller across
    cycles), every cumulative ``*_total`` row also yields its ``*_per_s`` rate row.
    """
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
            result.round_trips += _run_one(c, target, queues, conn, ts, database, result)
    finally:
        if own and conn is not None:
            conn.close()
    if any(c.name == "lock_timeouts" for c in collectors):
        # The console's own probes are the lock-timeout counter PostgreSQL does not have: how
        # many collector statements of this cycle were cancelled by lock_timeout / statement_timeout.
        timeouts = sum(1 for s in result.status if s.timeout)
        result.rows.append(SnapshotRow(ts, target.name, database, "", "probe_lock_timeouts", float(timeouts),
                                       "collector statements cancelled by a timeout this cycle"))
    if rates is not None:
        result.rows.extend(rates.derive(result.rows))
    return result


def _run_one(c: Collector, target: Target, queues: Sequence[Queue], conn: engine.Connection,
             ts: datetime, database: str, result: CycleResult) -> int:
    """Run one collector into ``result``; return the round trips it took (0 or 1)."""
    started = time.perf_counter()
    trips = 0
    try:
        stmt = build_statement(c, target, queues)
        if stmt is not None:
            trips = 1
            raw = conn.execute(stmt)
        else:
            raw = []
        rows = _to_rows(raw, ts, target.name, database)
        result.rows.extend(rows)
        result.status.append(StatusRow(ts, target.name, c.name, True, (time.perf_counter() - started) * 1000,
                                       len(rows)))
    except engine.TargetError as exc:
        result.status.append(StatusRow(ts, target.name, c.name, False, (time.perf_counter() - started) * 1000,
                                       0, str(exc), exc.timeout))
    except Exception as exc:  # noqa: BLE001 - a bug in one collector must not hide the others' rows
        msg = engine.TargetError(target.name, f"{type(exc).__name__}: {exc}")
        result.status.append(StatusRow(ts, target.name, c.name, False, (time.perf_counter() - started) * 1000,
                                       0, str(msg)))
    return trips


def run_once(cfg: Config, collectors: Sequence[Collector] | None = None,
             rates: CounterRates | None = None) -> CycleResult:
    """One cycle over every target of the config."""
    total = CycleResult()
    for target in cfg.targets:
        r = run_collectors(cfg, target, collectors, rates=rates)
        total.rows += r.rows
        total.status += r.status
        total.round_trips += r.round_trips
    return total


def sql_dir() -> Path:
    return Path(sqlfiles.__file__).resolve().parent.parent / "sql"
