"""The queueops configuration: a TOML file validated with pydantic.

A config declares *targets* (database servers) and *queues* (tables used as queues on a target).
Every problem is reported with the file, the dotted field path and the offending value, all at
once, so that ``queueops config check`` tells an engineer everything wrong in one run. Nothing in
this module touches a database; the live check (tables and columns exist) is in
:mod:`queueops.livecheck`.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from queueops import catalog, judge, secrets
from queueops.autopilot.policy import AutopilotPolicy
from queueops.identifiers import identifier_problem

DEFAULT_CONFIG = "queueops.toml"
KINDS = ("delete", "status", "lease", "due", "ring")


MAX_NAME = 128  # queue and target names: the store's name columns

# Every number in a config is finite and within a range a human would accept, so a slip such as
# ``fast_s = 1e300`` (the scheduler's OverflowError at start) or ``lease_timeout_s = inf`` (an
# interval the server refuses every cycle) is told by ``config check`` with the file, the field
# and the value, instead of by the running service. The bounds are generous; they only refuse
# what no deployment means.
HOUR_S, DAY_S = 3600.0, 86_400.0
WEEK_S = 7 * DAY_S
MAX_ROWS = 2**31 - 1  # counts and sizes that reach an int4 / int parameter
Interval = Annotated[float, Field(ge=1, le=DAY_S)]  # how often something runs: 1 s to 1 day
Grace = Annotated[float, Field(ge=0, le=DAY_S)]  # how long something may wait or be late: 0 to 1 day


def _ident(value: str) -> str:
    # Generic rules here; the length limit of the target's dialect (PostgreSQL: 63 bytes, SQL
    # Server: 128 characters) is checked per queue below, so a long name is told the limit of the
    # engine it is meant for.
    problem = identifier_problem(value, "mssql", check_length=False)
    if problem:
        raise ValueError(f"not a safe identifier: {problem}")
    return value


Ident = Annotated[str, AfterValidator(_ident)]


class _Model(BaseModel):
    # allow_inf_nan=False: inf and nan are refused as "a finite number" wherever a float is read.
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, allow_inf_nan=False)


class Threshold(_Model):
    """Warn / critical levels for one metric. ``direction='below'`` flags values under the level."""

    warn: float | None = None
    crit: float | None = None
    direction: Literal["above", "below"] = "above"

    @model_validator(mode="after")
    def _warn_before_crit(self) -> Threshold:
        # The judge tests the critical level first: a warning level past it would never show.
        if self.warn is not None and self.crit is not None and (
                self.warn > self.crit if self.direction == "above" else self.warn < self.crit):
            side = "above" if self.direction == "above" else "below"
            raise ValueError(f"warn {self.warn:g} is {side} crit {self.crit:g} (direction {self.direction!r}): "
                             "the warning would never show, the critical level is reached first")
        return self


# Defaults from the metric catalog (sql/metrics.toml: warn / crit / direction), chosen for the
# lab's short timings and sane for production starting points; every queue may override any of
# them. watermark_drift < 0 means stranded items: always critical.
DEFAULT_THRESHOLDS: dict[str, Threshold] = {
    name: Threshold(warn=warn, crit=crit, direction=direction)  # type: ignore[arg-type]
    for name, (warn, crit, direction) in catalog.thresholds().items()
}


class Watermark(_Model):
    """A one-row table holding the lowest key worth scanning from (the watermark pattern)."""

    schema_: Ident | None = Field(default=None, alias="schema")
    table: Ident
    column: Ident
    buffer: int = Field(default=0, ge=0, le=MAX_ROWS)


def _partition_value(value: int | str) -> int | str:
    # A partition value becomes a literal in the statements (queueops.fragments.literal): an integer,
    # or text with the characters of a safe identifier only (a queue name such as Hangfire's
    # "default"), never free text.
    if isinstance(value, str):
        problem = identifier_problem(value, "mssql", check_length=False)
        if problem:
            raise ValueError(f"a text value must be a plain name: {problem}")
    return value


class Partition(_Model):
    """The queue is the rows of a shared table where ``column = value`` (issue 33): MassTransit's
    ``MessageDelivery`` holds every queue (``QueueId``), Hangfire's ``JobQueue`` every named queue
    (``Queue``). Every per-queue statement reads only those rows (``AND column = value`` beside
    ``open_when_null``'s predicate), so an index that leads with ``column`` seeks them."""

    column: Ident
    value: Annotated[int, Field(strict=True, ge=-(2**63), le=2**63 - 1)] | Annotated[
        str, Field(strict=True, min_length=1, max_length=128), AfterValidator(_partition_value)]


class Claims(_Model):
    """Running items kept as rows of another table, each naming the process that holds it, whose
    liveness is a heartbeat column of a process table (issue 29; Solid Queue:
    ``solid_queue_claimed_executions.process_id`` -> ``solid_queue_processes.last_heartbeat_at``).

    A claim is abandoned when its process row is missing or its heartbeat is at least ``alive_s``
    old, as the library's own pruner judges it (Solid Queue: ``ClaimedExecution.orphaned`` and
    ``Process.prunable``): stuck_leases counts those claims (at most the cap of claims read, each
    with a key lookup of its process), oldest_lease_age_s is the oldest claim's age."""

    schema_: Ident | None = Field(default=None, alias="schema")
    table: Ident
    process_column: Ident
    claimed_at: Ident
    process_table: Ident
    process_key: Ident = "id"
    heartbeat_column: Ident
    alive_s: int = Field(gt=0, le=WEEK_S)
    # The claim's column naming the item it holds (Solid Queue: job_id): what the drill-down's stuck
    # list shows for each abandoned claim; without it that list is not offered.
    item_column: Ident | None = None


class HeartbeatFrom(_Model):
    """A processing item's liveness kept on its worker's row, not on the item (issue 29;
    procrastinate: ``procrastinate_jobs.worker_id`` -> ``procrastinate_workers.last_heartbeat``).

    An item is stuck when no worker row answers ``key = <queue>.ref`` with a heartbeat younger than
    ``alive_s`` (the library's own stale-worker limit: procrastinate's ``get_stalled_jobs``, 30 s),
    whatever its age: a live worker's long job is running, a dead worker's job of a second ago is
    not. PostgreSQL; a status queue."""

    schema_: Ident | None = Field(default=None, alias="schema")
    table: Ident
    key: Ident
    column: Ident
    ref: Ident
    alive_s: int = Field(gt=0, le=WEEK_S)


class RowHeartbeat(_Model):
    """A processing item's own heartbeat, kept on its row with its own limit in seconds (pg-boss 12:
    ``heartbeat_on`` and ``heartbeat_seconds``, judged by its ``failJobsByHeartbeat``): the item is
    stuck once ``column + seconds_column`` seconds has passed. An item whose limit is NULL sends no
    heartbeats; the rest of the stuck rule judges it. PostgreSQL; a status queue."""

    column: Ident
    seconds_column: Ident


class TimesFrom(_Model):
    """A side table that holds an item's times when the queue row does not (procrastinate keeps them
    in ``procrastinate_events``, Hangfire's ``JobQueue`` in ``Job.CreatedAt``).

    The collectors read the item's enqueue time as the earliest ``column`` of its side rows and its
    last status change as the latest one, through a correlated subquery on ``key = <queue>.ref``
    (``ref`` defaults to the queue's key), which an index on ``key`` answers with a seek per item.
    """

    schema_: Ident | None = Field(default=None, alias="schema")
    table: Ident
    key: Ident
    column: Ident
    ref: Ident | None = None
    # Only the side rows where only.column = only.value (Hangfire: State rows named 'Enqueued'), and
    # latest: the item's enqueue time is the latest of them (a retried job is enqueued again), not
    # the earliest side time.
    only: Partition | None = None
    latest: bool = False


class Target(_Model):
    name: Ident
    dialect: Literal["postgresql", "mssql"]
    url: str = Field(min_length=1)
    password: str | None = None
    actions_url: str | None = None
    actions_password: str | None = None
    connect_timeout_s: float = Field(default=5, gt=0, le=120)
    statement_timeout_ms: int = Field(default=5000, ge=100, le=600_000)
    lock_timeout_ms: int = Field(default=1000, ge=10, le=600_000)

    @field_validator("url", "actions_url")
    @classmethod
    def _url_scheme(cls, v: str | None) -> str | None:
        if v is None or secrets.is_reference(v):
            return v
        if "://" not in v:
            raise ValueError("must be a URL such as postgresql://user@host:5432/db, or an env:/file: reference")
        return v


class Queue(_Model):
    name: Ident
    target: Ident
    # A library preset (queueops/presets/NAME.toml) this queue was expanded from: its fields filled
    # in the mapping, and actions apply its rules (requeue refused or warned where it rescues itself).
    preset: Ident | None = None
    kind: Literal["delete", "status", "lease", "due", "ring"]
    schema_: Ident | None = Field(default=None, alias="schema")
    table: Ident
    key: Ident
    enqueued_at: Ident | None = None
    # fifo / lifo: the lowest key is the oldest item (oldest_age_s reads it through the key index);
    # heap: the key says nothing about age (a GUID), oldest_age_s orders by enqueued_at instead.
    order: Literal["fifo", "lifo", "heap"] = "fifo"
    # status kind
    status_column: Ident | None = None
    status_changed_at: Ident | None = None
    ready_values: list[int | str] = Field(default_factory=lambda: [0])
    processing_values: list[int | str] = Field(default_factory=lambda: [1])
    done_values: list[int | str] = Field(default_factory=lambda: [2])
    data_table: Ident | None = None
    # The payload table's column that holds the queue's key (Hangfire's State.JobId): archive deletes
    # payload rows only through it. Required with data_table.
    data_key: Ident | None = None
    # lease kind
    lease_column: Ident | None = None
    error_column: Ident | None = None
    attempts_column: Ident | None = None
    # What makes an item ready beyond its kind's own column (issue 31; lease kind, and runnable_at,
    # max_attempts and owner_column on status queues too). Every read
    # (depth, oldest_age_s, stuck_leases) and requeue follow them; docs/metrics.md, "Readiness".
    # runnable_at: a run-at / scheduled column: ready only when NULL or <= now() (later: scheduled).
    runnable_at: Ident | None = None
    # max_attempts: a number, or the column holding each item's limit: attempts >= it is exhausted.
    max_attempts: Annotated[int, Field(gt=0, le=MAX_ROWS)] | Ident | None = None
    # lease_ready: "null": a free item's lease is NULL; "past": the lease column holds a lock-until
    # time and the library takes an item whose lock is NULL or has passed (lock < now()).
    lease_ready: Literal["null", "past"] = "null"
    # owner_column: who holds the lease (locked_by): cleared by requeue.
    owner_column: Ident | None = None
    # ready_flag: a boolean column that must be true for the item to be taken (visible).
    ready_flag: Ident | None = None
    # error_at: when error_column was written; an item leased after its error is running again.
    error_at: Ident | None = None
    # due kind
    due_column: Ident | None = None
    # What oldest_age_s counts from (due kind; issue 29). "due": the lateness of the most overdue item
    # (now - its due time). "enqueued": now - enqueued_at of the oldest item still in the table (its
    # lowest key), read or not, as PGMQ's own metrics() reports oldest_msg_age_sec: a message stays
    # in the table until it is deleted or archived, and one read again every visibility timeout
    # (a consumer that keeps failing on it) is still waiting, which the lateness would hide.
    age_from: Literal["due", "enqueued"] = "due"
    # ring kind
    sequence_table: Ident | None = None
    push_column: Ident | None = None
    pop_column: Ident | None = None
    refcount_column: Ident | None = None
    capacity: int | None = Field(default=None, gt=0, le=MAX_ROWS)
    # any kind
    watermark: Watermark | None = None
    # Times kept in another table: enqueued_at / status_changed_at left empty are read from it.
    times_from: TimesFrom | None = None
    # A processing item's liveness on its worker's row (status kind, PostgreSQL): see HeartbeatFrom.
    heartbeat_from: HeartbeatFrom | None = None
    # A processing item's own time limit, an interval column of the row (pg-boss's expire_in): the
    # item is stuck when status_changed_at + it has passed, the rule of the library's own expiry
    # (failJobsByTimeout), instead of lease_timeout_s (status kind, PostgreSQL; issue 29).
    timeout_column: Ident | None = None
    # What timeout_column holds: an interval (pg-boss 10's expire_in) or a whole number of seconds
    # (pg-boss 11 and 12's expire_seconds).
    timeout_unit: Literal["interval", "seconds"] = "interval"
    # A processing item's own heartbeat on its row (pg-boss 12): see RowHeartbeat.
    row_heartbeat: RowHeartbeat | None = None
    # Boolean columns that are true while an item is not yet open work (pg-boss 12's blocked: a job
    # waiting on a flow parent, which its fetch does not take and its ready count leaves out): read
    # as open_when_null is, every per-queue statement reads only rows where each is false.
    closed_when_true: list[Ident] = Field(default_factory=list)
    # Running items as claims in another table, judged by their process's heartbeat (Claims).
    claims: Claims | None = None
    # Columns that are NULL while an item is still open (GoodJob: finished_at; Que: finished_at,
    # expired_at): libraries that keep finished jobs in the queue table index only the open ones
    # (partial indexes WHERE finished_at IS NULL). Every per-queue statement then reads only rows
    # where all of them are NULL, so finished jobs are not counted and those indexes match.
    open_when_null: list[Ident] = Field(default_factory=list)
    # The queue's rows of a table shared by many queues (issue 33): column = value, read by every
    # per-queue statement (MassTransit QueueId, Hangfire Queue). See Partition.
    partition: Partition | None = None
    # A column after which an item is no longer delivered (Rebus expiration, NServiceBus Expires):
    # every per-queue statement reads only rows where it is NULL or still ahead of the clock.
    expires_column: Ident | None = None
    # What a `timestamp without time zone` (naive) time column of this queue holds (issue 29): "utc"
    # (Oban, GoodJob, Solid Queue and Rails apps write UTC wall-clock times) or "server" (the writing
    # session's TimeZone: a hand-rolled table with DEFAULT now(); the server's default zone). Every
    # comparison and age reads the clock in that zone (queueops.fragments.clock). None: the dialect's
    # own reading, "server" on PostgreSQL; SQL Server's statements compare with SYSUTCDATETIME(), so
    # naive columns are read as UTC there. A timestamptz column is an instant: no zone to say.
    naive_times: Literal["utc", "server"] | None = None
    # A worker holds a session advisory lock on the item's key while it works it (Que:
    # pg_try_advisory_lock(id)): an item whose key is locked is running, not waiting; depth and
    # rows_total leave it out, as Que's own job_stats does (PostgreSQL; issue 29).
    advisory_lock: bool = False
    # Up to a week: a lease longer than that is a job nobody watches, not a timeout.
    lease_timeout_s: float = Field(default=300, gt=0, le=WEEK_S)
    thresholds: dict[str, Threshold] = Field(default_factory=dict)

    @field_validator("thresholds")
    @classmethod
    def _known_metrics(cls, v: dict[str, Threshold]) -> dict[str, Threshold]:
        return _known_metric_keys(v)

    @model_validator(mode="after")
    def _kind_columns(self) -> Queue:
        required = {
            "status": ("status_column",),
            "lease": ("lease_column",),
            "due": ("due_column",),
            "ring": ("sequence_table", "push_column", "pop_column"),
        }.get(self.kind, ())
        missing = [f for f in required if getattr(self, f) is None]
        if missing:
            raise ValueError(f"kind {self.kind!r} needs {', '.join(missing)}")
        if self.claims is not None and self.kind != "delete":
            raise ValueError(f"claims apply to a delete queue (its running items live in the claims table); "
                             f"kind {self.kind!r} has its own lease or status")
        if self.timeout_column is not None and (self.kind != "status" or not self.status_changed_at
                                                 or self.heartbeat_from is not None):
            raise ValueError("timeout_column applies to a status queue with status_changed_at (the time its "
                             "limit runs from), and not with heartbeat_from (one rule decides a stuck item)")
        if self.timeout_unit != "interval" and self.timeout_column is None:
            raise ValueError("timeout_unit says what timeout_column holds: set timeout_column too")
        if self.row_heartbeat is not None and (self.kind != "status" or self.heartbeat_from is not None):
            raise ValueError("row_heartbeat applies to a status queue (its processing items beat on their own "
                             "row), and not with heartbeat_from (their worker's row)")
        if self.closed_when_true and self.kind == "ring":
            raise ValueError("closed_when_true does not apply to a ring (its slots are reused, never finished)")
        if self.heartbeat_from is not None and self.kind != "status":
            raise ValueError(f"heartbeat_from applies to a status queue (its processing items name their "
                             f"worker); kind {self.kind!r} has no processing status")
        if self.times_from is not None:
            if self.kind == "ring":
                raise ValueError("times_from does not apply to a ring (its slots hold their own times)")
            if self.times_from.table == self.table and (self.times_from.schema_ or self.schema_) == self.schema_:
                raise ValueError("times_from.table must be another table than the queue's own")
        if self.open_when_null:
            if self.kind == "ring":
                raise ValueError("open_when_null does not apply to a ring (its slots are reused, never finished)")
            roles = {"key": self.key, "lease_column": self.lease_column, "due_column": self.due_column,
                     "status_column": self.status_column, "enqueued_at": self.enqueued_at}
            clash = [f"{col!r} is also {role}" for col in self.open_when_null for role, mapped in roles.items()
                     if col == mapped]
            if clash:
                raise ValueError(f"open_when_null: {'; '.join(clash)} (a column that is NULL for every open "
                                 "item cannot also be one the statements read)")
            if len(set(self.open_when_null)) != len(self.open_when_null):
                raise ValueError("open_when_null names a column twice")
        if self.partition is not None or self.expires_column:
            which = "partition" if self.partition is not None else "expires_column"
            if self.kind == "ring":
                raise ValueError(f"{which} does not apply to a ring (its slots are reused by position)")
            if self.watermark is not None:
                raise ValueError(f"{which} and watermark: watermark_drift reads every row of the table, so a "
                                 "watermark cannot be judged for a part of it")
            roles = {"key": self.key, "lease_column": self.lease_column, "due_column": self.due_column,
                     "status_column": self.status_column, "enqueued_at": self.enqueued_at}
            for fld, col in (("partition.column", self.partition.column if self.partition else None),
                             ("expires_column", self.expires_column)):
                clash = [role for role, mapped in roles.items() if col and col == mapped]
                if clash:
                    raise ValueError(f"{fld} {col!r} is also {clash[0]}: it must be a column of its own")
        problem = _readiness_problem(self)
        if problem:
            raise ValueError(problem)
        if self.age_from == "enqueued" and (self.kind != "due" or not self.enqueued_at):
            raise ValueError("age_from = \"enqueued\" needs kind = \"due\" and enqueued_at (the oldest item's "
                             "enqueue time is what oldest_age_s then counts from)")
        if self.data_table and not self.data_key:
            raise ValueError(f"data_table {self.data_table!r} needs data_key: the payload table's column that "
                             "holds the queue's key (archive deletes payload rows only through it)")
        return self

    def threshold(self, metric: str) -> Threshold | None:
        return self.thresholds.get(metric) or DEFAULT_THRESHOLDS.get(metric)

    @property
    def max_attempts_column(self) -> str | None:
        """``max_attempts`` when it names a column (graphile-worker's per-job max_attempts)."""
        return self.max_attempts if isinstance(self.max_attempts, str) else None

    @property
    def follows_readiness(self) -> bool:
        """Whether any readiness field beyond the kind's own column is mapped (the *_follow blocks)."""
        return bool(self.runnable_at or self.max_attempts is not None or self.lease_ready != "null"
                    or self.ready_flag or self.owner_column or self.error_at)


READINESS_FIELDS = ("runnable_at", "max_attempts", "lease_ready", "owner_column", "ready_flag", "error_at")
# A status queue's readiness is its status values; these refine it (procrastinate's scheduled_at,
# pgqueuer's execute_after, River's and Oban's max_attempts, a worker id requeue clears).
STATUS_READINESS_FIELDS = ("runnable_at", "max_attempts", "owner_column")
# A due queue's readiness is its due column; max_attempts refines it (MassTransit's fetch takes
# DeliveryCount < MaxDeliveryCount only: depth and oldest_age_s read the due_follow blocks).
DUE_READINESS_FIELDS = ("max_attempts",)


def _readiness_problem(q: Queue) -> str:
    """Why the readiness fields (issue 31) cannot apply to ``q`` ('' when they can)."""
    used = [f for f in READINESS_FIELDS if getattr(q, f) not in (None, "null")]
    allowed = {"lease": READINESS_FIELDS, "status": STATUS_READINESS_FIELDS,
               "due": DUE_READINESS_FIELDS}.get(q.kind, ())
    refused = [f for f in used if f not in allowed]
    if refused:
        where = ("lease queues" if q.kind != "lease" and not set(refused) & set(STATUS_READINESS_FIELDS)
                 else "lease and status queues")
        return (f"{', '.join(refused)}: honoured on {where} only ({q.kind!r} queue); on a "
                f"{q.kind} queue every count would ignore them, so they are refused")
    if q.max_attempts is not None and not q.attempts_column:
        return "max_attempts needs attempts_column (the column counting each item's attempts)"
    if q.error_at and not q.error_column:
        return "error_at needs error_column (error_at is when that error was written)"
    cols = {"key": q.key, "lease_column": q.lease_column, "enqueued_at": q.enqueued_at,
            "error_column": q.error_column, "attempts_column": q.attempts_column,
            "status_column": q.status_column, "status_changed_at": q.status_changed_at}
    for fld in ("runnable_at", "owner_column", "ready_flag", "error_at"):
        value = getattr(q, fld)
        clash = [role for role, col in cols.items() if value and col == value]
        if clash:
            return f"{fld} {value!r} is also {clash[0]}: each readiness column must be a column of its own"
    if q.max_attempts_column and q.max_attempts_column == q.attempts_column:
        return "max_attempts names attempts_column itself: every item would be exhausted"
    return ""


class Store(_Model):
    url: str = "sqlite:///.queueops/store.db"
    retention_days: float = Field(default=14, gt=0, le=3650)
    buffer_rows: int = Field(default=100_000, gt=0, le=10_000_000)
    # Retention pruning: how often, and rows per DELETE (small batches keep SQLite's writer lock
    # and PostgreSQL's transactions short while the service keeps writing).
    prune_every_s: Interval = 3600
    prune_batch: int = Field(default=5000, gt=0, le=1_000_000)


class Lake(_Model):
    path: str = ".queueops/lake"
    export_every_s: Interval = 3600
    # An hour is "closed" this long after it ends, so the rows of a cycle in flight at :59 are in.
    close_grace_s: float = Field(default=60, ge=0, le=HOUR_S)


class Schedule(_Model):
    fast_s: Interval = 15
    slow_s: Interval = 300
    collectors: dict[str, Interval] = Field(default_factory=dict)
    misfire_grace_s: float = Field(default=30, gt=0, le=DAY_S)
    # A target that cannot be reached: full connection attempts back off exponentially up to this,
    # while a cheap TCP probe every interval notices the server's return at once.
    backoff_max_s: Interval = 300


class AlertRule(_Model):
    metric: str
    op: Literal[">", ">=", "<", "<=", "==", "!="] = ">"
    value: float
    for_s: Grace = 0
    # Hysteresis (issue 32): a firing alert resolves only once its condition has been false for
    # clear_for_s seconds and, with clear_value, only once the value is past clear_value (fires at
    # value, resolves beyond clear_value): a metric hovering at its line does not flap.
    clear_for_s: Grace = 0
    clear_value: float | None = None
    queues: list[str] = Field(default_factory=list)
    severity: Literal["warn", "crit"] = "crit"
    name: str | None = None

    @model_validator(mode="after")
    def _clear_value_side(self) -> AlertRule:
        if self.clear_value is None:
            return self
        if self.op in ("==", "!="):
            raise ValueError(f"clear_value needs an ordering op (>, >=, <, <=), not {self.op!r}")
        if self.op in (">", ">=") and self.clear_value > self.value:
            raise ValueError(f"clear_value {self.clear_value:g} must not be above value {self.value:g} for op "
                             f"{self.op!r} (the alert resolves below clear_value)")
        if self.op in ("<", "<=") and self.clear_value < self.value:
            raise ValueError(f"clear_value {self.clear_value:g} must not be below value {self.value:g} for op "
                             f"{self.op!r} (the alert resolves above clear_value)")
        return self


class Alerts(_Model):
    webhook_url: str | None = None
    log: bool = True
    rules: list[AlertRule] = Field(default_factory=list)
    # Each queue's thresholds (or DEFAULT_THRESHOLDS) become rules unless an explicit rule covers
    # the same metric and queue.
    thresholds: bool = True
    # How long a threshold's condition must hold before it fires. None (default): one interval of the
    # metric's collector, i.e. seen on two consecutive samples (a one-sample blip is not paged);
    # stuck_leases fires on the sample the console turns red on (docs/operations.md, Alerts).
    thresholds_for_s: Grace | None = None
    # Hysteresis of the threshold rules: resolved once the condition has been false this long, and
    # only once the value is this fraction of the level back past it (an "above" level of 10 clears
    # below 8; a level of 0 clears at the level itself).
    thresholds_clear_for_s: Grace = 60
    thresholds_clear_margin: float = Field(default=0.2, ge=0, lt=1)
    webhook_timeout_s: float = Field(default=5, gt=0, le=60)


class Identity(_Model):
    """Who the CLI acts as, and the role of each known user (viewer or operator)."""

    user: str | None = None
    roles: dict[str, Literal["viewer", "operator"]] = Field(default_factory=dict)
    default_role: Literal["viewer", "operator"] = "viewer"


class ActionSettings(_Model):
    """``[actions]``: logins whose sessions ``act terminate`` never ends (e.g. replication, a DBA)."""

    terminate_deny_logins: list[str] = Field(default_factory=list)


class Console(_Model):
    users_file: str | None = None
    refresh_s: float = Field(default=5, ge=1, le=HOUR_S)
    cache_s: float = Field(default=5, ge=0, le=HOUR_S)


class Report(_Model):
    path: str = ".queueops/report.html"
    # UTC time of day at which the service writes the report; HH:MM, 00:00 to 23:59.
    daily_at: str | None = Field(default=None, pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")


class Pipeline(_Model):
    """The Spark pipeline (``queueops pipeline run``): where gold tables go, how Spark runs, and
    overrides of the rule parameters by name (see ``queueops/pipeline_params.py``)."""

    out: str = ".queueops/gold"
    master: str | None = None  # default local[*]; e.g. spark://host:7077, yarn
    driver_memory: str = Field(default="1g", pattern=r"^[0-9]+[kmgtKMGT]?$")
    shuffle_partitions: int = Field(default=4, ge=1, le=100_000)
    # The collector service runs the pipeline (a child process) after each lake export that wrote
    # new hours, so the console's Trends page follows the lake without a cron job.
    after_export: bool = False
    params: dict[str, float] = Field(default_factory=dict)

    @field_validator("params")
    @classmethod
    def _known_params(cls, v: dict[str, float]) -> dict[str, float]:
        from queueops.pipeline_params import Params

        try:
            Params().with_overrides(v)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return v


class Config(_Model):
    targets: list[Target] = Field(min_length=1)
    queues: list[Queue] = Field(default_factory=list)
    store: Store = Field(default_factory=Store)
    lake: Lake = Field(default_factory=Lake)
    schedule: Schedule = Field(default_factory=Schedule)
    alerts: Alerts = Field(default_factory=Alerts)
    identity: Identity = Field(default_factory=Identity)
    console: Console = Field(default_factory=Console)
    report: Report = Field(default_factory=Report)
    pipeline: Pipeline = Field(default_factory=Pipeline)
    actions: ActionSettings = Field(default_factory=ActionSettings)
    autopilot: list[AutopilotPolicy] = Field(default_factory=list)
    # Where the file was read from; relative paths (secrets, store, lake) resolve against it.
    source: str | None = Field(default=None, exclude=True)

    @property
    def base_dir(self) -> Path:
        return Path(self.source).resolve().parent if self.source else Path.cwd()

    def target(self, name: str) -> Target:
        for t in self.targets:
            if t.name == name:
                return t
        raise KeyError(name)

    def queue(self, name: str) -> Queue:
        for q in self.queues:
            if q.name == name:
                return q
        raise KeyError(name)

    def queues_of(self, target: str) -> list[Queue]:
        return [q for q in self.queues if q.target == target]

    def path(self, value: str) -> Path:
        """Resolve a path from config relative to the config file's folder."""
        p = Path(value)
        return p if p.is_absolute() else self.base_dir / p


@dataclass(frozen=True)
class Problem:
    field: str
    value: Any
    message: str

    def render(self, file: str) -> str:
        shown = "(missing)" if self.value is _MISSING else repr(self.value)
        return f"{file}: {self.field} = {shown}: {self.message}"


_MISSING = object()


class ConfigError(Exception):
    """One or more problems in a config file; ``str()`` lists each with file, field and value."""

    def __init__(self, file: str, problems: list[Problem]):
        self.file = file
        self.problems = problems
        super().__init__("\n".join(p.render(file) for p in problems))


def _field_path(loc: tuple[Any, ...], raw: dict[str, Any]) -> str:
    parts: list[str] = []
    node: Any = raw
    for item in loc:
        if isinstance(item, int):
            parts[-1] = f"{parts[-1]}[{item}]" if parts else f"[{item}]"
            name = node[item].get("name") if isinstance(node, list) and item < len(node) and isinstance(node[item], dict) else None
            if name is not None:
                parts[-1] += f"(name={name!r})"
        elif item in ("delete", "status", "lease", "due", "ring") and parts and parts[-1].startswith("kind"):
            continue
        else:
            parts.append(str(item))
        try:
            node = node[item]
        except (KeyError, IndexError, TypeError):
            node = None
    return ".".join(parts) or "(top level)"


def _lookup(raw: Any, loc: tuple[Any, ...]) -> Any:
    node = raw
    for item in loc:
        try:
            node = node[item]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return node


def _known_metric_keys(v: dict[str, Any]) -> dict[str, Any]:
    """Refuse a metric name the catalog does not know (a typo would otherwise set no level at all)."""
    unknown = [name for name in v if catalog.get(name) is None]
    if unknown:
        known = ", ".join(sorted(catalog.thresholds()))
        raise ValueError(f"unknown metric(s) {', '.join(map(repr, unknown))}; metrics with levels: {known} "
                         f"({catalog.accepted_names()}, is accepted)")
    return v


def _cross_checks(cfg: Config) -> list[Problem]:
    """Checks that need the whole file: references between sections and per-dialect limits."""
    problems: list[Problem] = []
    names = [t.name for t in cfg.targets]
    for i, t in enumerate(cfg.targets):
        if names.count(t.name) > 1:
            problems.append(Problem(f"targets[{i}].name", t.name, "duplicate target name"))
        for fld in ("url", "actions_url"):
            url = getattr(t, fld)
            if url and not secrets.is_reference(url) and secrets.has_literal_password(url):
                problems.append(Problem(f"targets[{i}].{fld}", secrets.mask(url),
                                        "holds a literal password; use password = \"env:NAME\" or \"file:PATH\""))
    by_target = {t.name: t for t in cfg.targets}
    qnames = [q.name for q in cfg.queues]
    for i, q in enumerate(cfg.queues):
        where = f"queues[{i}](name={q.name!r})"
        if qnames.count(q.name) > 1:
            problems.append(Problem(f"{where}.name", q.name, "duplicate queue name"))
        if len(q.name) > MAX_NAME:
            problems.append(Problem(f"{where}.name", q.name, f"is {len(q.name)} characters long; at most {MAX_NAME}"))
        target = by_target.get(q.target)
        if target is None:
            problems.append(Problem(f"{where}.target", q.target, f"no target of that name (known: {', '.join(names)})"))
            continue
        if target.dialect == "mssql" and q.naive_times == "server":
            problems.append(Problem(f"{where}.naive_times", q.naive_times,
                                    "SQL Server statements compare with SYSUTCDATETIME(): naive (datetime2) times "
                                    "are read as UTC there; local-time columns (DEFAULT SYSDATETIME()) are not "
                                    "supported; leave naive_times out or set \"utc\""))
        if target.dialect == "mssql" and q.advisory_lock:
            problems.append(Problem(f"{where}.advisory_lock", "true",
                                    "advisory locks are PostgreSQL's (pg_try_advisory_lock); SQL Server's "
                                    "statements could not leave locked items out of depth"))
        for fld in ("timeout_column", "row_heartbeat", "heartbeat_from"):
            if target.dialect == "mssql" and getattr(q, fld) is not None:
                problems.append(Problem(f"{where}.{fld}", str(getattr(q, fld)),
                                        "a library's own stuck rule is read by PostgreSQL's stuck_leases only; on "
                                        "SQL Server the count would fall back to lease_timeout_s without saying so"))
        if target.dialect == "mssql" and q.claims is not None:
            problems.append(Problem(f"{where}.claims", q.claims.table,
                                    "claims are read by PostgreSQL's stuck_leases only; on SQL Server no "
                                    "statement would count them (stuck_leases would be silently absent)"))
        for metric, th in q.thresholds.items():
            collector = catalog.target_wide(metric)
            if collector is not None and metric != judge.OLD_SNAPSHOT:
                problems.append(Problem(
                    f"{where}.thresholds.{metric}", th.model_dump(exclude_none=True),
                    f"a target-wide metric (the {collector} collector reads the server, not the queue's table): no "
                    "row of this queue carries it, so a queue's level would judge nothing and never alert; set "
                    "it as an [[alerts.rules]] rule without queues, which judges each target's row"))
        old_snapshot = q.thresholds.get(judge.OLD_SNAPSHOT)
        if old_snapshot is not None and old_snapshot.direction == "below":
            problems.append(Problem(f"{where}.thresholds.{judge.OLD_SNAPSHOT}.direction", "below",
                                    "the old-snapshot levels are ages a snapshot reaches (queueops.judge."
                                    "snapshot_levels): leave direction out or set \"above\""))
        for fld, value in _identifier_fields(q):
            problem = identifier_problem(value, target.dialect)
            if problem:
                problems.append(Problem(f"{where}.{fld}", value, f"not a safe identifier: {problem}"))
    pnames = [p.key for p in cfg.autopilot]
    for i, p in enumerate(cfg.autopilot):
        if p.queue not in qnames:
            problems.append(Problem(f"autopilot[{i}].queue", p.queue, f"no queue of that name (known: {', '.join(qnames)})"))
        if pnames.count(p.key) > 1:
            problems.append(Problem(f"autopilot[{i}].name", p.key, "duplicate policy name (name each policy)"))
        metric = p.condition.metric
        if catalog.get(metric) is None:
            problems.append(Problem(f"autopilot[{i}].when", p.when, f"unknown metric {metric!r}: no collector writes "
                                    f"it, so the policy would never fire ({catalog.accepted_names()})"))
    return problems


def preset_warnings(cfg: Config) -> list[Problem]:
    """Queues whose ``lease_timeout_s`` override is not above their preset library's own rescue
    (see :func:`queueops.presets.timeout_warning`): told by ``config check``, not refused."""
    from queueops import presets

    out = []
    for i, q in enumerate(cfg.queues):
        why = presets.timeout_warning(q.preset, q.lease_timeout_s)
        if why:
            out.append(Problem(f"queues[{i}](name={q.name!r}).lease_timeout_s", q.lease_timeout_s,
                               f"{why}; fix: raise it above the library's limit, or remove the override"))
    return out


def _secret_fields(cfg: Config) -> list[tuple[str, str]]:
    """(field, value) of every setting that may be an ``env:``/``file:`` reference."""
    refs = [(f"targets[{i}](name={t.name!r}).{fld}", getattr(t, fld)) for i, t in enumerate(cfg.targets)
            for fld in ("url", "password", "actions_url", "actions_password")]
    return [(f, v) for f, v in [*refs, ("store.url", cfg.store.url)] if v]


def secret_problems(cfg: Config) -> list[Problem]:
    """Every ``env:``/``file:`` reference that cannot be resolved from here, the file named by its
    resolved path (relative ``file:`` paths resolve against the config file's folder).

    Not part of :func:`load`: the service and the console resolve secrets when they connect and
    report there; ``queueops config check`` calls this so a broken reference is found before
    anything connects.
    """
    return [Problem(field, value, message) for field, value in _secret_fields(cfg)
            if secrets.is_reference(value) and (message := secrets.check(value, cfg.base_dir))]


def secret_files(cfg: Config) -> list[tuple[str, Path]]:
    """(field, resolved path) of every ``file:`` reference, for ``config check`` to show."""
    return [(field, secrets.file_path(value, cfg.base_dir)) for field, value in _secret_fields(cfg)
            if value.startswith("file:")]


def _identifier_fields(q: Queue) -> list[tuple[str, str]]:
    out = [(f, getattr(q, f)) for f in (
        "schema_", "table", "key", "enqueued_at", "status_column", "status_changed_at", "data_table",
        "data_key", "lease_column", "error_column", "attempts_column", "due_column", "sequence_table",
        "push_column", "pop_column", "refcount_column", "runnable_at", "owner_column", "ready_flag",
        "error_at") if getattr(q, f)]
    if q.max_attempts_column:
        out.append(("max_attempts", q.max_attempts_column))
    out += [(f"open_when_null[{i}]", col) for i, col in enumerate(q.open_when_null)]
    if q.partition:
        out.append(("partition.column", q.partition.column))
        if isinstance(q.partition.value, str):
            out.append(("partition.value", q.partition.value))
    if q.expires_column:
        out.append(("expires_column", q.expires_column))
    if q.times_from and q.times_from.only:
        out.append(("times_from.only.column", q.times_from.only.column))
    if q.watermark:
        out += [(f"watermark.{f}", getattr(q.watermark, f)) for f in ("schema_", "table", "column")
                if getattr(q.watermark, f)]
    return [(f.replace("schema_", "schema"), v) for f, v in out]


def _expand_presets(raw: dict[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """Replace every ``[[queues]]`` section naming a ``preset`` with the preset's complete mapping
    under the section's own overrides (see :mod:`queueops.presets`)."""
    from queueops import presets

    queues = raw.get("queues")
    if not isinstance(queues, list):
        return raw, []
    out, problems = [], []
    for i, q in enumerate(queues):
        try:
            out.append(presets.expand(q) if isinstance(q, dict) else q)
        except KeyError as exc:
            problems.append(Problem(_field_path(("queues", i, "preset"), raw), q.get("preset"), exc.args[0]))
            continue
        if isinstance(q, dict) and isinstance(q.get("preset"), str):
            for fld, why in presets.get(q["preset"]).requires.items():
                if fld not in q:
                    problems.append(Problem(f"{_field_path(('queues', i), raw)}.{fld}", _MISSING,
                                            f"preset {q['preset']!r} needs it: {why}"))
    return {**raw, "queues": out}, problems


def parse(raw: dict[str, Any], file: str = "<config>") -> Config:
    """Validate an already-parsed TOML document; raise :class:`ConfigError` listing every problem."""
    raw, preset_problems = _expand_presets(raw)
    if preset_problems:
        raise ConfigError(file, preset_problems)
    try:
        cfg = Config.model_validate({**raw, "source": file if file != "<config>" else None})
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "missing":
                msg = "is required"
            problems.append(Problem(_field_path(loc, raw), _lookup(raw, loc), msg))
        raise ConfigError(file, problems) from None
    problems = _cross_checks(cfg)
    if problems:
        raise ConfigError(file, problems)
    return cfg


def load(path: str | os.PathLike[str] | None = None) -> Config:
    """Read and validate a config file (default: ``$QUEUEOPS_CONFIG`` or ``./queueops.toml``)."""
    path = Path(path or os.environ.get("QUEUEOPS_CONFIG") or DEFAULT_CONFIG)
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(file, [Problem("(file)", file, "config file not found; pass --config PATH "
                                         "or run 'queueops lab start' to get .queueops/lab.toml")]) from None
    except OSError as exc:
        raise ConfigError(file, [Problem("(file)", file, f"cannot read: {exc.strerror}")]) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, [Problem("(syntax)", _MISSING, f"not valid TOML: {exc}")]) from None
    return parse(raw, file)
