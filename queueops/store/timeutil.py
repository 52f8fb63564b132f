"""UTC handling for the store.

SQLite has no timestamp type: SQLAlchemy stores ``DateTime`` as ISO text *without* the offset and
returns naive datetimes. Every timestamp therefore goes in as UTC and comes out re-labelled UTC,
so the same code reads a SQLite and a PostgreSQL store alike.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

HOUR = timedelta(hours=1)


def to_utc(dt: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken to be UTC already (that is what the store holds)."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def floor_hour(dt: datetime) -> datetime:
    return to_utc(dt).replace(minute=0, second=0, microsecond=0)


def ceil_hour(dt: datetime) -> datetime:
    f = floor_hour(dt)
    return f if f == to_utc(dt) else f + HOUR


def parse_hour(text: str) -> datetime:
    """``2026-11-21T10``, ``2026-11-21 10``, ``2026-11-21T10:00`` or a full ISO time -> the UTC hour.

    A time with an offset is converted; one without is UTC.
    """
    t = text.strip().replace(" ", "T")
    if len(t) == 13:  # YYYY-MM-DDTHH
        t += ":00"
    try:
        return floor_hour(datetime.fromisoformat(t))
    except ValueError:
        raise ValueError(f"not an hour: {text!r} (expected e.g. 2026-11-21T10, UTC)") from None
