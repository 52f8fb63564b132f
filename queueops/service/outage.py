"""One account of a target's outage, shared by every job that collects from it.

A target has several jobs (a fast and a slow cadence, per-collector intervals). Each used to log
its own "cannot collect" / "reachable again", unnamed: the slow job noticed the outage one slow
interval late and announced its end seconds after the fast job, which read like a second
outage. Here the first job to find the target unreachable opens the outage (one log line, one
status row), every job's missed cycles are counted against it, and the first job to reach the
target again closes it (one log line, one status row naming which collectors missed which cycles).

The status rows use the collector name :data:`OUTAGE`, which no collector has: the ``down`` row
(``ok`` false) at the outage's start, the ``up`` row (``ok`` true, ``duration_ms`` = the outage)
at its end. Readers (the console's charts) draw the span between them as a gap.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from queueops.rows import StatusRow
from queueops.store.writer import OUTAGE

log = logging.getLogger("queueops.service")

__all__ = ["OUTAGE", "TargetOutage"]


def hms(ts: datetime) -> str:
    return ts.strftime("%H:%M:%SZ")


@dataclass
class Missed:
    """The cycles one job could not collect during the current outage."""

    collectors: tuple[str, ...]
    cycles: int = 0
    first: datetime | None = None
    last: datetime | None = None

    def describe(self, job: str) -> str:
        span = hms(self.first) if self.first == self.last or self.last is None else \
            f"{hms(self.first)}–{hms(self.last)}" if self.first else "?"
        return (f"{job} ({', '.join(self.collectors)}) missed {self.cycles} "
                f"cycle{'s' if self.cycles != 1 else ''} {span}")


class TargetOutage:
    """Whether a target is down, since when, with which error, and what each job missed."""

    def __init__(self, target: str):
        self.target = target
        self._lock = threading.Lock()
        self.down_since: datetime | None = None
        self.error = ""
        self.missed: dict[str, Missed] = {}
        self.generation = 0  # bumped when an outage ends: jobs backing off start afresh

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failed(self, job: str, collectors: Sequence[str], ts: datetime, error: str) -> list[StatusRow]:
        """A cycle of ``job`` could not reach the target; the outage's ``down`` row if it opens it."""
        error = " ".join(error.split())
        with self._lock:
            m = self.missed.setdefault(job, Missed(tuple(collectors)))
            m.cycles += 1
            m.first = m.first or ts
            m.last = ts
            if error:
                self.error = error
            if self.down_since is not None:
                return []
            self.down_since = ts
        log.warning("%s: down since %s (%s); its collectors miss their cycles until it is back, "
                    "other targets go on", self.target, hms(ts), self.error)
        return [StatusRow(ts, self.target, OUTAGE, False, 0.0, 0, f"down since {ts.isoformat()}: {self.error}")]

    def reached(self, ts: datetime) -> list[StatusRow]:
        """A cycle reached the target; the outage's ``up`` row if this ends one."""
        with self._lock:
            if self.down_since is None:
                return []
            since, missed = self.down_since, self.missed
            self.down_since, self.missed, self.error = None, {}, ""
            self.generation += 1
        seconds = max(0.0, (ts - since).total_seconds())
        what = "; ".join(m.describe(job) for job, m in sorted(missed.items())) or "no cycle missed"
        text = f"up again after {seconds:.0f} s (down since {since.isoformat()}): {what}"
        log.info("%s: %s", self.target, text.replace(since.isoformat(), hms(since)))
        return [StatusRow(ts, self.target, OUTAGE, True, seconds * 1000.0, 0, text)]

    def since_text(self) -> str:
        return hms(self.down_since) if self.down_since else "?"
