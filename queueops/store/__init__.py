"""The snapshot store: snapshot rows, collector status, alert state and the action audit log.

SQLite file by default (WAL mode, so the console reads while the service writes); any
SQLAlchemy URL instead (PostgreSQL for a team or a fleet). The tables are in
:mod:`queueops.store.schema`; :mod:`~queueops.store.writer` writes (buffering while the store is
away), :mod:`~queueops.store.reader` reads back with UTC timestamps,
:mod:`~queueops.store.retention` prunes.
"""

from queueops.store.db import ensure_schema, open_engine

__all__ = ["ensure_schema", "open_engine"]
