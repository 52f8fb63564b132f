"""``queueops report``: the daily health report (findings, forecasts, charts, actions) as one HTML file.

Reads the pipeline's gold tables (no Spark needed to read them) and the store's audit log.
:func:`write_report` is what the command and the service's daily job (``report.daily_at``) run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from queueops.report import data, html


def period(gold: data.Lake, day: str | None, hours: float, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The UTC day ``day`` (YYYY-MM-DD), else the ``hours`` before the last pipeline run's as_of
    (else before now)."""
    if day:
        start = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
        return start, start + timedelta(days=1)
    end = data.latest_as_of(gold) or (now or datetime.now(UTC))
    return end - timedelta(hours=hours), end


def write_report(gold: str | Path, out: Path, *, day: str | None = None, hours: float = 24.0,
                 audit_engine: Any | None = None, now: datetime | None = None,
                 setting: str = "[pipeline] out", snapshot_thresholds: data.SnapshotThresholds | None = None
                 ) -> dict[str, Any]:
    """Write the report to ``out`` (atomically) and return what it holds. ``gold`` is a local
    folder or a URI pyarrow reads (``s3://...``, ``file://...``); one it cannot open raises
    :class:`~queueops.report.data.GoldError` naming ``setting`` and the value. ``snapshot_thresholds``:
    each queue's old-snapshot threshold (:func:`queueops.causes.snapshot_thresholds`)."""
    lake = data.gold_location(gold, setting)
    start, end = period(lake, day, hours, now)
    d = data.load(lake, start, end, audit_engine, shown=str(gold), snapshot_thresholds=snapshot_thresholds)
    text = html.render(d, now or datetime.now(UTC))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return {"path": str(out), "start": start.isoformat(), "end": end.isoformat(), "findings": len(d.findings),
            "critical": int((d.findings["severity"] == "crit").sum()) if not d.findings.empty else 0,
            "queue_states": {f"{r.target}/{r.queue}": r.state for r in data.queue_states(d.findings).itertuples()},
            "forecasts": len(d.forecasts), "actions": len(d.audit), "problems": d.problems,
            "bytes": out.stat().st_size}
