"""Open the store: create tables if needed, and WAL mode for SQLite."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, create_engine, event, inspect, text
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
    elif url.startswith("postgresql+psycopg"):
        # A store host that drops packets must not hang a collection cycle for minutes.
        kwargs["connect_args"] = {"connect_timeout": 10}
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
        ensure_schema(engine)
    return engine


def ensure_schema(engine: Engine) -> None:
    """Create missing tables, and add nullable columns that newer versions added to old tables.

    ``create_all`` never alters an existing table, so a store created by an earlier version would
    lack a column the code now writes; only nullable additions are made, never a rewrite.
    """
    metadata.create_all(engine)
    inspector = inspect(engine)
    with engine.begin() as conn:
        for table in metadata.sorted_tables:
            have = {c["name"] for c in inspector.get_columns(table.name)}
            for col in table.columns:
                if col.name not in have and col.nullable:
                    q = engine.dialect.identifier_preparer.quote  # names are ours, quoted anyway
                    conn.execute(text(f"ALTER TABLE {q(table.name)} ADD COLUMN {q(col.name)} "
                                      f"{col.type.compile(dialect=engine.dialect)}"))


def sqlite_path(engine: Engine) -> Path | None:
    db = engine.url.database
    return Path(db) if engine.url.get_backend_name() == "sqlite" and db else None
