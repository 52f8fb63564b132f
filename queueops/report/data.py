"""What the daily report shows, read without Spark: the gold tables (pyarrow) and the audit log.

The gold layout is ``pipeline/gold.py``'s (docs/pipeline.md). Only the partitions of the report's
period are read (hive partition filters on ``date``), so a report costs the same whatever the
history's length. The gold folder may be a local path or any URI pyarrow reads (``s3://``,
``gs://``, ``hdfs://``, ``file://``), through the same ``pyarrow.fs`` resolution as the lake
exporter (:func:`queueops.lake.fs.resolve`); a URI pyarrow cannot open is a :class:`GoldError`
naming the setting and its value, never an empty report.

One severity (issue 32): a queue's state in the report is :func:`queueops.judge.queue_state` of
its findings, and the root causes the console names (an old snapshot, a session holding the
queue's table) are findings here too (:func:`root_causes`), judged from the hourly rollups with
the judge's own rules (:func:`~queueops.judge.snapshot_state`, :func:`~queueops.judge.blocker_state`),
so a snapshot held for minutes is a warning in the report as on the Overview even where the dead
tuples did not rise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
from pyarrow import fs as pafs

from queueops import judge
from queueops.lake.fs import Lake, resolve

PARTS = {
    "rollups": pa.schema([("window", pa.string()), ("date", pa.string()), ("hour", pa.string())]),
    "findings": pa.schema([("date", pa.string()), ("hour", pa.string())]),
}


class GoldError(ValueError):
    """The gold location cannot be opened: the message names the setting and the value."""


def gold_location(gold: str | Path, setting: str = "[pipeline] out", base_dir: Path | None = None) -> Lake:
    """``gold`` as a pyarrow filesystem and root: a URI (``s3://bucket/gold``, ``file:///srv/gold``)
    through ``pyarrow.fs.FileSystem.from_uri``, as the lake exporter does, else a local path.
    Raises :class:`GoldError` naming ``setting`` and the value when pyarrow cannot open it (an
    unknown scheme, a bucket without credentials or region, a filesystem pyarrow was built without)."""
    text = str(gold)
    try:
        return resolve(text, base_dir or Path.cwd())
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise GoldError(f"{setting} = {text!r}: the gold tables cannot be opened there ({exc}); give a local "
                        "folder or a URI pyarrow reads (s3://bucket/path, gs://..., hdfs://..., file:///path)") from exc


@dataclass
class ReportData:
    start: datetime
    end: datetime
    gold: str
    rollups: pd.DataFrame
    findings: pd.DataFrame
    forecasts: pd.DataFrame
    fleet: pd.DataFrame
    audit: pd.DataFrame
    problems: list[str] = field(default_factory=list)  # what could not be read, said in the report

    @property
    def has_gold(self) -> bool:
        return not (self.rollups.empty and self.findings.empty and self.forecasts.empty)


def _days(start: datetime, end: datetime) -> list[str]:
    d, out = start.date(), []
    while d <= (end - timedelta(microseconds=1)).date():
        out.append(d.isoformat())
        d += timedelta(days=1)
    return out


def _read(gold: Lake | str | Path, name: str, days: list[str] | None, windows: list[str] | None = None
          ) -> pd.DataFrame:
    if not isinstance(gold, Lake):
        gold = gold_location(gold)
    folder = f"{gold.root}/{name}"
    if gold.fs.get_file_info(folder).type != pafs.FileType.Directory:
        return pd.DataFrame()
    part = ds.partitioning(PARTS[name], flavor="hive") if name in PARTS else None
    dataset = ds.dataset(folder, filesystem=gold.fs, format="parquet", partitioning=part,
                         exclude_invalid_files=True, ignore_prefixes=[".", "_"])
    flt = None
    if days is not None and name in PARTS:
        flt = ds.field("date").isin(days)
    if windows is not None:
        w = ds.field("window").isin(windows)
        flt = w if flt is None else flt & w
    return dataset.to_table(filter=flt).to_pandas()


def _utc(df: pd.DataFrame) -> pd.DataFrame:
    for c in df.columns:
        if pd.api.types.is_datetime64_any_dtype(df[c]):
            df[c] = pd.to_datetime(df[c], utc=True)
    return df


def latest_as_of(gold: Lake) -> datetime | None:
    """The ``as_of`` of the last pipeline run (the end of the newest lake hour it processed)."""
    f = _read(gold, "forecasts", None)
    if f.empty or "as_of" not in f:
        return None
    return pd.to_datetime(f["as_of"], utc=True).max().to_pydatetime()


# Each queue's threshold on oldest_snapshot_age_s, (target, queue) -> levels
# (:func:`queueops.causes.snapshot_thresholds`): a queue not in it has the judge's old-snapshot levels.
SnapshotThresholds = Mapping[tuple[str, str], judge.Levels | None]


def load(gold: Lake, start: datetime, end: datetime, audit_engine: Any | None, shown: str = "",
         snapshot_thresholds: SnapshotThresholds | None = None) -> ReportData:
    days = _days(start, end)
    problems: list[str] = []

    def within(df: pd.DataFrame, col: str) -> pd.DataFrame:
        if df.empty:
            return df
        t = pd.to_datetime(df[col], utc=True)
        return df[(t >= start) & (t < end)].reset_index(drop=True)

    try:
        rollups = within(_utc(_read(gold, "rollups", days, ["5m", "1h"])), "window_start")
        findings = with_root_causes(within(_utc(_read(gold, "findings", days)), "hour_start"), rollups,
                                    snapshot_thresholds)
        forecasts = _utc(_read(gold, "forecasts", None))
        fleet = _utc(_read(gold, "fleet", None))
    except (OSError, pa.ArrowException) as exc:
        problems.append(f"gold tables in {shown or gold.root} could not be read: {exc}")
        rollups = findings = forecasts = fleet = pd.DataFrame()
    audit = pd.DataFrame()
    if audit_engine is not None:
        try:
            audit = read_audit(audit_engine, start, end)
        except Exception as exc:  # noqa: BLE001 - a store outage must not stop the report
            from queueops import secrets

            problems.append(f"audit log unavailable: {secrets.mask(str(exc))}")
    return ReportData(start, end, shown or gold.root, rollups, findings, forecasts, fleet, audit, problems)


def _hourly(rollups: pd.DataFrame, metric: str) -> pd.DataFrame:
    if rollups.empty or "metric" not in rollups:
        return pd.DataFrame()
    return rollups[(rollups["window"] == "1h") & (rollups["metric"] == metric)]


def root_causes(rollups: pd.DataFrame, snapshot_thresholds: SnapshotThresholds | None = None) -> pd.DataFrame:
    """The console's root causes, per queue and hour, as findings judged by the judge's rules:

    * ``ghosts_held_by_snapshot``: the target's ``oldest_snapshot_age_s`` (hourly max) through
      :func:`~queueops.judge.snapshot_state` (60 s / 600 s, or the queue's own levels from
      ``snapshot_thresholds``), on every queue of the target, as the console names the snapshot holder
      for each of them;
    * ``blocker``: a session held a table lock that stops the queue's dequeues (``lock_blockers``
      at least 1 in the hour) through :func:`~queueops.judge.blocker_state` with the hour's
      ``lock_wait_max_s`` as its age (it counts from the holder's transaction start while held).

    The head of a chain of row-lock waiters is not here: the rollups keep no per-queue trace of it
    (``head_blockers`` is a target-wide note), so the report cannot tie it to a queue."""
    rows: list[dict[str, Any]] = []
    snap = _hourly(rollups, "oldest_snapshot_age_s")
    snap = snap[snap["queue"] == ""] if not snap.empty else snap
    queues = rollups[(rollups["window"] == "1h") & (rollups["queue"] != "")][
        ["target", "database", "queue", "window_start"]].drop_duplicates() if not rollups.empty else pd.DataFrame()
    for r in snap.itertuples():
        if not pd.notna(r.max) or queues.empty:
            continue
        mine = queues[(queues["target"] == r.target) & (queues["window_start"] == r.window_start)]
        for q in mine.itertuples():
            threshold = (snapshot_thresholds or {}).get((r.target, q.queue))
            age, state = float(r.max), judge.snapshot_state(float(r.max), threshold)
            if state not in ("warn", "crit"):
                continue
            warn, crit = judge.snapshot_levels(threshold)
            rows.append(_cause_row("ghosts_held_by_snapshot", state, r, q.queue, "oldest_snapshot_age_s",
                                   age, warn, {"snapshot_age_s": age, "holder": getattr(r, "peak_note", "") or ""},
                                   f"a transaction held the oldest snapshot of {r.target} for up to {age:.0f} s "
                                   f"(old from {warn:.0f} s, critical from {crit:.0f} s)"))
    held = _hourly(rollups, "lock_blockers")
    waits = _hourly(rollups, "lock_wait_max_s")
    for r in held.itertuples() if not held.empty else ():
        if not (pd.notna(r.max) and float(r.max) >= 1):
            continue
        w = waits[(waits["target"] == r.target) & (waits["queue"] == r.queue) & (waits["window_start"] == r.window_start)]
        age = float(w["max"].max()) if not w.empty and pd.notna(w["max"].max()) else 0.0
        state = judge.blocker_state(age, holds_table=True)
        rows.append(_cause_row("blocker", state, r, r.queue, "lock_blockers", float(r.max), 1.0,
                               {"lock_blockers_max": float(r.max), "held_s": age},
                               f"a session held a table lock that stops dequeues for up to {age:.0f} s "
                               f"(critical from {judge.LOCK_HOLD_CRIT_S:.0f} s)"))
    return pd.DataFrame(rows)


def _cause_row(rule: str, state: str, r: Any, queue: str, metric: str, value: float, threshold: float,
               evidence: dict[str, Any], summary: str) -> dict[str, Any]:
    hour = pd.Timestamp(r.window_start)
    return {"rule": rule, "severity": state, "target": r.target, "database": r.database, "queue": queue,
            "metric": metric, "hour_start": hour, "first_ts": getattr(r, "first_ts", hour),
            "last_ts": getattr(r, "last_ts", hour), "value": value, "threshold": threshold,
            "evidence": json.dumps(evidence, default=str), "summary": summary,
            "action": judge.advice(rule, queue), "date": hour.strftime("%Y-%m-%d"), "hour": hour.strftime("%H")}


def with_root_causes(findings: pd.DataFrame, rollups: pd.DataFrame,
                     snapshot_thresholds: SnapshotThresholds | None = None) -> pd.DataFrame:
    """The pipeline's findings and :func:`root_causes`; where both have the same rule for a queue's
    hour (the pipeline's ghosts_held_by_snapshot needs the dead tuples to rise), the pipeline's row
    is kept with the worse severity of the two."""
    causes = root_causes(rollups, snapshot_thresholds)
    if causes.empty:
        return findings
    if findings.empty:
        return causes.reset_index(drop=True)
    key = ["rule", "target", "queue", "hour_start"]
    worst = causes.set_index(key)["severity"]
    merged = findings.copy()
    idx = pd.MultiIndex.from_frame(merged[key])
    theirs = worst.reindex(idx).to_numpy()
    merged["severity"] = [judge.worst_state([a, b]) if isinstance(b, str) else a
                          for a, b in zip(merged["severity"], theirs, strict=True)]
    seen = set(map(tuple, findings[key].itertuples(index=False)))
    extra = causes[[tuple(k) not in seen for k in causes[key].itertuples(index=False)]]
    return pd.concat([merged, extra], ignore_index=True)


def queue_states(findings: pd.DataFrame) -> pd.DataFrame:
    """Each queue's one state over the period, :func:`queueops.judge.queue_state` of its findings'
    severities (the same rule as the Overview's pill and the alerts), worst first."""
    if findings.empty:
        return pd.DataFrame(columns=["target", "queue", "state", "rules"])
    out = []
    for (target, queue), g in findings.groupby(["target", "queue"], sort=False):
        out.append({"target": target, "queue": queue, "state": judge.queue_state([], list(g["severity"])),
                    "rules": ", ".join(sorted(set(g["rule"])))})
    df = pd.DataFrame(out)
    return df.assign(rank=df["state"].map({"crit": 0, "warn": 1}).fillna(2)).sort_values(
        ["rank", "target", "queue"]).drop(columns="rank").reset_index(drop=True)


def read_audit(engine: Any, start: datetime, end: datetime) -> pd.DataFrame:
    from sqlalchemy import select

    from queueops.store.schema import audit_log

    cols = ["start_time", "end_time", "user_name", "role", "action", "target", "queue", "rows_affected",
            "outcome", "error"]
    # Timestamps may come back naive (SQLite): compare as naive UTC there, aware elsewhere.
    naive = engine.url.get_backend_name() == "sqlite"
    lo, hi = (start.astimezone(UTC).replace(tzinfo=None), end.astimezone(UTC).replace(tzinfo=None)) if naive \
        else (start, end)
    stmt = (select(*[audit_log.c[c] for c in cols])
            .where(audit_log.c.start_time >= lo, audit_log.c.start_time < hi)
            .order_by(audit_log.c.start_time))
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(stmt).mappings()]
    return _utc(pd.DataFrame(rows, columns=cols))
