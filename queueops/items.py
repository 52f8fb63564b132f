"""The items behind a number (issue 32, item 6): stuck items, the oldest waiting ones, one by key.

Read-only and bounded: each read is one statement of ``sql/<dialect>/items.sql`` with at most
:data:`LIMIT` rows (``TOP`` / ``LIMIT``), through the index the collector of that number reads, in
that index's order; every value is bound and every identifier is the queue's quoted fragment
(its compiled mapping's names, :class:`queueops.mapping.CompiledQueue`). Optional columns (attempts, last error, owner) become
the quoted column or a typed NULL, so one block serves every mapping.

What the console's drill-down shows and what requeue's ``keys`` option releases: the stuck items
here are exactly those ``stuck_leases`` counts, because both read the queue's one compiled stuck
rule (:func:`queueops.mapping.stuck_rule`: ``{stuck_held}``, ``{stuck_if}``, ``{claim_gone}``):
the library's own rule where it has one (procrastinate's worker heartbeat, pg-boss's
``expire_in``, Solid Queue's abandoned claims), failed and exhausted items left out. The reads use
the compiled mapping's collector fragments, so a time read from a side table (procrastinate's
events) is read here as the collectors read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from queueops import coltypes, engine, mapping, sessions, sqlfiles
from queueops.config import Queue

LIMIT = 100
MAX_LIMIT = 1000
# The reads that filter a first slice (stuck status items among the processing ones, the free lease
# items below max_attempts) look at no more rows than the collectors do (collectors.runner.COUNT_CAP),
# so they list exactly the items those counts saw.
CAP = 1_000
COLUMNS = ("item", "since", "age_s", "attempts", "last_error", "owner")

_NULL = {
    "postgresql": {"time": "CAST(NULL AS timestamptz)", "int": "CAST(NULL AS int)", "text": "CAST(NULL AS text)"},
    "mssql": {"time": "CAST(NULL AS datetime2)", "int": "CAST(NULL AS int)", "text": "CAST(NULL AS nvarchar(1))"},
}


class NotApplicable(ValueError):
    """This list does not exist for this queue's kind or mapping (the message says why)."""


@dataclass(frozen=True)
class Read:
    """One bounded read: its statement (for the console to show) and the block it came from."""

    list: str
    block: str
    statement: sqlfiles.Statement


def item_fragments(queue: Queue, dialect: str, compiled: mapping.CompiledQueue | None = None) -> dict[str, str]:
    """The queue's collector fragments (the compiled stuck rule and side-table times among them)
    plus the select-list ones of items.sql (a quoted column or a typed NULL)."""
    c = compiled or mapping.compile_queue(queue, dialect)
    f = c.fragments
    null = _NULL[dialect]
    held = {"lease": f.get("lease"), "status": f.get("status_changed_at"), "due": f.get("due")}.get(queue.kind)
    out = {**f,
           "attempts_sel": f.get("attempts") or null["int"],
           "error_sel": f.get("error") or null["text"],
           "owner_sel": f.get("owner") or null["text"],
           "enq_sel": f.get("enqueued_at") or null["time"],
           "held_sel": held or null["time"],
           "state_sel": f.get("status") or null["text"]}
    return out


def _waiting_reads(c: mapping.CompiledQueue, f: dict[str, str], age: str) -> str:
    """``{waiting_reads}``: the oldest waiting items of a PostgreSQL status queue read by the very
    reads oldest_age_s reads its age by in block ``age`` (the runner's choice, so no second
    judgement of which applies here): ``status_follow_runnable`` through the runnable column's
    reads (since greatest(enqueued_at, runnable_at), a scheduled item never listed);
    ``status_skip`` / ``status_follow_skip`` through the skip walk of the fetch index (each
    (queue, priority) of River's and Oban's), the follow form leaving out the items at their
    attempt limit as the age does."""
    cols = ("{key} AS item, {attempts_sel} AS attempts, left(CAST({error_sel} AS text), 500) AS last_error, "
            "CAST({owner_sel} AS text) AS owner").format(**f)
    if age == "status_follow_runnable":
        return coltypes.runnable_item_reads(c.queue, c.status, f, CAP, cols, c.runnable)
    return coltypes.skip_item_reads(c.queue, c.status, f, CAP, LIMIT, cols,
                                    f["exhausted"] if age == "status_follow_skip" else None)


def stuck_block(queue: Queue, frags: dict[str, str]) -> str:
    """The stuck list's block: the one that reads the compiled stuck rule of the queue's kind."""
    if queue.claims is not None:
        if "claim_gone" not in frags:
            raise NotApplicable("the claims' stuck rule is read on PostgreSQL only")
        if "claims_item" not in frags:
            raise NotApplicable("claims.item_column is not mapped: the abandoned claims cannot name their items")
        return "stuck_claims"
    if queue.kind not in ("lease", "status"):
        raise NotApplicable(f"a {queue.kind} queue has no leases: nothing is stuck, items wait or are due")
    if "stuck_if" not in frags:
        raise NotApplicable("the queue's mapping gives stuck_leases no rule to count by (see config check)")
    return "stuck_lease" if queue.kind == "lease" else "stuck_status"


# The oldest-waiting list's block for each block oldest_age_s reads the age by (the lists of
# sql/<dialect>/items.sql): the list is the age's read, oldest first, so its first row is the figure.
LIST_OF_AGE = {
    "status": "waiting_status", "status_heap": "waiting_status_heap", "status_follow": "waiting_status_follow",
    "status_skip": "waiting_reads", "status_follow_skip": "waiting_reads", "status_follow_runnable": "waiting_reads",
    "lease": "waiting_lease", "lease_side": "waiting_lease", "lease_follow": "waiting_lease_follow",
    "lease_follow_runnable": "waiting_lease_follow_runnable",
    "due": "waiting_due", "due_follow": "waiting_due_follow", "due_enqueued": "waiting_due_enqueued",
    "delete": "waiting_delete", "delete_heap": "waiting_delete_heap",
}


def age_block(queue: Queue, dialect: str, compiled: mapping.CompiledQueue | None = None) -> str | None:
    """The block of ``sql/<dialect>/oldest_age_s.sql`` the collector reads this queue's age by
    (:func:`queueops.mapping.render_first`, as the runner chooses it); None when none applies."""
    first = mapping.render_first(sqlfiles.load(dialect, "oldest_age_s"),
                                 compiled or mapping.compile_queue(queue, dialect))
    return None if first is None else first[0]


def waiting_block(queue: Queue, frags: dict[str, str], dialect: str = "postgresql",
                  compiled: mapping.CompiledQueue | None = None) -> str:
    """The oldest-waiting list's block: the list of the block the age is read by
    (:data:`LIST_OF_AGE`), where this dialect has it; else the kind's own list."""
    return _waiting(queue, dialect, compiled or mapping.compile_queue(queue, dialect))[0]


def _waiting(queue: Queue, dialect: str, c: mapping.CompiledQueue) -> tuple[str, str]:
    """``(the list's block, the age's block)``."""
    if queue.kind == "ring":
        raise NotApplicable("a ring's slots are read by sequence, not listed (ring_occupancy shows them)")
    if queue.kind == "lease" and not queue.enqueued_at:
        raise NotApplicable("the oldest waiting items need enqueued_at in the queue's config")
    age = age_block(queue, dialect, c) or ""
    blocks = sqlfiles.load(dialect, "items")
    # waiting_reads: PostgreSQL's reads generated from the catalog (_waiting_reads), which the age's
    # own block having rendered guarantees; SQL Server has a block of the age's own name instead.
    for listed in (LIST_OF_AGE.get(age), f"waiting_{age}"):
        if listed and blocks.has_block(listed):
            return listed, age
    return f"waiting_{queue.kind}", age


def _values(c: mapping.CompiledQueue, limit: int) -> dict[str, Any]:
    return {"limit_n": max(1, min(int(limit), MAX_LIMIT)), "cap": CAP,
            "processing_values": c.values["processing_values"], "ready_values": c.values["ready_values"]}


def read_of(queue: Queue, dialect: str, which: str, *, limit: int = LIMIT, key: Any = None,
            types: mapping.Types | None = None) -> Read:
    """The statement of one list: ``stuck``, ``waiting`` or ``key`` (one item, exact match).
    ``types``: the queue's catalog types (:func:`queueops.coltypes.read_types`), without which the
    waiting list cannot read through the indexes the age reads (River's fetch index)."""
    c = mapping.compile_queue(queue, dialect, types)
    frags = item_fragments(queue, dialect, c)
    sqlf = sqlfiles.load(dialect, "items")
    if which == "stuck":
        block = stuck_block(queue, frags)
    elif which == "waiting":
        block, age = _waiting(queue, dialect, c)
        if block == "waiting_reads":
            frags["waiting_reads"] = _waiting_reads(c, frags, age)
    elif which == "key":
        if queue.kind == "ring":
            raise NotApplicable("a ring's slots are not items with keys")
        block = "by_key"
    else:
        raise ValueError(f"unknown list {which!r}")
    values = {**_values(c, limit), "key": None if key is None else c.bind([key])[0]}
    return Read(which, block, sqlf.render(block, frags, values))


def load(conn: engine.Connection, queue: Queue, which: str, *, limit: int = LIMIT,
         key: Any = None) -> tuple[Read, list[dict[str, Any]]]:
    """One list as the console reads it: ``(the read, its rows)`` on ``conn`` (a target connection
    for reading), its session set up first as the collectors' (:func:`queueops.sessions.reading`:
    statement and lock timeouts, read-only), so a drill-down never waits behind a queue's locks
    unbounded; for the waiting list the queue's catalog types are read next (the other lists need
    none)."""
    conn.execute(sessions.reading(conn.target))
    types = types_for(conn.execute, queue, conn.dialect) if which == "waiting" else None
    read = read_of(queue, conn.dialect, which, limit=limit, key=key, types=types)
    return read, conn.execute(read.statement)


def read(conn: engine.Connection, queue: Queue, which: str, *, limit: int = LIMIT,
         key: Any = None) -> list[dict[str, Any]]:
    """The rows of :func:`load`."""
    return load(conn, queue, which, limit=limit, key=key)[1]


def types_for(run: Callable[[sqlfiles.Statement], list[dict[str, Any]]], queue: Queue,
              dialect: str) -> mapping.Types:
    """The queue's catalog types, as the collectors read them (one catalog statement)."""
    return coltypes.read_types_with(run, dialect, [queue])
