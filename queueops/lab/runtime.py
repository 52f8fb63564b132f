"""Machinery shared by every thread of the lab workload: connections, counters, outages, the loop.

Each worker is a thread with one autocommit connection of its own. :class:`Worker` owns the loop
every worker needs: connect (with back-off while the database is away), run one ``step``, sleep
as long as the step asks, count lock timeouts, survive errors, and stop cleanly. A step that must
finish something it started (a lease it claimed) leaves it in ``pending``; the loop retries it
after a reconnect or a lock timeout, and once more while shutting down, so a database restart
does not strand the item.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from queueops import engine, secrets, sqlfiles
from queueops.config import Target
from queueops.lab.settings import Settings

log = logging.getLogger("queueops.lab.workload")

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 10.0
LOCK_RETRY_S = 0.3
ERROR_PAUSE_S = 1.0
STOP_GRACE_S = 5.0  # how long a worker may keep retrying its pending finish after SIGTERM


class ConnectionLost(psycopg.OperationalError):
    """An idle session (a fault holding a transaction) found its connection closed by the server."""


def run(conn: psycopg.Connection, file: str, block: str, **values: Any) -> list[dict[str, Any]]:
    """Run one statement of ``sql/postgresql/lab/<file>.sql`` and return its rows as dicts."""
    stmt = sqlfiles.load("postgresql", f"lab/{file}").render(block, values=values)
    cur = conn.execute(stmt.sql, stmt.params)
    return cur.fetchall() if cur.description else []  # type: ignore[return-value]


def check_alive(conn: psycopg.Connection) -> None:
    """Raise :class:`ConnectionLost` if the server closed an idle connection (no query sent)."""
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        # An idle session only receives data when the server says goodbye (shutdown, terminate).
        conn.pgconn.consume_input()
        raise ConnectionLost("the server closed the connection")


class Counters:
    """Thread-safe counters: deltas for the next flush to ``lab.counters`` and running totals."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._delta: Counter[str] = Counter()
        self.totals: Counter[str] = Counter()

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._delta[name] += n
            self.totals[name] += n

    def take(self) -> dict[str, int]:
        with self._lock:
            out = dict(self._delta)
            self._delta.clear()
            return out

    def give_back(self, deltas: dict[str, int]) -> None:
        """A flush failed: keep the deltas for the next one."""
        with self._lock:
            self._delta.update(deltas)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.totals)


class Outage:
    """One log line when the database goes away, a reminder every 15 s, one when it is back."""

    REMIND_S = 15.0

    def __init__(self, counters: Counters):
        self._lock = threading.Lock()
        self.down: set[str] = set()
        self.since: float | None = None
        self.last_note = 0.0
        self.returned = False  # a worker reached the database since the outage began
        self.counters = counters

    def lost(self, worker: str, error: object) -> None:
        with self._lock:
            self.down.add(worker)
            if self.since is None:
                self.since = self.last_note = time.monotonic()
                self.returned = False
                log.warning("database connection lost (%s: %s); workers reconnect with back-off",
                            worker, _short(error))

    def still_down(self, worker: str, error: object) -> None:
        with self._lock:
            self.down.add(worker)
            now = time.monotonic()
            if self.since is None:
                self.since = self.last_note = now
                self.returned = False
                log.warning("cannot reach the database (%s: %s); retrying with back-off", worker, _short(error))
            elif now - self.last_note >= self.REMIND_S:
                self.last_note = now
                log.warning("database unreachable for %.0fs, %d workers waiting: %s",
                            now - self.since, len(self.down), _short(error))

    def back(self, worker: str, reconnect: bool) -> None:
        with self._lock:
            if reconnect:
                self.counters.add("reconnects")
            self.down.discard(worker)
            self.returned = True
            self._all_back()

    def idle(self, worker: str) -> None:
        """A worker that lost its connection and no longer wants one (its fault switched off while
        the database was away): it waits for nothing, so the outage is over once the others are
        back. Before, it stayed in ``down`` and "reachable again" was never said."""
        with self._lock:
            self.down.discard(worker)
            self._all_back()

    def _all_back(self) -> None:
        # Said once every worker that wants the database has it again, and only after one reached it.
        if not self.down and self.since is not None and self.returned:
            log.warning("database reachable again after %.1fs; every worker reconnected",
                        time.monotonic() - self.since)
            self.since = None


def _short(error: object) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__


@dataclass
class Context:
    """What every worker shares: where the database is, the stop signal, settings, faults, counters."""

    target: Target
    base_dir: Path
    stop: threading.Event = field(default_factory=threading.Event)
    settings: Settings = field(default_factory=Settings)
    faults: dict[str, bool] = field(default_factory=dict)
    counters: Counters = field(default_factory=Counters)
    outage: Outage | None = None
    ring_capacity: int = 1024
    started: float = field(default_factory=time.monotonic)
    stop_deadline: float = 0.0
    config_path: Path | None = None

    def __post_init__(self) -> None:
        if self.outage is None:
            self.outage = Outage(self.counters)
        self._config_lock = threading.Lock()
        self._config_mtime = self._mtime()

    def _mtime(self) -> float | None:
        try:
            return self.config_path.stat().st_mtime if self.config_path else None
        except OSError:
            return None

    def refresh_target(self) -> None:
        """After a failed connect: if lab.toml was rewritten (the lab moved port), follow it."""
        from queueops import config as config_mod

        with self._config_lock:
            mtime = self._mtime()
            if mtime is None or mtime == self._config_mtime or self.config_path is None:
                return
            self._config_mtime = mtime
            try:
                cfg = config_mod.load(self.config_path)
                target = cfg.target(self.target.name)
            except Exception as exc:  # noqa: BLE001 - keep the old target, say why
                log.warning("%s changed but cannot be used: %s", self.config_path, _short(exc))
                return
            if target != self.target:
                log.warning("%s changed: connecting to %s from now on", self.config_path,
                            secrets.mask(target.url))
                self.target = target

    def fault(self, name: str) -> bool:
        return bool(self.faults.get(name)) and not self.stop.is_set()

    def request_stop(self) -> None:
        if not self.stop.is_set():
            self.stop_deadline = time.monotonic() + STOP_GRACE_S
            self.stop.set()

    def connect(self, worker: str) -> psycopg.Connection:
        conn = engine.connect(self.target, "collect", self.base_dir, application=f"queueops-lab-{worker}").raw
        conn.row_factory = dict_row  # type: ignore[assignment]
        try:
            run(conn, "control", "session", lock_timeout=str(self.settings.integer("lock_timeout_ms")),
                statement_timeout="10000")
        except BaseException:
            conn.close()
            raise
        return conn


def is_connection_error(exc: BaseException, conn: psycopg.Connection | None) -> bool:
    """Whether ``exc`` means the connection is gone (reconnect) rather than a failed statement."""
    if isinstance(exc, (ConnectionLost, engine.TargetError)):
        return True
    if conn is not None and (conn.closed or conn.broken):
        return True
    sqlstate = getattr(exc, "sqlstate", None) or ""
    return sqlstate.startswith(("08", "57P"))


class Worker(threading.Thread):
    """A thread with its own connection running ``step`` until the workload stops."""

    counter_scope = "workload"

    def __init__(self, ctx: Context, name: str):
        super().__init__(name=name, daemon=True)
        self.ctx = ctx
        self.conn: psycopg.Connection | None = None
        self.pending: tuple[str, str, dict[str, Any], str] | None = None
        self._lost = False  # the last connection was lost (not closed on purpose)
        self._last_error_log = 0.0

    # -- for subclasses ---------------------------------------------------------------------
    def step(self, conn: psycopg.Connection | None) -> float:
        """Do one unit of work; return how long to sleep before the next one.

        ``conn`` is ``None`` only while ``wants_connection()`` says no (an idle fault switch).
        """
        raise NotImplementedError

    def wants_connection(self) -> bool:
        return True

    def retired(self) -> bool:
        """A worker no longer wanted (fewer consumers configured) leaves after its current item."""
        return False

    def on_exit(self, conn: psycopg.Connection | None) -> None:
        """Release what the worker holds (a fault's transaction) before the connection closes."""

    # -- the loop ---------------------------------------------------------------------------
    def keep_going(self) -> bool:
        if self.retired():
            return self.pending is not None and not self.ctx.stop.is_set()
        if not self.ctx.stop.is_set():
            return True
        return self.pending is not None and time.monotonic() < self.ctx.stop_deadline

    def run(self) -> None:
        backoff = BACKOFF_FIRST_S
        while self.keep_going():
            if self.conn is None and self._lost and not self.wants_connection() and not self.pending:
                self.ctx.outage.idle(self.name)
                self._lost = False
            if self.conn is None and (self.wants_connection() or self.pending):
                try:
                    self.conn = self.ctx.connect(self.name)
                except Exception as exc:  # noqa: BLE001 - any failure to connect means: wait and retry
                    self.ctx.outage.still_down(self.name, exc)
                    self.ctx.refresh_target()
                    self._sleep(backoff)
                    backoff = min(backoff * 2, BACKOFF_MAX_S)
                    continue
                self.ctx.outage.back(self.name, reconnect=self._lost)
                self._lost = False
                backoff = BACKOFF_FIRST_S
            try:
                if self.pending:
                    self.finish_pending(self.conn)
                    pause = 0.0
                elif self.ctx.stop.is_set():
                    break
                else:
                    pause = self.step(self.conn)
            except psycopg.errors.LockNotAvailable:
                self.ctx.counters.add(f"lock_timeouts.{self.counter_scope}")
                pause = LOCK_RETRY_S
            except Exception as exc:  # noqa: BLE001 - a worker never dies; it says why and goes on
                if is_connection_error(exc, self.conn):
                    self.ctx.outage.lost(self.name, exc)
                    self._lost = True
                    self.drop_connection()
                    pause = BACKOFF_FIRST_S
                else:
                    self.ctx.counters.add(f"errors.{self.counter_scope}")
                    self._log_error(exc)
                    pause = ERROR_PAUSE_S
            if pause > 0:
                self._sleep(pause)
        self.shutdown()

    def finish_pending(self, conn: psycopg.Connection | None) -> None:
        if conn is None or self.pending is None:
            return
        file, block, values, counter = self.pending
        rows = run(conn, file, block, **values)
        self.pending = None
        self.ctx.counters.add(counter if rows else f"lease_lost.{self.counter_scope}")

    def drop_connection(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def shutdown(self) -> None:
        try:
            self.on_exit(self.conn)
        except Exception as exc:  # noqa: BLE001 - closing anyway
            log.warning("%s: while stopping: %s", self.name, _short(exc))
        self.drop_connection()

    def _sleep(self, seconds: float) -> None:
        if self.pending and self.ctx.stop.is_set():
            time.sleep(min(seconds, LOCK_RETRY_S))
        else:
            self.ctx.stop.wait(seconds)

    def _log_error(self, exc: BaseException) -> None:
        now = time.monotonic()
        if now - self._last_error_log >= 30:
            self._last_error_log = now
            log.warning("%s: %s: %s (further errors of this worker are counted, logged every 30 s)",
                        self.name, type(exc).__name__, _short(exc))
