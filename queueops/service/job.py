"""One collection job: a target, an interval, its collectors, and the connection it keeps.

The connection stays open between cycles of jobs less than a minute apart (a login per cycle
would cost more than the cycle); slower jobs connect per cycle (an idle connection minutes old
may have been cut by a firewall or an idle timeout). A kept connection found dead is replaced
at once, in the same cycle; if the target cannot be reached, the next cycles go through the
target's :class:`~queueops.service.backoff.Backoff`. A cycle never raises: whatever goes wrong
becomes status rows with the (masked) error, so an outage is recorded as rows, cycle after cycle.
The outage itself is told once per target, not once per job: every job of a target shares one
:class:`~queueops.service.outage.TargetOutage` (its start, its end, and the cycles each job missed).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime

from collectors import runner
from collectors.counters import CounterRates
from queueops import engine, sessions
from queueops.config import Config
from queueops.rows import StatusRow, utcnow
from queueops.service.backoff import Backoff, probe_address, tcp_probe
from queueops.service.outage import TargetOutage
from queueops.service.plan import JobPlan

log = logging.getLogger("queueops.service")

# Jobs this far apart do not keep their connection between cycles.
KEEP_CONNECTION_MAX_S = 60.0


class CollectJob:
    def __init__(self, cfg: Config, plan: JobPlan, sink: Callable[[CollectJob, runner.CycleResult], None],
                 outage: TargetOutage | None = None):
        self.cfg = cfg
        self.plan = plan
        self.target = cfg.target(plan.target)
        self.sink = sink
        self.conn: engine.Connection | None = None
        self.backoff = Backoff(plan.interval_s, cfg.schedule.backoff_max_s)
        self.address = probe_address(self.target, cfg.base_dir)
        self.rates = CounterRates()  # kept across cycles: cumulative counters become rates
        # Shared with the target's other jobs (the service passes one per target).
        self.outage = outage or TargetOutage(plan.target)
        self._seen_generation = self.outage.generation
        self.events: list[StatusRow] = []  # the outage's down/up rows of the last cycle
        self.cycles = 0

    @property
    def id(self) -> str:
        return self.plan.id

    def __call__(self) -> None:
        """The APScheduler entry point: one cycle, handed to the sink (store, metrics, alerts)."""
        ts = utcnow()
        try:
            result = self.cycle(ts)
        except Exception as exc:  # noqa: BLE001 - a bug must not stop the schedule; it becomes data
            log.exception("cycle of %s failed unexpectedly", self.id)
            result = self._errors(ts, f"internal error: {type(exc).__name__}: {exc}")
        self.cycles += 1
        self.sink(self, result)

    def cycle(self, ts: datetime) -> runner.CycleResult:
        """One cycle; ``self.events`` gets the outage rows it opened or closed."""
        self.events = []
        result, lost = self._collect(ts, time.monotonic())
        if lost is not None:
            self.events = self.outage.failed(self.id, [c.name for c in self.plan.collectors], ts, lost)
        elif any(s.ok or s.timeout for s in result.status):
            self.events = self.outage.reached(ts)
        if self.plan.interval_s >= KEEP_CONNECTION_MAX_S:
            self.close()  # minutes apart: a fresh connection per cycle beats one a firewall may have cut
        return result

    def _collect(self, ts: datetime, started: float) -> tuple[runner.CycleResult, str | None]:
        """The cycle's result, and the error if the target could not be reached at all."""
        if self.outage.generation != self._seen_generation:
            # Another job of this target reached it since this one last failed: no back-off left.
            self._seen_generation = self.outage.generation
            self.backoff.succeeded()
        reused = self.conn is not None
        if self.conn is None:
            attempt, why = self.backoff.should_attempt(started, self._probe)
            if not attempt:
                return self._errors(ts, f"{self.target.name} unreachable since {self.outage.since_text()}: {why}; "
                                        f"latest error: {self.outage.error or '?'}"), self.outage.error or why
            failed = self._open(started)
            if failed is not None:
                return self._errors(ts, failed), failed
        result = self._run(ts)
        if not self._broken(result):
            return result, None
        self.close()
        if reused and self._open(started) is None:
            # The kept connection died while idle (server restart, idle timeout, a proxy): one
            # fresh try in the same cycle, so an idle disconnect costs no error rows.
            result = self._run(ts)
            if not self._broken(result):
                return result, None
            self.close()
        errors = [s.error for s in result.status if not s.ok]
        return result, errors[0] if errors else "connection lost"

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    # -- internals --------------------------------------------------------------------------
    def _open(self, started: float) -> str | None:
        """Connect; None on success, else the error (the back-off counts from the cycle's start,
        so its next attempt falls on a cycle, not just after one)."""
        try:
            self.conn = self._connect()
        except engine.TargetError as exc:
            self.backoff.failed(started, self._probe())
            return str(exc)
        self.backoff.succeeded()
        return None

    def _run(self, ts: datetime) -> runner.CycleResult:
        return runner.run_collectors(self.cfg, self.target, self.plan.collectors, conn=self.conn, ts=ts,
                                     rates=self.rates)

    def _connect(self) -> engine.Connection:
        conn = engine.connect(self.target, "collect", self.cfg.base_dir, application="queueops-collect")
        try:
            runner.keep_plans(conn)  # open for many cycles: plan the same statements once
        except engine.TargetError:
            conn.close()
            raise
        return conn

    def _probe(self) -> bool | None:
        return tcp_probe(self.address, timeout=min(1.0, self.target.connect_timeout_s))

    def _broken(self, result: runner.CycleResult) -> bool:
        """Whether the connection is gone: the driver says so (psycopg), or -- when every collector
        failed outright -- re-running the session setup on it fails too (pyodbc has no flag)."""
        if self.conn is None:
            return True
        if self.conn.driver_says_broken():
            return True
        if not result.status or any(s.ok or s.timeout for s in result.status):
            return False
        try:
            self.conn.execute(sessions.reading(self.target, kept_plans=self.conn.kept_plans is not None))
        except engine.TargetError:
            return True
        return False

    def _errors(self, ts: datetime, error: str) -> runner.CycleResult:
        result = runner.CycleResult()
        result.status = [StatusRow(ts, self.target.name, c.name, False, 0.0, 0, error) for c in self.plan.collectors]
        return result
