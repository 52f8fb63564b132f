"""Write snapshot and status rows to the store, buffering in memory while the store is away.

The collectors must never stop because the store is down (a locked SQLite file, a PostgreSQL
store restarting). Rows that cannot be written wait in a bounded in-memory buffer and go out,
oldest first, with the next write that succeeds. Beyond ``bound`` rows the *oldest* are dropped
(recent health matters most to whoever reads it next) and counted, so the loss is reported
rather than silent: in the log, in :class:`WriteReport` (exposed as metrics) and, once the store
is back, as a ``collector_status`` row (target ``(service)``, collector ``store``).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, Table, insert

from queueops import secrets
from queueops.rows import SnapshotRow, StatusRow, utcnow
from queueops.store.db import ensure_schema
from queueops.store.schema import collector_status, snapshots
from queueops.store.timeutil import to_utc

log = logging.getLogger("queueops.store")

SERVICE_TARGET = "(service)"  # not a valid target name, so it never collides with one
# Collector names of the service's own status rows (not identifiers, so never a collector's):
SERVICE_RUN = "service"   # target SERVICE_TARGET: started, stopped cleanly, not running (a gap)
OUTAGE = "(outage)"       # a real target: down since / up again (queueops.service.outage)
CHUNK = 10_000


@dataclass(frozen=True)
class WriteReport:
    written: int          # rows that reached the store in this call (buffered ones included)
    buffered: int         # rows waiting in memory after this call
    bound: int
    dropped_total: int    # rows dropped beyond the bound since the service started
    ok: bool
    error: str = ""


def snapshot_dict(r: SnapshotRow) -> dict[str, Any]:
    return {"ts": to_utc(r.ts), "target": r.target, "database": r.database, "queue": r.queue,
            "metric": r.metric, "value": r.value, "note": r.note}


def status_dict(s: StatusRow) -> dict[str, Any]:
    return {"ts": to_utc(s.ts), "target": s.target, "collector": s.collector, "ok": s.ok,
            "duration_ms": float(s.duration_ms), "rows": int(s.rows), "error": s.error, "timeout": s.timeout}


def bulk_insert(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert many rows in the caller's transaction, by the fastest path the backend offers.

    PostgreSQL (psycopg 3): ``COPY ... FROM STDIN``. SQLite: the driver's ``executemany`` with
    values converted by the column types' own bind processors, so what is stored is exactly what
    SQLAlchemy would store (and reads back). Others: a Core ``insert`` (executemany).
    Measured by benchmarks/store_write.py; the generic path spends most of its time compiling.
    """
    cols = [c for c in table.columns if c.name in rows[0]]
    dialect = conn.dialect
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        raw = conn.connection.driver_connection
        q = dialect.identifier_preparer.quote
        copy_sql = f"COPY {q(table.name)} ({', '.join(q(c.name) for c in cols)}) FROM STDIN"
        with raw.cursor() as cur, cur.copy(copy_sql) as copy:
            for r in rows:
                copy.write_row(tuple(r[c.name] for c in cols))
        return
    if dialect.name == "sqlite":
        sql, order, procs = _sqlite_insert(table, tuple(c.name for c in cols), dialect)
        if set(order) <= set(rows[0]):
            data = [tuple(p(r[n]) if p else r[n] for n, p in zip(order, procs, strict=True)) for r in rows]
            conn.exec_driver_sql(sql, data)
            return
    conn.execute(insert(table), rows)


@functools.lru_cache(maxsize=64)
def _sqlite_insert(table: Table, columns: tuple[str, ...], dialect: Any) -> tuple[str, list[str], list[Any]]:
    """The compiled INSERT, its parameter order and each column's bind processor, made once per
    table, column set and dialect instead of at every write (~0.2 ms a cycle on SQLite,
    benchmarks/service_cycle.py). The cache holds the table and dialect themselves, so a key is
    never an address reused by another object."""
    compiled = insert(table).compile(dialect=dialect, column_keys=list(columns))
    order = list(compiled.positiontup or [])
    procs = [table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in order]
    return str(compiled), order, procs


class StoreWriter:
    """Thread-safe writer: ``write()`` never raises for a store problem."""

    def __init__(self, engine: Engine, bound: int, retry_max_s: float = 30.0):
        self.engine = engine
        self.bound = bound
        # While the store is away, write attempts back off (1 s, 2 s, ... retry_max_s): each failed
        # attempt can cost a connect timeout, and the collection cycle waits for it.
        self.retry_max_s = retry_max_s
        self._next_try = 0.0
        self._failures = 0
        self.attempts = 0
        self._buf: deque[tuple[bool, dict[str, Any]]] = deque()  # (is_status, row)
        self._lock = threading.Lock()
        self._schema_ready = False
        self.dropped_total = 0
        self._outage_started: datetime | None = None
        self._outage_dropped = 0
        self._outage_peak = 0
        self.last_error = ""

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def write(self, rows: Sequence[SnapshotRow], status: Sequence[StatusRow] = ()) -> WriteReport:
        with self._lock:
            self._buf.extend((False, snapshot_dict(r)) for r in rows)
            self._buf.extend((True, status_dict(s)) for s in status)
            written = 0
            if self._failures and time.monotonic() < self._next_try:
                self._drop_beyond_bound()
                return WriteReport(0, len(self._buf), self.bound, self.dropped_total, False, self.last_error)
            try:
                self.attempts += 1
                written = self._flush()
            except Exception as exc:  # noqa: BLE001 - any store failure means: keep the rows, go on
                self._on_failure(exc)
                return WriteReport(written, len(self._buf), self.bound, self.dropped_total, False, self.last_error)
            self._on_success()
            return WriteReport(written, 0, self.bound, self.dropped_total, True)

    def flush(self) -> WriteReport:
        """Try to write what is buffered (at shutdown, or when a cycle has nothing new)."""
        return self.write((), ())

    # -- internals --------------------------------------------------------------------------
    def _flush(self) -> int:
        if not self._buf:
            return 0
        if not self._schema_ready:
            ensure_schema(self.engine)
            self._schema_ready = True
        written = 0
        while self._buf:
            n = min(CHUNK, len(self._buf))
            chunk = [self._buf[i] for i in range(n)]
            snaps = [row for is_status, row in chunk if not is_status]
            stats = [row for is_status, row in chunk if is_status]
            with self.engine.begin() as conn:
                if snaps:
                    bulk_insert(conn, snapshots, snaps)
                if stats:
                    bulk_insert(conn, collector_status, stats)
            for _ in range(n):
                self._buf.popleft()
            written += n
        return written

    def _drop_beyond_bound(self) -> int:
        over = len(self._buf) - self.bound
        if over > 0:
            for _ in range(over):
                self._buf.popleft()
            self.dropped_total += over
            self._outage_dropped += over
        self._outage_peak = max(self._outage_peak, len(self._buf))
        return max(over, 0)

    def _on_failure(self, exc: BaseException) -> None:
        self.last_error = secrets.mask(f"{type(exc).__name__}: {exc}".splitlines()[0])[:500]
        self._failures += 1
        self._next_try = time.monotonic() + min(2.0 ** (self._failures - 1), self.retry_max_s)
        over = self._drop_beyond_bound()
        if self._outage_started is None:
            self._outage_started = utcnow()
            log.warning("store unavailable (%s): buffering rows in memory, at most %d", self.last_error, self.bound)
        elif over > 0:
            log.warning("store still unavailable: %d rows buffered (bound %d), %d dropped so far in this outage",
                        len(self._buf), self.bound, self._outage_dropped)

    def _on_success(self) -> None:
        self._failures = 0
        if self._outage_started is None:
            return
        started, dropped, peak = self._outage_started, self._outage_dropped, self._outage_peak
        self._outage_started, self._outage_dropped, self._outage_peak = None, 0, 0
        message = (f"store was unavailable from {started.isoformat()} ({self.last_error}); "
                   f"buffered up to {peak} rows (bound {self.bound}), dropped {dropped} oldest rows")
        (log.warning if dropped else log.info)("store back: %s", message)
        row = StatusRow(utcnow(), SERVICE_TARGET, "store", dropped == 0,
                        (utcnow() - started).total_seconds() * 1000, peak, message)
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(collector_status), [status_dict(row)])
        except Exception as exc:  # noqa: BLE001 - the report is best effort; the rows are safe
            log.warning("could not record the store outage: %s", exc)
