"""What the daily report shows, read without Spark: the gold tables (pyarrow) and the audit log.

The gold layout is ``pipeline/gold.py``'s (docs/pipeline.md). Only the partitions of the report's
period are read (hive partition filters on ``date``), so a report costs the same whatever the
history's length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

PARTS = {
    "rollups": pa.schema([("window", pa.string()), ("date", pa.string()), ("hour", pa.string())]),
    "findings": pa.schema([("date", pa.string()), ("hour", pa.string())]),
}


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


def _read(path: Path, name: str, days: list[str] | None, windows: list[str] | None = None) -> pd.DataFrame:
    folder = path / name
    if not folder.exists():
        return pd.DataFrame()
    part = ds.partitioning(PARTS[name], flavor="hive") if name in PARTS else None
    dataset = ds.dataset(str(folder), format="parquet", partitioning=part,
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


def latest_as_of(gold: Path) -> datetime | None:
    """The ``as_of`` of the last pipeline run (the end of the newest lake hour it processed)."""
    f = _read(gold, "forecasts", None)
    if f.empty or "as_of" not in f:
        return None
    return pd.to_datetime(f["as_of"], utc=True).max().to_pydatetime()


def load(gold: Path, start: datetime, end: datetime, audit_engine: Any | None) -> ReportData:
    days = _days(start, end)
    problems: list[str] = []

    def within(df: pd.DataFrame, col: str) -> pd.DataFrame:
        if df.empty:
            return df
        t = pd.to_datetime(df[col], utc=True)
        return df[(t >= start) & (t < end)].reset_index(drop=True)

    try:
        rollups = within(_utc(_read(gold, "rollups", days, ["5m", "1h"])), "window_start")
        findings = within(_utc(_read(gold, "findings", days)), "hour_start")
        forecasts = _utc(_read(gold, "forecasts", None))
        fleet = _utc(_read(gold, "fleet", None))
    except (OSError, pa.ArrowException) as exc:
        problems.append(f"gold tables in {gold} could not be read: {exc}")
        rollups = findings = forecasts = fleet = pd.DataFrame()
    audit = pd.DataFrame()
    if audit_engine is not None:
        try:
            audit = read_audit(audit_engine, start, end)
        except Exception as exc:  # noqa: BLE001 - a store outage must not stop the report
            from queueops import secrets

            problems.append(f"audit log unavailable: {secrets.mask(str(exc))}")
    return ReportData(start, end, str(gold), rollups, findings, forecasts, fleet, audit, problems)


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
