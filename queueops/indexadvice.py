"""Which index each frequent collector statement needs, whether a table has it, and the exact
``CREATE INDEX`` when it does not.

The collectors read a queue through an index that leads with the column they filter or order by
(``ORDER BY ... LIMIT`` / ``TOP``): without one, every sample scans and sorts the table. On
PostgreSQL ``config check --live`` learns seek or scan from ``EXPLAIN``; on SQL Server from the
index catalog (:func:`served`), where a filtered index serves only the rows its filter admits
(the seeds' SimpleQueue index ``WHERE ProcessingStartedAt IS NULL`` cannot find leased rows).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from queueops.config import Queue
from queueops.fragments import literal, table_of
from queueops.identifiers import quote_ident


@dataclass(frozen=True)
class Need:
    """An index leading with ``columns`` (in order), restricted to rows where ``where`` holds.

    ``open_columns`` are the queue's ``open_when_null``: every statement reads only rows where they
    are NULL, so the index may (and, to stay small, should) hold only those rows, as the library's
    own partial indexes do."""

    columns: tuple[str, ...]
    where_column: str | None = None
    where_null: bool = True  # IS NULL (True) or IS NOT NULL (False)
    open_columns: tuple[str, ...] = ()
    # Columns the statement fixes to one value (a partition: QueueId = 7, Queue = N'default'): an
    # index may lead with them, in any order, before the needed columns (issue 33).
    eq_columns: tuple[str, ...] = ()
    # Columns the statement compares with a value (status IN (...), due <= now): never NULL in the
    # rows it reads, so an index filtered WHERE column IS NOT NULL holds them all.
    compared: tuple[str, ...] = ()
    # A column and the values the index holds the rows of (``status IN (...)``) and boolean columns
    # it holds only the false rows of (``NOT blocked``): a closed_when_true queue's index on exactly
    # its waiting rows, whose reltuples is depth's figure above the cap (``ready_rows``).
    values_in: tuple[str, tuple[int | str, ...]] | None = None
    false_columns: tuple[str, ...] = ()

    def conditions(self) -> list[tuple[str, bool]]:
        """``(column, is_null)`` of every condition of the index's filter, in order."""
        own = [(self.where_column, self.where_null)] if self.where_column else []
        return own + [(c, True) for c in self.open_columns]

    @property
    def where(self) -> str | None:
        conds = self.conditions()
        if not conds:
            return None
        return " AND ".join(f"{c} IS {'NULL' if null else 'NOT NULL'}" for c, null in conds)


@dataclass(frozen=True)
class Index:
    name: str
    columns: tuple[str, ...]
    filter: str | None = None
    disabled: bool = False


def needed(collector: str, q: Queue) -> Need | None:
    """The index ``collector``'s statement for ``q`` reads through (None: it reads no queue rows by order)."""
    need = _needed(collector, q)
    if need is None:
        return None
    if q.open_when_null:
        need = replace(need, open_columns=tuple(q.open_when_null))
    if q.partition is not None:
        need = replace(need, eq_columns=(q.partition.column,))
    compared = [c for c in (q.status_column, q.due_column, q.runnable_at) if c and c in need.columns]
    if q.partition is not None:
        compared.append(q.partition.column)
    if need.where_column and not need.where_null:
        compared.append(need.where_column)
    return replace(need, compared=tuple(dict.fromkeys(compared))) if compared else need


def _needed(collector: str, q: Queue) -> Need | None:
    key = q.key
    if collector in ("depth", "oldest_age_s") and q.kind == "lease" and q.lease_column and q.runnable_at:
        # Readiness (issue 31): the ready and scheduled ranges are read in runnable_at order, best
        # through the free items only (a lock-until lease has no such filter: its free items are
        # NULL or past).
        if q.lease_ready == "null":
            return Need((q.runnable_at,), q.lease_column, True)
        return Need((q.runnable_at,))
    if collector in ("depth", "oldest_age_s") and q.kind == "status" and q.status_column and q.runnable_at:
        return Need((q.status_column, q.runnable_at))
    if collector == "stuck_leases":
        if q.kind == "lease" and q.lease_column:
            return Need((q.lease_column,), q.lease_column, False)
        if q.kind == "status" and q.status_column and q.status_changed_at:
            return Need((q.status_column, key))
        return None
    if collector == "oldest_age_s":
        if q.order == "heap" and q.kind in ("delete", "status") and q.enqueued_at:
            if q.kind == "status" and q.status_column:
                return Need((q.status_column, q.enqueued_at))
            return Need((q.enqueued_at,))
        if q.kind == "status" and q.status_column and q.enqueued_at:
            return Need((q.status_column, key))
        if q.kind == "lease" and q.lease_column and q.enqueued_at:
            return Need((q.enqueued_at, key), q.lease_column, True)
        if q.kind == "due" and q.due_column:
            return Need((q.due_column,))
        if q.kind == "delete" and q.enqueued_at:
            return Need((key,))
        if q.kind == "lease" and q.lease_column and q.times_from is not None:
            return Need((key,), q.lease_column, True)  # lease_side: the oldest free item by key
        return None
    if collector in ("depth", "watermark_drift"):
        if collector == "watermark_drift" and not q.watermark:
            return None
        if q.kind == "status" and q.status_column:
            return Need((q.status_column, key))
        if q.kind == "due" and q.due_column and collector == "depth":
            return Need((q.due_column,))
        if collector == "depth" and q.kind in ("delete", "lease") and q.partition is None:
            # A count of at most the cap rows with no WHERE (delete) or one a TOP reads along any
            # index (lease IS NULL): any index, or the heap, answers it; the cap bounds the read.
            return None
        if q.kind in ("delete", "lease", "due"):
            return Need((key,))
    return None


def ready_rows(q: Queue) -> Need:
    """A closed_when_true status queue's index on exactly its waiting rows (pg-boss 12's job_i11):
    its ready values, every flag false, keyed by the queue's key. Depth above the cap reads its
    reltuples, the joint figure of status and flags that pg_stats lacks."""
    return Need((q.key,), values_in=(q.status_column or "", tuple(q.ready_values)),
                false_columns=tuple(q.closed_when_true))


def _norm(text: str | None) -> str:
    """A filter predicate without brackets, quotes, parentheses, case or spacing differences."""
    return re.sub(r'[\[\]"()\s]', "", (text or "")).lower()


def serving(need: Need, indexes: Iterable[Index]) -> Index | None:
    """The first enabled index that serves ``need`` (see :func:`served`), or None."""
    for ix in indexes:
        if not ix.disabled and _key_serves(need, ix.columns) and _filter_admits(need, ix.filter):
            return ix
    return None


def served(need: Need, indexes: Iterable[Index]) -> bool:
    """Whether an enabled index serves the statement: its whole key read in order -- the columns the
    statement fixes to one value (a partition, ``lease IS NULL``) in any order, then the needed
    columns in order -- and a filter (if any) that admits every row the statement reads."""
    return serving(need, indexes) is not None


def _key_serves(need: Need, columns: tuple[str, ...]) -> bool:
    cols = [c.lower() for c in columns]
    # ``lease IS NULL`` fixes the lease column to one value: an index (lease, enqueued_at)
    # delivers the free items in enqueue order (the seeds' IX_SIMPLEQUEUE_POP); a partition column
    # (QueueId = 7) the same: Hangfire's clustered (Queue, Id) gives one queue's rows in Id order.
    fixed = {c.lower() for c in need.eq_columns}
    if need.where_null and need.where_column:
        fixed.add(need.where_column.lower())
    while cols and cols[0] in fixed and cols[0] != need.columns[0].lower():
        cols = cols[1:]
    wanted = [c.lower() for c in need.columns]
    # The first needed column must follow at once; the next ones too, as far as the key goes (an
    # index (status) serves (status, key): a nonclustered key carries the clustered key after it).
    return bool(cols) and cols[:len(wanted)] == wanted[:len(cols)]


def _filter_admits(need: Need, filt: str | None) -> bool:
    """Whether a filtered index holds every row the statement reads: each conjunct of its filter is
    one of the statement's own conditions (``lease IS NULL``, open_when_null), or ``c IS NOT NULL``
    for a column the statement compares with a value (Hangfire's IX_HangFire_Job_StateName WHERE
    [StateName] IS NOT NULL serves ``StateName IN (...)``)."""
    if filt is None:
        return True
    conds = {(c.lower(), null) for c, null in need.conditions()}
    compared = {c.lower() for c in need.compared}
    for part in re.split(r"(?i)\band\b", filt):
        text = re.sub(r'[\[\]"()\s]', "", part).lower()
        if text.endswith("isnotnull"):
            col = text[: -len("isnotnull")]
            if (col, False) not in conds and col not in compared:
                return False
        elif text.endswith("isnull"):
            if (text[: -len("isnull")], True) not in conds:
                return False
        else:
            return False  # a filter on values this check does not read: not relied upon
    return True


def indexes_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[Index]:
    """Group ``sql/mssql/catalog_indexes.sql`` rows (one per key column) into indexes."""
    grouped: dict[Any, dict[str, Any]] = {}
    for r in rows:
        ix = grouped.setdefault(r["index_id"], {"name": r["index_name"] or "", "cols": [],
                                                "filter": r.get("filter_definition"),
                                                "disabled": bool(r.get("is_disabled"))})
        ix["cols"].append((r["key_ordinal"], r["column_name"]))
    return [Index(g["name"], tuple(c for _, c in sorted(g["cols"])), g["filter"], g["disabled"])
            for g in grouped.values()]


def create_index(q: Queue, need: Need, dialect: str, online: bool | None = None, partitioned: bool = False) -> str:
    """The exact statement that gives ``q``'s table the needed index (PostgreSQL: CONCURRENTLY).

    ``partitioned`` (PostgreSQL, a partitioned table: pg-boss's job): CONCURRENTLY cannot build an
    index on a partitioned parent (issue 29); the statement is a plain CREATE INDEX on the parent,
    which builds it on every partition, and says what it locks and the per-partition alternative.

    On SQL Server ``online``: True (the edition builds indexes online: Enterprise, Developer, Azure
    SQL) adds ``WITH (ONLINE = ON)``; False says that this edition builds it offline, holding a
    lock that blocks every dequeue for the build; None (unknown) adds ONLINE = ON and says that it
    needs such an edition. The partition column (if any) leads the key, then the needed columns."""
    table = table_of(q, dialect)
    cols = ", ".join(quote_ident(c, dialect) for c in (*need.eq_columns, *need.columns))
    conds = [f"{quote_ident(c, dialect)} IS {'NULL' if null else 'NOT NULL'}" for c, null in need.conditions()]
    if need.values_in is not None:
        col, values = need.values_in
        conds.insert(0, f"{quote_ident(col, dialect)} IN ({', '.join(literal(v, dialect) for v in values)})")
    conds += [f"NOT {quote_ident(c, dialect)}" if dialect == "postgresql" else f"{quote_ident(c, dialect)} = 0"
              for c in need.false_columns]
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    if dialect == "postgresql" and partitioned:
        return (f"CREATE INDEX ON {table} ({cols}){where}  -- a partitioned table: CONCURRENTLY cannot run on "
                "its parent; this builds the index on every partition, blocking writes to each while it "
                "builds. Without that lock: CREATE INDEX CONCURRENTLY on each partition, then CREATE INDEX "
                "ON ONLY the parent and ALTER INDEX ... ATTACH PARTITION each")
    if dialect == "postgresql":
        return f"CREATE INDEX CONCURRENTLY ON {table} ({cols}){where}"
    name = quote_ident(f"IX_queueops_{q.table}_{'_'.join((*need.eq_columns, *need.columns))}"[:128], dialect)
    if online is False:
        return (f"CREATE INDEX {name} ON {table} ({cols}){where}  -- offline: this edition has no online "
                "index build; the build blocks every dequeue of the table until it ends: run it in a quiet window")
    stmt = f"CREATE INDEX {name} ON {table} ({cols}){where} WITH (ONLINE = ON)"
    return stmt if online else stmt + "  -- ONLINE = ON needs Enterprise, Developer or Azure SQL"
