"""Data access for the console: live samples, store history, collector status, audit, gold tables.

No Streamlit here (the pages wrap these in ``st.cache_resource``), so the benchmarks and tests use
the same code. Two sources:

* **Live**: the collectors run on demand through :class:`LiveSampler`, one instance per config,
  shared by every browser session. A sample is reused for ``console.cache_s`` seconds (slow
  collectors for ``schedule.slow_s``), and concurrent sessions wait for the collection in flight
  instead of starting their own (single flight): ten open dashboards cost the database one
  collection, not ten. The console therefore works with no scheduler running.
* **Store**: history, collector status and the audit log written by ``queueops collect`` and the
  action layer, read with SQLAlchemy Core. A store that is missing or unreadable yields empty
  frames and a message, never a crash.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from sqlalchemy import Engine, String, and_, func, or_, select, type_coerce
from sqlalchemy.exc import SQLAlchemyError

from collectors import registry, runner
from collectors.counters import CounterRates
from queueops import secrets
from queueops.config import Config
from queueops.rows import SnapshotRow, StatusRow, utcnow

ROW_COLUMNS = ["ts", "target", "database", "queue", "metric", "value", "note"]


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
    """Runs the collectors on demand for one config; shared by every session of the console."""

    HISTORY = timedelta(hours=1)

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self._lock = threading.Lock()
        self._fast: tuple[float, list[SnapshotRow], list[StatusRow]] | None = None
        self._slow: tuple[float, list[SnapshotRow], list[StatusRow]] | None = None
        self._ts = _now()
        self.last_ok: dict[str, datetime] = {}
        self._history: deque[SnapshotRow] = deque()
        self._rates = CounterRates()  # cumulative totals (lock timeouts, ...) -> *_per_s by delta

    @property
    def fast_collectors(self) -> list[registry.Collector]:
        return [c for c in registry.COLLECTORS if c.cadence == "fast"]

    @property
    def slow_collectors(self) -> list[registry.Collector]:
        return [c for c in registry.COLLECTORS if c.cadence == "slow"]

    @staticmethod
    def collectors_for(metrics: Sequence[str]) -> list[registry.Collector]:
        """The collectors that emit any of ``metrics`` (by their declared metric lists)."""
        wanted = set(metrics)
        return [c for c in registry.COLLECTORS if c.name in wanted or wanted & set(getattr(c, "metrics", ()))]

    def _collect(self, collectors: Sequence[registry.Collector]) -> tuple[list[SnapshotRow], list[StatusRow]]:
        if not collectors:
            return [], []
        ts = _now()
        targets = list(self.cfg.targets)
        # Targets in parallel: one unreachable server (connect timeout) must not delay the others.
        with ThreadPoolExecutor(max_workers=min(8, max(1, len(targets)))) as pool:
            results = list(pool.map(lambda t: runner.run_collectors(self.cfg, t, collectors, ts=ts), targets))
        rows = [r for res in results for r in res.rows]
        rows += self._rates.derive(rows)
        status = [s for res in results for s in res.status]
        for s in status:
            if s.ok:
                self.last_ok[s.target] = max(self.last_ok.get(s.target, s.ts), s.ts)
        return rows, status

    def sample(self, force: bool = False, max_age_s: float | None = None) -> LiveSample:
        """The latest sample, collecting again when older than ``max_age_s`` (default cache_s)."""
        fast_ttl = self.cfg.console.cache_s if max_age_s is None else max_age_s
        slow_ttl = max(fast_ttl, self.cfg.schedule.slow_s)
        with self._lock:  # single flight: a second session waits and reuses this collection
            now = time.monotonic()
            if force or self._fast is None or now - self._fast[0] >= fast_ttl:
                rows, status = self._collect(self.fast_collectors)
                self._fast = (time.monotonic(), rows, status)
                self._ts = _now()
                self._remember(rows)
            if self._slow is None or (force and now - self._slow[0] >= fast_ttl) or now - self._slow[0] >= slow_ttl:
                rows, status = self._collect(self.slow_collectors)
                self._slow = (time.monotonic(), rows, status)
            assert self._fast is not None and self._slow is not None
            return LiveSample(self._ts, self._fast[1] + self._slow[1], self._fast[2] + self._slow[2])

    def invalidate(self) -> None:
        """The next :meth:`sample` collects again (after an action changed what it shows)."""
        with self._lock:
            self._fast = None

    def resample(self, target: str, metrics: Sequence[str]) -> list[SnapshotRow]:
        """Collect only what is needed for ``metrics`` on one target now (after an action)."""
        wanted = self.collectors_for(metrics) or list(registry.FAST)
        res = runner.run_collectors(self.cfg, self.cfg.target(target), wanted)
        return [r for r in res.rows if r.metric in set(metrics)]

    def _remember(self, rows: list[SnapshotRow]) -> None:
        self._history.extend(r for r in rows if r.queue)
        cutoff = _now() - self.HISTORY
        while self._history and self._history[0].ts < cutoff:
            self._history.popleft()

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
            if "no such table" in msg or "does not exist" in msg:
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


def sparkline_series(frames: Sequence[pd.DataFrame], metric: str, since: datetime, bucket: str | None = None,
                     ) -> dict[tuple[str, str], list[float]]:
    """Per (target, queue): the metric's last values bucketed (max per bucket), oldest first.

    The bucket is a minute for an hour of history; shorter history gets shorter buckets (down to
    5 s) so that a console started two minutes ago still draws a line, not two dots.
    """
    parts = [f for f in frames if not f.empty]
    if not parts:
        return {}
    df = pd.concat([f[["ts", "target", "queue", "metric", "value"]] for f in parts], ignore_index=True)
    df = df[(df["metric"] == metric) & (df["ts"] >= pd.Timestamp(since)) & df["value"].notna()]
    if df.empty:
        return {}
    if bucket is None:
        span = (df["ts"].max() - df["ts"].min()).total_seconds()
        bucket = f"{int(min(60, max(5, span / 60)))}s"
    df = df.assign(bucket=df["ts"].dt.floor(bucket))
    g = df.groupby(["target", "queue", "bucket"], sort=True)["value"].max()
    return {key: [float(v) for v in series.to_numpy()] for key, series in g.groupby(level=[0, 1])}


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
