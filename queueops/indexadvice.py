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
from queueops.fragments import table_of
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
    return replace(need, open_columns=tuple(q.open_when_null)) if need and q.open_when_null else need


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
        return None
    if collector in ("depth", "watermark_drift"):
        if collector == "watermark_drift" and not q.watermark:
            return None
        if q.kind == "status" and q.status_column:
            return Need((q.status_column, key))
        if q.kind == "due" and q.due_column and collector == "depth":
            return Need((q.due_column,))
        if q.kind in ("delete", "lease", "due"):
            return Need((key,))
    return None


def _norm(text: str | None) -> str:
    """A filter predicate without brackets, quotes, parentheses, case or spacing differences."""
    return re.sub(r'[\[\]"()\s]', "", (text or "")).lower()


def served(need: Need, indexes: Iterable[Index]) -> bool:
    """Whether an enabled index leads with the needed column and admits the rows the statement reads."""
    for ix in indexes:
        cols = [c.lower() for c in ix.columns]
        # ``lease IS NULL`` fixes the lease column to one value: an index (lease, enqueued_at)
        # delivers the free items in enqueue order (the seeds' IX_SIMPLEQUEUE_POP).
        if need.where_null and need.where_column and cols and cols[0] == need.where_column.lower():
            cols = cols[1:]
        if ix.disabled or not cols or cols[0] != need.columns[0].lower():
            continue
        if ix.filter is None or (need.where is not None and _norm(ix.filter) == _norm(need.where)):
            return True
    return False


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


def create_index(q: Queue, need: Need, dialect: str) -> str:
    """The exact statement that gives ``q``'s table the needed index (PostgreSQL: CONCURRENTLY)."""
    table = table_of(q, dialect)
    cols = ", ".join(quote_ident(c, dialect) for c in need.columns)
    where = " AND ".join(f"{quote_ident(c, dialect)} IS {'NULL' if null else 'NOT NULL'}"
                         for c, null in need.conditions())
    where = f" WHERE {where}" if where else ""
    if dialect == "postgresql":
        return f"CREATE INDEX CONCURRENTLY ON {table} ({cols}){where}"
    name = quote_ident(f"IX_queueops_{q.table}_{'_'.join(need.columns)}"[:128], dialect)
    # No ONLINE = ON: only some editions have it; add it where yours does.
    return f"CREATE INDEX {name} ON {table} ({cols}){where}"
