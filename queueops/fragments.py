"""Turn a queue's config into the quoted SQL fragments its SQL files use.

This is the only place where names from config become SQL text, and every name goes through
:func:`queueops.identifiers.quote_ident`. A fragment a queue does not declare is simply absent,
so a block that needs it reports "not applicable" instead of running with a guess.
"""

from __future__ import annotations

from queueops import sqlfiles
from queueops.config import Queue
from queueops.identifiers import quote_ident, quote_table

_COLUMNS = {
    "key": "key",
    "enqueued_at": "enqueued_at",
    "status": "status_column",
    "status_changed_at": "status_changed_at",
    "lease": "lease_column",
    "error": "error_column",
    "attempts": "attempts_column",
    "due": "due_column",
    "push": "push_column",
    "pop": "pop_column",
    "refcount": "refcount_column",
    "runnable": "runnable_at",
    "owner": "owner_column",
    "flag": "ready_flag",
    "error_at": "error_at",
}


# A queue without ``schema`` is resolved explicitly in the engine's default schema, never by the
# login's default schema or search_path (the collector and action logins may differ).
DEFAULT_SCHEMA = {"postgresql": "public", "mssql": "dbo"}


def schema_of(queue: Queue, dialect: str) -> str:
    """The queue's schema, or the engine's default (``public`` / ``dbo``) when config names none."""
    return queue.schema_ or DEFAULT_SCHEMA[dialect]


def table_of(queue: Queue, dialect: str) -> str:
    """The queue table's quoted, always schema-qualified name."""
    return quote_table(schema_of(queue, dialect), queue.table, dialect)


def clock(queue: Queue, dialect: str) -> str:
    """``{clock}``: the database clock as this queue's time columns must be compared with (issue 29).

    A ``timestamp without time zone`` column has no zone: the library decides what it holds. Oban,
    GoodJob and Solid Queue write UTC wall-clock times (``timezone('UTC', now())``, Rails), a
    hand-rolled ``DEFAULT now()`` writes the session's local time. Compared with ``now()`` (a
    timestamptz), PostgreSQL reads the naive value in the *reading* session's TimeZone: right for the
    latter, off by the zone's offset for the former (Asia/Tokyo: every Oban job 9 h older, so live
    jobs stuck and released; America/New_York: GoodJob's due jobs 5 h ahead, depth 0).

    So a queue says what its naive columns hold (``naive_times``) and every statement compares them,
    and takes ages, against this expression instead of a bare ``now()``: ``(now() AT TIME ZONE
    'UTC')`` for ``"utc"`` (the UTC wall clock, a plain timestamp: same type as the column), ``now()``
    otherwise (today's reading). The clock side is converted, never the column, so each predicate
    stays an index condition (``col <= (now() AT TIME ZONE 'UTC')`` is a stable expression);
    actions bind cutoffs computed from the same expression (``sql/<dialect>/actions/session.sql``,
    block clock), naive when the clock is. The session's TimeZone is never set: it would break
    ``"server"`` tables read from the same connection. A timestamptz column is an instant and reads
    right against ``now()`` in any zone: it needs no ``naive_times`` (``coltypes.problems`` flags
    ``"utc"`` on one). SQL Server compares with ``SYSUTCDATETIME()`` always (naive datetime2 read as
    UTC; a datetimeoffset converts exactly).
    """
    if dialect != "postgresql":
        return "SYSUTCDATETIME()"
    return "(now() AT TIME ZONE 'UTC')" if queue.naive_times == "utc" else "now()"


def fragments_for(queue: Queue, dialect: str) -> dict[str, str]:
    """Quoted identifiers (and validated integers) for ``queue``'s SQL blocks."""
    schema = schema_of(queue, dialect)
    frags: dict[str, str] = {"table": quote_table(schema, queue.table, dialect), "clock": clock(queue, dialect)}
    for frag, attr in _COLUMNS.items():
        value = getattr(queue, attr)
        if value:
            frags[frag] = quote_ident(value, dialect)
    if queue.data_table and queue.data_key:
        frags["data_table"] = quote_table(schema, queue.data_table, dialect)
        frags["data_key"] = quote_ident(queue.data_key, dialect)
    if queue.sequence_table:
        frags["seq_table"] = quote_table(schema, queue.sequence_table, dialect)
    if queue.capacity:
        frags["capacity"] = str(int(queue.capacity))
    # {worker_gone} (stuck_leases' status blocks, issue 29): whether the item is abandoned by its
    # library's own rule rather than by its age: with heartbeat_from, no worker row vouches for it
    # (missing, or its heartbeat at least alive_s old, a validated integer); with timeout_column,
    # its own limit has passed since status_changed_at (pg-boss: started_on + expire_in). Without
    # either NULL, and the item's status-change age against lease_timeout_s decides.
    # With row_heartbeat (pg-boss 12), also stuck once its own heartbeat is older than its own limit;
    # an item without a limit sends no heartbeats (NULL: the rest of the rule decides). timeout_unit
    # "seconds": the limit is a whole number of seconds (pg-boss 11 and 12's expire_seconds).
    frags["worker_gone"] = "NULL::boolean" if dialect == "postgresql" else "NULL"
    pg = dialect == "postgresql"
    lost = None
    if queue.row_heartbeat is not None and pg:
        beat, limit = (quote_ident(queue.row_heartbeat.column, dialect),
                       quote_ident(queue.row_heartbeat.seconds_column, dialect))
        lost = f"(CASE WHEN {limit} IS NOT NULL THEN {beat} + {limit} * interval '1 second' < {frags['clock']} END)"
        frags["worker_gone"] = lost
    if queue.timeout_column and queue.status_changed_at and pg:
        limit = quote_ident(queue.timeout_column, dialect)
        if queue.timeout_unit == "seconds":
            limit = f"{limit} * interval '1 second'"
        timed_out = f"({quote_ident(queue.status_changed_at, dialect)} + {limit} < {frags['clock']})"
        frags["worker_gone"] = timed_out if lost is None else f"({timed_out} OR coalesce({lost}, false))"
    if queue.heartbeat_from and dialect == "postgresql":
        hb = queue.heartbeat_from
        names = {"hb_table": quote_table(hb.schema_ or schema, hb.table, dialect),
                 "hb_key": quote_ident(hb.key, dialect), "hb_column": quote_ident(hb.column, dialect),
                 "outer_ref": f"{quote_ident(queue.table, dialect)}.{quote_ident(hb.ref, dialect)}",
                 "clock": frags["clock"], "alive_s": str(int(hb.alive_s))}
        # Inlined into another statement's render, which escapes '%' itself (as side_time_fragments).
        frags["worker_gone"] = sqlfiles.load(dialect, "fragments/heartbeat").render("gone", names).sql.strip() \
            .replace("%%", "%")
    if queue.claims:
        # Claims in another table (Solid Queue's claimed executions), judged by their process's
        # heartbeat: stuck_leases.sql, block delete. alive_s is a validated integer.
        cl = queue.claims
        frags["claims_table"] = quote_table(cl.schema_ or schema, cl.table, dialect)
        frags["claims_process"] = quote_ident(cl.process_column, dialect)
        frags["claims_at"] = quote_ident(cl.claimed_at, dialect)
        frags["process_table"] = quote_table(cl.schema_ or schema, cl.process_table, dialect)
        frags["process_key"] = quote_ident(cl.process_key, dialect)
        frags["heartbeat"] = quote_ident(cl.heartbeat_column, dialect)
        frags["alive_s"] = str(int(cl.alive_s))
        if cl.item_column:
            frags["claims_item"] = quote_ident(cl.item_column, dialect)
    # Always present (empty without open_when_null), so a block reads the same for every queue:
    # ``WHERE ...{open_and}`` adds `` AND "c" IS NULL ...``, ``FROM {table}{open_where}`` a WHERE.
    closed = [f"NOT {quote_ident(c, dialect)}" if dialect == "postgresql" else f"{quote_ident(c, dialect)} = 0"
              for c in queue.closed_when_true]
    open_cond = " AND ".join([f"{quote_ident(c, dialect)} IS NULL" for c in queue.open_when_null] + closed
                             + queue_filters(queue, dialect))
    frags["open_and"] = f" AND {open_cond}" if open_cond else ""
    # advisory_lock (Que): the keys locked now, as Que's own job_stats reads them from pg_locks, in
    # this database and as pg_try_advisory_lock(bigint) takes them (objsubid 1). pg_locks is read
    # once per statement (a hashed subplan), however many items the count reads.
    locked = ("SELECT (qo_lk.classid::bigint << 32) + qo_lk.objid::bigint FROM pg_catalog.pg_locks AS qo_lk "
              "WHERE qo_lk.locktype = 'advisory' AND qo_lk.objsubid = 1 AND qo_lk.granted AND qo_lk.database = "
              "(SELECT qo_db.oid FROM pg_catalog.pg_database AS qo_db WHERE qo_db.datname = current_database())")
    advisory = queue.advisory_lock and dialect == "postgresql"
    # The open items locked now: a count of at most the advisory locks held (each a key lookup).
    frags["locked_open"] = (f"(SELECT count(*) FROM {frags['table']} WHERE "  # noqa: S608 - quoted names
                            f"{quote_ident(queue.key, dialect)} IN ({locked}){frags['open_and']})" if advisory else "0")
    frags["unlocked_and"] = f" AND {quote_ident(queue.key, dialect)} NOT IN ({locked})" if advisory else ""
    frags["open_where"] = f" WHERE {open_cond}" if open_cond else ""
    # The order a count of all rows reads in: the key, except for a due queue whose key says nothing
    # about age (order = "heap", GoodJob's UUID): there the due column's index, which the ready count
    # already reads (and which, partial on the open rows, matches {open_where}), counts them too.
    if queue.kind == "due" and queue.order == "heap" and queue.due_column:
        frags["count_order"] = quote_ident(queue.due_column, dialect)
    else:
        frags["count_order"] = quote_ident(queue.key, dialect)
    if queue.watermark:
        wm = queue.watermark
        frags["wm_table"] = quote_table(wm.schema_ or schema, wm.table, dialect)
        frags["wm_column"] = quote_ident(wm.column, dialect)
    frags.update(readiness_fragments(queue, dialect))
    return frags


def literal(value: int | str, dialect: str) -> str:
    """A partition value as SQL text: a validated integer, or a plain name (config refuses anything
    else) as a string literal, quotes doubled all the same (N'...' on SQL Server: nvarchar, which
    an nvarchar column such as Hangfire's JobQueue.Queue seeks; a varchar column converts it)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"not a partition value: {value!r}")
    if isinstance(value, int):
        return str(int(value))
    text = "'" + value.replace("'", "''") + "'"
    return f"N{text}" if dialect == "mssql" else text


def queue_filters(queue: Queue, dialect: str) -> list[str]:
    """The predicates that make a table's rows this queue's (issue 33), folded into ``{open_and}`` /
    ``{open_where}`` so that every per-queue statement of every collector and action reads them:
    ``partition`` (``[QueueId] = 7``) and ``expires_column`` (not yet expired; NULL never expires)."""
    out = []
    if queue.partition is not None:
        out.append(f"{quote_ident(queue.partition.column, dialect)} = {literal(queue.partition.value, dialect)}")
    if queue.expires_column:
        col = quote_ident(queue.expires_column, dialect)
        out.append(f"({col} IS NULL OR {col} > {clock(queue, dialect)})")
    return out


def readiness_fragments(queue: Queue, dialect: str) -> dict[str, str]:
    """The predicates of a lease or status queue that maps readiness fields (issue 31), for the
    ``*_follow`` blocks; none for any other queue, so those blocks do not apply to it.

    ``{free}``       an item no consumer holds and the library may take (lease_ready, ready_flag);
                     a scheduled (runnable_at) or exhausted item is told apart by the blocks
    ``{exhausted}``  a predicate: its attempts reached max_attempts (never unknown: a NULL count or
                     limit is not exhausted); ``{exhausted_next}`` the same one attempt on (the
                     release with --bump-attempts)
    ``{failed}``     a predicate: its error column marks it failed: set, and not older than its lease
                     when error_at says when it was written (a lease newer than the error: running)
    ``{release_set}``  requeue's SET list: every column that decides readiness made ready;
                     ``{release_cols}`` those columns (SQL Server's updatable CTE selects them);
                     ``{bump_set}`` / ``{bump_col}`` the attempt added with --bump-attempts;
                     ``{owner_set}`` / ``{owner_col}`` owner_column cleared (status queues)
    """
    if not queue.follows_readiness or not (queue.kind == "lease" and queue.lease_column
                                           or queue.kind == "status" and queue.status_column
                                           or queue.kind == "due" and queue.due_column):
        return {}
    q = lambda col: quote_ident(col, dialect)  # noqa: E731
    pg = dialect == "postgresql"
    now, (true, false) = clock(queue, dialect), (("true", "false") if pg else ("1", "(1 = 0)"))
    out = {"exhausted": false, "exhausted_next": false, "failed": false, "bump_set": "", "bump_col": ""}
    # {exact_note}: an exact stuck count's note names the exclusion only where there is one (a
    # runnable_at alone sends procrastinate's and pgqueuer's reads here, with no max_attempts).
    out["exact_note"] = "'exact'"
    # A status queue (its readiness is its status values): {exhausted} and {owner_set} / {owner_col}
    # (requeue's status blocks write the status themselves, bound as a value).
    owner = q(queue.owner_column) if queue.owner_column else ""
    out["owner_set"] = f", {owner} = NULL" if owner else ""
    out["owner_col"] = f", {owner}" if owner else ""
    lease = q(queue.lease_column) if queue.lease_column else ""
    if queue.kind == "lease":
        free = f"{lease} IS NULL" if queue.lease_ready == "null" else f"({lease} IS NULL OR {lease} <= {now})"
        if queue.ready_flag:
            free += f" AND {q(queue.ready_flag)}" if pg else f" AND {q(queue.ready_flag)} = 1"
        out["free"] = free
    if queue.max_attempts is not None and queue.attempts_column:
        limit = q(queue.max_attempts) if isinstance(queue.max_attempts, str) else str(int(queue.max_attempts))
        attempts = q(queue.attempts_column)
        out["max_attempts"] = limit

        def reached(expr: str) -> str:
            # T-SQL has no boolean values: the CASE makes an unknown comparison (a NULL) false.
            return (f"coalesce({expr} >= {limit}, false)" if pg
                    else f"(CASE WHEN {expr} >= {limit} THEN 1 ELSE 0 END = 1)")
        out["exhausted"], out["exhausted_next"] = reached(attempts), reached(f"{attempts} + 1")
        out["exact_note"] = "'exact (items at max_attempts excluded)'"
    if queue.attempts_column:
        attempts = q(queue.attempts_column)
        out["bump_set"] = f", {attempts} = {'t.' if pg else ''}{attempts} + 1"
        out["bump_col"] = f", {attempts}"
    if queue.kind != "lease":
        return out
    if queue.error_column:
        error = q(queue.error_column)
        out["failed"] = (f"({error} IS NOT NULL AND ({q(queue.error_at)} IS NULL OR {lease} <= {q(queue.error_at)}))"
                         if queue.error_at else f"({error} IS NOT NULL)")
    release = {lease: "NULL" if queue.lease_ready == "null" else now}
    if queue.owner_column:
        release[q(queue.owner_column)] = "NULL"
    if queue.ready_flag:
        release[q(queue.ready_flag)] = true
    out["release_set"] = ", ".join(f"{col} = {value}" for col, value in release.items())
    out["release_cols"] = ", ".join(release)
    return out


def side_time_fragments(queue: Queue, dialect: str) -> dict[str, str]:
    """``{enqueued_at}`` / ``{status_changed_at}`` read from ``times_from`` where the row has no such column.

    For the collectors' reads only (an action that sets a time needs a real column). Each is the
    correlated subquery of ``sql/<dialect>/fragments/side_time.sql``: the earliest side time is the
    enqueue time, the latest the last status change (procrastinate: 'deferred' first, 'started'
    last for a running job; the rule of its own select_stalled_jobs_by_started).
    """
    side = queue.times_from
    if side is None:
        return {}
    names = {"side_table": quote_table(side.schema_ or schema_of(queue, dialect), side.table, dialect),
             "side_key": quote_ident(side.key, dialect), "side_column": quote_ident(side.column, dialect),
             "outer_ref": f"{quote_ident(queue.table, dialect)}.{quote_ident(side.ref or queue.key, dialect)}",
             # times_from.only: the side rows of one kind (Hangfire's State rows named 'Enqueued').
             "side_and": (f" AND qo_side.{quote_ident(side.only.column, dialect)} = {literal(side.only.value, dialect)}"
                          if side.only else "")}
    sqlf = sqlfiles.load(dialect, "fragments/side_time")

    def text(block: str) -> str:
        # A fragment is inlined into another statement's render, which escapes '%' for psycopg
        # itself: undo this render's escaping (the block binds no value) so it is not done twice.
        sql = sqlf.render(block, names).sql.strip()
        return sql.replace("%%", "%") if sqlfiles.PARAMSTYLE[dialect] == "pyformat" else sql

    out: dict[str, str] = {}
    if not queue.enqueued_at:
        out["enqueued_at"] = text("last" if side.latest else "first")
    if not queue.status_changed_at and queue.kind == "status":
        out["status_changed_at"] = text("last")
    return out

