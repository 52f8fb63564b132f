"""Data access for the console: live samples, store history, collector status, audit, gold tables.

No Streamlit here (the pages wrap these in ``st.cache_resource``), so the benchmarks and tests use
the same code. Two sources:

* **Live**: :class:`LiveSampler`, one instance per config, shared by every browser session, goes
  through the service's own plan (:func:`queueops.service.plan.plan_jobs`: one job per target and
  interval). For each job it reads the latest cycle the collector service wrote to the store when
  that cycle is fresh (younger than the job's interval and half an interval more for the cycle's
  own run and write), so a running service is the only scheduler on the monitored server. Only
  when there is no fresh cycle (no service, a stopped one) does the console collect that job
  itself; its own sample is reused for ``console.cache_s`` seconds (jobs slower than
  ``schedule.fast_s``: for their interval), and concurrent sessions wait for the collection in
  flight instead of starting their own (single flight). The console therefore works with no
  service running, and costs the database nothing while one runs.
* **Store**: history, collector status and the audit log written by ``queueops collect`` and the
  action layer, read with SQLAlchemy Core. A store that is missing or unreadable yields empty
  frames and a message, never a crash.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from sqlalchemy import (
    BigInteger,
    Engine,
    Integer,
    String,
    and_,
    cast,
    extract,
    func,
    or_,
    select,
    tuple_,
    type_coerce,
)
from sqlalchemy.exc import SQLAlchemyError

from collectors import registry, runner
from collectors.counters import CounterRates
from queueops import secrets
from queueops.config import Config
from queueops.rows import SnapshotRow, StatusRow, utcnow
from queueops.service.plan import JobPlan, PlanError, plan_jobs

# A service cycle is fresh while younger than its job's interval plus this share of it (the cycle
# itself takes time to run and to be written).
FRESH_SLACK = 0.5

ROW_COLUMNS = ["ts", "target", "database", "queue", "metric", "value", "note"]

T = TypeVar("T")


def _now() -> datetime:
    return utcnow()


@dataclass
class LiveSample:
    """The latest values of every queue and the collectors' status, as one consistent picture."""

    ts: datetime
    rows: list[SnapshotRow] = field(default_factory=list)
    status: list[StatusRow] = field(default_factory=list)

    def values(self) -> dict[tuple[str, str], dict[str, float | None]]:
        out: dict[tuple[str, str], dict[str, float | None]] = {}
        for r in self.rows:
            if r.queue:
                out.setdefault((r.target, r.queue), {})[r.metric] = r.value
        return out

    def notes(self) -> dict[tuple[str, str, str], str]:
        return {(r.target, r.queue, r.metric): r.note for r in self.rows}

    def queue_errors(self) -> dict[tuple[str, str], str]:
        """Why a queue could not be read while its target answered (a missing or unreadable table):
        the ``queue_error`` rows' notes, joined per queue."""
        out: dict[tuple[str, str], list[str]] = {}
        for r in self.rows:
            if r.queue and r.metric == runner.QUEUE_ERROR and r.note not in out.get((r.target, r.queue), []):
                out.setdefault((r.target, r.queue), []).append(r.note)
        return {k: "; ".join(v) for k, v in out.items()}

    def target_rows(self, target: str) -> list[SnapshotRow]:
        """Target-wide rows (queue ``''``): root causes and server-wide counters."""
        return [r for r in self.rows if r.target == target and not r.queue]

    def errors(self) -> dict[str, list[StatusRow]]:
        out: dict[str, list[StatusRow]] = {}
        for s in self.status:
            if not s.ok:
                out.setdefault(s.target, []).append(s)
        return out

    def unreachable(self) -> dict[str, str]:
        """Targets where every collector failed: the first error of each."""
        by_target: dict[str, list[StatusRow]] = {}
        for s in self.status:
            by_target.setdefault(s.target, []).append(s)
        return {t: rows[0].error for t, rows in by_target.items() if rows and not any(r.ok for r in rows)}

    def frame(self) -> pd.DataFrame:
        return rows_frame(self.rows)


def rows_frame(rows: Iterable[SnapshotRow]) -> pd.DataFrame:
    df = pd.DataFrame([(r.ts, r.target, r.database, r.queue, r.metric, r.value, r.note) for r in rows],
                      columns=ROW_COLUMNS)
    df["ts"] = pd.to_datetime(df["ts"], utc=True)
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return df


class LiveSampler:
    """The latest values for one config, shared by every session of the console: the service's
    fresh cycles from the store, else the console's own collection, job by job of the same plan."""

    HISTORY = timedelta(hours=1)

    def __init__(self, cfg: Config, store: Engine | None = None):
        self.cfg = cfg
        self._lock = threading.Lock()
        # job id -> (monotonic time taken, rows, status, cycle ts, from the store?)
        self._jobs: dict[str, tuple[float, list[SnapshotRow], list[StatusRow], datetime, bool]] = {}
        self._ts = _now()
        self.last_ok: dict[str, datetime] = {}
        self._history: deque[SnapshotRow] = deque()
        self._remembered: dict[str, datetime] = {}  # job id -> newest cycle put into the history
        self._collect_next: set[str] = set()  # jobs the next sample collects itself (after an action)
        self._rates = CounterRates()  # cumulative totals (lock timeouts, ...) -> *_per_s by delta
        self._store = store
        self._store_opened = store is not None
        self.plans = self._plans(cfg)
        self.collected_jobs = 0  # jobs this console collected itself (0 while a service keeps up)
        self.stored_jobs = 0     # jobs read from the service's fresh cycles in the store
        # Changes whenever the console's own recent samples change (see :meth:`derived`).
        self.generation = 0
        self._derived: OrderedDict[Hashable, Any] = OrderedDict()

    @staticmethod
    def _plans(cfg: Config) -> list[JobPlan]:
        try:
            return plan_jobs(cfg, registry.COLLECTORS)
        except PlanError:  # config check reports the schedule; the console still shows what it can
            return plan_jobs(cfg.model_copy(update={"schedule": cfg.schedule.model_copy(update={"collectors": {}})}),
                             registry.COLLECTORS)

    @staticmethod
    def collectors_for(metrics: Sequence[str]) -> list[registry.Collector]:
        """The collectors that emit any of ``metrics`` (by their declared metric lists)."""
        wanted = set(metrics)
        return [c for c in registry.COLLECTORS if c.name in wanted or wanted & set(getattr(c, "metrics", ()))]

    def _ttl(self, job: JobPlan, max_age_s: float | None) -> float:
        """How long the console's own collection of ``job`` is reused."""
        if job.interval_s > self.cfg.schedule.fast_s:
            return max(job.interval_s, self.cfg.console.cache_s if max_age_s is None else max_age_s)
        return self.cfg.console.cache_s if max_age_s is None else max_age_s

    def _engine(self) -> Engine | None:
        if not self._store_opened:
            self._store_opened = True
            try:
                from queueops.store import open_engine

                self._store = open_engine(self.cfg, create=False)
            except Exception:  # noqa: BLE001 - no store: the console collects by itself
                self._store = None
        return self._store

    def _fresh_cycles(self, jobs: Sequence[JobPlan]) -> dict[str, tuple[list[SnapshotRow], list[StatusRow], datetime]]:
        """The latest cycle the service wrote for each job, where it is fresh (job id -> rows)."""
        engine = self._engine()
        if engine is None or not jobs:
            return {}
        from queueops.store.schema import collector_status as cs
        from queueops.store.schema import snapshots as sn

        now = _now()
        oldest = now - timedelta(seconds=max(j.interval_s for j in jobs) * (1 + FRESH_SLACK))
        out: dict[str, tuple[list[SnapshotRow], list[StatusRow], datetime]] = {}
        try:
            with engine.connect() as conn:
                newest = {(t, c): _aware(ts) for t, c, ts in conn.execute(
                    select(cs.c.target, cs.c.collector, func.max(cs.c.ts)).where(cs.c.ts >= oldest)
                    .group_by(cs.c.target, cs.c.collector))}
                for job in jobs:
                    seen = [newest.get((job.target, c.name)) for c in job.collectors]
                    if any(ts is None for ts in seen):
                        continue
                    cycle = max(ts for ts in seen if ts is not None)
                    if (now - cycle).total_seconds() > job.interval_s * (1 + FRESH_SLACK):
                        continue
                    names = [c.name for c in job.collectors]
                    status = [StatusRow(_aware(r.ts), r.target, r.collector, bool(r.ok), float(r.duration_ms),
                                        int(r.rows or 0), r.error or "", bool(r.timeout))
                              for r in conn.execute(select(cs).where(and_(cs.c.target == job.target, cs.c.ts == cycle,
                                                                          cs.c.collector.in_(names))))]
                    rows = [SnapshotRow(_aware(r.ts), r.target, r.database, r.queue, r.metric, r.value, r.note or "")
                            for r in conn.execute(select(sn).where(and_(sn.c.target == job.target, sn.c.ts == cycle)))]
                    out[job.id] = (rows, status, cycle)
        except SQLAlchemyError:
            return {}  # an unreadable store: the console collects by itself
        return out

    def _collect(self, jobs: Sequence[JobPlan]) -> dict[str, tuple[list[SnapshotRow], list[StatusRow], datetime]]:
        """Run the collectors of ``jobs`` now (targets in parallel; one connection per job)."""
        if not jobs:
            return {}
        ts = _now()
        # Targets in parallel: one unreachable server (connect timeout) must not delay the others.
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(jobs)))) as pool:
            results = list(pool.map(
                lambda j: runner.run_collectors(self.cfg, self.cfg.target(j.target), j.collectors, ts=ts), jobs))
        self.collected_jobs += len(jobs)
        out = {}
        for job, res in zip(jobs, results, strict=True):
            out[job.id] = (res.rows + self._rates.derive(res.rows), res.status, ts)
        return out

    def sample(self, force: bool = False, max_age_s: float | None = None) -> LiveSample:
        """The latest sample: each job's fresh service cycle from the store, else the console's own
        collection when older than its reuse time (``max_age_s``, default ``console.cache_s``).
        ``force``: collect the fast jobs now whatever the store holds (after an action)."""
        fast_ttl = self.cfg.console.cache_s if max_age_s is None else max_age_s
        with self._lock:  # single flight: a second session waits and reuses this collection
            now = time.monotonic()
            due = []
            for job in self.plans:
                have = self._jobs.get(job.id)
                age = None if have is None else now - have[0]
                slow = job.interval_s > self.cfg.schedule.fast_s
                if have is None or age >= self._ttl(job, max_age_s) or (force and (not slow or age >= fast_ttl)) \
                        or (have[4] and age >= min(fast_ttl, job.interval_s)):
                    due.append(job)
            stored = {} if force else self._fresh_cycles([j for j in due if j.id not in self._collect_next])
            self._collect_next.clear()
            for job_id, (rows, status, cycle) in stored.items():
                have = self._jobs.get(job_id)
                if have is not None and not have[4] and have[3] >= cycle and not force:
                    continue  # the console's own sample is newer than the service's cycle
                self._jobs[job_id] = (time.monotonic(), rows, status, cycle, True)
            self.stored_jobs += len(stored)
            mine = self._collect([j for j in due if j.id not in stored])
            for job_id, (rows, status, ts) in mine.items():
                self._jobs[job_id] = (time.monotonic(), rows, status, ts, False)
            for job_id, (_t, rows, status, cycle, _s) in self._jobs.items():
                if job_id in stored or job_id in mine:
                    self._remember(job_id, rows, cycle)
                    for st_row in status:
                        if st_row.ok:
                            self.last_ok[st_row.target] = max(self.last_ok.get(st_row.target, st_row.ts), st_row.ts)
            if mine or stored:
                self._ts = max(v[3] for v in self._jobs.values())
            rows = [r for v in self._jobs.values() for r in v[1]]
            status = [s for v in self._jobs.values() for s in v[2]]
            return LiveSample(self._ts, rows, status)

    def invalidate(self) -> None:
        """The next :meth:`sample` collects the fast jobs again (an action changed what they show)."""
        with self._lock:
            for job in self.plans:
                if job.interval_s <= self.cfg.schedule.fast_s:
                    self._jobs.pop(job.id, None)
                    self._collect_next.add(job.id)  # the service's last cycle predates the action

    def resample(self, target: str, metrics: Sequence[str]) -> list[SnapshotRow]:
        """Collect only what is needed for ``metrics`` on one target now (after an action)."""
        wanted = self.collectors_for(metrics) or list(registry.FAST)
        res = runner.run_collectors(self.cfg, self.cfg.target(target), wanted)
        return [r for r in res.rows if r.metric in set(metrics)]

    def _remember(self, job_id: str, rows: list[SnapshotRow], cycle: datetime) -> None:
        """Keep a cycle's queue rows for the streaks (each cycle once, whichever source gave it)."""
        if self._remembered.get(job_id) is not None and self._remembered[job_id] >= cycle:
            return
        self._remembered[job_id] = cycle
        self.generation += 1
        self._history.extend(r for r in rows if r.queue)
        cutoff = _now() - self.HISTORY
        while self._history and self._history[0].ts < cutoff:
            self._history.popleft()

    DERIVED_ENTRIES = 32

    def derived(self, key: Hashable, make: Callable[[], T]) -> T:
        """What a page computes from one sample and the store (sparklines, charts), made once and
        shared by every session and reload until ``key`` changes. The key must name every input
        (the sample's time, :attr:`generation`, the store's newest row, the viewer's time zone...),
        so a value served from here is the one that would be computed again."""
        with self._lock:
            if key in self._derived:
                self._derived.move_to_end(key)
                return self._derived[key]
        value = make()
        with self._lock:
            self._derived[key] = value
            while len(self._derived) > self.DERIVED_ENTRIES:
                self._derived.popitem(last=False)
        return value

    def history(self, metric: str) -> pd.DataFrame:
        with self._lock:
            rows = [r for r in self._history if r.metric == metric]
        return rows_frame(rows)


# --------------------------------------------------------------------------------------------
# Store


class Store:
    """Read-only views of the store for the console. Missing tables read as empty."""

    def __init__(self, cfg: Config):
        from queueops.store import open_engine

        self.cfg = cfg
        self.error: str | None = None
        self.engine: Engine | None = None
        try:
            self.engine = open_engine(cfg, create=False)
        except Exception as exc:  # noqa: BLE001 - a broken store must not break the live view
            self.error = secrets.mask(f"{type(exc).__name__}: {exc}")

    def _read(self, stmt: Any) -> pd.DataFrame:
        if self.engine is None:
            return pd.DataFrame()
        try:
            with self.engine.connect() as conn:
                result = conn.execute(stmt)
                # Plain tuples: pandas probes each Row object's attributes, which costs ~20 µs a row.
                df = pd.DataFrame([tuple(r) for r in result.fetchall()], columns=list(result.keys()))
            self.error = None
            return df
        except SQLAlchemyError as exc:
            msg = str(getattr(exc, "orig", exc))
            # A table not created yet is no data; a missing column (an older store: PostgreSQL says
            # 'column ... does not exist') is an error the readers fall back from.
            if "no such table" in msg or ("does not exist" in msg and not msg.startswith("column ")):
                return pd.DataFrame()
            self.error = secrets.mask(f"{type(exc).__name__}: {msg}")
            return pd.DataFrame()

    def history(self, metrics: Sequence[str], since: datetime, queues: Sequence[tuple[str, str]] | None = None,
                until: datetime | None = None, targets: Sequence[str] | None = None) -> pd.DataFrame:
        """Snapshot rows of ``metrics`` since a time (optionally for some (target, queue) pairs)."""
        from queueops.store.schema import snapshots as s

        cond = [s.c.ts >= since, s.c.metric.in_(list(metrics))]
        if targets:
            cond.append(s.c.target.in_(list(targets)))
        if until is not None:
            cond.append(s.c.ts <= until)
        if queues:
            cond.append(or_(*[and_(s.c.target == t, s.c.queue == q) for t, q in queues]))
        # ts as the stored text on SQLite: pandas parses a column of ISO strings in one vectorized
        # step, SQLAlchemy's per-row datetime parsing costs ~10 µs a row (PostgreSQL: unchanged).
        df = self._read(select(type_coerce(s.c.ts, String).label("ts"), s.c.target, s.c.queue, s.c.metric,
                               s.c.value).where(*cond).order_by(s.c.ts))
        return _normalize(df, ["ts", "target", "queue", "metric", "value"])

    def _series_cond(self, metric: str, since: datetime, queues: Sequence[tuple[str, str]]) -> list[Any]:
        """Rows of one metric of these (target, queue) pairs since a time, with a value: the
        ``target``/``queue`` lists let the (target, queue, metric, ts) index seek each pair's range
        instead of scanning every metric of the window."""
        from queueops.store.schema import snapshots as s

        return [s.c.target.in_(sorted({t for t, _ in queues})), s.c.queue.in_(sorted({q for _, q in queues})),
                tuple_(s.c.target, s.c.queue).in_(sorted(set(queues))), s.c.metric == metric,
                s.c.ts >= since, s.c.value.is_not(None)]

    def span(self, metric: str, since: datetime, queues: Sequence[tuple[str, str]]
             ) -> tuple[pd.Timestamp, pd.Timestamp] | None:
        """The oldest and newest time of a metric's values since a time, for these queues."""
        from queueops.store.schema import snapshots as s

        if not queues:
            return None
        df = self._read(select(type_coerce(func.min(s.c.ts), String).label("first"),
                               type_coerce(func.max(s.c.ts), String).label("last"))
                        .where(*self._series_cond(metric, since, queues)))
        if df.empty or df["first"].isna().all():
            return None
        first, last = (pd.to_datetime(df[c], utc=True, format="mixed").iloc[0] for c in ("first", "last"))
        return first, last

    def bucket_max(self, metric: str, since: datetime, queues: Sequence[tuple[str, str]], bucket_s: int
                   ) -> pd.DataFrame:
        """Per queue and ``bucket_s`` bucket (seconds since the epoch, floored like pandas'
        ``dt.floor``): the metric's largest value, aggregated by the store, which returns a few rows
        per queue instead of every sample of the window."""
        from queueops.store.schema import snapshots as s

        if not queues or self.engine is None:
            return pd.DataFrame(columns=["target", "queue", "bucket", "value"])
        if self.engine.dialect.name == "sqlite":  # ts is ISO text; strftime('%s') its whole epoch seconds
            bucket = (cast(func.strftime("%s", s.c.ts), Integer) // bucket_s) * bucket_s
        else:
            bucket = cast(func.floor(extract("epoch", s.c.ts) / bucket_s), BigInteger) * bucket_s
        b = bucket.label("bucket")
        df = self._read(select(s.c.target, s.c.queue, b, func.max(s.c.value).label("value"))
                        .where(*self._series_cond(metric, since, queues)).group_by(s.c.target, s.c.queue, b))
        return df if not df.empty else pd.DataFrame(columns=["target", "queue", "bucket", "value"])

    def target_rows(self, target: str, since: datetime) -> pd.DataFrame:
        from queueops.store.schema import snapshots as s

        df = self._read(select(s.c.ts, s.c.metric, s.c.value, s.c.note)
                        .where(s.c.target == target, s.c.queue == "", s.c.ts >= since).order_by(s.c.ts))
        return _normalize(df, ["ts", "metric", "value", "note"])

    def last_status(self) -> pd.DataFrame:
        """Per target: when a collector last succeeded, and the newest status row (ok or not)."""
        from queueops.store.schema import collector_status as cs

        ok = self._read(select(cs.c.target, func.max(cs.c.ts).label("last_ok"))
                        .where(cs.c.ok.is_(True)).group_by(cs.c.target))
        any_ = self._read(select(cs.c.target, func.max(cs.c.ts).label("last_row")).group_by(cs.c.target))
        ok = _normalize(ok, ["target", "last_ok"])
        any_ = _normalize(any_, ["target", "last_row"])
        return any_.merge(ok, on="target", how="left")

    def newest_snapshot(self) -> datetime | None:
        from queueops.store.schema import snapshots as s

        df = self._read(select(func.max(s.c.ts).label("ts")))
        if df.empty or df["ts"].iloc[0] is None:
            return None
        return pd.to_datetime(df["ts"].iloc[0], utc=True).to_pydatetime()

    def audit(self, since: datetime | None = None, limit: int = 5000) -> pd.DataFrame:
        from queueops.actions.audit import reconcile
        from queueops.store.schema import audit_log as a

        if self.engine is not None:
            try:  # a record whose process is gone reads as interrupted here too, not as running
                reconcile(self.engine)
            except SQLAlchemyError:
                pass  # _read below reports the store
        # Not last_heard / noticed_at: a store no newer process has opened yet lacks them (the
        # console opens it without altering it); an interrupted record's error names both times.
        cols = [c for c in a.columns if c.name not in ("last_heard", "noticed_at")]
        stmt = select(*cols).order_by(a.c.start_time.desc()).limit(limit)
        if since is not None:
            stmt = stmt.where(a.c.start_time >= since)
        df = self._read(stmt)
        return _normalize(df, [c.name for c in cols], ts_cols=("start_time", "end_time"))


    def commands(self, audit_id: int) -> pd.DataFrame:
        """The statements an action executed (its ``audit_commands`` rows), in order."""
        from queueops.store.schema import audit_commands as c

        df = self._read(select(c).where(c.c.audit_id == int(audit_id)).order_by(c.c.seq))
        return _normalize(df, [col.name for col in c.columns], ts_cols=("start_time", "end_time"))

    def alert_states(self) -> pd.DataFrame:
        """Every alert's latest state as the service keeps it (``alert_state``: pending, firing, resolved)."""
        from queueops.store.schema import alert_state as a

        df = self._read(select(a).order_by(a.c.since.desc()))
        if df.empty and self.error and "clearing_since" in self.error:
            # A store no newer service has opened yet (the console opens it without altering it).
            df = self._read(select(*[c for c in a.columns if c.name != "clearing_since"]).order_by(a.c.since.desc()))
            df["clearing_since"] = None
        return _normalize(df, [c.name for c in a.columns], ts_cols=("since", "notified_at", "clearing_since"))

    def alert_events(self, since: datetime, limit: int = 2000) -> pd.DataFrame:
        """Alert transitions (``alert_events``: fired, resolved) since a time, newest first, bounded."""
        from queueops.store.schema import alert_events as e

        df = self._read(select(e).where(e.c.at >= since).order_by(e.c.at.desc(), e.c.id.desc()).limit(limit))
        if df.empty and self.error and "queue_state" in self.error:
            # A store no newer service has opened yet: its transitions have no queue state.
            cols = [c for c in e.columns if c.name != "queue_state"]
            df = self._read(select(*cols).where(e.c.at >= since).order_by(e.c.at.desc(), e.c.id.desc()).limit(limit))
            df["queue_state"] = None
        return _normalize(df, [c.name for c in e.columns], ts_cols=("at", "active_since"))


def _aware(value: Any) -> Any:
    """SQLite hands back naive UTC times."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _normalize(df: pd.DataFrame, columns: Sequence[str], ts_cols: Sequence[str] = ("ts", "last_ok", "last_row")
               ) -> pd.DataFrame:
    """Same columns whether empty or not; times as UTC (SQLite returns them naive)."""
    if df.empty:
        df = pd.DataFrame({c: pd.Series(dtype="object") for c in columns})
    for c in ts_cols:
        if c in df.columns:
            df[c] = pd.to_datetime(df[c], utc=True, errors="coerce", format="mixed")
    if "value" in df.columns:
        df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return df


def bucket_seconds(span_s: float) -> int:
    """A sparkline's bucket width: a minute for an hour of history; shorter history gets shorter
    buckets (down to 5 s) so that a console started two minutes ago still draws a line, not two dots."""
    return int(min(60, max(5, span_s / 60)))


def sparklines(store: Store, live: Sequence[pd.DataFrame], metric: str, since: datetime,
               queues: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[float]]:
    """Per (target, queue): the metric's values since ``since`` in the store's rows of ``queues`` and
    the ``live`` frames, max per bucket (:func:`bucket_seconds` of both sources' span), oldest first.

    The store does the bucketing: it returns a point per queue and bucket (6,000 rows for 100
    queues and an hour) instead of every sample (24,000 at 15 s), through the per-queue index;
    the maximum of a bucket is the larger of the store's and the live rows' maxima."""
    parts = [f[["ts", "target", "queue", "metric", "value"]] for f in live if not f.empty]
    df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not df.empty:
        df = df[(df["metric"] == metric) & (df["ts"] >= pd.Timestamp(since)) & df["value"].notna()]
    ends = [store.span(metric, since, queues)]
    if not df.empty:
        ends.append((df["ts"].min(), df["ts"].max()))
    ends = [e for e in ends if e is not None]
    if not ends:
        return {}
    span = (max(e[1] for e in ends) - min(e[0] for e in ends)).total_seconds()
    bucket_s = bucket_seconds(span)
    best: dict[tuple[str, str, int], float] = {}
    for t, q, b, v in store.bucket_max(metric, since, queues, bucket_s).itertuples(index=False):
        best[(t, q, int(b))] = float(v)
    if not df.empty:
        floored = (df["ts"].dt.floor(f"{bucket_s}s") - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)
        for (t, q, b), v in df.assign(bucket=floored).groupby(["target", "queue", "bucket"])["value"].max().items():
            key = (t, q, int(b))
            best[key] = max(best.get(key, float(v)), float(v))
    out: dict[tuple[str, str], list[float]] = {}
    for key in sorted(best):
        out.setdefault(key[:2], []).append(best[key])
    return out


def parse_note(note: str) -> dict[str, Any] | None:
    """Root-cause rows carry JSON details in ``note``; anything else is a plain remark."""
    if not note or not note.lstrip().startswith(("{", "[")):
        return None
    try:
        value = json.loads(note)
    except ValueError:
        return None
    if isinstance(value, dict):
        return value
    if isinstance(value, list):
        return {"items": value}
    return None


# --------------------------------------------------------------------------------------------
# Pipeline gold tables (layout: pipeline/gold.py; written by ``queueops pipeline run``)

GOLD_TABLES = ("rollups", "findings", "forecasts", "fleet")


def gold_dir(cfg: Config) -> Path:
    """Where ``queueops pipeline run`` writes the gold tables (``[pipeline] out``)."""
    pipeline_cfg = getattr(cfg, "pipeline", None)
    out = getattr(pipeline_cfg, "out", None) or ".queueops/gold"
    return cfg.path(out)


def gold_version(path: Path) -> float:
    """Changes whenever the pipeline finished a run (its state file), for cache keys."""
    try:
        return (path / "_state" / "pipeline.json").stat().st_mtime
    except OSError:
        return 0.0


def read_gold(path: Path, name: str, filters: list[tuple[str, str, Any]] | None = None) -> pd.DataFrame:
    """One gold table as a frame (hive partitions become columns); empty when it does not exist.

    ``filters`` prune partitions before reading (e.g. ``[("window", "=", "1h"), ("date", ">=", d)]``),
    so the console reads days of rollups, not the whole history.
    """
    import pyarrow as pa
    import pyarrow.dataset as ds

    folder = path / name
    if not folder.exists() or not any(folder.rglob("*.parquet")):
        return pd.DataFrame()
    keys = {"rollups": ("window", "date", "hour"), "findings": ("date", "hour")}.get(name, ())
    # Partition values stay strings ("05" is an hour, not the number 5; dates compare as text).
    partitioning = ds.partitioning(pa.schema([(k, pa.string()) for k in keys]), flavor="hive") if keys else None
    dataset = ds.dataset(str(folder), format="parquet", partitioning=partitioning,
                         exclude_invalid_files=True, ignore_prefixes=[".", "_"])
    expr = None
    for col, op, value in filters or []:
        if col not in dataset.schema.names:
            continue
        term = {"=": ds.field(col) == value, ">=": ds.field(col) >= value, "<=": ds.field(col) <= value}[op]
        expr = term if expr is None else expr & term
    table = dataset.to_table(filter=expr)
    df = table.to_pandas()
    for col in df.columns:
        if isinstance(df[col].dtype, pd.CategoricalDtype):
            df[col] = df[col].astype(str)
    return df


def now_utc() -> datetime:
    return datetime.now(UTC)
