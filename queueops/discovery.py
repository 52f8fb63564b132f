"""``queueops discover``: find the queue tables on a server from its catalog and statistics.

Reads only catalog views and activity counters (``sql/<dialect>/discover.sql``): never a queue
table's rows. Every table is matched against the library presets (:mod:`queueops.presets`: table
name or pattern, column names and types); the rest are judged by shape (an identity key, status /
take / due / finish / enqueue-time columns, a ring's slot and sequence tables, a one-row watermark
table, a payload table linked by a foreign key) and activity (inserts, updates and deletes against
live rows, dead tuples / ghosts), and the two must agree: a table that has seen inserts and no
delete is never a delete queue.

:func:`survey` returns one :class:`Proposal` per table read, proposed or not: a proposal carries the
kind it guesses, a score, its evidence and what the mapping cannot say (``advice``); a *near miss*
(queue-like columns that no mapping kind can read as they are) carries the mapping it would need
and what to add by hand; every other table says why it was rejected, and a side table (a library's
own, a payload, sequence, watermark, lock or registry table) names the queue table it serves.
:func:`render_toml` turns proposals into ``[[queues]]`` sections with the evidence as a comment,
so nothing is mapped silently.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

from queueops import engine, presets, sessions, sqlfiles

ENQUEUED = ("enqueued_at", "created_at", "created", "createdat", "inserted_at", "queued_at", "insertedon",
            "created_on", "createdon", "enqueue_time", "enqueuetime", "enqueued_on", "queued_on", "submitted_at",
            "added_at", "create_time", "creation_time", "created_utc", "createdutc")
STATUS = ("status", "state", "statename", "status_code", "job_status", "job_state", "jobstatus", "jobstate")
ERROR = ("errors", "error", "last_error", "error_message", "exception", "lasterror", "last_exception")
ATTEMPTS = ("attempts", "attempt", "retry_count", "retries", "dequeue_count", "attempt_count", "deliverycount",
            "delivery_count", "receive_count", "read_ct", "tries", "retrycount", "attemptcount")
MAX_ATTEMPTS = ("max_attempts", "max_attempt", "max_retries", "retry_limit", "maxattempts", "max_tries",
                "maxretries", "attempts_max")
REFCOUNT = ("reference_count", "refcount", "ref_count", "references")
TIME_TYPES = ("timestamp", "datetime", "date", "smalldatetime", "datetimeoffset", "datetime2")
INT_TYPES = ("bigint", "integer", "int", "smallint", "tinyint")
BOOL_TYPES = ("boolean", "bool", "bit")
TEXT_TYPES = ("text", "character", "varchar", "nvarchar", "char", "nchar", "citext")

# Time columns by what they mark, matched on the snake_case name (ProcessingStartedAt ->
# processing_started_at). An expiring lock or visibility window is checked first: "locked_until"
# is not "locked_at".
_AT = r"(_?(at|on|time|date|utc|ts))?$"
EXPIRING = re.compile(r"(^|_)(lock|locked|lease|leased|reserved|claim|claimed|hold|held|invisible|visible|"
                      r"visibility)_?(until|expires?|expires_at|expiry|expiration|timeout|deadline)(_?(at|on|time))?$")
TAKEN = re.compile(r"(^|_)(dequeued|consumed|picked|picked_up|locked|claimed|fetched|leased|reserved|taken|started|"
                   r"acquired|checked_out|popped|grabbed|lease)" + _AT)
FINISH = re.compile(r"(^|_)(finished|completed|done|processed|acked|acknowledged|succeeded|ended|expired|discarded|"
                    r"cancelled|canceled|archived|deleted|removed|published|sent|handled)" + _AT)
FAILED_AT = re.compile(r"(^|_)(failed|errored|dead|died|dead_lettered)" + _AT)
RUN_AT = re.compile(r"(^|_)(due|due_at|due_on|due_time|due_date|run_at|run_after|run_time|not_before|available_at|"
                    r"available_after|available_from|scheduled|scheduled_at|scheduled_for|scheduled_on|"
                    r"scheduled_time|schedule_at|schedule_for|schedule_time|execute_at|execute_after|execution_time|"
                    r"deliver_at|deliver_after|process_at|process_after|start_after|eta|retry_at|next_run|"
                    r"next_run_at|next_attempt|next_attempt_at|next_retry|next_retry_at|ready_at|delay_until|"
                    r"delayed_until)$|^vt$|^visible(_?(at|after|from|on))?$")
CHANGED = re.compile(r"status_?changed|updated|changed_?at", re.I)
# Boolean columns that look like a state: the mapping kinds read no boolean yet.
FLAGS = (("readiness", re.compile(r"^(is_)?(visible|available|ready|runnable|pending|queued)$")),
         ("taken", re.compile(r"^(is_)?(locked|taken|claimed|reserved|leased|picked|in_progress|processing|running|"
                              r"consumed|dequeued|in_flight|invisible|busy)$")),
         ("done", re.compile(r"^(is_)?(done|processed|completed|finished|acked|handled|published|sent|succeeded|"
                             r"archived|deleted)$")),
         ("failed", re.compile(r"^(is_)?(failed|dead|poisoned|errored|dead_lettered)$")))
QUEUE_NAME = re.compile(r"queue|^q_|jobs?$|messages?$|outbox|inbox|tasks?$", re.I)
# Side tables: a per-queue lock or registry table has a name column as its key and a lock / owner column.
NAME_COLS = ("queue", "queue_name", "queuename", "name", "topic", "channel", "lock_name", "job_queue", "queue_key")
OWNER = re.compile(r"(^|_)(locked_by|lock|locked|owner|owner_id|holder|worker|worker_id|pid|process_id|leased_by|"
                   r"lease_owner|claimed_by|node|node_id|hostname|host|locked_at|lock_at|locked_until|lock_until|"
                   r"lock_expires_at|leased_until|heartbeat|last_heartbeat)$")
SIDE_MAX_ROWS = 10_000

# Status values by what they mean (labels are compared lower-case, '-' and ' ' read as '_').
# "later" (scheduled, retryable, ...) is ready when no run-at column says when such a job may run,
# and in no values list when one does (the mapping cannot say "ready once run_at <= now()" yet).
VOCAB = {
    "ready": ("ready", "pending", "queued", "new", "todo", "to_do", "available", "created", "enqueued", "waiting",
              "open", "submitted", "unprocessed", "not_started"),
    "later": ("scheduled", "retry", "retryable", "retrying", "delayed", "deferred", "snoozed", "backoff", "postponed"),
    "processing": ("processing", "running", "active", "picked", "doing", "in_progress", "inprogress", "executing",
                   "claimed", "started", "consumed", "taken", "locked", "reserved", "dequeued", "leased", "working",
                   "busy", "fetched", "in_flight", "inflight", "handling", "assigned"),
    "done": ("done", "completed", "complete", "succeeded", "success", "successful", "finished", "processed", "acked",
             "acknowledged", "archived", "handled", "sent", "published", "deleted", "ok"),
    "failed": ("failed", "failure", "fail", "error", "errored", "dead", "dead_letter", "deadletter", "discarded",
               "cancelled", "canceled", "aborted", "exception", "expired", "rejected", "nacked", "killed", "timed_out",
               "timeout", "poisoned"),
}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _word(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


@dataclass
class Column:
    name: str
    data_type: str
    udt: str
    is_enum: bool = False
    identity: bool = False
    labels: list[str] = field(default_factory=list)
    nullable: bool = True
    checks: list[str] = field(default_factory=list)  # the values a one-column CHECK constraint allows

    @property
    def is_time(self) -> bool:
        return self.data_type.lower().startswith(TIME_TYPES)

    @property
    def is_int(self) -> bool:
        return self.data_type.lower() in INT_TYPES

    @property
    def is_bool(self) -> bool:
        return self.data_type.lower() in BOOL_TYPES

    @property
    def is_text(self) -> bool:
        return self.data_type.lower().startswith(TEXT_TYPES) or self.udt.lower() in ("text", "varchar", "citext")

    def describe(self) -> str:
        return f"{self.name} ({self.data_type}{', nullable' if self.nullable else ', NOT NULL'})"


@dataclass
class Table:
    schema: str
    name: str
    kind: str = "r"
    reltuples: float = 0
    inserts: float = 0
    updates: float = 0
    deletes: float = 0
    live: float = 0
    dead: float = 0
    columns: dict[str, Column] = field(default_factory=dict)
    indexes: list[tuple[str, list[str], bool, bool]] = field(default_factory=list)  # name, keys, primary, partial
    fks: list[tuple[str, str, str, str]] = field(default_factory=list)  # column, ref schema, ref table, ref column
    unique_keys: list[list[str]] = field(default_factory=list)  # the keys of its unique indexes (primary included)
    # Its CHECK constraints could not be read (a lock held on it: _checks), so a status column's
    # values a CHECK lists are missing from this reading.
    checks_unread: bool = False

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    def col(self, names: tuple[str, ...], pred: Any = None) -> Column | None:
        for c in self.columns.values():
            if c.name.lower() in names and (pred is None or pred(c)):
                return c
        return None

    @property
    def primary_key(self) -> list[str]:
        return next((keys for _, keys, primary, _ in self.indexes if primary), [])

    def unique(self, column: str) -> bool:
        return [column] in self.unique_keys or self.primary_key == [column]

    def activity(self) -> str:
        return (f"{self.inserts:.0f} inserts, {self.updates:.0f} updates, {self.deletes:.0f} deletes, "
                f"{self.live:.0f} live rows, {self.dead:.0f} dead")

    def activity_dict(self) -> dict[str, float]:
        return {"inserts": self.inserts, "updates": self.updates, "deletes": self.deletes, "live_rows": self.live,
                "dead_rows": self.dead}


@dataclass
class Proposal:
    """One table read: a queue proposed (how it would be mapped, how sure discovery is, and why), a
    near miss (the mapping it would need and what to add by hand), or a table rejected (why)."""

    table: Table
    kind: str | None
    score: float
    evidence: list[str]
    mapping: dict[str, Any]
    preset: str | None = None
    proposed: bool = True
    rejected_because: str | None = None
    near_miss: bool = False
    # What the mapping cannot say, or (near miss) what to add by hand.
    advice: list[str] = field(default_factory=list)
    side_of: str | None = None  # schema.table of the queue table this one serves
    strong: bool = False  # has a column only a queue has (status values, take / due / lock time, readiness flag)

    @property
    def label(self) -> str:
        return f"preset {self.preset}" if self.preset else "hand-rolled"

    def reject(self, because: str, near_miss: bool = False) -> Proposal:
        self.proposed, self.rejected_because, self.near_miss = False, because, near_miss
        return self

    def as_dict(self, rank: int) -> dict[str, Any]:
        """The JSON object of ``discover --json``: one per table read."""
        return {"rank": rank, "schema": self.table.schema, "table": self.table.name, "proposed": self.proposed,
                "kind": self.kind if self.proposed else None, "preset": self.preset,
                "score": self.score if self.proposed or self.near_miss else None,
                "evidence": self.evidence, "advice": self.advice,
                "mapping": self.mapping if self.proposed else None,
                "near_miss": ({"kind": self.kind, "mapping": self.mapping, "add_by_hand": self.advice}
                              if self.near_miss else None),
                "rejected_because": self.rejected_because, "side_of": self.side_of,
                "activity": self.table.activity_dict()}


# -- reading the catalog -------------------------------------------------------------------------------
def read_catalog(conn: engine.Connection) -> dict[tuple[str, str], Table]:
    """Every user table of the connection's database, with columns, indexes, keys and activity,
    read on a reading session (:func:`queueops.sessions.reading`: lock and statement timeouts)."""
    conn.execute(sessions.reading(conn.target))
    sqlf = sqlfiles.load(conn.dialect, "discover")
    tables: dict[tuple[str, str], Table] = {}
    for r in conn.execute(sqlf.render("tables")):
        tables[(r["schema_name"], r["table_name"])] = Table(
            r["schema_name"], r["table_name"], r["relkind"], float(r["reltuples"] or 0), float(r["inserts"] or 0),
            float(r["updates"] or 0), float(r["deletes"] or 0), float(r["live_rows"] or 0), float(r["dead_rows"] or 0))
    for r in conn.execute(sqlf.render("columns")):
        t = tables.get((r["schema_name"], r["table_name"]))
        if t is not None:
            t.columns[r["column_name"]] = Column(r["column_name"], r["data_type"], r["udt_name"], bool(r["is_enum"]),
                                                 bool(r["is_identity"]), list(r.get("enum_labels") or []),
                                                 bool(r.get("is_nullable", True)))
    per_index: dict[tuple[str, str, str], tuple[list[str], bool, bool, bool]] = {}
    for r in conn.execute(sqlf.render("indexes")):
        key = (r["schema_name"], r["table_name"], r["index_name"])
        keys = list(r["key_columns"] or []) if "key_columns" in r else [r["column_name"]]
        prev = per_index.get(key)
        per_index[key] = ((prev[0] if prev else []) + keys, bool(r["is_primary"]), bool(r["is_partial"]),
                          bool(r.get("is_unique", r["is_primary"])))
    for (s, t_name, i_name), (keys, primary, partial, unique) in per_index.items():
        if (s, t_name) in tables:
            tables[(s, t_name)].indexes.append((i_name, keys, primary, partial))
            if unique and not partial:
                tables[(s, t_name)].unique_keys.append(keys)
    for r in conn.execute(sqlf.render("foreign_keys")):
        t = tables.get((r["schema_name"], r["table_name"]))
        if t is not None:
            t.fks.append((r["column_name"], r["ref_schema"], r["ref_table"], r["ref_column"]))
    if sqlf.has_block("checks"):
        for r in _checks(conn, sqlf, tables):
            t = tables.get((r["schema_name"], r["table_name"]))
            col = t.columns.get(r["column_name"]) if t is not None else None
            if col is not None:
                col.checks += [v for v in check_values(r["definition"] or "", col.name) if v not in col.checks]
    return tables


def _checks(conn: engine.Connection, sqlf: sqlfiles.SqlFile,
            tables: dict[tuple[str, str], Table]) -> list[dict[str, Any]]:
    """The one-column CHECK constraints' definitions. Printing one (pg_get_constraintdef) takes
    ACCESS SHARE on its table: one table of the database held by a migration failed the read of
    every table's at the lock timeout (and, before discovery set one, hung it). Then each table's
    are read apart, and a table whose read times out again is marked ``checks_unread``."""
    try:
        return conn.execute(sqlf.render("checks", {}, {"relid": None}))
    except engine.TargetError as exc:
        if not exc.timeout or not sqlf.has_block("check_tables"):
            raise
    rows: list[dict[str, Any]] = []
    for t in conn.execute(sqlf.render("check_tables")):
        try:
            rows += conn.execute(sqlf.render("checks", {}, {"relid": t["relid"]}))
        except engine.TargetError as exc:
            if not exc.timeout:
                raise
            table = tables.get((t["schema_name"], t["table_name"]))
            if table is not None:
                table.checks_unread = True
    return rows


def check_values(definition: str, column: str) -> list[str]:
    """The string values a one-column CHECK constraint allows, when it is a list of them
    (PostgreSQL: ``CHECK ((status = ANY (ARRAY['queued'::text, ...])))`` or ``status = 'x' OR ...``;
    SQL Server: ``([Status]='queued' OR [Status]='consumed')`` or ``[Status] IN (...)``); [] for any
    other check (a length, a range, a comparison with another column)."""
    text = re.sub(r"::[\w\s.\"]+(\[\])?", "", definition)  # PostgreSQL casts
    if re.search(r"<|>|\blike\b|\blength\b|char_length|\bnot\b|<>|!=", text, re.I):
        return []
    values = re.findall(r"N?'((?:[^']|'')*)'", text)
    named = re.sub(r"[\[\]\"`]", "", text).lower()
    if not values or column.lower() not in named:
        return []
    return [v.replace("''", "'") for v in values]


# -- presets -------------------------------------------------------------------------------------------
_MODIFIER = re.compile(r"\(\s*\d+(\s*,\s*\d+)?\s*\)")


def _type_fits(col: Column, expected: str) -> bool:
    """Whether ``col`` has the signature's type, whatever its precision or length modifier: Rails 7+
    writes ``timestamp(6) without time zone`` (issue 29: GoodJob was missed), MassTransit ``datetime2(7)``."""
    exp = _MODIFIER.sub("", expected.lower())
    have = _MODIFIER.sub("", col.data_type.lower())
    return (have.startswith(exp) or col.udt.lower() == exp or have.split(".")[-1] == exp)


def match_preset(t: Table, dialect: str) -> tuple[presets.Preset, list[str]] | None:
    """The preset whose signature this table fits best (every signature column, with its type)."""
    best: tuple[int, presets.Preset, list[str]] | None = None
    fold = str.lower if dialect == "mssql" else str
    for p in presets.all_presets().values():
        sig = p.signature
        if p.engine != dialect:
            continue
        if sig.schema_ and fold(sig.schema_) != fold(t.schema):
            continue
        if sig.table and fold(sig.table) != fold(t.name):
            continue
        if sig.table_like and not fnmatch.fnmatchcase(t.name, sig.table_like.replace("%", "*")):
            continue
        cols = {fold(c): col for c, col in t.columns.items()}
        fits = [c for c, typ in sig.columns.items() if fold(c) in cols and _type_fits(cols[fold(c)], typ)]
        if len(fits) != len(sig.columns):
            continue
        named = bool(sig.table or sig.table_like)
        why = [f"signature of {p.library} {p.versions}: "
               + (f"table {sig.table or sig.table_like}" + (f" in schema {sig.schema_}" if sig.schema_ else "") + ", "
                  if named else "")
               + f"{len(fits)}/{len(sig.columns)} columns with their types ({', '.join(fits)})"]
        rank = len(fits) + (10 if named else 0)
        if best is None or rank > best[0]:
            best = (rank, p, why)
    return (best[1], best[2]) if best else None


def _preset_proposal(t: Table, p: presets.Preset, why: list[str]) -> Proposal:
    mapping = {"preset": p.name, "schema": t.schema, "table": t.name}
    evidence = [*why, f"activity: {t.activity()}", f"rescue: {p.rescue.how}"]
    evidence += [f"not available: {m}: {reason}" for m, reason in p.unavailable.items()]
    return Proposal(t, str(p.queue["kind"]), 100 + _activity_score(t), evidence, mapping, p.name)


# -- hand-rolled tables --------------------------------------------------------------------------------
def _activity_score(t: Table) -> float:
    churn = t.deletes + t.updates
    if t.inserts <= 0:
        return 0
    score = 0.0
    if churn >= 0.5 * t.inserts:
        score += 5
    if t.inserts > 10 * max(t.live, 1):
        score += 5
    if t.dead > t.live:
        score += 2
    return score


def _key(t: Table) -> Column | None:
    ident = next((c for c in t.columns.values() if c.identity), None)
    pk = t.primary_key
    if ident and (not pk or pk == [ident.name] or ident.name in pk):
        return ident
    if len(pk) == 1:
        return t.columns.get(pk[0])
    return ident


def _label_groups(labels: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {g: [] for g in (*VOCAB, "unknown")}
    for lab in labels:
        groups[next((g for g, words in VOCAB.items() if _word(lab) in words), "unknown")].append(lab)
    return groups


def _state_like(col: Column) -> bool:
    """An enum or CHECK-listed column whose values read like a job's states (ready and taken or done)."""
    labels = col.labels or col.checks
    if not labels:
        return False
    g = _label_groups(labels)
    return bool(g["ready"] or g["later"]) and bool(g["processing"] or g["done"] or g["failed"])


def _status_values(col: Column, run_at: Column | None
                   ) -> tuple[dict[str, list[Any]] | None, list[str], list[str], bool]:
    """Ready / processing / done values of a status column: the enum's labels or the CHECK
    constraint's values read on a wide vocabulary, the usual 0 / 1 / 2 for an integer column.
    Returns (values or None, evidence, advice, strong: the values read like a job's states)."""
    labels = col.labels if col.is_enum and col.labels else col.checks
    source = "the enum's labels" if col.is_enum and col.labels else "its CHECK constraint's values"
    if labels:
        g = _label_groups(labels)
        ready = g["ready"] + ([] if run_at else g["later"])
        done = g["done"] + g["failed"]
        line = (f"status column {col.name} ({col.data_type}, {source}): ready {ready}, processing {g['processing']}, "
                f"done {g['done']}")
        if g["failed"]:
            line += f", failed {g['failed']} (finished: mapped as done)"
        evidence, advice = [line], []
        if g["later"] and run_at:
            advice.append(f"status values {g['later']} wait for {run_at.name}: in no values list (the mapping cannot "
                          f"say 'ready once {run_at.name} <= now()' yet: runnable_at = \"{run_at.name}\" once the "
                          "config has it): depth does not count them, even once due")
        elif g["later"]:
            evidence.append(f"{g['later']} read as ready (no run-at column says when they may run)")
        if g["unknown"]:
            evidence.append(f"values not recognised: {g['unknown']}: in no values list (counted nowhere); add each "
                            "by hand to ready_values, processing_values or done_values")
        strong = bool(ready or g["later"] or g["processing"])
        if ready and g["processing"]:
            if not done:
                rest = [v for v in labels if v not in ready and v not in g["processing"] and v not in g["later"]]
                done = rest[-1:] or [labels[-1]]
                evidence.append(f"no done value recognised: done_values = {done} is a guess, check it")
            return {"ready_values": ready, "processing_values": g["processing"], "done_values": done}, evidence, \
                advice, strong
        missing = " or ".join(n for n, v in (("ready", ready), ("processing (taken)", g["processing"])) if not v)
        advice.append(f"no {missing} value recognised among {labels}: map status_column = \"{col.name}\" with "
                      "ready_values, processing_values and done_values by hand")
        return None, evidence, advice, strong
    if col.is_int:
        values: dict[str, list[Any]] = {"ready_values": [0], "processing_values": [1], "done_values": [2]}
        return values, [f"status column {col.name} ({col.data_type}): ready [0], processing [1], done [2] (guessed: "
                        "the usual 0 / 1 / 2, check them)"], [], True
    return None, [f"status column {col.name} ({col.data_type}): its values are not in the catalog (no enum, no CHECK "
                  "constraint listing them; discover reads no rows)"], \
        [f"map status_column = \"{col.name}\" with ready_values, processing_values and done_values by hand "
         f"(SELECT DISTINCT {col.name} shows them)"], False


def _one_row(t: Table) -> bool:
    return len(t.columns) <= 3 and t.reltuples <= 1 and t.live <= 1 and t.primary_key != []


def _flag_role(c: Column) -> str | None:
    if not c.is_bool:
        return None
    return next((role for role, rx in FLAGS if rx.search(_snake(c.name))), None)


def _lock_shape(t: Table) -> tuple[Column, list[str]] | None:
    """A per-queue lock or registry table: a name column as its key, a lock / owner column, no
    enqueue time, few rows."""
    if t.col(ENQUEUED, lambda c: c.is_time) or max(t.live, t.reltuples) > SIDE_MAX_ROWS:
        return None
    name = next((c for c in t.columns.values() if c.name.lower() in NAME_COLS and (c.is_text or c.is_int)
                 and t.unique(c.name)), None)
    owners = [c.name for c in t.columns.values() if OWNER.search(_snake(c.name))]
    return (name, owners) if name and owners else None


def _ring(t: Table, siblings: list[Table], enq: Column | None) -> Proposal | None:
    """Slots with a reference count, and a one-row sequence table with push / pop columns
    (``siblings``: the tables of ``t``'s schema, ``t`` among them)."""
    refc = t.col(REFCOUNT, lambda c: c.is_int)
    if not (refc and t.primary_key):
        return None
    seq = next((o for o in siblings if o is not t and any("push" in c.lower() for c in o.columns)
                and any("pop" in c.lower() for c in o.columns) and _one_row(o)), None)
    capacity = int(max(t.reltuples, t.live))
    if not seq or capacity <= 0:
        return None
    push = next(c for c in seq.columns if "push" in c.lower())
    pop = next(c for c in seq.columns if "pop" in c.lower())
    mapping: dict[str, Any] = {"schema": t.schema, "table": t.name, "key": t.primary_key[0], "sequence_table": seq.name,
                               "push_column": push, "pop_column": pop, "refcount_column": refc.name,
                               "capacity": capacity}
    if enq:
        mapping["enqueued_at"] = enq.name
    evidence = [f"preallocated slots ({capacity} rows, key {t.primary_key[0]}) with a reference count {refc.name}",
                f"one-row sequence table {seq.name} ({push}, {pop})", f"activity: {t.activity()}"]
    return Proposal(t, "ring", 60 + _activity_score(t), evidence, mapping, strong=True)


def judge(t: Table, siblings: list[Table]) -> Proposal:
    """Judge a table that matches no preset: is it a queue, which kind, and why; a near miss (the
    mapping it would need, what to add by hand); or why not. ``siblings``: the tables of ``t``'s
    schema, ``t`` among them (each scan below skips it), a side table is found among them.
    :func:`survey` builds each schema's list once: a list per table made discover quadratic, 27 s
    of Python for 3,050 tables."""
    enq = t.col(ENQUEUED, lambda c: c.is_time)
    if ring := _ring(t, siblings, enq):
        return ring
    key = _key(t)
    evidence: list[str] = []
    advice: list[str] = []
    blockers: list[str] = []  # why a table that reads like a queue cannot be mapped as it is
    mapping: dict[str, Any] = {"schema": t.schema, "table": t.name}
    if key is not None:
        mapping["key"] = key.name
        evidence.append(f"key {key.name} ({key.data_type}{', identity' if key.identity else ''})")
    if enq:
        mapping["enqueued_at"] = enq.name
        evidence.append(f"enqueue time {enq.name} ({enq.data_type})")
    # what each column marks
    times = [c for c in t.columns.values() if c.is_time and c is not enq]
    expiring = [c for c in times if EXPIRING.search(_snake(c.name))]
    taken = [c for c in times if c not in expiring and TAKEN.search(_snake(c.name))]
    finish = [c for c in times if c not in expiring and c not in taken and FINISH.search(_snake(c.name))]
    failed_at = [c for c in times if c not in expiring and c not in taken and c not in finish
                 and FAILED_AT.search(_snake(c.name))]
    run_at = [c for c in times if c not in expiring and c not in taken and c not in finish and c not in failed_at
              and RUN_AT.search(_snake(c.name))]
    flags = [(c, role) for c in t.columns.values() if (role := _flag_role(c))]
    status = t.col(STATUS) or next((c for c in t.columns.values() if _state_like(c)), None)
    attempts = t.col(ATTEMPTS, lambda c: c.is_int)
    max_attempts = t.col(MAX_ATTEMPTS, lambda c: c.is_int)
    err = t.col(ERROR)
    queue_named = bool(QUEUE_NAME.search(t.name))
    due_col = next((c for c in run_at if not c.nullable), run_at[0] if run_at else None)
    lease = next((c for c in taken if c.nullable), None)
    for c in taken:
        if not c.nullable:
            evidence.append(f"{c.describe()} is set on every row: not a take marker")
    status_values = None
    # columns only a queue has; a readiness flag alone is not one (products.available)
    strong = bool(lease or run_at or expiring)
    if any(role == "readiness" for _, role in flags):
        strong = strong or queue_named or bool(taken or attempts or status is not None)
    if status is not None:
        status_values, ev, adv, status_strong = _status_values(status, due_col)
        evidence += ev
        advice += adv
        strong = strong or status_strong
    open_cols = [c.name for c in finish if c.nullable]
    # -- the kind
    kind: str | None = None
    if status is not None and status_values:
        kind = "status"
        mapping.update(status_column=status.name, **status_values)
        changed = next((c for c in t.columns.values() if c.is_time and CHANGED.search(c.name)), None) or lease
        if changed:
            mapping["status_changed_at"] = changed.name
            if changed is lease:
                evidence.append(f"status change time {lease.name}: set when a job is taken")
        data = next(((o, fk_col) for o in siblings if o is not t for fk_col, rs, rt, _ in o.fks
                     if rs == t.schema and rt == t.name and fk_col in o.primary_key), None)
        if data:
            mapping.update(data_table=data[0].name, data_key=data[1])
            evidence.append(f"payload table {data[0].name} linked by foreign key {data[1]}")
        open_cols = []  # done values say which jobs are finished
    elif lease:
        kind = "lease"
        mapping["lease_column"] = lease.name
        evidence.append(f"take marker {lease.describe()}: NULL until a job is taken: the lease column")
    elif status is not None and (status.labels or status.checks):
        g = _label_groups(status.labels or status.checks)
        kind = "status"  # what it would need: the values discover could not place, added by hand
        mapping.update(status_column=status.name, ready_values=g["ready"] + g["later"],
                       processing_values=g["processing"], done_values=g["done"] + g["failed"])
        blockers.append(f"status column {status.name}: "
                        + next((a.split(":")[0] for a in advice if a.startswith("no ")), "its values fit no mapping"))
    elif due_col:
        kind = "due"
        mapping["due_column"] = due_col.name
        evidence.append(f"due-time column {due_col.describe()}")
        if due_col.nullable:
            advice.append(f"{due_col.name} is nullable: a due mapping never counts a row whose {due_col.name} is NULL "
                          "as ready")
    elif (not_null := [c for c in expiring if not c.nullable]):
        kind = "due"
        mapping["due_column"] = not_null[0].name
        evidence.append(f"visibility time {not_null[0].describe()}: an item is ready once it has passed (taking "
                        "one moves it forward)")
    elif enq and key is not None and key.identity and (queue_named or _activity_score(t) >= 5):
        kind = "delete"
        evidence.append("identity key and enqueue time, no status / take / due column: items leave by DELETE"
                        + (f" or when {' / '.join(open_cols)} is set" if open_cols else ""))
    # -- what the columns say beside the kind
    if kind and run_at and kind != "due":
        c = run_at[0]
        advice.append(f"{c.describe()} schedules jobs for later: the mapping should honour it (runnable_at = "
                      f"\"{c.name}\" once the config has it); until then depth counts a job scheduled for later as "
                      "ready")
    for c, role in flags:
        if kind == "status" or (role == "taken" and kind == "lease"):
            evidence.append(f"boolean {c.name}: a {role} flag beside the {kind} column")
            continue
        blockers.append(f"boolean {c.name} looks like a {role} flag, which the mapping kinds cannot "
                        "read yet" + (": depth would count the items it hides as ready" if role == "readiness" else
                                      f": the counts would include the items it marks {role}"))
    for c in expiring:
        if mapping.get("due_column") == c.name:
            continue
        what = (f"{c.describe()} is an expiring lock or visibility window (an item is taken while it is in the "
                "future, ready again once it has passed)")
        if kind == "due":
            advice.append(f"{what}: a due mapping cannot honour it: depth counts a taken job as ready, and "
                          "stuck_leases is not read for a due queue")
        elif kind in ("lease", "status"):
            since = mapping.get("lease_column") or mapping.get("status_changed_at") or "no time of the row"
            evidence.append(f"{what}: stuck_leases reads {since} against lease_timeout_s instead")
        else:
            blockers.append(f"{what}: an item is ready when it is NULL or past, which no mapping kind reads yet")
    if open_cols and kind in ("lease", "due", "delete"):
        mapping["open_when_null"] = open_cols
        evidence.append(f"finish marker {', '.join(open_cols)}: an item is open while it is NULL (open_when_null)")
    for c in failed_at:
        advice.append(f"{c.describe()} marks failed jobs: if it is set only on jobs that will not run again, add it "
                      "to open_when_null by hand")
    if kind == "lease" and err and attempts:
        advice.append(f"{err.name} is kept across retries ({attempts.name} counts them): not mapped as error_column "
                      f"(a job with both {mapping.get('lease_column') or 'a lease'} and {err.name} set would count as "
                      "failed, not stuck, while it runs a retry)")
    elif kind == "lease" and err:
        mapping["error_column"] = err.name
        evidence.append(f"error column {err.name}: a leased job with an error failed (kept, not retried)")
    if attempts and kind:
        mapping["attempts_column"] = attempts.name
    if max_attempts:
        advice.append(f"{max_attempts.describe()}: a job past its last attempt is dead, not waiting: the mapping "
                      "cannot say so yet (max_attempts)")
    # -- the activity counters must agree with the kind
    notes: list[str] = []
    if t.inserts > 0 and t.deletes == 0:
        if kind == "delete" and not open_cols:
            why = (f"not a delete queue: {t.inserts:.0f} inserts and 0 deletes counted: nothing leaves the table by "
                   "DELETE")
            if t.updates > 0:
                why += (f"; its rows are changed in place ({t.updates:.0f} updates) by a column discover does not read "
                        "as a take, finish or due time")
                advice.append("map by hand as lease (lease_column = the column set when an item is taken) or add "
                              "open_when_null = [the column set when an item is done]")
            else:
                advice.append("if consumers delete items and none has run since the counters were reset, map kind = "
                              "\"delete\" by hand")
            blockers.insert(0, why)
        elif kind in ("lease", "due") and not open_cols:
            marker = mapping.get("lease_column") or mapping.get("due_column")
            notes.append(f"0 deletes against {t.inserts:.0f} inserts: items stay in the table once taken")
            advice.append(f"no column marks an item finished: finished items keep {marker} set, so "
                          + ("processing and stuck_leases count them too" if kind == "lease" else
                             "depth counts them once due")
                          + ": add open_when_null = [the column your workers set when an item ends] by hand "
                            "(or delete finished items)")
    elif kind and t.inserts <= 0 and t.updates <= 0 and t.deletes <= 0:
        notes.append("none counted since the statistics were reset: the kind is read from the columns alone")
    if kind is not None and key is None:
        blockers.append("no one-column key (identity or primary key): a mapping needs one")
    # -- score
    score = 20.0
    lead = {"status": mapping.get("status_column"), "lease": mapping.get("lease_column"),
            "due": mapping.get("due_column"), "delete": key.name if key else None}.get(kind or "")
    for name, keys, _, partial in t.indexes:
        if lead and keys and keys[0] == lead:
            score += 10
            evidence.append(f"dequeue-order index {name} ({', '.join(keys)}{', partial' if partial else ''})")
            break
    if re.search(r"queue|^q_|jobs?$|messages?$", t.name, re.I):
        score += 10
        evidence.append(f"name {t.name} reads like a queue")
    # a one-row watermark table named after this one
    wm = next((o for o in siblings if o is not t and o.name.startswith(t.name) and "watermark" in o.name.lower() and _one_row(o)),
              None) if kind else None
    if wm:
        col = next((c.name for c in wm.columns.values() if c.is_int and c.name not in wm.primary_key), None)
        if col:
            mapping["watermark"] = {"table": wm.name, "column": col}
            evidence.append(f"watermark table {wm.name}.{col}")
    score += _activity_score(t)
    evidence.append(f"activity: {t.activity()}" + "".join(f": {n}" for n in notes))
    p = Proposal(t, kind, score, evidence, mapping, advice=advice, strong=strong)
    if kind and not blockers:
        return p
    weak = bool(finish or flags or failed_at or (status is not None))
    if blockers and (kind or strong or queue_named):
        p.advice = blockers[1:] + advice
        return p.reject(blockers[0], near_miss=strong or queue_named)
    if strong or (weak and queue_named):
        if status is not None:
            why = f"status column {status.name}: its values are not in the catalog"
        else:
            cols = [c.name for c in (*taken, *run_at, *expiring, *finish, *failed_at)] + [c.name for c, _ in flags]
            why = f"queue-like columns ({', '.join(cols)}), none of which a mapping kind reads as it is"
        return p.reject(why, near_miss=True)
    if key is None:
        return p.reject("no one-column key (identity or primary key)")
    if weak:
        cols = [c.name for c in (*finish, *failed_at)] + [c.name for c, _ in flags] + (
            [status.name] if status is not None else [])
        return p.reject(f"only {', '.join(cols)} looks queue-like: neither its name nor its other columns read like "
                        "a queue")
    if enq and key.identity:
        return p.reject(f"identity key and enqueue time {enq.name}, but neither its name nor its activity reads like "
                        "a queue")
    return p.reject("no queue-like column (status, take, due, finish or enqueue time)")


# -- every table: proposals, near misses, side tables, the rest ----------------------------------------
def _mark_side(f: Proposal, owner: Proposal, what: str) -> None:
    f.reject(f"side table of {owner.table.qualified}: {what}")
    f.side_of = owner.table.qualified


def survey(tables: dict[tuple[str, str], Table], dialect: str) -> list[Proposal]:
    """One entry per table read: proposals best first, then near misses, then side tables (after
    the queue table each serves), then the other tables with why they are not queues."""
    found: dict[tuple[str, str], Proposal] = {}
    for k, t in tables.items():
        if hit := match_preset(t, dialect):
            found[k] = _preset_proposal(t, *hit)
    for p in list(found.values()):  # a matched library's own tables
        for pattern in presets.get(p.preset or "").signature.companions:
            for k, t in tables.items():
                if k not in found and fnmatch.fnmatchcase(t.qualified.lower(), pattern.lower()):
                    found[k] = Proposal(t, None, 0, [f"activity: {t.activity()}"], {})
                    _mark_side(found[k], p, f"a table of {presets.get(p.preset or '').library} (preset {p.preset})")
    by_schema: dict[str, list[Table]] = {}
    for (schema, _), t in tables.items():
        by_schema.setdefault(schema, []).append(t)
    for k, t in tables.items():
        if k not in found:
            found[k] = judge(t, by_schema[t.schema])
    queues = [f for f in found.values() if f.proposed or f.near_miss]
    # payload, sequence and watermark tables of a hand-rolled queue
    for p in queues:
        m = p.mapping
        for what, name in (("its payload table", m.get("data_table")), ("its sequence table", m.get("sequence_table")),
                           ("its watermark table", (m.get("watermark") or {}).get("table"))):
            side = found.get((p.table.schema, name)) if name else None
            if side is not None and side is not p and side.side_of is None:
                _mark_side(side, p, what)
    # per-queue lock and registry tables: a name column as key, a lock / owner column, no enqueue time
    for k, t in tables.items():
        f = found[k]
        if f.side_of or f.preset or (shape := _lock_shape(t)) is None:
            continue
        name, owners = shape
        owner = max((q for q in queues if q is not f and q.side_of is None and q.table.schema == t.schema
                     and _lock_shape(q.table) is None
                     and (name.name.lower() in {c.lower() for c in q.table.columns}
                          or any((rs, rt) == k for _, rs, rt, _ in q.table.fks))),
                    key=lambda q: (q.proposed, q.score), default=None)
        what = (f"a per-queue lock table (key {name.name}, lock / owner column {', '.join(owners)}, no enqueue time, "
                f"{max(t.live, t.reltuples):.0f} rows)")
        if owner is not None:
            _mark_side(f, owner, what)
            owner.evidence.insert(-1, f"side table {t.name}: {what[2:]}")
        else:
            f.reject(f"looks like a lock or registry table ({what[2:].split('(', 1)[1]}: not a queue")
    # tables a queue table references by a foreign key: lookups and registries, unless queue-like
    for p in sorted(queues, key=lambda q: -q.score):
        if p.side_of:
            continue
        for fk_col, rs, rt, _ in p.table.fks:
            side = found.get((rs, rt))
            if side is None or side is p or side.side_of or side.preset or side.strong:
                continue
            _mark_side(side, p, f"referenced by {p.table.name}.{fk_col} (a foreign key): a lookup or registry table")
    for f in found.values():
        if f.table.checks_unread:
            f.advice.append("its CHECK constraints were not read (a lock was held on the table, a migration?): "
                            "status values a CHECK lists may be missing here; run discover again")
    return _ordered(list(found.values()))


def _ordered(found: list[Proposal]) -> list[Proposal]:
    proposed = sorted((f for f in found if f.proposed), key=lambda f: (-f.score, f.table.qualified))
    near = sorted((f for f in found if f.near_miss and not f.side_of), key=lambda f: (-f.score, f.table.qualified))
    rank = {f.table.qualified: i for i, f in enumerate(proposed + near)}
    side = sorted((f for f in found if f.side_of), key=lambda f: (rank.get(f.side_of or "", len(rank)),
                                                                   f.table.qualified))
    rest = sorted((f for f in found if not f.proposed and not f.near_miss and not f.side_of),
                  key=lambda f: f.table.qualified)
    return proposed + near + side + rest


def discover(tables: dict[tuple[str, str], Table], dialect: str) -> list[Proposal]:
    """Every queue table proposed, best first: preset matches, then hand-rolled tables by score."""
    return [f for f in survey(tables, dialect) if f.proposed]


def unconfigured(found: list[Proposal], configured: list[Any], dialect: str) -> list[Proposal]:
    """The proposals whose table no configured queue (of that target) maps yet."""
    default = "dbo" if dialect == "mssql" else "public"
    mapped = {(q.schema_ or default, q.table) for q in configured}
    return [p for p in found if (p.table.schema, p.table.name) not in mapped]


# -- output --------------------------------------------------------------------------------------------
def queue_name(p: Proposal, taken: set[str]) -> str:
    base = p.preset if p.preset and p.preset not in ("pgmq", "nservicebus", "rebus") else \
        f"{p.table.schema}_{p.table.name}"
    base = re.sub(r"[^A-Za-z0-9_]", "_", base).lower()[:60]
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_toml(proposals: list[Proposal], target: str, taken: set[str] | None = None) -> str:
    """``[[queues]]`` sections for the proposals, each under a comment with its evidence."""
    taken = set(taken or ())
    out = []
    for p in proposals:
        name = queue_name(p, taken)
        lines = [f"# discovered: {p.table.qualified}: {p.kind} ({p.label}), score {p.score:g}"]
        lines += [f"#   {e}" for e in p.evidence]
        lines += [f"#   check: {a}" for a in p.advice]
        body = ["[[queues]]", f"name = {toml_value(name)}", f"target = {toml_value(target)}"]
        if not p.preset:
            body.append(f"kind = {toml_value(p.kind)}")
        body += [f"{k} = {toml_value(v)}" for k, v in p.mapping.items()]
        # A preset of a table holding many queues (MassTransit, Hangfire; issue 33) needs the queue's
        # partition, which only the operator knows: the section is written commented out with why,
        # so the config still loads.
        needs = {f: why for f, why in (presets.get(p.preset).requires.items() if p.preset else ())
                 if f not in p.mapping}
        if needs:
            lines += [f"#   needs {f}: {why}" for f, why in needs.items()]
            lines.append("#   (commented out until it is set: uncomment and add it)")
            body = [f"# {line}" for line in body]
        out.append("\n".join(lines + body))
    return "\n\n".join(out) + "\n"
