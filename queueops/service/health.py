"""``/healthz``: healthy while every collection job has succeeded within three of its intervals.

A cycle succeeds when at least one of its collectors returned rows without error (the target
answered). A job that never succeeded counts from the service's start.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

STALE_INTERVALS = 3


@dataclass
class JobHealth:
    target: str
    interval_s: float
    last_success: float | None = None  # monotonic
    last_run: float | None = None
    last_error: str = ""
    consecutive_failures: int = 0


class Health:
    def __init__(self, started: float | None = None):
        self.started = time.monotonic() if started is None else started
        self.jobs: dict[str, JobHealth] = {}
        self._lock = threading.Lock()

    def register(self, job_id: str, target: str, interval_s: float) -> None:
        self.jobs[job_id] = JobHealth(target, interval_s)

    def record(self, job_id: str, ok: bool, error: str = "", now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            j = self.jobs[job_id]
            j.last_run = now
            if ok:
                j.last_success, j.last_error, j.consecutive_failures = now, "", 0
            else:
                j.last_error, j.consecutive_failures = error, j.consecutive_failures + 1

    def report(self, now: float | None = None) -> tuple[bool, dict[str, Any]]:
        now = time.monotonic() if now is None else now
        body: dict[str, Any] = {"jobs": {}}
        healthy = True
        with self._lock:
            for job_id, j in self.jobs.items():
                since = j.last_success if j.last_success is not None else self.started
                age = now - since
                ok = age <= STALE_INTERVALS * j.interval_s
                healthy &= ok
                body["jobs"][job_id] = {
                    "target": j.target, "interval_s": j.interval_s, "healthy": ok,
                    "seconds_since_success": None if j.last_success is None else round(age, 3),
                    "consecutive_failures": j.consecutive_failures, "last_error": j.last_error,
                }
        body["status"] = "ok" if healthy else "unhealthy"
        return healthy, body
