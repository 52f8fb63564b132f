"""Open the store: create tables if needed, and WAL mode for SQLite."""

from __future__ import annotations

import sqlite3
import time

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError, ProgrammingError

from queueops import secrets
from queueops.config import Config
from queueops.private import private_file
from queueops.store.schema import metadata


def store_url(cfg: Config) -> str:
    """The store URL with a relative SQLite path resolved against the config file's folder."""
    url = make_url(secrets.resolve(cfg.store.url, cfg.base_dir))
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        path = private_file(cfg.path(url.database))
        url = url.set(database=str(path))
    return url.render_as_string(hide_password=False)


def open_engine(cfg_or_url: Config | str, *, create: bool = True) -> Engine:
    url = store_url(cfg_or_url) if isinstance(cfg_or_url, Config) else cfg_or_url
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    kwargs: dict[str, object] = {"pool_pre_ping": True}
    is_sqlite = url.startswith("sqlite")
    if is_sqlite:
        kwargs["connect_args"] = {"timeout": 30, "check_same_thread": False}
    elif url.startswith("postgresql+psycopg"):
        # A store host that drops packets must not hang a collection cycle for minutes.
        kwargs["connect_args"] = {"connect_timeout": 10}
    engine = create_engine(url, **kwargs)
    if is_sqlite:
        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001 - DB-API connection
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA busy_timeout=30000")
            _set_wal(cur)
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.close()
    if create:
        ensure_schema(engine)
    return engine


def _set_wal(cur: sqlite3.Cursor) -> None:
    """WAL mode, which persists in the file. Switching to it needs a moment alone with the file
    and SQLite answers "database is locked" at once, without waiting, when a second process opens
    the new store at the same time; once one of them has switched, the mode is already set."""
    for attempt in range(50):
        try:
            if cur.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 49:
                raise
            time.sleep(0.05 + 0.01 * attempt)


def ensure_schema(engine: Engine) -> None:
    """Create missing tables, and add nullable columns that newer versions added to old tables.

    ``create_all`` never alters an existing table, so a store created by an earlier version would
    lack a column the code now writes; only nullable additions are made, never a rewrite.
    """
    # Two processes opening a new store at once (the service and the console) both see a table
    # missing and both create it; the loser's "already exists" means the work is done, so the
    # check-then-create is simply repeated.
    for attempt in range(3):
        try:
            metadata.create_all(engine)
            _add_missing_columns(engine)
            return
        except (OperationalError, ProgrammingError) as exc:
            if attempt == 2 or not _lost_creation_race(exc):
                raise
            time.sleep(0.1 * (attempt + 1))


def _lost_creation_race(exc: Exception) -> bool:
    msg = str(exc).lower()
    return "already exists" in msg or "duplicate column" in msg


def _add_missing_columns(engine: Engine) -> None:
    inspector = inspect(engine)
    with engine.begin() as conn:
        for table in metadata.sorted_tables:
            have = {c["name"] for c in inspector.get_columns(table.name)}
            for col in table.columns:
                if col.name not in have and col.nullable:
                    q = engine.dialect.identifier_preparer.quote  # names are ours, quoted anyway
                    conn.execute(text(f"ALTER TABLE {q(table.name)} ADD COLUMN {q(col.name)} "
                                      f"{col.type.compile(dialect=engine.dialect)}"))

