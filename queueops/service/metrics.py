"""Prometheus metrics of the service, on a registry of its own (never the process-global one).

* One family per snapshot metric, ``queueops_<metric>`` (name sanitised to Prometheus'
  alphabet), labelled ``target`` and ``queue`` (empty for target-wide metrics): a counter for the
  catalog's ``counter`` metrics (running totals), a gauge otherwise, with the catalog's help text. A value expires
  after three intervals of the job that produced it, so a queue that stopped reporting does
  not show a frozen number.
* Collector durations (histogram) and errors (counter) per target and collector; whether each
  target answered; the store's buffer, its bound and the rows dropped; alerts firing; lake exports.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from queueops import catalog
from queueops.rows import SnapshotRow, StatusRow

PREFIX = "queueops_"
_BAD = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(metric: str) -> str:
    """``queueops_<metric>`` with anything outside ``[a-zA-Z0-9_]`` replaced by ``_``."""
    return PREFIX + _BAD.sub("_", metric)


class SnapshotGauges(Collector):
    """The latest value of every (metric, target, queue), served as gauge families."""

    def __init__(self, reserved: set[str]):
        self.reserved = reserved
        self._values: dict[str, dict[tuple[str, str], tuple[float, float]]] = {}
        self._metric: dict[str, str] = {}  # family name -> the stored metric it serves
        self._names: dict[str, str] = {}  # metric -> family name: the same few dozen, every cycle
        self._lock = threading.Lock()

    def family_name(self, metric: str) -> str:
        name = self._names.get(metric)
        if name is None:
            name = metric_name(metric)
            # A collected metric must not collide with the service's own families.
            if any(name == r or name.startswith(r + "_") for r in self.reserved):
                name += "_value"
            self._names[metric] = name
        return name

    def update(self, rows: Iterable[SnapshotRow], ttl_s: float, now: float | None = None) -> None:
        expires = (time.monotonic() if now is None else now) + ttl_s
        with self._lock:
            for r in rows:
                if r.value is None:
                    continue
                name = self.family_name(r.metric)
                self._metric[name] = r.metric
                self._values.setdefault(name, {})[(r.target, r.queue)] = (r.value, expires)

    def collect(self, now: float | None = None) -> Iterator[Metric]:
        now = time.monotonic() if now is None else now
        with self._lock:
            for name in sorted(self._values):
                series = self._values[name]
                for key in [k for k, (_, exp) in series.items() if exp < now]:
                    del series[key]
                if not series:
                    continue
                metric = self._metric.get(name, name[len(PREFIX):])
                family = CounterMetricFamily if catalog.is_counter(metric) else GaugeMetricFamily
                fam = family(name, catalog.help_text(metric), labels=["target", "queue"])
                for (target, queue), (value, _exp) in sorted(series.items()):
                    fam.add_metric([target, queue], value)
                yield fam


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.duration = Histogram("queueops_collector_duration_seconds", "Duration of one collector statement",
                                  ["target", "collector"], registry=r,
                                  buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
        self.errors = Counter("queueops_collector_errors", "Collector runs that failed or timed out",
                              ["target", "collector"], registry=r)
        self.runs = Counter("queueops_collector_runs", "Collector runs (ok or not)", ["target", "collector"],
                            registry=r)
        self.target_up = Gauge("queueops_target_up", "1 when the target's last cycle succeeded", ["target"],
                               registry=r)
        self.last_success = Gauge("queueops_last_success_timestamp_seconds",
                                  "Unix time of the target's last successful cycle", ["target"], registry=r)
        self.cycles_skipped = Counter("queueops_cycles_skipped", "Cycles not started because the previous one "
                                      "was still running or the run was missed", ["job", "reason"], registry=r)
        self.store_buffered = Gauge("queueops_store_buffered_rows", "Rows waiting in memory for the store",
                                    registry=r)
        self.store_bound = Gauge("queueops_store_buffer_bound_rows", "Most rows kept in memory while the store "
                                 "is unavailable (store.buffer_rows)", registry=r)
        self.store_dropped = Counter("queueops_store_dropped_rows", "Rows dropped beyond the buffer bound",
                                     registry=r)
        self.store_up = Gauge("queueops_store_up", "1 when the last write to the store succeeded", registry=r)
        self.alerts_firing = Gauge("queueops_alert_firing", "1 while an alert fires",
                                   ["alert", "target", "queue", "severity"], registry=r)
        self.notifications = Counter("queueops_alert_notifications", "Alert notifications sent",
                                     ["notifier", "outcome"], registry=r)
        self.lake_hours = Counter("queueops_lake_hours_exported", "Hours written to the lake", registry=r)
        self.lake_last = Gauge("queueops_lake_last_export_timestamp_seconds", "Unix time of the last lake "
                               "export run that succeeded", registry=r)
        reserved = {n for n in r._names_to_collectors}  # noqa: SLF001 - the names we registered above
        self.snapshots = SnapshotGauges(reserved)
        r.register(self.snapshots)
        self._dropped_seen = 0

    def observe_cycle(self, status: Iterable[StatusRow]) -> None:
        for s in status:
            self.runs.labels(s.target, s.collector).inc()
            if s.duration_ms > 0:
                self.duration.labels(s.target, s.collector).observe(s.duration_ms / 1000)
            if not s.ok:
                self.errors.labels(s.target, s.collector).inc()

    def observe_store(self, buffered: int, bound: int, dropped_total: int, ok: bool) -> None:
        self.store_buffered.set(buffered)
        self.store_bound.set(bound)
        self.store_up.set(1 if ok else 0)
        if dropped_total > self._dropped_seen:
            self.store_dropped.inc(dropped_total - self._dropped_seen)
            self._dropped_seen = dropped_total
