"""Run collectors against a target: one round trip per collector, whatever the number of queues.

The runner is the thin adapter between SQL files and snapshot rows. It never lets one failing
collector stop the others: a failure or a timeout becomes a :class:`~queueops.rows.StatusRow`
with the (masked) error, and the next collector runs.

Each collector is its own short statement on an autocommit connection (PostgreSQL) or with
autocommit and READ UNCOMMITTED (SQL Server). A statement cancelled by ``lock_timeout`` or
``statement_timeout`` ends only that statement: there is no open transaction to poison, so the
next collector runs on the same connection at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from collectors.counters import CounterRates
from collectors.registry import COLLECTORS, Collector
from queueops import catalog, coltypes, engine, mapping, presets, sessions, sqlfiles
from queueops.config import Config, Queue, Target
from queueops.rows import SnapshotRow, StatusRow, utcnow

# The count limits (queueops.mapping says why each is what it is); module attributes here, read at
# every compile, because a benchmark moves COUNT_SKIP_ABOVE out of reach.
COUNT_CAP = mapping.COUNT_CAP
COUNT_SKIP_ABOVE = mapping.COUNT_SKIP_ABOVE
SMALL_TABLE_PAGES = mapping.SMALL_TABLE_PAGES


@dataclass
class CycleResult:
    rows: list[SnapshotRow] = field(default_factory=list)
    status: list[StatusRow] = field(default_factory=list)
    round_trips: int = 0


Types = mapping.Types


def compiled(queue: Queue, dialect: str, types: Types | None = None) -> mapping.CompiledQueue:
    """``queue`` compiled for ``dialect``, ``types`` and the current count limits, once per
    (queue, types snapshot): the same objects give the same compiled mapping (kept like the
    statements, by the objects themselves)."""
    limits = mapping.Limits(COUNT_CAP, COUNT_SKIP_ABOVE, SMALL_TABLE_PAGES)
    key = (id(queue), dialect, id(types), limits)
    return _memo(key, (queue, types), lambda: [mapping.compile_queue(queue, dialect, types, limits)],
                 _COMPILED, _COMPILED_MAX)[0]


def uncollected(target: Target, queue: Queue, metrics: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Of ``metrics``, each one whose queue collectors all have no block for this queue's mapping
    (``queueops sql`` says "not collected"), with their names: no row of it will ever be read, so
    a level on it never judges anything. Target-wide metrics, and those the runner writes itself,
    are not queue collectors' and are left out. A block that applies may still not emit every
    metric its file can (a kind's own counts), so this finds the certain holes only."""
    out: dict[str, tuple[str, ...]] = {}
    for metric in metrics:
        entry = catalog.get(metric)
        if entry is None or entry.source != "sql":
            continue
        mine = [c for c in COLLECTORS if c.name in entry.collectors and c.scope == "queue"]
        if mine and not any(build_statements(c, target, [queue]) for c in mine):
            out[metric] = tuple(c.name for c in mine)
    return out


def target_lists(queues: Sequence[mapping.CompiledQueue]) -> dict[str, list[str]]:
    """Every queue of a target as aligned lists of bound values (for ``all`` and ``prelude`` blocks)."""
    vals = [c.values for c in queues]
    return {
        "queue_names": [v["queue"] for v in vals],
        "queue_tables": [v["qualified_table"] for v in vals],
        "schema_names": [v["schema_name"] for v in vals],
        "table_names": [v["table_name"] for v in vals],
        "key_names": [v["key_name"] for v in vals],
        "status_names": [v["status_name"] for v in vals],
        "lease_names": [v["lease_name"] for v in vals],
        "due_names": [v["due_name"] for v in vals],
        "error_names": [v["error_name"] for v in vals],
        # What each queue's naive times hold: 'UTC' or '' (the session's zone); see fragments.clock.
        "naive_zones": ["UTC" if c.queue.naive_times == "utc" and c.dialect == "postgresql" else "" for c in queues],
        # open_when_null: the library's partial index on exactly the open rows, as the catalog
        # types found it (mapping.CompiledQueue.open_index): its copies, one a line, whose
        # reltuples depth's estimate reads (issue 29; '' without one).
        "open_indexes": ["\n".join(c.open_index.copies) if c.open_index else "" for c in queues],
        # closed_when_true's columns, one a line: depth's estimates leave their share out (pg-boss 12).
        "closed_names": ["\n".join(c.queue.closed_when_true) for c in queues],
        # A status queue's values as text, each list a JSON array (a status value may hold any
        # text): depth's prelude reads their shares from the status column's most common values.
        "ready_texts": [json.dumps(list(c.values["ready_values_text"])) for c in queues],
        "processing_texts": [json.dumps(list(c.values["processing_values_text"])) for c in queues],
        "done_texts": [json.dumps(list(c.values["done_values_text"])) for c in queues],
        # closed_when_true: the library's partial index on exactly the waiting rows, as the
        # catalog types found it (mapping.CompiledQueue.ready_index): its copies, one a line, whose
        # reltuples depth sums above the cap, and the predicate that finds it on a partition made
        # since ('' without one, or when the types were not read).
        "ready_indexes": ["\n".join(c.ready_index.copies) if c.ready_index else "" for c in queues],
        "ready_predicates": [c.ready_index.predicate if c.ready_index else "" for c in queues],
        # A lease queue's free items, for the share depth estimates above the cap: its ready_flag
        # ('' without one), and whether a free item's lease is NULL ('null'; '' for a lock-until
        # lease, "past", whose expired locks no statistic tells apart from held ones).
        "flag_names": [c.queue.ready_flag or "" for c in queues],
        "lease_free": ["null" if c.queue.kind == "lease" and c.queue.lease_ready == "null" else "" for c in queues],
    }


def _render_queue(sqlf: sqlfiles.SqlFile, c: mapping.CompiledQueue) -> sqlfiles.Statement | None:
    """The statement of this queue's block (:func:`queueops.mapping.render_first`); None if none applies."""
    first = mapping.render_first(sqlf, c)
    return None if first is None else first[1]


def has_pvs(server: dict[str, Any] | None) -> bool:
    """Whether a SQL Server has sys.dm_tran_persistent_version_store_stats (accelerated database
    recovery's persistent version store): SQL Server 2019 (major 15) on, Azure SQL Database (engine
    edition 5) and Managed Instance (8). Unknown (None): not assumed."""
    if not server:
        return False
    major, edition = server.get("major_version"), server.get("engine_edition")
    return (major is not None and int(major) >= 15) or edition in (5, 8)


def target_block(sqlf: sqlfiles.SqlFile, server: dict[str, Any] | None) -> str:
    """A target collector's block: ``main``, or ``main_pvs`` on a server that has the persistent
    version store (a statement naming a view the server lacks would not compile at all)."""
    return "main_pvs" if sqlf.has_block("main_pvs") and has_pvs(server) else "main"


def build_statement(collector: Collector, target: Target, queues: Sequence[Queue],
                    types: Types | None = None, server: dict[str, Any] | None = None) -> sqlfiles.Statement | None:
    """The single statement that answers ``collector`` for every applicable queue of a target."""
    sqlf = sqlfiles.load(target.dialect, collector.name)
    if collector.scope == "target":
        return sqlf.render(target_block(sqlf, server), {}, {"target": target.name})
    if sqlf.has_block("all"):
        # One statement over every queue at once (e.g. one read of pg_locks for all tables).
        if not queues:
            return None
        return sqlf.render("all", {}, target_lists([compiled(q, target.dialect) for q in queues]))
    parts = [s for q in queues if (s := _render_queue(sqlf, compiled(q, target.dialect, types))) is not None]
    joined = sqlfiles.union_all(parts, collector.name)
    if joined is None or not sqlf.has_block("prelude"):
        return joined
    # A 'prelude' block (a WITH clause) does the catalog and statistics lookups for every queue
    # of the target once; the per-queue blocks read its rows by queue name. Planning those
    # lookups once instead of once per queue is most of a 100-queue cycle's cost.
    values = {**target_lists([compiled(q, target.dialect, types) for q in queues]), "cap": COUNT_CAP,
              "small_pages": SMALL_TABLE_PAGES}
    return sqlf.render("prelude", {}, values) + joined


# SQL Server refuses a statement with more than 2,100 parameters (about 100 status queues in one
# UNION ALL); stay well under it.
MSSQL_MAX_PARAMS = 2_000


def build_statements(collector: Collector, target: Target, queues: Sequence[Queue],
                     types: Types | None = None, server: dict[str, Any] | None = None) -> list[sqlfiles.Statement]:
    """The statements that answer ``collector`` for every queue of a target: one, unless on SQL Server
    the queues' parameters exceed the limit, then the queues are halved until each part fits."""
    stmt = build_statement(collector, target, queues, types, server)
    if stmt is None:
        return []
    if target.dialect != "mssql" or len(stmt.params) <= MSSQL_MAX_PARAMS or len(queues) < 2 \
            or collector.scope == "target":
        return [stmt]
    half = len(queues) // 2
    return (build_statements(collector, target, queues[:half], types)
            + build_statements(collector, target, queues[half:], types))


# Rendering a 100-queue target's statements (checking and quoting every identifier, each queue's
# fragments and block) took ~60 ms of Python per cycle (benchmarks/collect_cycle.py), for the same
# text every time. They are kept per collector, target, queues and column types, by the objects
# themselves: a reloaded config or a re-read catalog is a new object and so a new entry. The entry
# holds those objects, so their ids cannot be reused while it lives. The count limits are part of
# the key (a benchmark moves them). The plan check's statement and the mapping's problems are kept
# the same way (:func:`check_plans`, :func:`mapping_errors`): 13 entries per target and queue set.
_BUILT: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], list[Any]]] = OrderedDict()
_BUILT_MAX = 256
_BUILT_LOCK = threading.Lock()
# The compiled mappings, kept the same way (a target's queues, with and without its types).
_COMPILED: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], list[Any]]] = OrderedDict()
_COMPILED_MAX = 4096


def cached_statements(collector: Collector, target: Target, queues: Sequence[Queue],
                      types: Types | None = None, server: dict[str, Any] | None = None) -> list[sqlfiles.Statement]:
    """:func:`build_statements`, rendered once for the same collector, target, queues and types."""
    key = (collector.name, id(target), tuple(map(id, queues)), id(types), COUNT_CAP, COUNT_SKIP_ABOVE,
           SMALL_TABLE_PAGES, has_pvs(server))
    return _memo(key, (collector, target, tuple(queues), types),
                 lambda: build_statements(collector, target, queues, types, server))


def _memo(key: tuple[Any, ...], refs: tuple[Any, ...], build: Callable[[], list[Any]],
          cache: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], list[Any]]] = _BUILT,
          limit: int = _BUILT_MAX) -> list[Any]:
    """``build()``, once per ``key`` in ``cache`` (at most ``limit`` entries, the oldest dropped).
    The entry holds ``refs`` (the objects whose ids are in the key), so a key never matches another
    object that reused a freed one's address."""
    with _BUILT_LOCK:
        hit = cache.get(key)
        if hit is not None:
            cache.move_to_end(key)
            return list(hit[1])
    stmts = build()
    with _BUILT_LOCK:
        cache[key] = (refs, stmts)
        while len(cache) > limit:
            cache.popitem(last=False)
    return list(stmts)


# A connection that keeps its plans (the collector service's, open for many cycles) makes them
# again when a table's rows (live + dead, from the statistics counters) moved by this factor or
# more since they were made, once the larger side has REPLAN_MIN_ROWS rows (below that, any plan
# reads little).
REPLAN_FACTOR = 2.0
REPLAN_MIN_ROWS = 1_000


def keep_plans(conn: engine.Connection) -> None:
    """Set up a long-lived collector session (instead of :func:`queueops.sessions.reading`) whose statements
    are kept prepared and run with generic plans.

    Why: planning and parsing the batched statements was about half of a 100-queue cycle on
    PostgreSQL (benchmarks/collect_cycle.py), the same work every cycle for the same text. Made
    once on a long-lived connection, the plans are reused; :func:`check_plans` drops them when a
    table's size moved enough to change the plan (a plan made on an empty table reads it whole
    once it fills), and PostgreSQL itself re-plans after an ANALYZE or DDL on the table. SQL Server
    caches parameterised plans by itself: nothing to do there. A connection opened for one cycle
    (the console's own collection) keeps nothing: there is nothing to reuse.
    """
    rows = conn.execute(sessions.reading(conn.target, kept_plans=True))  # the session setup, generic plans
    conn.server = rows[0] if rows else None
    conn.keep_prepared()


def plan_relations(queues: Sequence[Queue], dialect: str) -> list[str]:
    """Every table the queues' statements read a lot of: the queue tables and their side tables."""
    compiled_queues = [compiled(q, dialect) for q in queues]
    out = [c.table for c in compiled_queues] + [rel for c in compiled_queues for rel in c.relations[1:]]
    return list(dict.fromkeys(out))


def replan_needed(made: dict[str, float], now: dict[str, float]) -> bool:
    """Whether a table's rows moved enough since the plans were made (see :data:`REPLAN_FACTOR`)."""
    if made.keys() != now.keys():
        return True
    for rel, then in made.items():
        big, small = max(then, now[rel]), min(then, now[rel])
        if big >= REPLAN_MIN_ROWS and big >= REPLAN_FACTOR * small:
            return True
    return False


def check_plans(target: Target, queues: Sequence[Queue], conn: engine.Connection, result: CycleResult) -> None:
    """Before a cycle on a connection that keeps its plans: drop them if a table's size moved."""
    if conn.kept_plans is None or not queues:
        return
    stmt = _memo(("(plan_rows)", id(target), tuple(map(id, queues))), (target, tuple(queues)), lambda: [
        sqlfiles.load(target.dialect, "plan_rows").render("main", {}, {"relations": plan_relations(queues, target.dialect)})
    ])[0]
    result.round_trips += 1
    try:
        now = {str(r["relation"]): float(r["tuples"]) for r in conn.execute(stmt)}
    except engine.TargetError:
        now = {}  # unknown: plan again from what the server knows now
    if conn.kept_plans and not replan_needed(conn.kept_plans, now):
        return
    if conn.kept_plans:
        try:
            conn.forget_prepared()
        except engine.TargetError:  # a dead connection: the cycle's statements fail and say why
            return
    conn.kept_plans = now


def _to_rows(raw: Iterable[dict[str, Any]], ts: datetime, target: str, database: str) -> list[SnapshotRow]:
    out = []
    for r in raw:
        value = r.get("value")
        out.append(SnapshotRow(ts, target, database, r.get("queue") or "", str(r["metric"]),
                               None if value is None else float(value), str(r.get("note") or "")))
    return out


def run_collectors(cfg: Config, target: Target, collectors: Sequence[Collector] | None = None,
                   conn: engine.Connection | None = None, ts: datetime | None = None,
                   rates: CounterRates | None = None) -> CycleResult:
    """Run ``collectors`` (default: all) for one target; never raises for a database problem.

    With ``rates`` (a :class:`~collectors.counters.CounterRates` kept by the caller across
    cycles), every cumulative ``*_total`` row also yields its ``*_per_s`` rate row.
    """
    collectors = list(collectors or COLLECTORS)
    ts = ts or utcnow()
    result = CycleResult()
    base = cfg.base_dir
    queues = cfg.queues_of(target.name)
    own = conn is None
    try:
        database = engine.database_name(target, base)
        if conn is None:
            conn = engine.connect(target, "collect", base)
            rows = conn.execute(sessions.reading(target))
            conn.server = rows[0] if rows else None
            result.round_trips += 1
    except Exception as exc:  # noqa: BLE001 - an unreachable target is data, not a crash
        err = engine.TargetError(target.name, str(exc)) if not isinstance(exc, engine.TargetError) else exc
        for c in collectors:
            result.status.append(StatusRow(ts, target.name, c.name, False, 0.0, 0, str(err)))
        return result
    try:
        types: Types = {}
        if queues and any(c.scope == "queue" for c in collectors):
            types = _catalog_types(target, queues, conn, result)
            errors = mapping_errors(target, queues, types, ts, database)
            if errors and _types_age(target, queues) > TYPES_RECHECK_S:
                # Types kept from an earlier cycle judged the mapping wrong: the table may have been
                # migrated since (a status column made an enum, a table recreated), and no statement
                # ran to fail and drop them. Read them again before saying so: a stale type reported,
                # for up to TYPES_TTL_S, a mapping error the table no longer had, and nothing was
                # collected for the queue.
                forget_types(target.name)
                types = _catalog_types(target, queues, conn, result)
                errors = mapping_errors(target, queues, types, ts, database)
            result.rows.extend(errors)
            check_plans(target, queues, conn, result)
        for c in collectors:
            result.round_trips += _run_one(c, target, queues, conn, ts, database, result, types)
    finally:
        if own and conn is not None:
            conn.close()
    # The console's own probes are the lock-timeout counter PostgreSQL does not have: how many
    # collector statements of this cycle were cancelled by lock_timeout / statement_timeout. A
    # metric of the lock_timeouts collector, so only when its statement reached the server (it
    # answered, or was itself cut by a timeout): in a cycle whose collection failed (the
    # connection died, the server went away) a 0 here would be a value invented by an outage.
    if any(s.collector == "lock_timeouts" and (s.ok or s.timeout) for s in result.status):
        timeouts = sum(1 for s in result.status if s.timeout)
        result.rows.append(SnapshotRow(ts, target.name, database, "", "probe_lock_timeouts", float(timeouts),
                                       "collector statements cancelled by a timeout this cycle"))
    result.rows[:] = mark_unavailable(result.rows, queues)
    if rates is not None:
        result.rows.extend(rates.derive(result.rows))
    return result


UNAVAILABLE = "not available ({preset} preset): {reason}"


def mark_unavailable(rows: list[SnapshotRow], queues: Sequence[Queue]) -> list[SnapshotRow]:
    """``rows`` with each metric a queue's preset marks unavailable (its ``[unavailable]``) turned
    into "not available": no value, the preset's reason as the note. The mapping still emits a row
    (the SQL cannot know the library), and a figure there would read as a measurement."""
    marked = {q.name: (q.preset, presets.unavailable(q.preset)) for q in queues if q.preset}
    if not any(m for _, m in marked.values()):
        return rows
    out = []
    for r in rows:
        preset, metrics = marked.get(r.queue, (None, {}))
        reason = metrics.get(r.metric)
        out.append(r if reason is None else
                   replace(r, value=None, note=UNAVAILABLE.format(preset=preset, reason=reason)))
    return out


def _run_one(c: Collector, target: Target, queues: Sequence[Queue], conn: engine.Connection,
             ts: datetime, database: str, result: CycleResult, types: Types | None = None) -> int:
    """Run one collector into ``result``; return the round trips it took (1 normally, 0 if nothing applies,
    more only on SQL Server past its parameter limit).

    A queue-scoped statement that fails (not by a timeout) is run again queue by queue, so that one
    missing, renamed or unreadable table becomes a ``queue_error`` row for that queue alone and
    every other queue of the target keeps its metrics (see :func:`_isolate`).
    """
    started = time.perf_counter()
    trips = 0
    if c.name in PER_QUEUE and c.scope == "queue" and len(queues) > 1:
        # Physical-stats reads: one statement (and one statement timeout) per queue, so that one
        # large table cannot spend the budget of every other queue's (issue 33, item 3).
        return _isolate(c, target, queues, conn, ts, database, result, started, types)
    try:
        raw: list[dict[str, Any]] = []
        for stmt in cached_statements(c, target, queues, types, getattr(conn, "server", None)):
            trips += 1
            raw += conn.execute(stmt)
        rows = _to_rows(raw, ts, target.name, database)
        result.rows.extend(rows)
        result.status.append(StatusRow(ts, target.name, c.name, True, (time.perf_counter() - started) * 1000,
                                       len(rows)))
    except engine.TargetError as exc:
        forget_types(target.name)  # a table renamed, dropped or altered: read the catalog again next time
        # A timeout too is run again queue by queue (issue 33, item 3): one slow table must not
        # blank the collector for every queue of the target.
        if c.scope == "queue" and len(queues) > 1 and _connection_alive(conn):
            return trips + _isolate(c, target, queues, conn, ts, database, result, started, types)
        result.status.append(StatusRow(ts, target.name, c.name, False, (time.perf_counter() - started) * 1000,
                                       0, str(exc), exc.timeout))
    except Exception as exc:  # noqa: BLE001 - a bug in one collector must not hide the others' rows
        msg = engine.TargetError(target.name, f"{type(exc).__name__}: {exc}")
        result.status.append(StatusRow(ts, target.name, c.name, False, (time.perf_counter() - started) * 1000,
                                       0, str(msg)))
    return trips


QUEUE_ERROR = "queue_error"
# Collectors whose statement reads pages (sys.dm_db_index_physical_stats, pgstattuple): always run
# one queue at a time, each under its own statement timeout.
PER_QUEUE = frozenset({"ghost_records", "fragmentation_pct"})
# After this many queues in a row cut by a timeout, the rest of the target is not tried this cycle:
# the server is slow as a whole, and each further try would spend a whole statement timeout.
TIMEOUTS_IN_A_ROW = 2


def first_line(error: str) -> str:
    """The reason of a driver error without the driver's LINE / caret / HINT lines."""
    return error.strip().splitlines()[0] if error.strip() else error


def _connection_alive(conn: engine.Connection) -> bool:
    """False when the driver says the connection is gone (psycopg); re-running per queue would be futile."""
    return not conn.driver_says_broken()


def _isolate(c: Collector, target: Target, queues: Sequence[Queue], conn: engine.Connection, ts: datetime,
             database: str, result: CycleResult, started: float, types: Types | None = None) -> int:
    """Run ``c`` once per queue after the joined statement failed; return the round trips taken.

    Why: the joined statement names every queue's table, so one absent or unreadable table fails
    it for all. Queue by queue, the healthy ones still answer and the broken one gets a
    ``queue_error`` row (value 1) whose note is the engine's own reason. The collector's status
    row is ok when at least one queue answered (its error lists the failed queues); it fails only
    when every queue failed, so one broken table never reads as "target unreachable".
    """
    trips = 0
    answered = 0
    failures: list[str] = []
    n_rows = 0
    timeouts = in_a_row = 0
    for i, q in enumerate(queues):
        try:
            stmt = build_statement(c, target, [q], types)
            if stmt is None:
                continue
            trips += 1
            rows = _to_rows(conn.execute(stmt), ts, target.name, database)
        except engine.TargetError as exc:
            reason = first_line(str(exc))
            failures.append(f"{q.name}: {reason}")
            if not _connection_alive(conn):
                break
            # A timeout is this queue's (a large or locked table): its queue_error row says so and
            # the next queue is tried, unless timeouts keep coming (the server is slow as a whole).
            result.rows.append(SnapshotRow(ts, target.name, database, q.name, QUEUE_ERROR, 1.0,
                                           f"{c.name}: {reason}"))
            if exc.timeout:
                timeouts += 1
                in_a_row += 1
                if in_a_row >= TIMEOUTS_IN_A_ROW and i + 1 < len(queues):
                    failures.append(f"not tried this cycle after {in_a_row} timeouts in a row: "
                                    + ", ".join(x.name for x in queues[i + 1:]))
                    break
            continue
        in_a_row = 0
        answered += 1
        n_rows += len(rows)
        result.rows.extend(rows)
    error = "; ".join(failures)
    result.status.append(StatusRow(ts, target.name, c.name, answered > 0 or not failures,
                                   (time.perf_counter() - started) * 1000, n_rows, error,
                                   timeouts > 0))
    return trips


# The catalog types of each target's mapped columns, read when a target is first collected and
# kept until a statement on that target fails (a table renamed, dropped or altered), or for
# TYPES_TTL_S: an index an operator creates on the live check's advice (which decides how a
# statement reads: the age's skip read, the status reads) is used within that time, not only after
# a restart. One catalog statement per target per TTL.
TYPES_TTL_S = 600.0
# Kept types that find a mapping error are read again once they are this old: a migrated table is
# judged on its new types within this time, and a mapping that stays wrong costs one catalog
# statement per TYPES_RECHECK_S, not one per cycle.
TYPES_RECHECK_S = 30.0
_TYPES: dict[tuple[str, tuple[Any, ...]], tuple[float, Types]] = {}
_TYPES_LOCK = threading.Lock()


def _types_age(target: Target, queues: Sequence[Queue]) -> float:
    """Seconds since the kept types of ``queues`` were read (0 when none are kept)."""
    with _TYPES_LOCK:
        hit = _TYPES.get(_types_key(target, queues))
    return 0.0 if hit is None else time.monotonic() - hit[0]


def _types_key(target: Target, queues: Sequence[Queue]) -> tuple[str, tuple[Any, ...]]:
    return target.name, (target.dialect, *((q.name, tuple(coltypes.mapped_columns(q))) for q in queues))


def forget_types(target: str) -> None:
    """Drop what is known of ``target``'s column types: the next collection reads the catalog again."""
    with _TYPES_LOCK:
        for key in [k for k in _TYPES if k[0] == target]:
            del _TYPES[key]


def _catalog_types(target: Target, queues: Sequence[Queue], conn: engine.Connection, result: CycleResult) -> Types:
    """The mapped columns' types: from the cache, else one catalog statement (one round trip).

    A failed lookup yields no types (statements then bind values as configured), never an
    exception: the collectors still run.
    """
    key = _types_key(target, queues)
    with _TYPES_LOCK:
        hit = _TYPES.get(key)
        if hit is not None and time.monotonic() - hit[0] < TYPES_TTL_S:
            return hit[1]
    result.round_trips += 1
    try:
        types, unread = coltypes.read_types_apart(conn, queues)
    except engine.TargetError:
        return {}  # the collectors' own statements fail too, and say why in their status rows
    if unread:
        # A table held by a lock (a migration): the other queues keep their types; these are read
        # again next cycle rather than kept for TYPES_TTL_S without the locked table's.
        return types
    with _TYPES_LOCK:
        _TYPES[key] = (time.monotonic(), types)
    return types


def mapping_errors(target: Target, queues: Sequence[Queue], types: Types, ts: datetime,
                   database: str) -> list[SnapshotRow]:
    """A ``queue_error`` row per mapped column whose real type cannot work (see :mod:`queueops.coltypes`)."""
    # The same queues and catalog types give the same problems: found once, not every cycle.
    found = _memo(("(mapping)", id(target), tuple(map(id, queues)), id(types)), (target, tuple(queues), types),
                  lambda: [(q.name, f"mapping: {p.field} = {p.value!r}: {p.message}")
                           for q in queues for p in compiled(q, target.dialect, types).problems
                           if p.severity == "error"])
    return [SnapshotRow(ts, target.name, database, queue, QUEUE_ERROR, 1.0, note) for queue, note in found]


def run_once(cfg: Config, collectors: Sequence[Collector] | None = None,
             rates: CounterRates | None = None) -> CycleResult:
    """One cycle over every target of the config."""
    total = CycleResult()
    for target in cfg.targets:
        r = run_collectors(cfg, target, collectors, rates=rates)
        total.rows += r.rows
        total.status += r.status
        total.round_trips += r.round_trips
    return total

