"""rebuild: index maintenance of a queue table that keeps the queue running.

PostgreSQL: ``REINDEX INDEX CONCURRENTLY`` for each index whose bloat or leaf fragmentation is
past the rebuild threshold, then ``VACUUM (ANALYZE)`` of the table; both outside a transaction,
under the lock timeout, retried a few times when the lock timeout hits (autovacuum holds the same
lock for a moment). A REINDEX CONCURRENTLY that fails leaves an invalid ``*_ccnew`` index: it is
dropped at once -- only that one, never an invalid index another session is building or dropping
(a concurrent rebuild's ``*_ccnew``, a CREATE INDEX CONCURRENTLY in progress) -- and any left by an
earlier interrupted run is listed by the preview and dropped first. SQL Server: ``REORGANIZE`` or ``REBUILD WITH (ONLINE = ON ...)`` per index by the 5 / 30 % /
1000 pages rule. An offline operation is chosen only when the operator allowed it.

The execution runs the previewed statements on the previewed indexes only (:func:`_recheck`): each
index is bound by its identity (OID / index_id), so one renamed or replaced since is not touched,
and one chosen by its figures is measured again and left alone when it no longer needs the work;
a step not run is listed as ``skipped`` and noted in the result and the audit record.

Progress is the engine's own, read from a second connection while the statement runs:
``pg_stat_progress_create_index`` / ``pg_stat_progress_vacuum`` (and ``_analyze``);
``sys.dm_exec_requests.percent_complete`` and ``sys.index_resumable_operations``.
"""

from __future__ import annotations

import contextlib
import math
import re
import time
from collections.abc import Callable
from typing import Any

from queueops.actions.context import PlanContext, Runner
from queueops.actions.decide import (
    IndexDecision,
    MssqlIndex,
    PgIndex,
    Thresholds,
    mssql_caps,
    mssql_index_operation,
    pg_index_bloat_pct,
    pg_index_operation,
)
from queueops.actions.model import ActionError, Plan, Preview, RebuildOptions, Step
from queueops.actions.session import (
    Session,
    connection_lost,
    is_lock_timeout,
    open_session,
    sleep,
)
from queueops.config import Queue
from queueops.engine import TargetError
from queueops.identifiers import identifier_problem, quote_ident, quote_table

POLL_S = 0.5
RETRY_PAUSE_S = 1.0


def check(queue: Queue, opts: RebuildOptions) -> None:
    if opts.vacuum_only and not opts.vacuum:
        raise ActionError("--vacuum-only and --no-vacuum contradict each other")
    if opts.vacuum_only and opts.indexes:
        raise ActionError("--vacuum-only does no index work: drop --index")
    if opts.reorganize_pct > opts.rebuild_pct:
        raise ActionError(f"--reorganize-pct ({opts.reorganize_pct:g}) must not exceed --rebuild-pct "
                          f"({opts.rebuild_pct:g})")


def plan(ctx: PlanContext) -> Plan:
    check(ctx.queue, ctx.options)
    if ctx.options.vacuum_only and ctx.dialect != "postgresql":
        raise ActionError("--vacuum-only is PostgreSQL's VACUUM; SQL Server removes ghost records by itself once "
                          "the version store lets it")
    return _plan_pg(ctx) if ctx.dialect == "postgresql" else _plan_mssql(ctx)


def _thresholds(opts: RebuildOptions) -> Thresholds:
    return Thresholds(opts.reorganize_pct, opts.rebuild_pct, opts.min_pages)


def _unknown_indexes(opts: RebuildOptions, names: list[str]) -> None:
    unknown = sorted(set(opts.indexes) - set(names))
    if unknown:
        raise ActionError(f"no index {', '.join(map(repr, unknown))} on this table; its indexes: "
                          f"{', '.join(names) or 'none'}")


def _nan_none(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) else round(f, 1)


# ---------------------------------------------------------------------------------------------
# PostgreSQL


def _pg_index(run: Callable[[Any], list[dict[str, Any]]], sqlf: Any, table: dict[str, Any], r: dict[str, Any],
              warnings: list[str]) -> tuple[PgIndex, float | None]:
    """One index of the ``indexes`` block with its bloat and leaf fragmentation (pgstatindex, when
    installed), and its leaf density; ``run`` runs a statement (the preview's session, or the
    action's executor when the execution checks an index again)."""
    name, schema = r["index_name"], r["index_schema"]
    bloat = leaf_frag = density = None
    if r["method"] == "btree" and r["valid"] and table["has_pgstatindex"] and not identifier_problem(name, "postgresql"):
        # Live rows of the index's own table (a partition's, on a partitioned table):
        # pg_class.reltuples (set by ANALYZE / VACUUM) when known, else pg_stat's counter, which lags
        # behind the sessions' changes by up to a second or more.
        dead = int(r["table_dead_tuples"])
        live = float(r["table_reltuples"]) if r["table_reltuples"] is not None and r["table_reltuples"] >= 0 \
            else int(r["table_live_tuples"])
        live_fraction = live / (live + dead) if live + dead else 1.0
        try:
            s = run(sqlf.render("index_stats", {}, {"qualified_index": quote_table(schema, name, "postgresql")}))[0]
            density = _nan_none(s["avg_leaf_density"])
            bloat = pg_index_bloat_pct(int(s["index_size"]), int(s["leaf_pages"]), density, int(r["fillfactor"]),
                                       live_fraction)
            leaf_frag = _nan_none(s["leaf_fragmentation"])
        except TargetError as exc:
            warnings.append(f"pgstatindex({name}) failed, its bloat is unknown: {exc}")
    return PgIndex(name, r["method"], int(r["pages"]), bool(r["valid"]), bool(r["leftover"]), bloat, leaf_frag), density


def _plan_pg(ctx: PlanContext) -> Plan:
    q, opts = ctx.queue, ctx.options
    sqlf, frags = ctx.sql("rebuild"), ctx.frags()
    qualified = ctx.compiled.table
    table = ctx.session.run(sqlf.render("table", {}, {"qualified_table": qualified}))[0]
    if not table["table_exists"]:
        raise ActionError(f"table {qualified} of queue {q.name!r} does not exist")
    if table["relkind"] not in ("r", "p"):
        raise ActionError(f"{qualified} of queue {q.name!r} is not a table (relkind {table['relkind']!r}: a view?): "
                          "nothing to reindex or vacuum; rebuild the table it reads")
    if table["other_builds"]:
        raise ActionError(f"an index build is running on {qualified} right now (pid {table['other_builds']}); "
                          "wait for it to finish, then preview again")
    indexes = ctx.session.run(sqlf.render("indexes", {}, {"qualified_table": qualified}))
    _unknown_indexes(opts, [r["index_name"] for r in indexes])
    concurrently = int(table["server_version"]) >= 120000
    warnings: list[str] = []
    if not table["has_pgstatindex"]:
        warnings.append("pgstattuple is not installed (CREATE EXTENSION pgstattuple): index bloat is unknown, "
                        "so only indexes named with --index are reindexed")
    rows, steps = [], []
    for r in indexes:
        name, schema = r["index_name"], r["index_schema"]
        problem = identifier_problem(name, "postgresql")
        ix, density = _pg_index(ctx.session.run, sqlf, table, r, warnings)
        if problem:
            decision = IndexDecision("none", f"index name cannot be quoted safely ({problem}): maintain it by hand")
        else:
            decision = pg_index_operation(ix, _thresholds(opts), concurrently=concurrently,
                                          allow_offline=opts.allow_offline, forced=name in opts.indexes)
        rows.append({"index": name, "method": r["method"], "bytes": int(r["bytes"]), "pages": int(r["pages"]),
                     "valid": bool(r["valid"]), "bloat_pct": ix.bloat_pct, "leaf_density_pct": density,
                     "leaf_fragmentation_pct": ix.leaf_fragmentation_pct, "operation": decision.operation,
                     "reason": decision.reason,
                     "offline": decision.offline})
        if decision.acts and opts.vacuum_only and decision.operation != "drop_leftover":
            decision = IndexDecision("none", "--vacuum-only: no index work")
            rows[-1].update(operation="none", reason=decision.reason, offline=False)
        if decision.acts:
            block = {"drop_leftover": "drop_leftover", "reindex_concurrently": "reindex_concurrently",
                     "reindex_offline": "reindex_offline"}[decision.operation]
            stmt = sqlf.render(block, {"index": quote_table(schema, name, "postgresql")})
            steps.append(Step(f"{decision.operation} {name}", stmt))
    steps.sort(key=lambda s: not s.label.startswith("drop_leftover"))  # leftovers first
    if opts.vacuum:
        steps.append(Step(f"vacuum {qualified}", sqlf.render("vacuum", {"table": frags["table"]})))
    offline = [r["index"] for r in rows if r["offline"]]
    if offline:
        warnings.append(f"OFFLINE: REINDEX of {', '.join(offline)} blocks every write to the queue while it runs")
    work = [s.label for s in steps]
    summary = (f"{len(steps)} maintenance statement(s) on {qualified} (queue {q.name!r}): "
               + (", ".join(work) if work else "nothing to do"))
    details = {"table": {"live_tuples": table["live_tuples"], "dead_tuples": table["dead_tuples"],
                         "table_bytes": table["table_bytes"], "last_vacuum": table["last_vacuum"],
                         "last_autovacuum": table["last_autovacuum"]},
               "thresholds": {"reorganize_pct": opts.reorganize_pct, "rebuild_pct": opts.rebuild_pct,
                              "min_pages": opts.min_pages},
               "server_version": table["server_version"], "lock_retries": opts.lock_retries,
               "max_duration_minutes": opts.max_duration_minutes}
    preview = Preview(action="rebuild", queue=q.name, target=q.target, dialect="postgresql", summary=summary,
                      steps=steps, rows=rows, row_count=len(steps), warnings=warnings, destructive=bool(offline),
                      details=details)
    return Plan("rebuild", q, ctx.target, opts, preview,
                observed={"qualified_table": qualified, "index_oids": {r["index_name"]: int(r["index_oid"]) for r in indexes},
                          "concurrently": concurrently})


# ---------------------------------------------------------------------------------------------
# SQL Server


def _plan_mssql(ctx: PlanContext) -> Plan:
    q, opts = ctx.queue, ctx.options
    sqlf, frags = ctx.sql("rebuild"), ctx.frags()
    qualified = ctx.compiled.table
    server = ctx.session.run(sqlf.render("server", {}, {"qualified_table": qualified}))[0]
    if not server["table_exists"]:
        raise ActionError(f"table {qualified} of queue {q.name!r} does not exist")
    caps = mssql_caps(server["engine_edition"], server["major_version"], server.get("edition") or "")
    by_id = _mssql_indexes(ctx.session.run(sqlf.render("indexes", {}, {"qualified_table": qualified})))
    _unknown_indexes(opts, [d["index_name"] for d in by_id.values()])
    warnings: list[str] = []
    # sys.index_resumable_operations exists from SQL Server 2017 (14) on: a 2016 server would fail the
    # whole plan on its name (issue 33, item 7: SQL Server 2016 is the minimum).
    has_resumable = int(server["major_version"] or 0) >= 14 or server["engine_edition"] in (5, 8)
    for r in (ctx.session.run(sqlf.render("resumable", {}, {"qualified_table": qualified})) if has_resumable else []):
        name = next((d["index_name"] for i, d in by_id.items() if i == int(r["index_id"])), r["index_id"])
        warnings.append(f"a resumable rebuild of {name} is {'paused' if int(r['state']) == 1 else 'running'} at "
                        f"{float(r['percent_complete']):.1f} %: rebuilding it with --resumable resumes it")
    if not caps.online:
        warnings.append(f"{caps.label}: no online index rebuilds; fragmented indexes get REORGANIZE instead")
    rows, steps = [], []
    for d in by_id.values():
        name = d["index_name"]
        ix = _mssql_index(d)
        problem = identifier_problem(name, "mssql")
        if problem:
            decision = IndexDecision("none", f"index name cannot be quoted safely ({problem}): maintain it by hand")
        else:
            decision = mssql_index_operation(ix, caps, _thresholds(opts), allow_offline=opts.allow_offline,
                                             resumable=opts.resumable, forced=name in opts.indexes)
        rows.append({"index": name, "index_id": ix.index_id, "type": ix.type_desc, "pages": ix.pages,
                     "bytes": ix.pages * 8192, "fragmentation_pct": ix.fragmentation_pct,
                     "operation": decision.operation, "reason": decision.reason, "offline": decision.offline})
        if decision.acts:
            stmt = sqlf.render(decision.operation, {
                "index": quote_ident(name, "mssql"), "table": frags["table"],
                "wait_minutes": str(int(opts.wait_minutes)),
                "max_duration_minutes": str(int(opts.max_duration_minutes))})
            steps.append(Step(f"{decision.operation} {name}", stmt))
    offline = [r["index"] for r in rows if r["offline"]]
    if offline:
        warnings.append(f"OFFLINE: REBUILD of {', '.join(offline)} blocks every dequeue while it runs")
    if any(r["operation"] in ("rebuild_online_low_priority", "rebuild_online") for r in rows):
        warnings.append("SQL Server reports no progress for a non-resumable REBUILD (only for REORGANIZE and "
                        "RESUMABLE rebuilds); --resumable gets progress but drops WAIT_AT_LOW_PRIORITY")
    summary = (f"{len(steps)} index statement(s) on {qualified} (queue {q.name!r}): "
               + (", ".join(s.label for s in steps) if steps else "nothing to do"))
    preview = Preview(action="rebuild", queue=q.name, target=q.target, dialect="mssql", summary=summary,
                      steps=steps, rows=rows, row_count=len(steps), warnings=warnings, destructive=bool(offline),
                      details={"server": {"engine_edition": server["engine_edition"],
                                          "major_version": server["major_version"], "edition": server.get("edition"),
                                          "online": caps.online, "wait_at_low_priority": caps.wait_at_low_priority,
                                          "resumable": caps.resumable},
                               "thresholds": {"reorganize_pct": opts.reorganize_pct, "rebuild_pct": opts.rebuild_pct,
                                              "min_pages": opts.min_pages}})
    index_ids = {r["index"]: r["index_id"] for r in rows}
    return Plan("rebuild", q, ctx.target, opts, preview,
                observed={"qualified_table": qualified, "index_ids": index_ids, "caps": caps})


def _mssql_indexes(raw: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The ``indexes`` block's rows by index: one row per partition, pages summed, the worst
    fragmentation kept."""
    by_id: dict[int, dict[str, Any]] = {}
    for r in raw:
        d = by_id.setdefault(int(r["index_id"]), {**r, "page_count": 0, "avg_fragmentation_in_percent": None})
        d["page_count"] += int(r["page_count"] or 0)
        frag = r["avg_fragmentation_in_percent"]
        if frag is not None:
            d["avg_fragmentation_in_percent"] = max(float(frag), d["avg_fragmentation_in_percent"] or 0.0)
    return by_id


def _mssql_index(d: dict[str, Any]) -> MssqlIndex:
    return MssqlIndex(d["index_name"], int(d["index_id"]), str(d["type_desc"]), int(d["page_count"]),
                      _nan_none(d["avg_fragmentation_in_percent"]), bool(d["is_disabled"]),
                      bool(d["allow_page_locks"]), int(d["legacy_lob_columns"] or 0) > 0)


# ---------------------------------------------------------------------------------------------
# Execution (both dialects)


def _poller(runner: Runner, step: Step, i: int, n: int) -> Callable[[], None]:
    plan = runner.plan
    sqlf = runner.sql("progress")
    sid = runner.session.session_id
    op, _, name = step.label.partition(" ")

    def poll() -> None:
        mon = runner.monitor()
        if runner.dialect == "postgresql":
            block = "vacuum" if op == "vacuum" else "create_index"
            rows = mon.run(sqlf.render(block, {}, {"session_id": sid}))
        elif op == "rebuild_resumable":
            rows = mon.run(sqlf.render("resumable", {}, {"qualified_table": plan.observed["qualified_table"],
                                                         "index_id": plan.observed["index_ids"].get(name, 0)}))
        else:
            rows = mon.run(sqlf.render("request", {}, {"session_id": sid}))
        for r in rows[:1]:
            runner.report(f"{step.label}: {r['phase']}", done=r["done"], total=r["total"], step=i, steps=n,
                          rows=runner.rows)

    return poll


def _step_object(step: Step, runner: Runner) -> str:
    """The index (or, for VACUUM, the table) a step's statement works on: its label's second word."""
    return step.label.partition(" ")[2] or runner.table


def _leftovers(runner: Runner, session: Session | None = None) -> list[dict[str, Any]]:
    """The invalid REINDEX leftovers on the table now, each with the session working on it, if any."""
    sqlf = runner.sql("rebuild")
    return runner.execute(sqlf.render("leftovers", {}, {"qualified_table": runner.plan.observed["qualified_table"]}),
                          session=session)


def _busy(r: dict[str, Any]) -> int | None:
    """The other session building or dropping a leftover (never touched), or None."""
    return r.get("building_pid") or r.get("holding_pid")


def _gone(exc: BaseException) -> bool:
    """A DROP INDEX of a leftover that another session dropped first."""
    return isinstance(exc, TargetError) and ("UndefinedObject" in str(exc) or "does not exist" in str(exc))


def _drop_own_leftovers(runner: Runner, session: Session, before: set[int], index: str) -> list[str]:
    """Drop the invalid leftover the failed REINDEX CONCURRENTLY of ``index`` left: a *_ccnew /
    *_ccold of that index that was not there before the statement and that no other session is
    building or dropping (two rebuilds on one table each see the other's *_ccnew; a concurrent
    CREATE INDEX CONCURRENTLY's index is invalid until it ends). Returns what this session dropped."""
    sqlf = runner.sql("rebuild")
    dropped = []
    for r in _leftovers(runner, session):
        name = r["index_name"]
        base = re.sub(r"_cc(new|old)[0-9]*$", "", name)  # PostgreSQL truncates a long index name first
        if int(r["index_oid"]) in before or _busy(r) or not index.startswith(base) \
                or identifier_problem(name, "postgresql"):
            continue
        qualified = quote_table(r["index_schema"], name, "postgresql")
        try:
            runner.execute(sqlf.render("drop_leftover", {"index": qualified}), obj=qualified, session=session)
        except TargetError as exc:
            if _gone(exc):
                continue  # another session dropped it first: not reported as dropped here
            raise
        dropped.append(name)
    return dropped


def _cleanup_after_failure(runner: Runner, exc: BaseException, before: set[int], index: str) -> str:
    """Best effort; on a lost session a fresh one is opened. Returns a note for the result."""
    try:
        if not connection_lost(runner.session, exc) and not isinstance(exc, (KeyboardInterrupt,)):
            dropped = _drop_own_leftovers(runner, runner.session, before, index)
        else:
            fresh = open_session(runner.plan.target, runner.cfg.base_dir, f"{runner.application}-cleanup")
            try:
                dropped = _drop_own_leftovers(runner, fresh, before, index)
            finally:
                fresh.close()
        return f"dropped leftover {', '.join(dropped)}" if dropped else ""
    except Exception as cleanup_exc:  # noqa: BLE001 - reported, and the next preview lists leftovers
        return f"could not drop the leftover index ({cleanup_exc}); the next preview lists it"


def _recheck(plan: Plan, runner: Runner, step: Step) -> str:
    """Why ``step`` must not run now although the preview showed it, or "": the execution works on
    the previewed indexes only. An index is bound by its identity (PostgreSQL: its OID; SQL Server:
    its index_id), not its name: one renamed, dropped and recreated, or rebuilt concurrently by
    someone else since the preview is not touched. An index chosen by its figures (not named with
    --index) is measured again by the same rule and left alone when it no longer needs the work
    (another session rebuilt it meanwhile). A leftover already gone, or that another session is
    building or dropping, is not dropped. Never a different statement than the preview's."""
    opts: RebuildOptions = plan.options  # type: ignore[assignment]
    op, _, name = step.label.partition(" ")
    if op == "vacuum":
        return ""
    qualified = plan.observed["qualified_table"]
    sqlf = runner.sql("rebuild")
    if runner.dialect == "postgresql":
        if op == "drop_leftover":
            now = next((r for r in _leftovers(runner) if r["index_name"] == name), None)
            if now is None:
                return "already gone (another session dropped it since the preview)"
            if int(now["index_oid"]) != plan.observed["index_oids"].get(name):
                return "another index has that name now (not the leftover the preview showed)"
            if _busy(now):
                return f"session {_busy(now)} is building or dropping it now: left to that session"
            return ""
        found = [r for r in runner.execute(sqlf.render("indexes", {}, {"qualified_table": qualified}))
                 if r["index_name"] == name]
        if not found:
            return "the index is gone (dropped or renamed since the preview)"
        r = found[0]
        if int(r["index_oid"]) != plan.observed["index_oids"].get(name):
            return ("not the index the preview showed: it was dropped and created again, renamed, or rebuilt "
                    "concurrently by another session since (another OID)")
        if name in opts.indexes:
            return ""
        table = runner.execute(sqlf.render("table", {}, {"qualified_table": qualified}))[0]
        ix, _ = _pg_index(runner.execute, sqlf, table, r, [])
        decision = pg_index_operation(ix, _thresholds(opts), concurrently=plan.observed["concurrently"],
                                      allow_offline=opts.allow_offline)
        return "" if decision.acts else f"measured again: {decision.reason}; it no longer needs a rebuild"
    by_name = {d["index_name"]: d for d in _mssql_indexes(
        runner.execute(sqlf.render("indexes", {}, {"qualified_table": qualified}))).values()}
    d = by_name.get(name)
    if d is None:
        return "the index is gone (dropped or renamed since the preview)"
    if int(d["index_id"]) != plan.observed["index_ids"].get(name):
        return "not the index the preview showed: it was dropped and created again or renamed since (another index_id)"
    if name in opts.indexes:
        return ""
    decision = mssql_index_operation(_mssql_index(d), plan.observed["caps"], _thresholds(opts),
                                     allow_offline=opts.allow_offline, resumable=opts.resumable)
    return "" if decision.acts else f"measured again: {decision.reason}; it no longer needs the work"


def run(plan: Plan, runner: Runner) -> list[dict[str, Any]]:
    opts: RebuildOptions = plan.options  # type: ignore[assignment]
    steps = plan.preview.steps
    runner.set_statement_timeout(opts.max_duration_minutes * 60_000)
    results = runner.done_rows  # kept as each statement completes: a failed result lists them
    completed = 0
    for i, step in enumerate(steps, start=1):
        op, _, name = step.label.partition(" ")
        runner.report(step.label, step=i, steps=len(steps), rows=runner.rows, message="starting")
        skipped = _recheck(plan, runner, step)
        before: set[int] = set()
        if not skipped and op == "reindex_concurrently" and runner.dialect == "postgresql":
            before = {int(r["index_oid"]) for r in _leftovers(runner)}
        started = time.monotonic()
        attempts = 0
        while not skipped:
            attempts += 1
            try:
                runner.execute(step.statement, step=step.label, obj=_step_object(step, runner),
                               poll=_poller(runner, step, i, len(steps)), poll_interval_s=POLL_S)
                break
            except BaseException as exc:
                if op == "drop_leftover" and _gone(exc):
                    skipped = "already gone (another session dropped it first)"
                    break
                note = ""
                if op == "reindex_concurrently" and runner.dialect == "postgresql":
                    note = _cleanup_after_failure(runner, exc, before, name)
                retry = (isinstance(exc, TargetError) and is_lock_timeout(exc) and attempts <= opts.lock_retries
                         and not connection_lost(runner.session, exc))
                if retry:
                    runner.report(step.label, step=i, steps=len(steps), rows=runner.rows,
                                  message=f"lock timeout, retry {attempts} of {opts.lock_retries}")
                    sleep(RETRY_PAUSE_S)
                    continue
                if note and isinstance(exc, TargetError):
                    raise TargetError(exc.target, f"{exc} ({note})", timeout=exc.timeout) from None
                raise
        if skipped:
            results.append({"step": i, "statement": step.label, "skipped": skipped})
            runner.note(f"{step.label}: not run: {skipped}")
            runner.report(step.label, step=i, steps=len(steps), rows=runner.rows, message=f"not run: {skipped}")
            continue
        completed += 1
        runner.committed(completed)
        results.append({"step": i, "statement": step.label, "seconds": round(time.monotonic() - started, 3),
                        "attempts": attempts})
        runner.report(step.label, done=1, total=1, step=i, steps=len(steps), rows=runner.rows, message="done")
    with contextlib.suppress(Exception):
        runner.set_statement_timeout(plan.target.statement_timeout_ms)
    return results
