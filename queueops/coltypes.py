"""The real types of a queue's mapped columns, read from the target's catalog, and what they allow.

Names alone are not a mapping: a status column may be an enum, an integer or text; a time column
may be an integer; a watermark key may be a GUID. queueops reads each mapped column's type once
(``config check --live``, and when a target is first collected) so that

* status values are bound in the column's own type (an enum compared with an enum, an integer
  with an integer), so the engine can still use the index on the status column;
* an enum status's values are checked against its labels;
* time columns must be a timestamp type and watermark keys an integer type, or the queue's metrics
  that need them are refused with the file, field, value and real type instead of failing at
  collect time.

Only catalog lookups run (``sql/<dialect>/catalog_types.sql``), with names bound as values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple
from xml.sax.saxutils import quoteattr

from queueops import engine, sqlfiles
from queueops.config import Queue
from queueops.fragments import DEFAULT_SCHEMA
from queueops.identifiers import quote_ident, quote_table

# Fields that hold a point in time: compared with now() - interval, subtracted from now().
TIME_FIELDS = ("enqueued_at", "status_changed_at", "lease_column", "due_column", "runnable_at", "error_at")
# The collectors each time field feeds, to say what a wrong type costs.
TIME_FIELD_METRICS = {
    "enqueued_at": ("oldest_age_s",),
    "status_changed_at": ("stuck_leases", "oldest_lease_age_s"),
    "lease_column": ("stuck_leases", "oldest_lease_age_s", "oldest_age_s"),
    "due_column": ("depth", "oldest_age_s"),
    "runnable_at": ("depth", "oldest_age_s", "stuck_leases"),
    "error_at": ("depth", "oldest_age_s", "stuck_leases"),
}
# Readiness fields (issue 31) whose wrong type drops {free}: every *_follow block then does not
# apply, so the queue's metrics are not collected instead of counted as if the field were absent.
_FOLLOW_DROPS = ("runnable_at", "error_at")
TIMESTAMP_TYPES = "timestamptz, timestamp, datetime, datetime2, datetimeoffset"
STATUS_VALUE_FIELDS = ("ready_values", "processing_values", "done_values")


class FlaggedPartial(NamedTuple):
    """A partial btree index on status values that also requires boolean flags false (PostgreSQL):
    pg-boss 12's ``job_i11 ... WHERE state < 'active' AND NOT blocked``, on every partition. It
    holds only the unflagged part of its values' rows, so no count or age reads through it; its
    reltuples is the joint figure of status and flags pg_stats lacks (depth above the cap)."""

    name: str
    values: tuple[str, ...]
    flags: tuple[str, ...]  # the boolean columns its predicate requires false
    copies: tuple[str, ...]  # each leaf's copy (regclass text: schema-qualified where not visible)
    predicate: str  # one copy's pg_get_expr text (a partition made since is matched on it)


class NullPartial(NamedTuple):
    """A partial index whose predicate is only ``col IS NULL`` conjuncts (PostgreSQL): the library's
    index on its open rows (Que's ``que_poll_idx ... WHERE finished_at IS NULL AND expired_at IS
    NULL``), on every partition. Its reltuples is depth's open rows above the cap."""

    columns: tuple[str, ...]
    copies: tuple[str, ...]  # each leaf's copy (regclass text)


@dataclass(frozen=True)
class ColumnType:
    """One column's type as the catalog reports it."""

    table: str  # the quoted, schema-qualified table (as configured)
    column: str
    type_schema: str
    type_name: str
    type_text: str
    category: str  # integer | timestamp | text | enum | uuid | boolean | other
    labels: tuple[str, ...] = ()
    relkind: str = "r"
    # A valid btree index, not partial, leads with this column (PostgreSQL; issue 29): a status
    # count can then read all its values in one status-ordered read of that index.
    leads_index: bool = False
    # The second key column of each of those indexes: (status, key) serves oldest_age_s's first
    # item of each value in key order.
    then_columns: tuple[str, ...] = ()
    # The partial btree indexes whose predicate is this column alone equal to some values
    # (PostgreSQL; issue 29): ``(index name, values, ORDER BY of its key)``.
    partials: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    # The later key columns of each index leads_index counts whose key columns are all plain and
    # ascending, each ``(name, NOT NULL)`` (PostgreSQL): oldest_age_s's skip read (age_skip_reads).
    index_keys: tuple[tuple[tuple[str, bool], ...], ...] = ()
    # NOT NULL (PostgreSQL; False when not read): oldest_age_s's runnable reads (_runnable_reads).
    notnull: bool = False
    # The partial indexes whose predicate also requires boolean flags false (PostgreSQL).
    flagged_partials: tuple[FlaggedPartial, ...] = ()
    # The partial indexes on open rows whose predicate names this column IS NULL (PostgreSQL).
    null_partials: tuple[NullPartial, ...] = ()

    def cast_fragment(self, dialect: str) -> str:
        """The column's type as a quoted SQL type name (PostgreSQL), for ``ARRAY[...]::{type}[]``."""
        return quote_table(self.type_schema, self.type_name, dialect)


@dataclass(frozen=True)
class TypeProblem:
    """A mapped column whose real type or values cannot work: what, where, and what it costs."""

    queue: str
    field: str
    value: str
    message: str
    severity: str = "error"  # error | warning
    drops: tuple[str, ...] = ()  # fragments the queue's statements must not use
    fix: str = ""


def qualified(schema: str | None, table: str, dialect: str) -> str:
    """A table's quoted name, schema-qualified always (the engine's default schema when none is set)."""
    return quote_table(schema or DEFAULT_SCHEMA[dialect], table, dialect)


def mapped_columns(q: Queue) -> list[tuple[str, str | None, str, str]]:
    """``(field, schema, table, column)`` for every column the queue maps (main, payload, ring, watermark)."""
    out = [(f, q.schema_, q.table, getattr(q, f)) for f in
           ("key", "enqueued_at", "status_column", "status_changed_at", "lease_column", "error_column",
            "attempts_column", "due_column", "refcount_column", "runnable_at", "owner_column", "ready_flag",
            "error_at") if getattr(q, f)]
    if q.max_attempts_column:
        out.append(("max_attempts", q.schema_, q.table, q.max_attempts_column))
    out += [(f"open_when_null[{i}]", q.schema_, q.table, col) for i, col in enumerate(q.open_when_null)]
    out += [(f"closed_when_true[{i}]", q.schema_, q.table, col) for i, col in enumerate(q.closed_when_true)]
    if getattr(q, "partition", None) is not None:
        out.append(("partition.column", q.schema_, q.table, q.partition.column))  # type: ignore[union-attr]
    if getattr(q, "expires_column", None):
        out.append(("expires_column", q.schema_, q.table, q.expires_column))
    if q.sequence_table:
        out += [(f, q.schema_, q.sequence_table, getattr(q, f)) for f in ("push_column", "pop_column")
                if getattr(q, f)]
    if q.data_table and getattr(q, "data_key", None):
        out.append(("data_key", q.schema_, q.data_table, q.data_key))  # type: ignore[attr-defined]
    if q.watermark:
        out.append(("watermark.column", q.watermark.schema_ or q.schema_, q.watermark.table, q.watermark.column))
    if q.times_from:
        side = q.times_from
        out += [("times_from.key", side.schema_ or q.schema_, side.table, side.key),
                ("times_from.column", side.schema_ or q.schema_, side.table, side.column)]
        if side.ref:
            out.append(("times_from.ref", q.schema_, q.table, side.ref))
    if getattr(q, "timeout_column", None):
        out.append(("timeout_column", q.schema_, q.table, q.timeout_column))  # type: ignore[attr-defined]
    if getattr(q, "row_heartbeat", None):
        out += [("row_heartbeat.column", q.schema_, q.table, q.row_heartbeat.column),  # type: ignore[union-attr]
                ("row_heartbeat.seconds_column", q.schema_, q.table, q.row_heartbeat.seconds_column)]  # type: ignore[union-attr]
    hb = getattr(q, "heartbeat_from", None)
    if hb:
        out += [("heartbeat_from.key", hb.schema_ or q.schema_, hb.table, hb.key),
                ("heartbeat_from.column", hb.schema_ or q.schema_, hb.table, hb.column),
                ("heartbeat_from.ref", q.schema_, q.table, hb.ref)]
    return out


def _statement(dialect: str, pairs: Sequence[tuple[str, str]]) -> sqlfiles.Statement:
    sqlf = sqlfiles.load(dialect, "catalog_types")
    if dialect == "mssql":
        # One XML parameter, whatever the number of queues: never near the 2,100-parameter limit, and
        # no OPENJSON (compatibility level 130 and up only; issue 33, item 7).
        return sqlf.render("main", {}, {"pairs_xml": "".join(f"<p t={quoteattr(t)} c={quoteattr(c)}/>"
                                                             for t, c in pairs)})
    return sqlf.render("main", {}, {"tables": [t for t, _ in pairs], "columns": [c for _, c in pairs]})


def read_types(conn: engine.Connection, queues: Iterable[Queue]) -> dict[tuple[str, str], ColumnType]:
    """``{(quoted table, column): ColumnType}`` for every mapped column of ``queues`` that exists."""
    return read_types_with(conn.execute, conn.dialect, queues)


def read_types_with(run: Callable[[sqlfiles.Statement], list[dict[str, Any]]], dialect: str,
                    queues: Iterable[Queue]) -> dict[tuple[str, str], ColumnType]:
    """:func:`read_types` through any statement runner (an action's session, for one)."""
    return _read_pairs(run, dialect, _pairs(queues, dialect))


def read_types_apart(conn: engine.Connection, queues: Iterable[Queue]) -> tuple[dict[tuple[str, str], ColumnType],
                                                                                tuple[str, ...]]:
    """:func:`read_types`, where a table whose read fails costs only its own columns: ``(types,
    the quoted tables not read)``.

    Why: reading an index's predicate or definition (``pg_get_expr``, ``pg_get_indexdef``) takes
    ACCESS SHARE on its table, so a migration's ACCESS EXCLUSIVE lock on one queue table failed the
    one statement of every table at the lock timeout, and every queue of the target was collected
    without its types (no skip reads, the NULL range read in no order) while it lasted. One
    statement still reads them all; only when it fails is each table read by a statement of its
    own, and those that fail again are left out."""
    pairs = _pairs(queues, conn.dialect)
    try:
        return _read_pairs(conn.execute, conn.dialect, pairs), ()
    except engine.TargetError:
        tables = sorted({t for t, _ in pairs})
        if len(tables) < 2:
            raise
    out: dict[tuple[str, str], ColumnType] = {}
    unread: list[str] = []
    failed: engine.TargetError | None = None
    for table in tables:
        try:
            out.update(_read_pairs(conn.execute, conn.dialect, [p for p in pairs if p[0] == table]))
        except engine.TargetError as exc:
            unread.append(table)
            failed = failed or exc
    if failed is not None and len(unread) == len(tables):
        raise failed  # not one table: the target's problem, not a table's
    return out, tuple(unread)


def _pairs(queues: Iterable[Queue], dialect: str) -> list[tuple[str, str]]:
    return sorted({(qualified(s, t, dialect), c) for q in queues for _, s, t, c in mapped_columns(q)})


def _read_pairs(run: Callable[[sqlfiles.Statement], list[dict[str, Any]]], dialect: str,
                pairs: list[tuple[str, str]]) -> dict[tuple[str, str], ColumnType]:
    if not pairs:
        return {}
    out: dict[tuple[str, str], ColumnType] = {}
    for r in run(_statement(dialect, pairs)):
        labels = r.get("labels") or ()
        out[(r["qualified_table"], r["column_name"])] = ColumnType(
            r["qualified_table"], r["column_name"], r["type_schema"], r["type_name"], r["type_text"],
            r["category"], tuple(labels), r.get("relkind") or "r", bool(r.get("leads_index")),
            tuple(str(c) for c in r.get("then_columns") or ()),
            tuple((str(p["name"]), tuple(str(v) for v in p["values"]), str(p["order"]))
                  for p in r.get("partials") or () if p.get("order") and not p.get("flags")),
            tuple(tuple((str(k["name"]), bool(k["notnull"])) for k in cols) for cols in r.get("index_keys") or ()),
            bool(r.get("notnull")),
            tuple(FlaggedPartial(str(p["name"]), tuple(str(v) for v in p["values"]), tuple(p["flags"]),
                                 tuple(p.get("copies") or ()), str(p.get("predicate") or ""))
                  for p in r.get("partials") or () if p.get("flags")),
            tuple(NullPartial(tuple(p["columns"]), tuple(p["copies"])) for p in r.get("null_partials") or ()))
    return out


def type_of(q: Queue, field: str, types: dict[tuple[str, str], ColumnType], dialect: str) -> ColumnType | None:
    """The catalog type of ``q``'s mapped ``field`` (None when unknown: missing table or column)."""
    for f, schema, table, column in mapped_columns(q):
        if f == field:
            return types.get((qualified(schema, table, dialect), column))
    return None


def coerce_values(values: Sequence[Any], ctype: ColumnType | None) -> list[Any]:
    """Status values as the column's own type wants them bound (integers for an integer column,
    text for an enum or text column); unchanged when the type is unknown or a value does not fit
    (:func:`problems` reports that)."""
    if ctype is None:
        return list(values)
    if ctype.category == "integer":
        out = []
        for v in values:
            try:
                out.append(int(str(v)))
            except ValueError:
                return list(values)
        return out
    if ctype.category == "enum":
        # A value that is no label of the enum would fail the whole statement (invalid input value
        # for enum): it is left out, and problems() reports it. All invalid: the list is kept and
        # problems() drops the status fragment, so no statement uses it.
        valid = [str(v) for v in values if str(v) in ctype.labels]
        return valid or [str(v) for v in values]
    if ctype.category == "text":
        return [str(v) for v in values]
    return list(values)


# What an ASCII text value is compared in on SQL Server (see bind_compared_values).
MSSQL_COMPARED_TEXT = "varchar(8000)"


def bind_compared_values(values: Sequence[Any], dialect: str) -> list[Any]:
    """Values a statement compares with a queue table's column, ``{col} IN (:values)``: status
    values, and the keys an action picked.

    SQL Server: pyodbc sends a Python string as ``nvarchar``. Against a ``varchar`` column,
    ``nvarchar`` wins by data type precedence, so the *column* is converted
    (``CONVERT_IMPLICIT``), and under a SQL collation (``SQL_Latin1_General_CP1_CI_AS``, the
    default of US-English installs) that makes the predicate non-sargable: the index is scanned
    instead of sought, by every bounded count of every cycle and by an action's ``UPDATE`` /
    ``DELETE`` (with a lock on every row it reads). A value cast to ``varchar`` is sought on both
    kinds of column: on ``varchar`` it is the column's own type, on ``nvarchar`` (or a
    ``uniqueidentifier`` key) the *value* is converted up, and the column keeps its index. Only
    ASCII text is cast, since it is the same in every code page; any other value stays
    ``nvarchar``, exact. Integers and PostgreSQL values (typed by the statement itself) are
    unchanged.
    """
    if dialect != "mssql":
        return list(values)
    return [sqlfiles.Cast(v, MSSQL_COMPARED_TEXT) if isinstance(v, str) and v.isascii() else v for v in values]


def problems(q: Queue, types: dict[tuple[str, str], ColumnType], dialect: str) -> list[TypeProblem]:
    """Every mapped column of ``q`` whose real type (or whose configured values) cannot work."""
    out: list[TypeProblem] = []
    for field in TIME_FIELDS:
        value = getattr(q, field)
        ctype = type_of(q, field, types, dialect) if value else None
        if ctype is not None and ctype.category != "timestamp":
            costs = ", ".join(TIME_FIELD_METRICS[field])
            frag = {"enqueued_at": "enqueued_at", "status_changed_at": "status_changed_at",
                    "lease_column": "lease", "due_column": "due", **dict.fromkeys(_FOLLOW_DROPS, "free")}[field]
            out.append(TypeProblem(q.name, field, value, f"is {ctype.type_text}, not a timestamp type "
                                   f"({TIMESTAMP_TYPES}): {costs} not collected for this queue",
                                   drops=(frag,), fix=f"map {field} to a timestamp column, or leave it out"))
    if q.naive_times == "utc" and dialect == "postgresql":
        # naive_times says what a *naive* column holds; a timestamptz column is an instant, read right
        # against now() in any zone, but against the UTC wall clock ({clock}) it is compared in the
        # session's TimeZone: off by the zone's offset anywhere but UTC (issue 29).
        for field in (*TIME_FIELDS, "expires_column"):
            value = getattr(q, field)
            ctype = type_of(q, field, types, dialect) if value else None
            if ctype is not None and ctype.type_name == "timestamptz":
                out.append(TypeProblem(q.name, field, value, "is timestamptz, but naive_times = \"utc\" compares the "
                                       "queue's times with the UTC wall clock (now() AT TIME ZONE 'UTC'): its "
                                       "figures are off by the session's UTC offset",
                                       fix="remove naive_times (a timestamptz column needs none): it is for "
                                           "timestamp without time zone columns that hold UTC"))
    out += _stuck_rule_problems(q, types, dialect)
    flag = type_of(q, "ready_flag", types, dialect) if q.ready_flag else None
    if flag is not None and flag.category != "boolean" and flag.type_name.lower() != "bit":
        out.append(TypeProblem(q.name, "ready_flag", q.ready_flag or "", f"is {flag.type_text}, not a boolean: "
                               "depth, oldest_age_s and stuck_leases not collected for this queue",
                               drops=("free",), fix="map ready_flag to the boolean column that must be true"))
    side = type_of(q, "times_from.column", types, dialect) if q.times_from else None
    if q.times_from and side is not None and side.category != "timestamp":
        drops = tuple(f for f, own in (("enqueued_at", q.enqueued_at), ("status_changed_at", q.status_changed_at))
                      if not own)
        out.append(TypeProblem(q.name, "times_from.column", q.times_from.column, f"is {side.type_text}, not a "
                               f"timestamp type ({TIMESTAMP_TYPES}): the times it should give are not collected",
                               drops=drops, fix="name the side table's timestamp column"))
    status = type_of(q, "status_column", types, dialect) if q.status_column else None
    if status is not None:
        for field in STATUS_VALUE_FIELDS:
            values = list(getattr(q, field))
            if status.category == "enum":
                bad = [v for v in values if str(v) not in status.labels]
                if bad:
                    out.append(TypeProblem(q.name, field, repr(values), f"{', '.join(map(repr, bad))} "
                                           f"{'is' if len(bad) == 1 else 'are'} not a label of the enum "
                                           f"{status.type_text} (labels: {', '.join(status.labels)})",
                                           drops=("status",) if len(bad) == len(values) else (),
                                           fix=f"use labels of {status.type_text}"))
            elif status.category == "integer":
                bad = [v for v in values if not str(v).lstrip("-").isdigit()]
                if bad:
                    out.append(TypeProblem(q.name, field, repr(values), f"{', '.join(map(repr, bad))}: the "
                                           f"status column {q.status_column!r} is {status.type_text}, "
                                           "values must be integers", fix="use the integer codes the table stores"))
            elif status.category not in ("text",):
                out.append(TypeProblem(q.name, "status_column", q.status_column or "",
                                       f"is {status.type_text}: status values can only be compared in an "
                                       "enum, integer or text column"))
                break
    if q.watermark:
        for field, ctype in (("key", type_of(q, "key", types, dialect)),
                             ("watermark.column", type_of(q, "watermark.column", types, dialect))):
            if ctype is not None and ctype.category != "integer":
                value = q.key if field == "key" else q.watermark.column
                out.append(TypeProblem(q.name, field, value, f"is {ctype.type_text}: a watermark needs an integer "
                                       "key (drift is key minus watermark); watermark_drift not collected",
                                       drops=("wm_table",), fix="remove the watermark from this queue"))
    return out


def _stuck_rule_problems(q: Queue, types: dict[tuple[str, str], ColumnType], dialect: str) -> list[TypeProblem]:
    """The library's own stuck rule's columns (timeout_column, row_heartbeat) of a type the rule
    cannot compute with: stuck_leases is then not collected (its rule dropped) rather than failing
    every cycle, and the live check names the column, its type and what it should be."""
    want = []
    if q.timeout_column:
        want.append(("timeout_column", q.timeout_column,
                     "integer" if q.timeout_unit == "seconds" else "interval",
                     f"timeout_unit = \"{q.timeout_unit}\""))
    if q.row_heartbeat is not None:
        want += [("row_heartbeat.column", q.row_heartbeat.column, "timestamp", "a heartbeat time"),
                 ("row_heartbeat.seconds_column", q.row_heartbeat.seconds_column, "integer", "a limit in seconds")]
    out = []
    for field, column, kind, why in want:
        ctype = type_of(q, field, types, dialect)
        ok = ctype is None or (ctype.type_name == "interval" if kind == "interval" else ctype.category == kind)
        if not ok:
            assert ctype is not None
            out.append(TypeProblem(q.name, field, column, f"is {ctype.type_text}, not {kind} ({why}): stuck_leases "
                                   "not collected for this queue", drops=("worker_gone",),
                                   fix="map the column the library's own rule reads, or set timeout_unit to what it "
                                       "holds" if field == "timeout_column" else "map the column the library's own "
                                       "rule reads"))
    for i, column in enumerate(q.closed_when_true):
        ctype = type_of(q, f"closed_when_true[{i}]", types, dialect)
        if ctype is not None and ctype.category != "boolean" and ctype.type_name.lower() != "bit":
            out.append(TypeProblem(q.name, f"closed_when_true[{i}]", column, f"is {ctype.type_text}, not a boolean: "
                                   "every per-queue statement of this queue fails", fix="name a boolean column"))
    return out


def queue_fragments(q: Queue, status: ColumnType | None, dialect: str) -> dict[str, str]:
    """Extra fragments from the catalog: ``{status_type}``, the status column's own type
    (``status``, None when unknown; PostgreSQL)."""
    if dialect == "postgresql":
        if status is not None and status.category in ("enum", "integer", "text"):
            cast = status.cast_fragment(dialect)
        else:
            # Unknown (table not found yet): the type the configured values have.
            values = [*q.ready_values, *q.processing_values, *q.done_values]
            plain = all(isinstance(v, int) for v in values)
            cast = quote_table("pg_catalog", "int8" if plain else "text", dialect)
        # Each status value list as typed literals ({ready_list}: 'available'::"s"."oban_job_state"),
        # for `{status} IN ({ready_list})` (issue 29): a bound value (or one from unnest) is unknown to
        # the service's generic plans, so the planner walked the primary key for every status count;
        # a constant is matched to the library's status index and to the column's statistics.
        lists = {f"{name}_list": ", ".join(_typed_literal(v, cast) for v in coerce_values(vals, status))
                 or f"NULL::{cast}"
                 for name, vals in (("ready", q.ready_values), ("processing", q.processing_values),
                                    ("done", q.done_values))}
        return {"status_type": cast, **lists, **status_read_fragments(q, status, lists)}
    return {}


def status_read_fragments(q: Queue, status: ColumnType | None, lists: dict[str, str]) -> dict[str, str]:
    """How a status count reads its values, chosen from the table's indexes (issue 29).

    The blocks count ``FROM {ready_rows} CROSS JOIN LATERAL (... WHERE {status} {ready_match}
    ORDER BY {status_order} LIMIT :cap)``. Two forms, one text:

    * the status column leads a btree index (Oban's and River's fetch indexes, a hand-rolled
      ``(status, id)``): one read of ``= ANY (ARRAY[typed constants]) ORDER BY {status}``, which the
      planner matches to that index (read in status order, stopping at the cap). Each value on its
      own from ``unnest`` was a parameter the planner could not match to the index when the key is not
      its second column: it walked the primary key (9,749 buffers for Oban at 200,000 rows);
    * no index leads with it (procrastinate: only partial indexes and the key): each value on its
      own, ``= u.s ORDER BY {status}, {key}``, along the key, stopping at the cap. The ANY form there
      was a sequential scan and a sort of the whole table every cycle (commit 37cf34b).

    Unknown type (the catalog not read): one read of ``IN (untyped constants)`` in (status, key)
    order; an untyped constant takes the column's type, whatever it is.
    """
    if not q.status_column:
        return {}
    seek = status is not None and status.leads_index
    col = quote_ident(q.status_column, "postgresql")
    out = {"status_order": col if seek else f"{col}, {quote_ident(q.key, 'postgresql')}"}
    for name in ("ready", "processing", "done"):
        values = lists[f"{name}_list"]
        if status is None:
            plain = ", ".join(_typed_literal(v, "").removesuffix("::")
                              for v in getattr(q, f"{name}_values")) or "NULL"
            out[f"{name}_rows"], out[f"{name}_match"] = "(VALUES (1)) AS u (s)", f"IN ({plain})"
        else:
            out[f"{name}_rows"] = "(VALUES (1)) AS u (s)" if seek else f"unnest(ARRAY[{values}]) AS u (s)"
            out[f"{name}_match"] = f"= ANY (ARRAY[{values}])" if seek else "= u.s"
    # oldest_age_s: where a (status, key) index exists, or no index leads with the status column,
    # the first item of each ready value in (status, key) order, one row each (the lowest key is the
    # oldest item, fifo and lifo alike; the cap read read 1,000 rows of the lab's status queue for
    # the one it needs: test_explain). Where the index puts other columns between status and key
    # (River's (state, queue, priority, scheduled_at, id)), the key order is not the age order: the
    # oldest of the cap of items read in the index's order, as depth reads them.
    first = status is None or not seek or q.key in status.then_columns
    out["age_rows"] = (out["ready_rows"] if status is None or not first
                       else f"unnest(ARRAY[{lists['ready_list']}]) AS u (s)")
    out["age_match"] = out["ready_match"] if status is None or not first else "= u.s"
    out["age_order"] = f"{col}, {quote_ident(q.key, 'postgresql')}" if first else out["status_order"]
    out["age_first"] = "true" if first else "false"  # LIMIT 1, else the cap (a bound value)
    # Whether {status_order} is age order (the key in fifo and lifo alike, read after the status):
    # a read of the cap in that order that found a ready item below max_attempts found the oldest.
    out["age_ordered"] = "true" if not seek and q.order != "heap" else "false"
    # stuck_leases: which read serves the processing items, from the catalog (issue 29): an index
    # leading with the status column (an ordered read), else the library's partial index on exactly
    # the processing values, read by {status} {processing_in} with the same constants as its
    # predicate (so the planner proves it); with neither the same read finds them in the table.
    out["stuck_indexed"] = "true" if seek else "false"
    out["stuck_partial"] = "true" if exact_partial(status, q.processing_values) else "false"
    out["processing_in"] = (out["processing_match"] if status is None
                            else f"IN ({lists['processing_list']})")
    return out


def exact_partial(status: ColumnType | None, values: Sequence[Any]) -> str | None:
    """The partial index (catalog_types' partials) that holds exactly ``values``' rows, or None."""
    if status is None:
        return None
    wanted = {str(v) for v in coerce_values(values, status)}
    return next((name for name, vals, _ in status.partials if set(vals) == wanted), None)


def reads_ready_index(q: Queue) -> bool:
    """Whether depth reads ``q``'s waiting rows from a partial index on exactly them above the cap:
    a status queue with closed_when_true whose rows the mapping alone decides (no partition column,
    no expiry: the index's reltuples would count other queues' rows too)."""
    return (q.kind == "status" and bool(q.status_column) and bool(q.closed_when_true) and q.partition is None
            and not q.expires_column)


def ready_index(q: Queue, status: ColumnType | None) -> FlaggedPartial | None:
    """A closed_when_true status queue's partial index on exactly its waiting rows: its ready
    values, every flag false (pg-boss 12's job_i11), on every partition; None without one, or when
    depth does not read one (:func:`reads_ready_index`)."""
    if status is None or not reads_ready_index(q):
        return None
    wanted = {str(v) for v in coerce_values(list(q.ready_values), status)}
    flags = set(q.closed_when_true)
    return next((p for p in status.flagged_partials if set(p.values) == wanted and set(p.flags) == flags), None)


def open_index(q: Queue, types: dict[tuple[str, str], ColumnType], dialect: str) -> NullPartial | None:
    """An open_when_null queue's partial index on exactly its open rows (every one of those columns
    IS NULL, nothing else), on every partition; None without one, or when more than those columns
    decides a row's queue (a partition column, an expiry): its reltuples would count other rows."""
    if not q.open_when_null or q.partition is not None or q.expires_column:
        return None
    first = type_of(q, "open_when_null[0]", types, dialect)
    wanted = set(q.open_when_null)
    return next((p for p in first.null_partials if set(p.columns) == wanted), None) if first else None


def _constant(value: int | str, cast: str, status: ColumnType | None) -> str:
    """A status value as a constant of the column's type; untyped when the type was not read (an
    untyped constant takes the column's type, whatever it is: an enum compared with text fails)."""
    return _typed_literal(value, cast) if status is not None else _typed_literal(value, "").removesuffix("::")


def _typed_literal(value: int | str, cast: str) -> str:
    """A status value from config as a PostgreSQL constant of the status column's type: an integer
    as digits, text quoted with quotes doubled (E'' with backslashes doubled when it has one, so the
    text means the same whatever standard_conforming_strings says)."""
    if isinstance(value, bool):
        raise TypeError(f"not a status value: {value!r}")
    if isinstance(value, int):
        return f"{int(value)}::{cast}"
    text = str(value).replace("'", "''")
    if "\\" in text:
        return "E'" + text.replace("\\", "\\\\") + f"'::{cast}"
    return f"'{text}'::{cast}"


def serving_partial(status: ColumnType | None, value: int | str, prefer: str = "") -> tuple[str, str] | None:
    """``(index name, ORDER BY)`` of the partial index that holds ``value``'s rows (procrastinate's
    ``procrastinate_jobs_priority_idx_v1 ... WHERE status = 'todo'``), or None: one whose key holds
    the column ``prefer`` first, then the one holding the fewest other values.

    A count of the value read in that index's own order, ``LIMIT`` the cap, reads at most the cap
    of its entries whatever else the table holds (issue 29: the per-value read walked the primary
    key, 24,739 buffers for procrastinate's depth at 200,000 rows)."""
    if status is None:
        return None
    held = sorted((prefer not in _key_columns(order), len(vals), name, order)
                  for name, vals, order in status.partials if str(value) in vals)
    return (held[0][2], held[0][3]) if held else None


def _key_columns(order: str) -> list[str]:
    """The column names of an ORDER BY text as catalog_types renders it (quote_ident's quotes off)."""
    names = re.findall(r'("(?:[^"]|"")*"|[^\s,]+)[^,]*(?:, |$)', order)
    return [n[1:-1].replace('""', '"') if n.startswith('"') else n for n in names]


def follow_runnable_reads(q: Queue, status: ColumnType | None, frags: dict[str, str], cap: int,
                          small_pages: int) -> dict[str, str]:
    """depth's ``status_follow_runnable`` reads, one per status value (issue 29, item 5): what each
    reads is bounded by the cap, never by the table.

    * ``{ready_reads}``: one row per ready value, ``ready, exhausted, n, counted, ahead``: at most
      ``cap`` rows of that value, whatever their runnable time (jobs scheduled ahead no longer
      make the read walk past them: pgqueuer's 155,000), classified after the read; ``ahead``, the
      rows scheduled ahead, counted by a read of their own (at most ``cap`` matched);
    * ``{processing_count}``, ``{done_count}``: the group's count, NULL when not counted.

    Each value is read through the index that serves it: one leading with the status column (one
    read of all values, as before), else the library's partial index on that value, read in its own
    order. A value no index serves is counted only on a small table (under ``small_pages`` pages,
    read whole anyway); on a larger one it is not read at all (NULL), and the block reports the
    statistics' estimate, labelled so: walking the primary key for it read the whole table.
    """
    table, col, open_and = frags["table"], frags["status"], frags.get("open_and", "")
    runnable, clock, exhausted = frags["runnable"], frags["clock"], frags["exhausted"]
    seek = status is not None and status.leads_index
    cast = frags["status_type"]

    def source(values: list[Any], select: str, where: str = "") -> list[tuple[str, str]]:
        """``(FROM-subquery, counted)`` for each read of ``values``; ``where``: an added condition."""
        if not values:
            return []

        def order(o: str) -> str:
            # The read of the rows ahead orders by the index only when its key holds the runnable
            # column (pgqueuer's (entrypoint, execute_after), pg-boss's (name, start_after): a seek
            # of the range); else the planner's own way (procrastinate: a bitmap of the value's
            # partial index, which holds only that value's rows).
            return f" ORDER BY {o}" if not where or q.runnable_at in _key_columns(o) else ""

        lits = [_constant(v, cast, status) for v in coerce_values(values, status)]
        if seek:
            # Quoted names, typed constants, catalog-quoted ORDER BY: nothing from outside.
            return [(f"(SELECT {select} FROM {table} WHERE {col} = ANY (ARRAY[{', '.join(lits)}]){where}"  # noqa: S608
                     f"{open_and}{order(col)} LIMIT {cap}) AS l", "true")]
        out = []
        for v, lit in zip(coerce_values(values, status), lits, strict=True):
            served = serving_partial(status, v, q.runnable_at or "")
            if served:
                out.append((f"(SELECT {select} FROM {table} WHERE {col} = {lit}{where}{open_and}"  # noqa: S608
                            f"{order(served[1])} LIMIT {cap}) AS l", "true"))
            else:
                gate = f"c.pages < {int(small_pages)}"
                out.append((f"(SELECT {select} FROM {table} WHERE {gate} AND {col} = {lit}{where}{open_and} "  # noqa: S608
                            f"LIMIT {cap}) AS l", gate))
        return out

    due = f"({runnable} IS NULL OR {runnable} <= {clock})"
    ready = list(q.ready_values)
    if seek:
        # An index leads with the status column (a hand-rolled (status, scheduled_at)): each value's
        # ranges of runnable_at apart, in (status, runnable_at) order, as before: the runnable
        # ones are read exactly even behind 30,000 scheduled.
        rows = []
        for lit in (_constant(v, cast, status) for v in coerce_values(ready, status)):
            def read(cond: str, select: str, lit: str = lit) -> str:
                return (f"(SELECT {select} FROM {table} WHERE {col} = {lit} AND {cond}{open_and} "  # noqa: S608
                        f"ORDER BY {col}, {runnable} LIMIT {cap}) AS l")
            for cond, ahead in ((f"{runnable} <= {clock}", read(f"{runnable} > {clock}", "1")),
                                (f"{runnable} IS NULL", "")):
                counted_ahead = "(SELECT count(*) FROM " + ahead + ")" if ahead else "0"  # noqa: S608
                rows.append(f"SELECT count(*) FILTER (WHERE NOT l.exhausted), count(*) FILTER (WHERE l.exhausted), "  # noqa: S608
                            f"count(*), true, {counted_ahead} FROM {read(cond, f'{exhausted} AS exhausted')}")
    else:
        rows = [f"SELECT count(*) FILTER (WHERE l.due AND NOT l.exhausted) AS ready, "  # noqa: S608
                f"count(*) FILTER (WHERE l.due AND l.exhausted) AS exhausted, count(*) AS n, {counted} AS counted, "
                f"CASE WHEN {counted} THEN (SELECT count(*) FROM {ahead_src}) END AS ahead FROM {src}"
                for (src, counted), (ahead_src, _) in zip(
                    source(ready, f"{due} AS due, {exhausted} AS exhausted"),
                    source(ready, "1", f" AND {runnable} > {clock}"), strict=True)]
    out = {"ready_reads": " UNION ALL ".join(rows) or "SELECT 0, 0, 0, true, 0"}
    for name in ("processing", "done"):
        parts = [f"CASE WHEN {counted} THEN (SELECT count(*) FROM {src}) END"  # noqa: S608
                 for src, counted in source(list(getattr(q, f"{name}_values")), "1")]
        out[f"{name}_count"] = "(" + " + ".join(parts) + ")" if parts else "0"
    return out


# At most this many key columns between the status and the enqueue time in an index oldest_age_s
# skips through (River's and Oban's fetch index: queue, priority).
SKIP_PREFIX_MAX = 3


def age_skip_prefix(q: Queue, status: ColumnType | None) -> tuple[str, ...]:
    """The key columns oldest_age_s's skip read walks (``()``: none applies).

    Where the index that leads with the status column puts other columns before the enqueue time
    (River's and Oban's fetch index, (state, queue, priority, scheduled_at, id)), the first cap of
    ready items in that index's order are those of the first queue and the highest priority: an
    older job of another queue or a lower priority behind them was never read, and the age looked
    exact (River at 200,000 rows: 1,803 s for 5,403 s). Those columns then form the prefix a skip
    read walks: the first item of each distinct prefix, in time order, one index descent each.
    Only NOT NULL prefix columns (a row comparison with a NULL ends the walk early), at most
    :data:`SKIP_PREFIX_MAX`, and not where a (status, key) index reads the first item already.
    """
    if status is None or not status.leads_index or not q.enqueued_at or q.key in status.then_columns:
        return ()
    best: tuple[str, ...] = ()
    for cols in status.index_keys:
        names = [n for n, _ in cols]
        if q.enqueued_at not in names:
            continue
        prefix = cols[:names.index(q.enqueued_at)]
        if prefix and len(prefix) <= SKIP_PREFIX_MAX and all(nn for _, nn in prefix) \
                and (not best or len(prefix) < len(best)):
            best = tuple(n for n, _ in prefix)
    return best


def age_skip_reads(q: Queue, status: ColumnType | None, frags: dict[str, str], cap: int) -> dict[str, str]:
    """oldest_age_s's skip reads (:func:`age_skip_prefix`): ``{age_skip}``, and with max_attempts
    ``{age_skip_follow}``, rows of ``(oldest enqueue time read, whether the walk stopped at the
    cap)``, one per ready value (a typed constant, as the status counts read them).

    Per value, a recursive walk of the prefixes the index holds for that value: the first prefix,
    then each next one above the last (a row comparison the index serves), at most ``cap`` of them;
    for each, its first item in time order (with max_attempts: the first below its limit among at
    most ``cap`` items). A walk that reaches the cap reads 'at least'."""
    out: dict[str, str] = {}
    forms = {"age_skip": None, "age_skip_follow": frags.get("exhausted")}
    for name, exhausted in forms.items():
        if name == "age_skip_follow" and exhausted is None:
            continue
        rows = []
        for walk, first_rows in _skip_walks(q, status, frags, cap):
            if exhausted is None:
                first = f"(SELECT {frags['enqueued_at']} {first_rows(1)})"
            else:
                # The first below the limit in time order, of at most the cap (the read stops there).
                first = (f"(SELECT l.enq FROM (SELECT {frags['enqueued_at']} AS enq, {exhausted} AS exhausted "  # noqa: S608
                         f"{first_rows(cap)}) AS l WHERE NOT l.exhausted LIMIT 1)")
            rows.append(f"SELECT min(f.enq), count(*) >= {cap} FROM ({walk} SELECT {first} AS enq FROM k) AS f")  # noqa: S608
        if rows:
            out[name] = " UNION ALL ".join(rows)
    return out


def skip_item_reads(q: Queue, status: ColumnType | None, frags: dict[str, str], cap: int, per: int,
                    item_cols: str, exhausted: str | None) -> str:
    """The items drill-down's oldest waiting items where oldest_age_s reads by a skip walk
    (:func:`age_skip_reads`): the first ``per`` items of each prefix the walk reaches (each
    (queue, priority) of River's and Oban's fetch index), in time order, and with ``exhausted``
    (``{age_skip_follow}``'s predicate) those at their attempt limit left out; rows of ``(item,
    attempts, last_error, owner, since)`` (``item_cols``: the select list of the first four).
    Empty when no skip read applies."""
    rows = []
    for walk, first_rows in _skip_walks(q, status, frags, cap):
        cols = f"{item_cols}, {frags['enqueued_at']} AS since"
        if exhausted is None:
            items = f"(SELECT {cols} {first_rows(per)}) AS i"
        else:
            items = (f"(SELECT l.item, l.attempts, l.last_error, l.owner, l.since FROM (SELECT {cols}, "  # noqa: S608
                     f"{exhausted} AS exhausted {first_rows(cap)}) AS l WHERE NOT l.exhausted LIMIT {per}) AS i")
        rows.append(f"SELECT w.* FROM ({walk} SELECT i.item, i.attempts, i.last_error, i.owner, i.since "  # noqa: S608
                    f"FROM k CROSS JOIN LATERAL {items}) AS w")
    return " UNION ALL ".join(rows)


def _skip_walks(q: Queue, status: ColumnType | None, frags: dict[str, str],
                cap: int) -> list[tuple[str, Callable[[int], str]]]:
    """Per ready value, the skip walk of :func:`age_skip_prefix`'s prefixes: ``WITH RECURSIVE k``
    (one row per prefix, at most ``cap``), and how to read a prefix's items in time order:
    ``first_rows(limit)``, the ``FROM ... ORDER BY ... LIMIT`` text of a read that
    follows ``SELECT <columns>`` inside the walk (its prefix is ``k``'s row)."""
    prefix = age_skip_prefix(q, status)
    if not prefix or not q.ready_values:
        return []
    pg = "postgresql"
    table, st, open_and, enq = frags["table"], frags["status"], frags.get("open_and", ""), frags["enqueued_at"]
    cols = [quote_ident(c, pg) for c in prefix]
    alias = [f"p{i}" for i in range(len(cols))]
    listed, walked = ", ".join(cols), ", ".join(f"k.{a}" for a in alias)
    same = " AND ".join(f"{c} = k.{a}" for c, a in zip(cols, alias, strict=True))
    out = []
    for v in coerce_values(list(q.ready_values), status):
        where = f"{st} = {_constant(v, frags['status_type'], status)}"
        walk = (f"WITH RECURSIVE k ({', '.join(alias)}, n) AS ("  # noqa: S608
                f"(SELECT {listed}, 1 FROM {table} WHERE {where}{open_and} ORDER BY {st}, {listed} LIMIT 1) "
                f"UNION ALL SELECT nx.*, k.n + 1 FROM k CROSS JOIN LATERAL (SELECT {listed} FROM {table} "
                f"WHERE {where} AND ({listed}) > ({walked}){open_and} ORDER BY {st}, {listed} LIMIT 1) AS nx "
                f"WHERE k.n < {cap})")

        def first_rows(limit: int, where: str = where) -> str:
            return (f"FROM {table} WHERE {where} AND {same}{open_and} "  # noqa: S608
                    f"ORDER BY {st}, {listed}, {enq} LIMIT {limit}")
        out.append((walk, first_rows))
    return out


def oldest_reads_partial(q: Queue, status: ColumnType | None) -> list[str]:
    """The partial indexes oldest_age_s reads the ready values through (none: it reads in
    (status, runnable_at) order, see :func:`oldest_runnable_reads`)."""
    if not q.runnable_at or status is None or status.leads_index or not q.ready_values:
        return []
    served = [serving_partial(status, v, q.runnable_at) for v in coerce_values(list(q.ready_values), status)]
    if not all(s and q.runnable_at in _key_columns(s[1]) for s in served):
        return []
    return sorted({s[0] for s in served if s})


def oldest_runnable_reads(q: Queue, status: ColumnType | None, frags: dict[str, str], cap: int,
                          runnable: ColumnType | None = None) -> dict[str, str]:
    """oldest_age_s's ``status_follow_runnable`` reads (issue 29): ``{oldest_reads}``, rows of
    ``(oldest runnable time read, whether a read stopped at the cap in an order that is not the
    runnable time's)``.

    Where an index leads with the status column, or a ready value has no partial index whose key
    holds the runnable column: the ready items in (status, runnable_at) order, at most the cap for
    each range (as before; without such an index the planner reads the table: the live check says
    so, with the index). Where each ready value has one (pgqueuer's ``pgqueuer_ep_ea_idx`` on
    (entrypoint, execute_after) WHERE status = 'queued'): at most the cap of its runnable items in
    that index's order, the runnable range sought; when the read stops at the cap the oldest is
    of the items read (ordered by the runnable time within each leading key only): 'at least'.
    """
    reads = _runnable_reads(q, status, frags, cap, "", runnable)
    return {"oldest_reads": " UNION ALL ".join(
        f"SELECT min({age}) FILTER (WHERE NOT l.exhausted), {capped} FROM {inner}"  # noqa: S608
        for inner, age, capped in reads)}


def runnable_item_reads(q: Queue, status: ColumnType | None, frags: dict[str, str], cap: int, item_cols: str,
                        runnable: ColumnType | None = None) -> str:
    """The items drill-down's oldest waiting items, read exactly as :func:`oldest_runnable_reads`
    reads the age: rows of ``(item, attempts, last_error, owner, since)`` (``item_cols``: the select
    list of the first four, read as ``l.<name>``), ``since`` the time the age counts from
    (greatest(enqueued_at, runnable_at)), items at their attempt limit left out."""
    return " UNION ALL ".join(
        f"SELECT l.item, l.attempts, l.last_error, l.owner, {age} AS since FROM {inner} "  # noqa: S608
        "WHERE NOT l.exhausted"
        for inner, age, _ in _runnable_reads(q, status, frags, cap, ", " + item_cols, runnable))


def runnable_null_order(q: Queue, dialect: str, frags: dict[str, str], runnable_type: ColumnType | None) -> str:
    """``{runnable_null_order}``: the order the ready items without a runnable time are read in, by
    oldest_age_s and by the drill-down's list of the same range, so that the cap of them kept is
    the oldest (an order the range's index serves, the age's order within it).

    In that range the runnable column is no order at all: the index's equal keys are in physical
    order on PostgreSQL, and after VACUUM lets new items into freed pages the cap kept was new
    items, the age read as exact (procrastinate's immediate jobs: 60 s for 7,199 s). PostgreSQL:
    the key, where it is the age's order (fifo, lifo; not heap) and the column's type was read
    (without it, as before: the runnable column, whose plan never walks the key of a table with no
    NULL to find; the planner weighs the key walk against the NULL range's size from the column's
    statistics). SQL Server: the runnable column then the key, which a nonclustered index on the
    runnable column serves as it is when the key is the clustering key (its rows carry the
    clustering key after their own; any other key is a sort of the NULL range)."""
    key = frags["key"]
    if dialect == "mssql":
        return f"{frags['runnable']}, {key}" if q.order != "heap" else frags["runnable"]
    return key if runnable_type is not None and q.order != "heap" else frags["runnable"]


def _runnable_reads(q: Queue, status: ColumnType | None, frags: dict[str, str], cap: int,
                    extra: str, runnable_type: ColumnType | None = None) -> list[tuple[str, str, str]]:
    """``(inner read AS l, the age's time of a row of it, whether it stopped at the cap)`` for each
    ready range (and, through partial indexes, each ready value) oldest_age_s reads; ``extra``: more
    of each row's columns to select (the drill-down's).

    ``runnable_type`` (the runnable column's catalog type): a NOT NULL column has no NULL range to
    read; in a nullable one's NULL range (procrastinate's immediate jobs, scheduled_at NULL) the
    runnable order is no order at all, so which cap of rows the read kept was the plan's (the first
    in physical order: after VACUUM lets new jobs into old pages, not the oldest): it is read in key
    order where the key is the age's order (fifo, lifo). Unknown: as before, in (status, runnable)
    order, whose plan never walks the key of a table with no NULL to find."""
    table, col, open_and = frags["table"], frags["status"], frags.get("open_and", "")
    runnable, clock, exhausted, enq = frags["runnable"], frags["clock"], frags["exhausted"], frags["enqueued_at"]
    seek = status is not None and status.leads_index
    values = coerce_values(list(q.ready_values), status)
    served = [serving_partial(status, v, q.runnable_at or "") for v in values]
    select = f"{enq} AS enq, {runnable} AS run, {exhausted} AS exhausted{extra}"
    null_order = f"{col}, {frags['runnable_null_order']}"
    ranges = [(f"{runnable} <= {clock}", "greatest(l.enq, l.run)", f"{col}, {runnable}")]
    if runnable_type is None or not runnable_type.notnull:
        ranges.append((f"{runnable} IS NULL", "l.enq", null_order))
    if seek or not oldest_reads_partial(q, status):
        within = f"IN ({', '.join(_constant(v, frags['status_type'], status) for v in values) or 'NULL'})"
        return [(f"(SELECT {select} FROM {table} WHERE {col} {within} AND {cond}{open_and} "  # noqa: S608
                 f"ORDER BY {order} LIMIT {cap}) AS l", age, "false")
                for cond, age, order in ranges]
    return [(f"(SELECT {select} FROM {table} WHERE {col} = {_constant(v, frags['status_type'], status)} "  # noqa: S608
             f"AND {cond}{open_and} ORDER BY {order} LIMIT {cap}) AS l", age, f"count(*) >= {cap}")
            for v, (_, order) in zip(values, [s for s in served if s], strict=True) for cond, age, _ in ranges]
