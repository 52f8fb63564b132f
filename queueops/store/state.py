"""Named values the service keeps in the store between runs (``service_state``)."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine, insert, select, update

from queueops.rows import utcnow
from queueops.store.schema import service_state


def get(engine: Engine, name: str, default: Any = None) -> Any:
    with engine.connect() as conn:
        raw = conn.execute(select(service_state.c.value).where(service_state.c.name == name)).scalar()
    return default if raw is None else json.loads(raw)


def put(engine: Engine, name: str, value: Any) -> None:
    raw = json.dumps(value)
    with engine.begin() as conn:
        n = conn.execute(update(service_state).where(service_state.c.name == name)
                         .values(value=raw, updated_at=utcnow())).rowcount
        if not n:
            conn.execute(insert(service_state).values(name=name, value=raw, updated_at=utcnow()))
