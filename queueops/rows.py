"""The narrow rows that flow from collectors to the store, the lake, the pipeline and the charts.

One row per (sample time, target, queue, metric). ``queue`` is empty for target-wide metrics
(root causes). ``note`` says how a value was obtained where that matters to the reader
(``exact``, ``estimate``, ``pgstattuple_approx``, ``SAMPLED``...) or carries details of a root
cause as JSON (the session, its user, what it runs). A new metric needs no schema change.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class SnapshotRow:
    ts: datetime
    target: str
    database: str
    queue: str
    metric: str
    value: float | None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["ts"] = self.ts.isoformat()
        return d


@dataclass(frozen=True)
class StatusRow:
    """One per collector, target and cycle: did it work, how long did it take, and why not."""

    ts: datetime
    target: str
    collector: str
    ok: bool
    duration_ms: float
    rows: int = 0
    error: str = ""
    timeout: bool = False

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["ts"] = self.ts.isoformat()
        d["kind"] = "status"
        return d
