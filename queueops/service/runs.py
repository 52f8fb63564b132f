"""The service's own runs: a start record, a clean stop, and the gap an unclean stop leaves.

A SIGKILLed (or crashed, or powered-off) service used to leave only silence in the store, which
a chart draws as a straight line from the last sample to the next: healthy-looking. Now:

* at start the service writes a run record to ``service_state`` (``service.run.<host>.<pid>``:
  host, pid and process start time, when it started) and a ``collector_status`` row (target
  ``(service)``, collector :data:`RUN`, ``ok``) saying so;
* a clean stop writes a row "stopped cleanly" and deletes its run record, in one transaction;
* a run record left behind whose process is gone (:func:`queueops.proc.process_gone`) is an
  unclean stop: the next start writes a row *covering the gap* -- ``ts`` = the last row that run
  wrote (its last sign of life), ``duration_ms`` = until this start, ``ok`` false, the text
  "service was not running from .. to .." -- and removes the record. The console draws that span
  as a gap.

A run record of a process still alive (another service sharing the store) or of another host
(unknowable from here) is left alone.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Engine, delete, func, insert, select

from queueops import proc
from queueops.rows import StatusRow, utcnow
from queueops.store.schema import collector_status, service_state
from queueops.store.timeutil import to_utc
from queueops.store.writer import SERVICE_RUN as RUN
from queueops.store.writer import SERVICE_TARGET, status_dict

log = logging.getLogger("queueops.service")

PREFIX = "service.run."


class ServiceRuns:
    """Writes this run's start and clean stop, and the gaps earlier runs left."""

    def __init__(self, engine: Engine, targets: Sequence[str]):
        self.engine = engine
        self.targets = list(targets)
        me = proc.this_process()
        self.name = f"{PREFIX}{me['host']}.{me['pid']}"
        self.record = {**me, "since": ""}
        self.started: datetime | None = None

    def start(self, now: datetime | None = None) -> list[StatusRow]:
        """Record this start; return the rows written (gaps of unclean stops, then the start)."""
        now = now or utcnow()
        self.started = now
        self.record["since"] = now.isoformat()
        with self.engine.begin() as conn:
            gaps = [self._gap(conn, name, body, now) for name, body in self._orphans(conn)]
            gaps = [g for g in gaps if g is not None]
            note = f"; after an unclean stop ({len(gaps)} gap{'s' if len(gaps) != 1 else ''} recorded)" if gaps else ""
            started = StatusRow(now, SERVICE_TARGET, RUN, True, 0.0, 0,
                                f"service started (pid {self.record['pid']} on {self.record['host']}){note}")
            rows = [*gaps, started]
            conn.execute(insert(collector_status), [status_dict(r) for r in rows])
            conn.execute(insert(service_state).values(name=self.name, value=json.dumps(self.record), updated_at=now))
        for g in gaps:
            log.warning("%s", g.error)
        return rows

    def stop(self, now: datetime | None = None) -> StatusRow:
        """Record a clean stop (the run record goes with it)."""
        now = now or utcnow()
        ran = (now - self.started).total_seconds() if self.started else 0.0
        row = StatusRow(now, SERVICE_TARGET, RUN, True, 0.0, 0,
                        f"service stopped cleanly (pid {self.record['pid']}) after {ran:.0f} s")
        with self.engine.begin() as conn:
            conn.execute(insert(collector_status).values(**status_dict(row)))
            conn.execute(delete(service_state).where(service_state.c.name == self.name))
        return row

    # -- internals --------------------------------------------------------------------------
    def _orphans(self, conn) -> list[tuple[str, dict]]:  # noqa: ANN001 - a SQLAlchemy Connection
        """Run records of services that are gone without a clean stop."""
        out = []
        for name, raw in conn.execute(select(service_state.c.name, service_state.c.value)
                                      .where(service_state.c.name.like(f"{PREFIX}%"))):
            try:
                body = json.loads(raw)
            except ValueError:
                continue
            if name != self.name and body.get("host") == socket.gethostname() and proc.process_gone(body):
                out.append((name, body))
            elif name == self.name:  # our pid, an older process (a reused pid): certainly gone
                out.append((name, body))
        return out

    def _gap(self, conn, name: str, body: dict, now: datetime) -> StatusRow | None:  # noqa: ANN001
        """The row covering an unclean stop: from the run's last row to ``now``."""
        conn.execute(delete(service_state).where(service_state.c.name == name))
        try:
            since = to_utc(datetime.fromisoformat(body["since"]))
        except (KeyError, TypeError, ValueError):
            return None
        targets = [*self.targets, SERVICE_TARGET]
        last = conn.execute(select(func.max(collector_status.c.ts)).where(
            collector_status.c.ts >= since, collector_status.c.target.in_(targets))).scalar()
        last = max(to_utc(last), since) if last is not None else since
        if last >= now:
            return None
        seconds = (now - last).total_seconds()
        return StatusRow(last, SERVICE_TARGET, RUN, False, seconds * 1000.0, 0,
                         f"service was not running from {last.isoformat(timespec='seconds')} to "
                         f"{now.isoformat(timespec='seconds')} ({seconds:.0f} s): pid {body.get('pid')} stopped "
                         "without a clean stop (killed or crashed); nothing was collected in between")
