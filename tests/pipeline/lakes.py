"""Build small snapshot lakes for the pipeline's tests, in the contract's exact layout.

``<lake>/snapshots/date=YYYY-MM-DD/hour=HH/part-0.parquet`` with ts (timestamp[us, UTC]), target,
database, queue, metric (strings), value (double, nullable) and note (string), as
docs/architecture.md ("Store and lake contracts") says the exporter writes them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema([
    ("ts", pa.timestamp("us", tz="UTC")),
    ("target", pa.string()),
    ("database", pa.string()),
    ("queue", pa.string()),
    ("metric", pa.string()),
    ("value", pa.float64()),
    ("note", pa.string()),
])

T0 = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)

Row = tuple[datetime, str, str, str, str, float | None, str]


def row(ts: datetime, queue: str, metric: str, value: float | None, *, target: str = "t1", note: str = "",
        database: str = "db") -> Row:
    return (ts, target, database, queue, metric, value, note)


def series(start: datetime, step_s: float, values: Iterable[float | None], queue: str, metric: str,
           **kw: str) -> list[Row]:
    return [row(start + timedelta(seconds=i * step_s), queue, metric, v, **kw) for i, v in enumerate(values)]


def write_hour(lake: Path, hour: datetime, rows: list[Row]) -> Path:
    """Replace one hour's partition (as a re-export does)."""
    folder = lake / "snapshots" / f"date={hour:%Y-%m-%d}" / f"hour={hour:%H}"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.parquet"):
        old.unlink()
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in SCHEMA]
    table = pa.table({f.name: pa.array(list(c), type=f.type) for f, c in zip(SCHEMA, cols, strict=True)},
                     schema=SCHEMA)
    path = folder / "part-0.parquet"
    pq.write_table(table, path)
    return path


def write_lake(lake: Path, rows: Iterable[Row]) -> list[datetime]:
    """Write rows into their hours (by ts); returns the hours written."""
    by_hour: dict[datetime, list[Row]] = defaultdict(list)
    for r in rows:
        by_hour[r[0].replace(minute=0, second=0, microsecond=0)].append(r)
    for hour, rs in by_hour.items():
        write_hour(lake, hour, sorted(rs, key=lambda r: (r[0], r[3], r[4])))
    return sorted(by_hour)


def utc(ts: datetime | None) -> datetime | None:
    """A timestamp collected from Spark (naive, in the driver's local time) as an aware UTC time."""
    return None if ts is None else ts.astimezone(UTC)
