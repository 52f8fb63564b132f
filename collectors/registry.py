"""Which collectors exist, their cadence, and what they apply to.

``cadence`` is ``fast`` (cheap, index seeks and statistics views: every few seconds) or ``slow``
(reads pages: ghosts, fragmentation; minutes). ``scope`` is ``queue`` (one SQL block per queue
kind, joined with UNION ALL) or ``target`` (one statement per target, e.g. root causes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Collector:
    name: str
    cadence: Literal["fast", "slow"]
    scope: Literal["queue", "target"] = "queue"
    description: str = ""


COLLECTORS: tuple[Collector, ...] = (
    Collector("depth", "fast", description="items ready now, rows in total and per status"),
    Collector("oldest_age_s", "fast", description="how long the oldest ready item has waited"),
)


def by_name(name: str) -> Collector:
    for c in COLLECTORS:
        if c.name == name:
            return c
    known = ", ".join(c.name for c in COLLECTORS)
    raise KeyError(f"unknown collector {name!r} (known: {known})")
