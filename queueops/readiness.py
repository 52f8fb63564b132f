"""Whether requeue can release a queue's items into a state its library takes (issue 31).

Requeue writes only what the mapping counts as ready (``fragments.readiness_fragments``). What the
mapping cannot describe refuses it, naming the column: a lock on a side table the queue references
(a library that serialises named queues: the job released, its queue still locked, no worker takes
it), or a lease column that cannot be set NULL while ``lease_ready`` says a free item's lease is
NULL (the release would fail). A lease column whose name or comment reads like a lock-until time
while ``lease_ready`` is ``"null"`` is a warning: the library may take ``lock < now()``, and a NULL
lock never satisfies that.

Read by ``requeue``'s preview (refused before anything is counted) and by ``config check --live``
(says per queue whether requeue can be offered, and why not). Catalog reads only, names bound as
values: ``sql/postgresql/catalog_readiness.sql``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from queueops import engine, mapping, sqlfiles
from queueops.config import Queue

# A lease column named or described like this holds when the lock ends, not when it began.
LOCK_UNTIL = re.compile(r"until|expir|visible|invisible|(^|_)vt($|_)|timeout|deadline", re.I)
# A lease this far ahead of the database clock is not a taken-at time (clock skew between a
# consumer and the database stays well under a minute): it is a lock-until time.
AHEAD_S = 60.0
# A column of a referenced table that looks like a lock on it (names in snake_case after camel
# case is split: LockedBy -> locked_by).
SIDE_LOCK = re.compile(r"(^|_)(lock|locked|lease|leased|worker)(_|$)")


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


@dataclass(frozen=True)
class Facts:
    """What the catalog says about a queue table beyond its mapped columns."""

    not_null: frozenset[str] = frozenset()
    comments: dict[str, str] = field(default_factory=dict)
    side_locks: tuple[tuple[str, str, str], ...] = ()  # (side table, its lock column, our FK columns)
    lease_ahead_s: float | None = None  # how far the furthest lease lies ahead of the database clock


def read(run: Callable[[sqlfiles.Statement], list[dict[str, Any]]], q: Queue, dialect: str) -> Facts:
    """The facts for ``q`` through any statement runner (an action's session, a check connection)."""
    sqlf = sqlfiles.load(dialect, "catalog_readiness")
    c = mapping.compile_queue(q, dialect)
    values = {"qualified_table": c.table}
    cols = run(sqlf.render("columns", {}, values))
    via: dict[tuple[str, str], list[str]] = {}
    rows = run(sqlf.render("side_locks", {}, values))
    for r in sorted(rows, key=lambda r: (r["side_table"], r["side_column"], r["via"])):
        if SIDE_LOCK.search(_snake(r["side_column"])):
            via.setdefault((r["side_table"], r["side_column"]), []).append(r["via"])
    ahead = None
    if q.kind == "lease" and q.lease_column and cols:
        try:
            ahead = run(sqlf.render("lease_ahead", c.names, {}))[0]["ahead_s"]
        except engine.TargetError:
            ahead = None  # a lease column that is no time (config check reports its type): unknown
    return Facts(frozenset(r["column_name"] for r in cols if r["not_null"]),
                 {r["column_name"]: r["comment"] for r in cols if r["comment"]},
                 tuple((t, c, ", ".join(dict.fromkeys(v))) for (t, c), v in via.items()),
                 None if ahead is None else float(ahead))


@dataclass(frozen=True)
class Verdict:
    refusal: str = ""  # why requeue cannot be offered ('' when it can)
    field: str = ""
    value: str = ""
    fix: str = ""
    warnings: tuple[tuple[str, str, str, str], ...] = ()  # (field, value, reason, fix)


def requeue_verdict(q: Queue, facts: Facts) -> Verdict:
    """Whether requeue may release ``q``'s items (lease kind), and the warnings that go with it."""
    if q.kind != "lease" or not q.lease_column:
        return Verdict()
    warnings = []
    lease = q.lease_column
    comment = facts.comments.get(lease, "")
    if q.lease_ready == "null" and (LOCK_UNTIL.search(lease) or LOCK_UNTIL.search(comment)):
        said = f"its comment says {comment!r}" if LOCK_UNTIL.search(comment) else "its name"
        warnings.append(("lease_column", lease, f"{said} suggests a lock-until time (the library takes an item "
                         "whose lock has passed), while lease_ready = \"null\" counts only a NULL lease as ready "
                         "and requeue would write NULL, which such a library never takes",
                         "set lease_ready = \"past\" if the library dequeues lock < now()"))
    if facts.side_locks:
        table, column, via = facts.side_locks[0]
        return Verdict(f"readiness also depends on {table}.{column} (the queue table references {table} "
                       f"through {via}): a library that serialises named queues holds that side row while a job "
                       "runs, and requeue cannot release it, so a released job would still not be taken",
                       "lease_column", lease, f"release {table}.{column} with the library's own tooling",
                       tuple(warnings))
    if q.lease_ready == "null" and facts.lease_ahead_s is not None and facts.lease_ahead_s > AHEAD_S:
        return Verdict(f"the lease column {lease!r} holds a time {facts.lease_ahead_s:.0f} s ahead of the database "
                       "clock: it is a lock-until time (a taken-at time is never ahead), and the library takes an "
                       "item whose lock has passed; lease_ready = \"null\" would release to NULL, which such a "
                       "library never takes", "lease_column", lease,
                       "set lease_ready = \"past\"", tuple(warnings))
    if q.lease_ready == "null" and lease in facts.not_null:
        return Verdict(f"the lease column {lease!r} is NOT NULL, while lease_ready = \"null\" makes requeue set "
                       "it NULL: the release would fail", "lease_column", lease,
                       "set lease_ready = \"past\" if a lock that has passed is free, or map the right column",
                       tuple(warnings))
    return Verdict(warnings=tuple(warnings))
