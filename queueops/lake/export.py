"""Export closed hours of the store to the lake, each hour exactly once and replaceable.

Which hours (pure: :func:`hours_to_export`):

* every closed hour (ended at least ``lake.close_grace_s`` ago) inside the store's retention
  that ``lake_exports`` does not list yet -- so a service restarted after a day away catches up,
  and one restarted a minute later writes nothing twice;
* every exported hour that received rows since the previous run (late rows: a store outage
  flushed from the buffer, a second scheduler writing to a shared store). Detected cheaply from
  the rows inserted since the run before last (ids above a mark kept in ``service_state``): the
  distinct cycle timestamps of one or two hours of rows, never a scan of the whole store.

An hour older than the retention cutoff is never rewritten from the store: pruning may have
removed part of it, and the lake's copy is then the only complete one. An hour the store holds
no rows for is recorded (rows 0) and gets no folder; an existing partition is never replaced by
an empty one.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import Engine, Table, func, insert, select, update

from queueops.config import Config
from queueops.lake import fs as lakefs
from queueops.rows import utcnow
from queueops.store import state
from queueops.store.reader import SNAPSHOT_COLUMNS, STATUS_COLUMNS, rows_between
from queueops.store.schema import collector_status, lake_exports, snapshots
from queueops.store.timeutil import HOUR, ceil_hour, floor_hour, to_utc

log = logging.getLogger("queueops.lake")

SNAPSHOT_SCHEMA = pa.schema([
    ("ts", pa.timestamp("us", tz="UTC")), ("target", pa.string()), ("database", pa.string()),
    ("queue", pa.string()), ("metric", pa.string()), ("value", pa.float64()), ("note", pa.string()),
])
STATUS_SCHEMA = pa.schema([
    ("ts", pa.timestamp("us", tz="UTC")), ("target", pa.string()), ("collector", pa.string()),
    ("ok", pa.bool_()), ("duration_ms", pa.float64()), ("rows", pa.int64()), ("error", pa.string()),
    ("timeout", pa.bool_()),
])
KINDS: tuple[tuple[str, Table, pa.Schema, tuple[str, ...]], ...] = (
    ("snapshots", snapshots, SNAPSHOT_SCHEMA, SNAPSHOT_COLUMNS),
    ("status", collector_status, STATUS_SCHEMA, STATUS_COLUMNS),
)
MARKS = "lake.scan_marks"  # service_state: {"snapshots": [older, newer], "status": [...]}


@dataclass
class ExportResult:
    exported: list[dict[str, object]] = field(default_factory=list)  # hour, rows, status_rows, reason, how
    skipped: list[dict[str, object]] = field(default_factory=list)   # hour, reason
    cleaned: int = 0
    repaired: list[str] = field(default_factory=list)  # hours whose cut publishing was completed

    def to_json(self) -> dict[str, object]:
        return {"exported": self.exported, "skipped": self.skipped, "cleaned_leftovers": self.cleaned,
                "repaired": self.repaired}


def lake_for(cfg: Config) -> lakefs.Lake:
    return lakefs.resolve(cfg.lake.path, cfg.base_dir)


# -- which hours ---------------------------------------------------------------------------------
def hours_to_export(*, first_row: datetime | None, exported: set[datetime], dirty: set[datetime],
                    now: datetime, retention_days: float, close_grace_s: float) -> list[tuple[datetime, str]]:
    """Hours to write, oldest first, each with the reason (``new`` or ``changed``). Pure."""
    closed_before = floor_hour(to_utc(now) - timedelta(seconds=close_grace_s))
    floor = ceil_hour(to_utc(now) - timedelta(days=retention_days))
    out: list[tuple[datetime, str]] = []
    if first_row is not None:
        h = max(floor_hour(first_row), floor)
        while h < closed_before:
            if h not in exported:
                out.append((h, "new"))
            h += HOUR
    out += [(h, "changed") for h in sorted(dirty) if h in exported and floor <= h < closed_before]
    return sorted(out)


def _first_row(engine: Engine) -> datetime | None:
    with engine.connect() as conn:
        firsts = [conn.execute(select(func.min(t.c.ts))).scalar() for t in (snapshots, collector_status)]
    firsts = [to_utc(f) for f in firsts if f is not None]
    return min(firsts) if firsts else None


def _exported(engine: Engine) -> dict[datetime, tuple[int, int | None]]:
    with engine.connect() as conn:
        rows = conn.execute(select(lake_exports.c.hour, lake_exports.c.rows, lake_exports.c.status_rows))
        return {to_utc(h): (n, s) for h, n, s in rows}


def _counts(engine: Engine, hour: datetime) -> tuple[int, int]:
    with engine.connect() as conn:
        return tuple(conn.execute(select(func.count()).select_from(t).where(t.c.ts >= hour, t.c.ts < hour + HOUR))
                     .scalar_one() for t in (snapshots, collector_status))  # type: ignore[return-value]


def _dirty_hours(engine: Engine, exported: dict[datetime, tuple[int, int | None]],
                 closed_before: datetime) -> tuple[set[datetime], dict[str, list[int]]]:
    """Exported hours whose rows changed since they were written, and the marks to keep after this run.

    Candidates are the hours of rows inserted since the run before last (ids above the older of
    two marks: a row whose id was taken before the previous run read ``max(id)`` but committed
    after it -- concurrent writers on PostgreSQL -- is still above the older mark). A candidate
    is dirty when its row counts differ from what was exported: one indexed count per candidate.
    """
    marks: dict[str, list[int]] = state.get(engine, MARKS, {}) or {}
    candidates: set[datetime] = set()
    new_marks: dict[str, list[int]] = {}
    with engine.connect() as conn:
        for kind, table, _schema, _cols in KINDS:
            top = conn.execute(select(func.max(table.c.id))).scalar() or 0
            older, newer = (marks.get(kind) or [top, top])
            stamps = conn.execute(select(table.c.ts).where(table.c.id > older).distinct()).scalars()
            candidates |= {floor_hour(ts) for ts in stamps}
            new_marks[kind] = [newer, top]
    dirty = set()
    for hour in sorted(h for h in candidates if h in exported and h < closed_before):
        rows, status_rows = exported[hour]
        if _counts(engine, hour) != (rows, status_rows):
            dirty.add(hour)
    return dirty, new_marks


# -- writing one hour ----------------------------------------------------------------------------
def _table_of(rows: list[dict[str, object]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pydict({name: [r[name] for r in rows] for name in schema.names}, schema=schema)


def _stage_kind(engine: Engine, lake: lakefs.Lake, table: Table, schema: pa.Schema, cols: tuple[str, ...],
                hour: datetime, date_dir: str, final: str, token: str) -> tuple[int, str | None]:
    """Write one kind's rows of ``hour`` into a hidden temp folder; (rows, temp) -- temp None when
    the hour has no rows (nothing is written then). The file carries ``token`` in its metadata,
    so a repair can tell this export's file from the copy it replaces."""
    temp = lakefs.temp_sibling(final)
    n = 0
    writer: pq.ParquetWriter | None = None
    try:
        for chunk in rows_between(engine, table, hour, hour + HOUR, columns=cols):
            if writer is None:  # folders only for an hour that has rows
                lake.fs.create_dir(date_dir, recursive=True)
                lake.fs.create_dir(temp, recursive=True)
                writer = pq.ParquetWriter(f"{temp}/part-0.parquet", schema.with_metadata({lakefs.TOKEN_KEY: token}),
                                          filesystem=lake.fs, compression="zstd")
            writer.write_table(_table_of(chunk, schema))
            n += len(chunk)
    except BaseException:
        if writer is not None:
            writer.close()
            lake.fs.delete_dir(temp)
        raise
    if writer is None:  # no rows: keep whatever the lake has, write nothing
        return 0, None
    writer.close()
    return n, temp


def export_hour(engine: Engine, lake: lakefs.Lake, hour: datetime) -> dict[str, object]:
    """Write (or replace) one hour of snapshots and status, then record it in ``lake_exports``.

    Both kinds are written to temp folders first; only then are they published, one right after
    the other, under a publish record (:func:`queueops.lake.fs.publish_together`): a crash before
    the record leaves neither kind published, a crash after it is rolled forward by the next
    export (the service's first runs at its start), so the hour ends with both or neither.
    """
    hour = floor_hour(hour)
    counts: dict[str, int] = {}
    staged: list[tuple[str, str]] = []
    token = uuid.uuid4().hex
    try:
        for kind, table, schema, cols in KINDS:
            date_dir, final = lake.partition(kind, hour)
            counts[kind], temp = _stage_kind(engine, lake, table, schema, cols, hour, date_dir, final, token)
            if temp is not None:
                staged.append((temp, final))
    except BaseException:
        for temp, _final in staged:
            lake.fs.delete_dir(temp)
        raise
    hows = lakefs.publish_together(lake, f"{hour:%Y-%m-%dT%H}", token, staged)
    with engine.begin() as conn:
        values = {"rows": counts["snapshots"], "status_rows": counts["status"], "exported_at": utcnow()}
        if not conn.execute(update(lake_exports).where(lake_exports.c.hour == hour).values(**values)).rowcount:
            conn.execute(insert(lake_exports).values(hour=hour, **values))
    return {"hour": hour.strftime("%Y-%m-%dT%H"), "rows": counts["snapshots"], "status_rows": counts["status"],
            "how": "/".join(hows.get(final, "empty") for final in (lake.partition(k, hour)[1] for k, *_ in KINDS))}


def export_hours(cfg: Config, engine: Engine, *, now: datetime | None = None,
                 hours: Iterable[datetime] | None = None) -> ExportResult:
    """Export what is due (default), or exactly ``hours`` (re-export on demand)."""
    now = to_utc(now or utcnow())
    lake = lake_for(cfg)
    result = ExportResult()
    cutoff = ceil_hour(now - timedelta(days=cfg.store.retention_days))
    closed_before = floor_hour(now - timedelta(seconds=cfg.lake.close_grace_s))
    with lakefs.export_lock(lake):
        # First finish any hour whose publishing a crash cut (both kinds, or the hour would stay
        # half-published), then tidy unfinished temp folders.
        result.repaired = lakefs.repair_publishing(lake)
        for hour_tag in result.repaired:
            log.warning("lake: hour %s was half-published by an export that stopped mid-way; completed", hour_tag)
        for kind, *_ in KINDS:
            result.cleaned += lakefs.clean_leftovers(lake, kind)
        new_marks = None
        if hours is None:
            exported = _exported(engine)
            dirty, new_marks = _dirty_hours(engine, exported, closed_before)
            plan = hours_to_export(first_row=_first_row(engine), exported=set(exported), dirty=dirty,
                                   now=now, retention_days=cfg.store.retention_days,
                                   close_grace_s=cfg.lake.close_grace_s)
        else:
            plan = []
            for h in sorted({floor_hour(h) for h in hours}):
                if h < cutoff:
                    result.skipped.append({"hour": h.strftime("%Y-%m-%dT%H"), "reason": "older than the store's "
                                           "retention: the store may hold only part of it, the lake copy is kept"})
                elif h >= closed_before:
                    result.skipped.append({"hour": h.strftime("%Y-%m-%dT%H"), "reason": "not closed yet"})
                else:
                    plan.append((h, "requested"))
        for hour, reason in plan:
            done = export_hour(engine, lake, hour)
            done["reason"] = reason
            result.exported.append(done)
            if done["rows"] or done["status_rows"]:
                log.info("lake: exported %s (%s): %s snapshot rows, %s status rows", done["hour"], reason,
                         done["rows"], done["status_rows"])
        if new_marks is not None:
            state.put(engine, MARKS, new_marks)
    return result
