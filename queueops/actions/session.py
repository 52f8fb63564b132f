"""Action sessions on a target: connect, bound every statement, batch transactions, long statements.

Thin adapter over :mod:`queueops.engine`. Actions connect with the action login (``actions_url``
/ ``actions_password`` when set) and an application name that identifies them on the server
(``queueops-action-<action>-<audit id>``), so an operator can find -- and kill -- the session.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from queueops import engine, sqlfiles
from queueops.config import Target
from queueops.engine import Connection, TargetError
from queueops.sqlfiles import Statement

# A transaction of a batch is a few statements apart at most; if the action's process hangs in
# between, the server aborts the transaction after this and releases its row locks.
IDLE_IN_TRANSACTION_MS = 10_000


@dataclass
class Session:
    conn: Connection
    session_id: int | None
    cursors: list[Any] = field(default_factory=list)  # pyodbc cursors running now (to cancel them)

    @property
    def dialect(self) -> str:
        return self.conn.dialect

    def run(self, stmt: Statement) -> list[dict[str, Any]]:
        return self.conn.execute(stmt)

    def close(self) -> None:
        self.conn.close()


def open_session(target: Target, base_dir: Path | None, application: str, *,
                 read_only: bool = False, statement_timeout_ms: int | None = None) -> Session:
    """Connect with the action login and apply the action session settings (lock timeout etc.)."""
    conn = engine.connect(target, "action", base_dir, application=application[:63])
    try:
        sql = sqlfiles.load(conn.dialect, "actions/session")
        timeout_ms = statement_timeout_ms or target.statement_timeout_ms
        if conn.dialect == "postgresql":
            rows = conn.execute(sql.render("main", {}, {
                "lock_timeout": f"{target.lock_timeout_ms}ms", "statement_timeout": f"{timeout_ms}ms",
                "idle_timeout": f"{IDLE_IN_TRANSACTION_MS}ms"}))
            if read_only:
                conn.execute(sql.render("read_only"))
        else:
            rows = conn.execute(sql.render("main", {"lock_timeout_ms": str(int(target.lock_timeout_ms))}))
            set_mssql_timeout(conn, timeout_ms)
        sid = rows[0]["session_id"] if rows else None
        return Session(conn, int(sid) if sid is not None else None)
    except BaseException:
        conn.close()
        raise


def statement_timeout(session: Session, timeout_ms: int) -> Statement | None:
    """Bound the following statements (index work runs longer than a batch): on PostgreSQL the
    statement that sets it (the caller runs it, logged), on SQL Server the driver's query timeout,
    set here (no statement: None)."""
    if session.dialect == "postgresql":
        return sqlfiles.load("postgresql", "actions/session").render(
            "statement_timeout", {}, {"statement_timeout": f"{int(timeout_ms)}ms"})
    set_mssql_timeout(session.conn, timeout_ms)
    return None


def set_mssql_timeout(conn: Connection, timeout_ms: int) -> None:
    conn.raw.timeout = max(1, int(timeout_ms / 1000))  # pyodbc query timeout, seconds


@contextlib.contextmanager
def transaction(session: Session) -> Iterator[None]:
    """One batch = one transaction: commit if the block completes, roll back otherwise.

    If the connection drops inside, the server rolls the open transaction back by itself, so a
    batch is always all or nothing.
    """
    raw = session.conn.raw
    if session.dialect == "postgresql":
        import psycopg

        try:
            with raw.transaction():
                yield
        except psycopg.Error as exc:  # BEGIN / COMMIT themselves failed (e.g. the session was killed)
            raise engine._wrap(session.conn.target.name, "postgresql", exc) from None
        return
    raw.autocommit = False
    try:
        yield
        raw.commit()
    except BaseException:
        with contextlib.suppress(Exception):
            raw.rollback()
        raise
    finally:
        with contextlib.suppress(Exception):
            raw.autocommit = True


def connection_lost(session: Session | None, exc: BaseException) -> bool:
    """Whether ``exc`` means the session is gone (killed, network, server restart) rather than a
    statement failing on a live session: that makes the outcome ``interrupted``, not ``failed``."""
    if session is None:
        return False
    raw = session.conn.raw
    if session.dialect == "postgresql":
        return bool(getattr(raw, "broken", False) or getattr(raw, "closed", False))
    text = str(exc)
    return any(code in text for code in ("08S01", "08003", "08001", "Communication link failure"))


def is_lock_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TargetError):
        text = str(exc)
        return "lock timeout" in text or "55P03" in text or "1222" in text or "LockNotAvailable" in text
    return False


def cancel(session: Session) -> None:
    """Ask the server to cancel the statement running on ``session`` (from another thread)."""
    raw = session.conn.raw
    with contextlib.suppress(Exception):
        if session.dialect == "postgresql":
            (getattr(raw, "cancel_safe", None) or raw.cancel)()
        else:
            for cur in list(session.cursors):
                cur.cancel()


def run_watched(session: Session, stmt: Statement, poll: Callable[[], None], interval_s: float = 0.5
                ) -> list[dict[str, Any]]:
    """Run a long statement in a worker thread and call ``poll`` every ``interval_s`` meanwhile.

    The caller's thread does the polling (and thus calls the progress callback), so a console may
    update its widgets from it. Ctrl-C / SIGTERM in the caller cancels the statement on the server
    and waits for the worker to finish before re-raising.
    """
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            if session.dialect == "mssql":
                cur = session.conn.raw.cursor()
                session.cursors.append(cur)
                try:
                    cur.execute(stmt.sql, stmt.params) if stmt.params else cur.execute(stmt.sql)
                    while cur.nextset():  # drain: errors of later result sets surface here
                        pass
                except Exception as exc:  # noqa: BLE001 - re-raised in the caller's thread
                    raise engine._wrap(session.conn.target.name, "mssql", exc) from None
                finally:
                    session.cursors.clear()
                    with contextlib.suppress(Exception):
                        cur.close()
                box["rows"] = []
            else:
                box["rows"] = session.run(stmt)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=work, name="queueops-action-statement", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(interval_s)
            if worker.is_alive():
                with contextlib.suppress(Exception):
                    poll()
    except BaseException:
        cancel(session)
        worker.join(30)
        raise
    if "error" in box:
        raise box["error"]
    return box.get("rows", [])


def sleep(seconds: float) -> None:
    """The pause between batches (in small steps, so Ctrl-C is prompt)."""
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(0.1, left))
