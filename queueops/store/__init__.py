"""The snapshot store: snapshot rows, collector status, alert state and the action audit log.

SQLite file by default (WAL mode, so the console reads while the service writes); any
SQLAlchemy URL instead (PostgreSQL for a team or a fleet). The tables are in
:mod:`queueops.store.schema`.
"""

from queueops.store.db import open_engine

__all__ = ["open_engine"]
