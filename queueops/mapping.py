"""A queue's mapping compiled once: every name, value and predicate its statements read.

Why: before this module each statement re-derived the same things from the config on its own
path (the runner's values and fragments, the catalog's fragments, the mapping's problems, the
actions' and the drill-down's fragments): one collector statement's rendering went through the
runner, sqlfiles, coltypes, identifiers and fragments 26 times, and each new predicate had to be
threaded through every one of them. :func:`compile_queue` does it once per (queue, dialect,
catalog types, count limits); the collectors (``collectors.runner``, which keeps one per queue
and types snapshot), the items drill-down (:mod:`queueops.items`), the live check and the actions
read the :class:`CompiledQueue`.

Nothing here reaches a database: the catalog types are read elsewhere (:mod:`queueops.coltypes`)
and passed in; without them (``types=None``: the actions, the drill-down, ``queueops sql``) the
values bind as configured and the status constants are typed as the configured values are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from queueops import coltypes, sqlfiles
from queueops.config import Queue
from queueops.fragments import fragments_for, schema_of, side_time_fragments
from queueops.identifiers import quote_table

Types = dict[tuple[str, str], coltypes.ColumnType]

# Exact counts are bounded: below the cap a count is exact (an index-only scan of at most `cap`
# entries); at the cap the collector reports the statistics' estimate instead and says so.
# 1,000 entries cost ~0.2-0.4 ms per count; 10,000 cost ~2-4 ms, which for 100 queues of a few
# counts each made one cycle ~1 s (benchmarks/collect_cycle.py): not "every few seconds".
COUNT_CAP = 1_000
# A count of all rows is not started when the server's live-row counter already puts the table at
# this many rows or more (PostgreSQL: pg_stat_user_tables.n_live_tup, current at every commit): it
# would only reach the cap and report an estimate. Ten times the cap leaves room for a counter that
# lags. A benchmark sets it out of reach (through collectors.runner) to measure the cycle that
# always counts.
COUNT_SKIP_ABOVE = 10 * COUNT_CAP
# A table this small (pg_class.relpages, 8 kB pages: 1 MB) is read whole even without the index
# a collector would like: cheaper than telling the operator to add one.
SMALL_TABLE_PAGES = 128


@dataclass(frozen=True)
class Limits:
    """What bounds a collector's reads; part of what a queue is compiled for (a benchmark moves them)."""

    cap: int = COUNT_CAP
    skip_above: int = COUNT_SKIP_ABOVE
    small_pages: int = SMALL_TABLE_PAGES


@dataclass(frozen=True, eq=False)
class CompiledQueue:
    """One queue's mapping for one dialect and one catalog types snapshot, compiled once.

    ``names`` are the quoted identifiers and the predicates the config alone decides
    (:func:`queueops.fragments.fragments_for`): the ready predicate ``{free}``, ``{exhausted}``,
    ``{failed}``, the stuck rule ``{worker_gone}``, ``{open_and}``, ``{clock}``, requeue's SET lists.
    Actions read these: a statement that writes a time needs a real column.

    ``fragments`` are what the collector blocks read: ``names``, plus the times read from a side
    table, the catalog's typed status constants and reads (``{ready_list}``, ``{ready_match}``,
    ``{processing_match}``, the age read ``{age_rows}`` / ``{age_order}`` / ``{age_first}``,
    ``{ready_reads}``, ``{oldest_reads}``), the stuck rule (:func:`stuck_rule`: ``{stuck_held}``,
    ``{stuck_if}``, ``{claim_gone}``, read by stuck_leases and the drill-down's stuck list alike),
    minus every fragment a column of the wrong real type cannot serve (``problems``' drops): a block
    that needs one does not apply.

    ``values`` are the collector blocks' bound values: names as values (for catalog lookups), the
    status values as the column's own type wants them, bound as compared (SQL Server: ASCII text as
    varchar), and the count limits.
    """

    queue: Queue
    dialect: str
    limits: Limits
    status: coltypes.ColumnType | None  # the status column's catalog type (None: unknown)
    problems: tuple[coltypes.TypeProblem, ...]
    names: Mapping[str, str] = field(repr=False)
    fragments: Mapping[str, str] = field(repr=False)
    values: Mapping[str, Any] = field(repr=False)
    # The partial indexes oldest_age_s reads the ready values through ('at least' at the cap; the
    # live check warns): empty when it reads in (status, runnable_at) order.
    age_partials: tuple[str, ...] = ()
    # The runnable column's catalog type (None: unknown or not mapped): its NULL range's read.
    runnable: coltypes.ColumnType | None = None
    # closed_when_true: the library's partial index on exactly the waiting rows (pg-boss 12's
    # job_i11), whose reltuples is depth's figure above the cap (coltypes.ready_index).
    ready_index: coltypes.FlaggedPartial | None = None
    # open_when_null: the library's partial index on exactly the open rows (Que's que_poll_idx),
    # whose reltuples is depth's figure of them above the cap (coltypes.open_index).
    open_index: coltypes.NullPartial | None = None

    @property
    def table(self) -> str:
        """The quoted, schema-qualified table: a fragment, and the value catalog lookups bind."""
        return self.names["table"]

    @property
    def relations(self) -> list[str]:
        """The tables its collector statements read a lot of: the queue table, then its side table."""
        side = self.queue.times_from
        out = [self.table]
        if side is not None:
            out.append(quote_table(side.schema_ or schema_of(self.queue, self.dialect), side.table, self.dialect))
        return out

    @property
    def data_table(self) -> str | None:
        """The payload table, quoted (None without one)."""
        return self.names.get("data_table")

    def bind(self, values: Sequence[Any]) -> list[Any]:
        """Values compared with a column of the queue table (keys an operator picked, status values)."""
        return coltypes.bind_compared_values(values, self.dialect)


def compile_queue(queue: Queue, dialect: str, types: Types | None = None, limits: Limits = Limits()) -> CompiledQueue:
    """Compile ``queue`` for ``dialect``, its columns' catalog ``types`` (None: not read) and ``limits``."""
    known = types or {}
    status = coltypes.type_of(queue, "status_column", known, dialect) if queue.status_column else None
    runnable = coltypes.type_of(queue, "runnable_at", known, dialect) if queue.runnable_at else None
    problems = tuple(coltypes.problems(queue, known, dialect))
    names = fragments_for(queue, dialect)
    # Read-only views: one compiled mapping is shared by every statement of its queue (the runner
    # keeps it), so a reader that adds a fragment copies it first.
    return CompiledQueue(queue, dialect, limits, status, problems, MappingProxyType(names),
                         MappingProxyType(_fragments(queue, dialect, names, status, problems, limits, runnable)),
                         MappingProxyType(_values(queue, dialect, names, status, limits)),
                         tuple(coltypes.oldest_reads_partial(queue, status)) if dialect == "postgresql" else (),
                         runnable, coltypes.ready_index(queue, status) if dialect == "postgresql" else None,
                         coltypes.open_index(queue, known, dialect) if dialect == "postgresql" else None)


def block_chain(queue: Queue, has_block: Callable[[str], bool]) -> tuple[str, ...]:
    """The blocks a per-queue collector file is tried in for ``queue`` (``has_block``: whether the
    file has one), the first that renders with its fragments answering: its kind's, else
    ``<kind>_basic``, else ``any``. The collectors read by it, and the items drill-down reads the
    block oldest_age_s reads by, so the oldest-waiting list is read as the age is.

    A queue whose ``order`` is ``heap`` (the key says nothing about age) first tries ``<kind>_heap``;
    one whose times live in a side table (``times_from``) tries ``<kind>_side``.
    """
    heap = (f"{queue.kind}_heap",) if queue.order == "heap" else ()
    # Times read from a side table (times_from): a block that orders by key rather than by time.
    side = (f"{queue.kind}_side",) if queue.times_from is not None and not queue.enqueued_at else ()
    # An error column kept on a failed row (lease kind): a block that counts it apart, where the
    # dialect has one (SQL Server's depth lease_error; PostgreSQL's lease block estimates it).
    error = (f"{queue.kind}_error",) if queue.error_column else ()
    # age_from = "enqueued" (a due queue, PGMQ): oldest_age_s from the enqueue time, not the lateness.
    enqueued = (f"{queue.kind}_enqueued",) if queue.age_from == "enqueued" else ()
    # A skip read of the fetch index (oldest_age_s, coltypes.age_skip_reads), where the index allows one.
    skip = f"{queue.kind}_skip"
    chain: tuple[str, ...] = (*enqueued, *heap, *side, *error, skip, queue.kind, f"{queue.kind}_basic", "any")
    if queue.follows_readiness and has_block(f"{queue.kind}_follow"):
        # A mapping with readiness fields (runnable_at, max_attempts, lease_ready, ready_flag, ...)
        # is read by the blocks that follow them, and only by those: when none renders (a column
        # whose type cannot work dropped {free}), the metric is not collected rather than counted
        # as if those fields were not there.
        past = f"{queue.kind}_follow_past"
        runnable = (f"{queue.kind}_follow_runnable",) if queue.runnable_at else ()
        chain = ((past,) if queue.lease_ready == "past" and has_block(past)
                 else (*runnable, f"{queue.kind}_follow_skip", f"{queue.kind}_follow"))
    return chain


def render_first(sqlf: sqlfiles.SqlFile, c: CompiledQueue) -> tuple[str, sqlfiles.Statement] | None:
    """``(block, statement)``: the first block of :func:`block_chain` the file has and that renders
    with the queue's fragments; None if none applies."""
    for block in block_chain(c.queue, sqlf.has_block):
        if not sqlf.has_block(block):
            continue
        try:
            return block, sqlf.render(block, c.fragments, c.values)
        except sqlfiles.MissingFragment:
            continue  # the queue does not declare what this block needs: try the next one
    return None


def _fragments(queue: Queue, dialect: str, names: dict[str, str], status: coltypes.ColumnType | None,
               problems: Sequence[coltypes.TypeProblem], limits: Limits,
               runnable: coltypes.ColumnType | None = None) -> dict[str, str]:
    """The collector blocks' fragments, minus the columns whose real type cannot work (a
    non-timestamp time column, a watermark on a non-integer key): the blocks that need them do not
    apply, and the runner's mapping errors say why."""
    frags = {**names, **side_time_fragments(queue, dialect), **coltypes.queue_fragments(queue, status, dialect)}
    for problem in problems:
        for frag in problem.drops:
            frags.pop(frag, None)
    if "lease" not in frags:
        frags.pop("free", None)  # the readiness predicates name the lease column too
    frags.update(stuck_rule(queue, dialect, frags))
    if "runnable" in frags:
        frags["runnable_null_order"] = coltypes.runnable_null_order(queue, dialect, frags, runnable)
    if dialect == "postgresql" and all(k in frags for k in ("status", "status_type", "enqueued_at")):
        # oldest_age_s's skip read through a fetch index that puts (queue, priority) before the time.
        frags.update(coltypes.age_skip_reads(queue, status, frags, limits.cap))
    if dialect == "postgresql" and all(k in frags for k in ("status", "status_type", "runnable", "exhausted")):
        # depth's status_follow_runnable: each status value read through the index that serves it,
        # at most the cap of rows (issue 29, item 5).
        frags.update(coltypes.follow_runnable_reads(queue, status, frags, limits.cap, limits.small_pages))
        if "enqueued_at" in frags and "ready_list" in frags:
            frags.update(coltypes.oldest_runnable_reads(queue, status, frags, limits.cap, runnable))
    return frags


def _seconds(clock: str, seconds: float, dialect: str) -> str:
    """``clock`` moved by ``seconds`` (negative: earlier): a validated finite number from config
    (``lease_timeout_s``: above 0, at most a week; ``alive_s``: an integer), written as a literal so
    that the predicate it is part of is one fragment every statement inlines as it is."""
    if dialect == "postgresql":
        return f"{clock} {'-' if seconds < 0 else '+'} make_interval(secs => {abs(float(seconds))!r})"
    # The collectors' own DATEADD(SECOND, -CAST(:lease_timeout_s AS int), ...): whole seconds.
    return f"DATEADD(SECOND, {int(seconds)}, {clock})"


def stuck_rule(queue: Queue, dialect: str, frags: Mapping[str, str]) -> dict[str, str]:
    """The stuck rule of ``queue``, once: what ``stuck_leases`` counts and the drill-down lists.

    Why one place: the count (``sql/<dialect>/stuck_leases.sql``) and the list behind it
    (``items.sql``, block ``stuck_*``) used to spell the rule each on its own, and the list missed
    the library's own rules (procrastinate's worker heartbeat, pg-boss's ``expire_in``, Solid
    Queue's claims): an on-call engineer saw "stuck: 20" and a different list. Both now read these
    fragments, so they cannot disagree. Only the fragments the queue's mapping can fill are returned
    (a block that needs a missing one does not apply):

    ``{stuck_held}``  lease kind: the held items the count reads (in lease order, at most the cap):
                      leased, and not failed (``error_column``) nor exhausted (readiness fields)
    ``{stuck_if}``    lease and status kinds: whether one held item of ``{table}`` (un-aliased: the
                      worker and side-table reads name it) is stuck: its lease older than
                      lease_timeout_s (lease_ready = "past": set further ahead than that); a
                      processing item abandoned by its library's rule (``{worker_gone}``) or else
                      changed longer ago than lease_timeout_s, and not exhausted
    ``{held_note}``   lease kind: the oldest-lease note naming what the held items exclude
    ``{claim_gone}``  claims: whether the claim ``qo_claim`` is abandoned: its process ``qo_proc``
                      (LEFT JOINed) missing or silent for ``alive_s``, Solid Queue's own rule
    """
    pg = dialect == "postgresql"
    clock, timeout = frags["clock"], float(queue.lease_timeout_s)
    out: dict[str, str] = {}
    follow = queue.follows_readiness and all(k in frags for k in ("failed", "exhausted"))
    if queue.kind == "lease" and "lease" in frags and (follow or not queue.follows_readiness):
        lease = frags["lease"]
        if follow:
            out["stuck_held"] = f"{lease} IS NOT NULL AND NOT {frags['failed']} AND NOT {frags['exhausted']}"
            out["held_note"] = "'no leased item (failed and exhausted items excluded)'"
        elif "error" in frags:
            out["stuck_held"] = f"{lease} IS NOT NULL AND {frags['error']} IS NULL"
            out["held_note"] = "'no leased item (failed items excluded)'"
        else:
            out["stuck_held"] = f"{lease} IS NOT NULL"
            out["held_note"] = "'no leased item'"
        out["stuck_if"] = (f"({lease} > {_seconds(clock, timeout, dialect)})" if queue.lease_ready == "past"
                           else f"({lease} < {_seconds(clock, -timeout, dialect)})")
    elif queue.kind == "status" and "status_changed_at" in frags and "worker_gone" in frags and (
            "exhausted" in frags or not queue.follows_readiness):
        older = f"{frags['status_changed_at']} < {_seconds(clock, -timeout, dialect)}"
        rule = f"coalesce({frags['worker_gone']}, {older})" if pg else older
        if queue.follows_readiness:
            rule += f" AND NOT {frags['exhausted']}"
        out["stuck_if"] = f"({rule})"
    elif queue.claims is not None and pg and "heartbeat" in frags:
        hb = f"qo_proc.{frags['heartbeat']}"
        out["claim_gone"] = f"({hb} IS NULL OR {hb} <= {_seconds(clock, -int(frags['alive_s']), dialect)})"
    return out


def _values(queue: Queue, dialect: str, names: dict[str, str], status: coltypes.ColumnType | None,
            limits: Limits) -> dict[str, Any]:
    """Bound values every block may use (names of the queue, its table and columns are values here).

    Catalog lookups (``to_regclass``, ``pg_stats``, ``OBJECT_ID``) take names as *values*, so a
    hostile-looking name is data, never SQL text. With the status column's catalog type, status
    values are bound as it wants them (integers for an integer column, text for an enum or text
    column).
    """
    ready = coltypes.coerce_values(queue.ready_values, status)
    processing = coltypes.coerce_values(queue.processing_values, status)
    done = coltypes.coerce_values(queue.done_values, status)
    out = {
        "queue": queue.name,
        "qualified_table": names["table"],
        "schema_name": schema_of(queue, dialect),
        "table_name": queue.table,
        "key_name": queue.key,
        "status_name": queue.status_column or "",
        "lease_name": queue.lease_column or "",
        "due_name": queue.due_column or "",
        "error_name": queue.error_column or "",
        "runnable_name": queue.runnable_at or "",
        "ready_values": coltypes.bind_compared_values(ready, dialect),
        "processing_values": coltypes.bind_compared_values(processing, dialect),
        "done_values": coltypes.bind_compared_values(done, dialect),
        "ready_values_text": [str(v) for v in ready],
        "processing_values_text": [str(v) for v in processing],
        "done_values_text": [str(v) for v in done],
        "lease_timeout_s": float(queue.lease_timeout_s),
        "cap": limits.cap,
        # open_when_null: the live-row counter includes the finished rows, so never skip (NULL); the
        # same for a partition (the counter is every queue's of the table) and expired rows.
        "skip_above": (None if queue.open_when_null or queue.partition is not None or queue.expires_column
                       else limits.skip_above),
        "small_pages": limits.small_pages,
        "watermark_buffer": queue.watermark.buffer if queue.watermark else 0,
    }
    if queue.kind == "status":
        # watermark-reset: a processing item may come back (requeue, failure): keep it reachable too.
        out["pending_values"] = coltypes.bind_compared_values([*ready, *processing], dialect)
    return out
