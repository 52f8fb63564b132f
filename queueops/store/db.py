"""Open the store: create tables if needed, and WAL mode for SQLite."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from queueops import secrets
from queueops.config import Config
from queueops.store.schema import metadata


def store_url(cfg: Config) -> str:
    """The store URL with a relative SQLite path resolved against the config file's folder."""
    url = make_url(secrets.resolve(cfg.store.url, cfg.base_dir))
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        path = cfg.path(url.database)
        path.parent.mkdir(parents=True, exist_ok=True)
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
    engine = create_engine(url, **kwargs)
    if is_sqlite:
        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001 - DB-API connection
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()
    if create:
        metadata.create_all(engine)
    return engine


def sqlite_path(engine: Engine) -> Path | None:
    db = engine.url.database
    return Path(db) if engine.url.get_backend_name() == "sqlite" and db else None
