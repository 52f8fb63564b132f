"""The action layer's data: options per action, the plan and its preview, progress, the result.

A :class:`Plan` is what the operator confirms: its :class:`Preview` shows the exact SQL with its
parameters and the objects it will touch, and it carries the values the preview observed (the
cutoff, the watermark's old value, the chosen index operations) so that the execution does
exactly what was shown -- never a fresh, different decision.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from queueops.actions import ACTIONS  # noqa: F401 - re-exported
from queueops.config import DAY_S, MAX_ROWS, WEEK_S, Queue, Target
from queueops.sqlfiles import Statement

Outcome = Literal["running", "ok", "failed", "interrupted", "refused"]
# Each row list in a preview is capped; the count next to it is exact.
SAMPLE_ROWS = 100


class ActionError(ValueError):
    """The action cannot be planned as asked (bad option, kind not applicable, missing table).

    The message is meant for the operator as it is; nothing was changed.
    """


class NotOffered(ActionError):
    """The action is refused on this queue by rule (its library preset rescues the jobs itself, or
    keeps what the action would need elsewhere): a refusal, not a bad request. The CLI exits 3,
    like a refusal at execution; nothing was changed."""


class Conflict(RuntimeError):
    """The database changed between preview and execution so that the action must not proceed
    (e.g. the watermark no longer holds the observed value); nothing was written."""


class Refused(RuntimeError):
    """A guard refused the execution after the audit record was written (e.g. terminate: the
    session is no longer the one the preview showed); nothing was changed. Outcome ``refused``."""


class Interrupted(BaseException):  # noqa: N818 - reads as an event, like KeyboardInterrupt
    """The action's process was asked to stop (SIGTERM); handled like Ctrl-C."""


# ---------------------------------------------------------------------------------------------
# Options (validated: the console passes UI input straight through, the CLI its flags)


MAX_KEYS = 1000  # requeue --key: keys per request (one bound value each; SQL Server allows 2,100)


class _Options(BaseModel):
    # Finite numbers in a range a human would accept (as in the config, queueops.config): an
    # ``--older-than-s inf`` is told here, not by the server after the audit record was written.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RequeueOptions(_Options):
    max_items: int | None = Field(default=None, gt=0, le=MAX_ROWS, description="release at most this many items")
    batch_size: int = Field(default=500, ge=1, le=1000, description="items per batch (one transaction each)")
    pause_s: float = Field(default=0.0, ge=0, le=60, description="pause between batches")
    bump_attempts: bool = Field(default=False, description="add 1 to the attempts column of each item")
    lease_timeout_s: float | None = Field(default=None, gt=0, le=WEEK_S,
                                          description="override the queue's lease_timeout_s")
    # Only these items (issue 32: requeue the stuck items picked in the console's drill-down); each
    # key bound as a value, compared exactly; the cutoff and the compare-and-set still apply.
    keys: list[int | Annotated[str, Field(min_length=1, max_length=450)]] | None = Field(
        default=None, min_length=1, max_length=MAX_KEYS, description=f"only these keys (at most {MAX_KEYS})")


class ArchiveOptions(_Options):
    older_than_s: float = Field(default=86_400, ge=0, le=3650 * DAY_S, description="finished at least this long ago")
    mode: Literal["delete", "move"] = "delete"
    archive_table: str | None = Field(default=None, description="move: table with the queue table's columns")
    archive_data_table: str | None = Field(default=None, description="move: table with the data table's columns")
    archive_schema: str | None = Field(default=None, description="schema of the archive tables (default: the queue's)")
    max_items: int | None = Field(default=None, gt=0, le=MAX_ROWS)
    batch_size: int = Field(default=200, ge=1, le=1000)
    pause_s: float = Field(default=0.5, ge=0, le=60, description="pause between batches")


class WatermarkOptions(_Options):
    buffer: int | None = Field(default=None, ge=0, le=MAX_ROWS, description="override the watermark's configured buffer")


class RebuildOptions(_Options):
    indexes: list[str] = Field(default_factory=list, description="only these indexes, whatever their figures")
    min_pages: int = Field(default=1000, ge=0, le=MAX_ROWS)
    reorganize_pct: float = Field(default=5.0, ge=0, le=100)
    rebuild_pct: float = Field(default=30.0, ge=0, le=100)
    allow_offline: bool = Field(default=False, description="allow an offline rebuild where online is impossible")
    resumable: bool = Field(default=False, description="SQL Server: RESUMABLE = ON (progress) instead of WAIT_AT_LOW_PRIORITY")
    vacuum: bool = Field(default=True, description="PostgreSQL: VACUUM (ANALYZE) the table afterwards")
    wait_minutes: int = Field(default=1, ge=1, le=60, description="SQL Server: WAIT_AT_LOW_PRIORITY MAX_DURATION")
    max_duration_minutes: int = Field(default=60, ge=1, le=10080, description="bound of each index statement")
    lock_retries: int = Field(default=3, ge=0, le=20, description="retries of a statement that hit the lock timeout")
    vacuum_only: bool = Field(default=False, description="PostgreSQL: only VACUUM (ANALYZE) the table, no index work")


class TerminateOptions(_Options):
    session: int | None = Field(default=None, gt=0, le=MAX_ROWS, description="end this session (it must be a root cause)")
    cancel_only: bool = Field(default=False, description="PostgreSQL: cancel the running statement, keep the session")
    min_age_s: float | None = Field(default=None, ge=0, le=WEEK_S, description="a snapshot holder counts from this transaction "
                                    "age (default: the queue's oldest_snapshot_age_s warn level, else 60 s)")


OPTIONS: dict[str, type[_Options]] = {
    "requeue": RequeueOptions,
    "archive": ArchiveOptions,
    "watermark-reset": WatermarkOptions,
    "rebuild": RebuildOptions,
    "terminate": TerminateOptions,
}


# ---------------------------------------------------------------------------------------------
# JSON


def jsonable(value: Any) -> Any:
    """Database values as JSON values (times as ISO 8601 UTC, decimals as numbers)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            return value.isoformat()
        return value.astimezone(UTC).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value


def dumps(value: Any) -> str:
    return json.dumps(jsonable(value), default=str, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# Plan and preview


def shown_sql(sql: str, dialect: str) -> str:
    """A statement as the server receives it: psycopg's paramstyle doubles every literal '%' (a
    quoted name ``"x%y"`` is sent to psycopg as ``"x%%y"``); the preview promises the exact SQL."""
    return sql.replace("%%", "%") if dialect == "postgresql" else sql


@dataclass(frozen=True)
class Step:
    """One statement as it will run (``repeat``: once per batch until nothing is left)."""

    label: str
    statement: Statement
    repeat: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "sql": self.statement.sql, "params": jsonable(list(self.statement.params)),
                "repeat": self.repeat}


@dataclass
class Preview:
    """What the operator sees and confirms. ``row_count`` is exact; ``rows`` lists at most
    :data:`SAMPLE_ROWS` of the items (or every index / the watermark row)."""

    action: str
    queue: str
    target: str
    dialect: str
    summary: str
    steps: list[Step]
    rows: list[dict[str, Any]]
    row_count: int
    warnings: list[str] = field(default_factory=list)
    destructive: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def sql(self) -> str:
        """Every distinct statement, in order, as one script, exactly as the server receives it."""
        seen: list[str] = []
        for s in self.steps:
            text = shown_sql(s.statement.sql, self.dialect)
            if text not in seen:
                seen.append(text)
        return ";\n".join(seen)

    @property
    def params(self) -> list[Any]:
        """The parameters of the main statement (the first repeated one, else the first)."""
        main = next((s for s in self.steps if s.repeat), self.steps[0] if self.steps else None)
        return jsonable(list(main.statement.params)) if main else []

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": "preview", "action": self.action, "queue": self.queue, "target": self.target,
            "dialect": self.dialect, "summary": self.summary, "sql": self.sql, "params": self.params,
            "rows": jsonable(self.rows), "row_count": self.row_count, "warnings": self.warnings,
            "destructive": self.destructive, "details": jsonable(self.details),
            "statements": [{**s.to_json(), "sql": shown_sql(s.statement.sql, self.dialect)} for s in self.steps],
        }


@dataclass
class Plan:
    """A confirmed-able action: preview plus the observed values the execution must reuse."""

    action: str
    queue: Queue
    target: Target
    options: _Options
    preview: Preview
    observed: dict[str, Any] = field(default_factory=dict)
    created_monotonic: float = field(default_factory=time.monotonic)
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def age_s(self) -> float:
        return time.monotonic() - self.created_monotonic

    @property
    def nothing_to_do(self) -> bool:
        return self.preview.row_count == 0


# ---------------------------------------------------------------------------------------------
# Progress and result


@dataclass(frozen=True)
class Progress:
    """One progress report. Batch actions: ``done``/``total`` batches and ``rows`` so far; index
    work: the engine's own figures (``done``/``total`` blocks, tuples or percent) and ``phase``."""

    action: str
    phase: str
    done: float | None = None
    total: float | None = None
    rows: int = 0
    step: int = 0
    steps: int = 0
    message: str = ""

    @property
    def fraction(self) -> float | None:
        if self.done is None or not self.total:
            return None
        return max(0.0, min(1.0, float(self.done) / float(self.total)))

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "done": self.done, "total": self.total, "rows": self.rows,
                "step": self.step, "steps": self.steps, "message": self.message, "fraction": self.fraction}


ProgressCallback = Callable[[Progress], None]


@dataclass
class Result:
    action: str
    queue: str
    target: str
    outcome: Outcome
    rows_affected: int | None
    error: str = ""
    audit_id: int | None = None
    user: str = ""
    role: str = ""
    started: datetime | None = None
    ended: datetime | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)
    preview: Preview | None = None
    # What the operator should know that is no error: e.g. fewer items qualified at execution than
    # the preview counted (the rest changed, went or were held meanwhile). Also in the audit record.
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": "result", "action": self.action, "queue": self.queue, "target": self.target,
            "outcome": self.outcome, "rows_affected": self.rows_affected, "error": self.error,
            "audit_id": self.audit_id, "user": self.user, "role": self.role,
            "started": jsonable(self.started), "ended": jsonable(self.ended),
            "sql": self.preview.sql if self.preview else "",
            "params": self.preview.params if self.preview else [],
            "rows": jsonable(self.rows), "notes": list(self.notes),
            "preview": self.preview.to_json() if self.preview else None,
        }
