"""Connections to targets: PostgreSQL through psycopg 3, SQL Server through pyodbc.

A thin adapter: it opens a DB-API connection for a target, runs :class:`~queueops.sqlfiles.Statement`
objects and returns rows as dicts. Errors leave this module as :class:`TargetError` with every
secret masked, so they can be shown in the UI and stored in snapshot status rows as they are.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from queueops import secrets
from queueops.config import Target
from queueops.sqlfiles import Statement

Purpose = Literal["collect", "action", "check"]


class TargetError(RuntimeError):
    """A target could not be reached or a statement failed; the message is safe to show."""

    def __init__(self, target: str, message: str, *, timeout: bool = False):
        self.target = target
        self.timeout = timeout
        super().__init__(secrets.mask(message))


def database_name(target: Target, base_dir: Path | None = None) -> str:
    """The database a target points at, for the ``database`` column of snapshot rows."""
    from sqlalchemy.engine import make_url

    url = secrets.resolve(target.url, base_dir)
    try:
        return make_url(url).database or ""
    except Exception:  # noqa: BLE001 - a label only; a malformed URL fails properly at connect
        return ""


def _pg_conninfo(url: str) -> str:
    # Accept SQLAlchemy-style "postgresql+psycopg://" as well as libpq's "postgresql://".
    scheme, sep, rest = url.partition("://")
    return f"{scheme.split('+', 1)[0]}{sep}{rest}"


@dataclass
class Connection:
    """An open connection to one target and the dialect it speaks."""

    target: Target
    dialect: str
    raw: Any
    # The row counts of the tables at the time this connection's kept plans were made (PostgreSQL
    # only; None: statements are not kept prepared). See collectors.runner.keep_plans.
    kept_plans: dict[str, float] | None = None
    # What the collector session setup read of the server (SQL Server: major_version, engine_edition;
    # collectors.runner.server_block picks a block only some servers can run, issue 33).
    server: dict[str, Any] | None = None

    def execute(self, stmt: Statement) -> list[dict[str, Any]]:
        """Run one statement and return its rows (empty for statements without a result)."""
        try:
            if self.dialect == "postgresql" and self.kept_plans is not None:
                # Kept plans: the same long statements every cycle. psycopg re-parses a statement's
                # '%s' placeholders at every execution past 4 kB (~7 ms a 100-queue cycle); the
                # server's own '$n' form is made once per text and sent as is.
                import psycopg

                cur = psycopg.RawCursor(self.raw)
                cur.execute(dollar_params(stmt.sql), stmt.params)
            elif self.dialect == "postgresql":
                cur = self.raw.cursor()
                # Always pass the tuple, even empty: rendered SQL escapes '%' as '%%' for psycopg,
                # which psycopg only un-escapes when parameters are given.
                cur.execute(stmt.sql, stmt.params)
            else:
                cur = self.raw.cursor()
                if stmt.params:
                    cur.execute(stmt.sql, stmt.params)
                else:
                    cur.execute(stmt.sql)
            rows: list[dict[str, Any]] = []
            # pyodbc: skip result-less statements (SET ...) in a batch to reach the first result.
            while True:
                if cur.description:
                    cols = [d[0] for d in cur.description]
                    rows = [dict(zip(cols, r, strict=False)) for r in cur.fetchall()]
                    break
                if self.dialect != "mssql" or not cur.nextset():
                    break
            cur.close()
            return rows
        except Exception as exc:
            raise _wrap(self.target.name, self.dialect, exc) from None

    def driver_says_broken(self) -> bool:
        """Whether the driver knows the connection is gone (psycopg's ``closed`` / ``broken``).
        pyodbc keeps no such flag: False there means only "not known to be gone"."""
        return bool(getattr(self.raw, "closed", False) or getattr(self.raw, "broken", False))

    def keep_prepared(self) -> None:
        """Prepare every statement on its first execution and keep it (PostgreSQL; a no-op
        elsewhere: SQL Server caches parameterised plans by itself). The caller decides when the
        plans are stale (collectors.runner.check_plans) and calls :meth:`forget_prepared`."""
        if self.dialect != "postgresql":
            return
        self.raw.prepare_threshold = 0  # psycopg: prepare on the first execution, not the fifth
        self.kept_plans = {}

    def forget_prepared(self) -> None:
        """Drop this session's prepared statements; the next execution of each prepares it again.
        ``DEALLOCATE ALL`` through psycopg itself, which then forgets its own prepared names."""
        try:
            self.raw.execute("DEALLOCATE ALL", prepare=False)
        except Exception as exc:
            raise _wrap(self.target.name, self.dialect, exc) from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.raw.close()


@functools.lru_cache(maxsize=64)
def dollar_params(sql: str) -> str:
    """psycopg's ``%s`` / ``%%`` form of a rendered statement in PostgreSQL's own ``$1, $2, ...``."""
    n = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal n
        if m.group(0) == "%%":
            return "%"
        n += 1
        return f"${n}"

    return re.sub(r"%%|%s", repl, sql)


def _wrap(target: str, dialect: str, exc: BaseException) -> TargetError:
    text = f"{type(exc).__name__}: {exc}".strip()
    timeout = False
    if dialect == "postgresql":
        sqlstate = getattr(exc, "sqlstate", None)
        timeout = sqlstate in ("57014", "55P03")  # statement_timeout / lock_timeout
    else:
        timeout = "1222" in text or "HYT00" in text or "timeout" in text.lower()
    return TargetError(target, text, timeout=timeout)


def _password(target: Target, purpose: Purpose, base_dir: Path | None) -> str | None:
    ref = target.actions_password if purpose == "action" and target.actions_password else target.password
    return secrets.resolve(ref, base_dir) if ref else None


def connect(target: Target, purpose: Purpose = "collect", base_dir: Path | None = None,
            application: str | None = None) -> Connection:
    """Open an autocommit connection to ``target`` (actions use ``actions_url`` when set)."""
    url_ref = target.actions_url if purpose == "action" and target.actions_url else target.url
    try:
        url = secrets.resolve(url_ref, base_dir)
        password = _password(target, purpose, base_dir)
    except secrets.SecretError as exc:
        raise TargetError(target.name, f"cannot resolve a secret of target {target.name!r}: {exc}") from None
    app = application or f"queueops-{purpose}"
    if target.dialect == "postgresql":
        return Connection(target, "postgresql", _connect_pg(target, url, password, app))
    return Connection(target, "mssql", _connect_mssql(target, url, password, app, reads_uncommitted(purpose)))


def reads_uncommitted(purpose: Purpose) -> bool:
    """Whether a SQL Server session of ``purpose`` runs READ UNCOMMITTED: every session that only
    reads (collectors, the console's drill-down, checks, discovery). Under READ COMMITTED without
    RCSI a read waits on a dequeuer's exclusive row locks and holds shared ones up: a drill-down on a
    busy queue stalled until its query timeout. Decided by the purpose, not by the application name
    (the console's drill-down connected as 'queueops-console' and read at READ COMMITTED). An
    action's session keeps READ COMMITTED: its previews say NOLOCK and its writes carry their own
    hints (READPAST, UPDLOCK, READCOMMITTEDLOCK)."""
    return purpose != "action"


def _connect_pg(target: Target, url: str, password: str | None, app: str) -> Any:
    import psycopg

    kwargs: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": max(1, int(target.connect_timeout_s)),
        "application_name": app,
        # Queue tables are often empty; a generic plan prepared then would be a full scan later
        # (a prepared pop measured here fell to ~700 msg/s that way). Never prepare server-side.
        "prepare_threshold": None,
    }
    if password:
        kwargs["password"] = password
    try:
        return psycopg.connect(_pg_conninfo(url), **kwargs)
    except Exception as exc:
        raise _wrap(target.name, "postgresql", exc) from None


def odbc_connection_string(url: str, password: str | None) -> str:
    """Build an ODBC connection string from a SQLAlchemy ``mssql+pyodbc://`` URL."""
    from sqlalchemy.dialects.mssql.pyodbc import MSDialect_pyodbc
    from sqlalchemy.engine import make_url

    u = make_url(url)
    if password:
        u = u.set(password=password)
    args, _ = MSDialect_pyodbc().create_connect_args(u)
    return args[0]


def _connect_mssql(target: Target, url: str, password: str | None, app: str, uncommitted: bool) -> Any:
    try:
        import pyodbc
    except ImportError as exc:
        raise TargetError(target.name, "pyodbc cannot be imported (" + str(exc) + "); install unixODBC "
                          "(Debian: apt-get install unixodbc) and an ODBC driver for SQL Server "
                          "(Debian: tdsodbc for FreeTDS, or Microsoft's msodbcsql18)") from None
    try:
        conn_str = odbc_connection_string(url, password) + f";APP={app}"
        conn = pyodbc.connect(conn_str, autocommit=True, timeout=max(1, int(target.connect_timeout_s)))
        conn.timeout = max(1, int(target.statement_timeout_ms / 1000))  # query timeout, seconds
        if uncommitted:
            # A reader takes no shared locks (Sch-S only): it never waits on, nor blocks, a dequeuer.
            conn.set_attr(pyodbc.SQL_ATTR_TXN_ISOLATION, pyodbc.SQL_TXN_READ_UNCOMMITTED)
        return conn
    except Exception as exc:
        msg = str(exc)
        if "IM002" in msg or "Can't open lib" in msg:
            msg += (" -- the ODBC driver named in the URL is not installed; FreeTDS: apt-get install "
                    "tdsodbc, Microsoft: msodbcsql18")
        raise TargetError(target.name, f"{type(exc).__name__}: {msg}") from None


@contextlib.contextmanager
def connection(target: Target, purpose: Purpose = "collect", base_dir: Path | None = None,
               application: str | None = None) -> Iterator[Connection]:
    conn = connect(target, purpose, base_dir, application)
    try:
        yield conn
    finally:
        conn.close()
