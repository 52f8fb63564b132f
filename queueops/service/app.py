"""``queueops collect`` without ``--once``: the collector service.

APScheduler 3 runs one job per (target, interval) (see :mod:`~queueops.service.plan`) on a
thread pool, each with ``max_instances=1`` and ``coalesce`` (a slow cycle delays the next one of
its own job, never overlaps it, and missed runs collapse into one) and the configured misfire
grace. Beside them: the hourly lake export, the retention prune and, when configured, the daily
report. SIGINT / SIGTERM stop the scheduler after the cycles in flight, then the store buffer is
flushed and queued notifications are delivered. ``--duration`` bounds a run (tests, soaks).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from collectors import registry, runner
from collectors.registry import Collector
from queueops import children, secrets
from queueops.alerts.evaluate import Transition
from queueops.alerts.manager import AlertManager
from queueops.alerts.notify import Notification
from queueops.alerts.rules import Rule, RuleError, effective_rules
from queueops.autopilot.runner import Autopilot
from queueops.config import Config
from queueops.lake.export import export_hours
from queueops.rows import utcnow
from queueops.service.child import pipeline_command, report_command
from queueops.service.health import Health
from queueops.service.http import MetricsServer
from queueops.service.job import CollectJob
from queueops.service.metrics import ServiceMetrics
from queueops.service.outage import TargetOutage
from queueops.service.plan import JobPlan, PlanError, plan_jobs
from queueops.service.runs import ServiceRuns
from queueops.store import open_engine
from queueops.store.db import ensure_schema
from queueops.store.retention import prune
from queueops.store.writer import StoreWriter

log = logging.getLogger("queueops.service")


class _MaskingFormatter(logging.Formatter):
    """Masks the whole formatted record: the message and any traceback or stack under it
    (a driver's exception text can quote a connection string)."""

    def format(self, record: logging.LogRecord) -> str:
        return secrets.mask(super().format(record))


class _DropCountedSkips(logging.Filter):
    """APScheduler warns on every skipped or missed run; the service counts those itself
    (``queueops_cycles_skipped``, logged at debug), so a slow target does not flood the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("apscheduler"):
            return True
        text = record.getMessage()
        return not ("maximum number of running instances reached" in text or "was missed by" in text)


def setup_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_MaskingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_DropCountedSkips())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("apscheduler").setLevel(logging.WARNING)


class Service:
    """Everything the running service holds; :meth:`start` and :meth:`shutdown` bracket a run."""

    def __init__(self, cfg: Config, plans: Sequence[JobPlan], rules: Sequence[Rule], *,
                 metrics_port: int | None = None, metrics_addr: str = "127.0.0.1", lake: bool = True):
        self.cfg = cfg
        self.plans = list(plans)
        self.engine = open_engine(cfg, create=False)
        try:
            ensure_schema(self.engine)
        except Exception as exc:  # noqa: BLE001 - the writer buffers until the store is there
            log.warning("store not reachable at start (%s); rows are buffered until it is", exc)
        self.metrics = ServiceMetrics()
        self.health = Health()
        self.writer = StoreWriter(self.engine, cfg.store.buffer_rows)
        self.metrics.observe_store(0, cfg.store.buffer_rows, 0, True)
        self.alerts = AlertManager(rules, self.engine, webhook_url=cfg.alerts.webhook_url,
                                   webhook_timeout_s=cfg.alerts.webhook_timeout_s, log_lines=cfg.alerts.log,
                                   on_transition=self._on_transition, on_notified=self._on_notified)
        # One outage account per target, shared by its jobs: an outage is told once per target.
        outages = {t.name: TargetOutage(t.name) for t in cfg.targets}
        # Off unless a policy is in propose or act mode (docs/actions.md, Autopilot).
        self.autopilot = Autopilot(cfg, self.engine) if any(p.mode != "off" for p in cfg.autopilot) else None
        self.jobs = [CollectJob(cfg, p, self._on_cycle, outages[p.target]) for p in self.plans]
        self.runs = ServiceRuns(self.engine, [t.name for t in cfg.targets])
        for j in self.jobs:
            self.health.register(j.id, j.plan.target, j.plan.interval_s)
        self.lake = lake
        self.pipeline = pipeline_command(cfg.source) if lake and cfg.pipeline.after_export else None
        self.report = report_command(cfg.source)
        self.http = MetricsServer(self.metrics.registry, self.health.report, metrics_port, metrics_addr) \
            if metrics_port is not None else None
        self.scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": ThreadPoolExecutor(max_workers=len(self.jobs) + 3)},
            job_defaults={"max_instances": 1, "coalesce": True,
                          "misfire_grace_time": max(1, int(cfg.schedule.misfire_grace_s))},
        )
        self.scheduler.add_listener(self._on_event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED | EVENT_JOB_ERROR)
        self.stats: dict[str, Any] = {"cycles": 0, "rows": 0, "status_rows": 0, "lake_hours": 0, "pruned": 0}
        self._stats_lock = threading.Lock()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self._record_start()
        now = datetime.now(UTC)
        for j in self.jobs:
            self.scheduler.add_job(j, IntervalTrigger(seconds=j.plan.interval_s, timezone=UTC), id=j.id,
                                   name=j.plan.describe(), next_run_time=now)
        if self.lake:
            # First run shortly after start: a restarted service catches up on closed hours.
            self.scheduler.add_job(self._export, IntervalTrigger(seconds=self.cfg.lake.export_every_s, timezone=UTC),
                                   id="lake-export", next_run_time=now + timedelta(seconds=2))
        self.scheduler.add_job(self._prune, IntervalTrigger(seconds=self.cfg.store.prune_every_s, timezone=UTC),
                               id="retention", next_run_time=now + timedelta(seconds=1))
        self._schedule_report()
        if self.http is not None:
            self.http.start()
        self.scheduler.start()
        # As SQLAlchemy spells it: an absolute SQLite path keeps its four slashes; no password.
        url = self.engine.url.render_as_string(hide_password=True)
        log.info("queueops collect started: %d job(s): %s; store %s; lake %s%s", len(self.jobs),
                 "; ".join(p.describe() for p in self.plans), url,
                 self.cfg.lake.path if self.lake else "(export off)",
                 f"; metrics on http://{self.http.address[0]}:{self.http.address[1]}/metrics" if self.http else "")

    def shutdown(self) -> dict[str, Any]:
        log.info("stopping: waiting for the cycles in flight")
        for child in (self.pipeline, self.report):
            if child is not None:
                child.stop()
        self.scheduler.shutdown(wait=True)
        for j in self.jobs:
            j.close()
        if self.autopilot is not None:
            self.autopilot.close()
        self.alerts.close()
        rep = self.writer.flush()
        self.metrics.observe_store(rep.buffered, rep.bound, rep.dropped_total, rep.ok)
        if not rep.buffered:  # with rows still unwritten the stop is not clean: the next start says so
            try:
                self.runs.stop()
            except Exception as exc:  # noqa: BLE001 - the next start reports a gap instead
                log.warning("the clean stop could not be recorded (%s); the next start reports a gap",
                            secrets.mask(str(exc)))
        if self.http is not None:
            self.http.close()
        if self.pipeline is not None:
            self.stats.update(pipeline_runs=self.pipeline.runs, pipeline_failures=self.pipeline.failures)
        summary = {**self.stats, "jobs": {j.id: j.cycles for j in self.jobs}, "buffered": rep.buffered,
                   "dropped": rep.dropped_total, "firing": len(self.alerts.firing())}
        if rep.buffered:
            log.error("stopped with %d rows not written: the store is unavailable (%s)", rep.buffered, rep.error)
        log.info("queueops collect stopped: %s", json.dumps(summary, sort_keys=True))
        return summary

    # -- callbacks --------------------------------------------------------------------------
    def _record_start(self) -> None:
        """This run's start in the store, and a status row over the gap an unclean stop left."""
        try:
            self.runs.start()
        except Exception as exc:  # noqa: BLE001 - collecting matters more than the record of it
            log.warning("the service's start could not be recorded in the store (%s): a gap left by an "
                        "unclean stop before it is not recorded", secrets.mask(str(exc)))

    def _on_cycle(self, job: CollectJob, result: runner.CycleResult) -> None:
        # The target's outage rows (down / up again), if this cycle opened or closed one, go with it.
        rep = self.writer.write(result.rows, [*result.status, *job.events])
        self.metrics.observe_store(rep.buffered, rep.bound, rep.dropped_total, rep.ok)
        self.metrics.observe_cycle(result.status)
        ok = any(s.ok for s in result.status)
        errors = [s.error for s in result.status if not s.ok]
        self.health.record(job.id, ok, errors[0] if errors else "")
        self.metrics.target_up.labels(job.plan.target).set(1 if ok else 0)
        if ok:
            self.metrics.last_success.labels(job.plan.target).set(time.time())
        self.metrics.snapshots.update(result.rows, ttl_s=3 * job.plan.interval_s)
        self.alerts.on_cycle(result.rows)
        if self.autopilot is not None:
            self.autopilot.on_cycle(job.plan.target, result.rows)
        with self._stats_lock:
            self.stats["cycles"] += 1
            self.stats["rows"] += len(result.rows)
            self.stats["status_rows"] += len(result.status)

    def _on_transition(self, t: Transition) -> None:
        labels = (t.rule.name, t.target, t.queue, t.rule.severity)
        if t.state == "firing":
            self.metrics.alerts_firing.labels(*labels).set(1)
        else:
            try:
                self.metrics.alerts_firing.remove(*labels)
            except KeyError:
                pass

    def _on_notified(self, notifier: str, n: Notification, ok: bool) -> None:
        """One notification (a queue's transitions of one cycle) logged or delivered, or not."""
        self.metrics.notifications.labels(notifier, "ok" if ok else "failed").inc()

    def _on_event(self, event: JobExecutionEvent) -> None:
        if event.code == EVENT_JOB_ERROR:
            log.error("job %s raised: %s", event.job_id, event.exception)
            return
        reason = "still_running" if event.code == EVENT_JOB_MAX_INSTANCES else "missed"
        self.metrics.cycles_skipped.labels(event.job_id, reason).inc()
        log.debug("job %s skipped a run (%s)", event.job_id, reason)

    # -- housekeeping jobs --------------------------------------------------------------------
    def _export(self) -> None:
        try:
            res = export_hours(self.cfg, self.engine)
        except Exception as exc:  # noqa: BLE001 - retried soon; the hours stay unexported until then
            retry = min(self.cfg.lake.export_every_s, 60.0)
            log.warning("lake export failed (%s); retrying in %.0fs", secrets.mask(str(exc)), retry)
            self.scheduler.add_job(self._export, "date", run_date=datetime.now(UTC) + timedelta(seconds=retry),
                                   id="lake-export-retry", replace_existing=True)
            return
        self.metrics.lake_hours.inc(len(res.exported))
        self.metrics.lake_last.set(time.time())
        with self._stats_lock:
            self.stats["lake_hours"] += len(res.exported)
        if self.pipeline is not None and (res.exported or self.pipeline.pending):
            # In the export job's own thread: the next export waits for it, nothing else does.
            self.pipeline.run()

    def _prune(self) -> None:
        try:
            out = prune(self.engine, self.cfg.store.retention_days, self.cfg.store.prune_batch, utcnow())
        except Exception as exc:  # noqa: BLE001 - next run tries again
            log.warning("retention prune failed (%s); next run in %.0fs", secrets.mask(str(exc)),
                        self.cfg.store.prune_every_s)
            return
        with self._stats_lock:
            self.stats["pruned"] += out.get("snapshots", 0) + out.get("collector_status", 0)

    def _schedule_report(self) -> None:
        """``report.daily_at = "HH:MM"`` (UTC): run ``queueops report`` in a child process daily."""
        at = self.cfg.report.daily_at
        if not at:
            return
        if importlib.util.find_spec("queueops.commands.report") is None:
            log.warning("report.daily_at is set but this installation has no 'queueops report' command")
            return
        try:
            hour, minute = (int(x) for x in at.split(":", 1))
            trigger = CronTrigger(hour=hour, minute=minute, timezone=UTC)
        except ValueError:
            log.error("report.daily_at = %r is not HH:MM (UTC); no daily report scheduled", at)
            return
        self.scheduler.add_job(self.report.run, trigger, id="daily-report")


def select_collectors(names: Sequence[str]) -> list[Collector]:
    return [registry.by_name(n) for n in names] if names else list(registry.COLLECTORS)


def run_service(cfg: Config, args: argparse.Namespace) -> int:
    """Run until SIGINT / SIGTERM (or ``--duration`` seconds); exit 0 after a clean stop."""
    setup_logging(getattr(args, "log_level", None) or "INFO")
    try:
        collectors = select_collectors(getattr(args, "collector", []) or [])
        plans = plan_jobs(cfg, collectors, known=registry.COLLECTORS)
        rules = effective_rules(cfg)
    except (PlanError, RuleError, KeyError) as exc:
        print(f"queueops: {exc}", file=sys.stderr)
        return 2
    try:
        svc = Service(cfg, plans, rules, metrics_port=getattr(args, "metrics_port", None),
                      metrics_addr=getattr(args, "metrics_addr", "127.0.0.1"), lake=not getattr(args, "no_lake", False))
    except OSError as exc:  # e.g. the metrics port is taken
        print(f"queueops: cannot start the service: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        def _handler(signum: int) -> None:
            if stop.is_set():
                log.warning("second %s: exiting without waiting", signal.Signals(signum).name)
                os._exit(130)
            log.info("received %s: stopping after the cycle in flight", signal.Signals(signum).name)
            stop.set()

        children.forward_stop_signals(_handler)  # SIGINT, SIGTERM and SIGHUP
    svc.start()
    stop.wait(getattr(args, "duration", None))
    svc.shutdown()
    return 0
