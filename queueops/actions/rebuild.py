"""rebuild: index maintenance of a queue table that keeps the queue running.

PostgreSQL: ``REINDEX INDEX CONCURRENTLY`` for each index whose bloat or leaf fragmentation is
past the rebuild threshold, then ``VACUUM (ANALYZE)`` of the table; both outside a transaction,
under the lock timeout, retried a few times when the lock timeout hits (autovacuum holds the same
lock for a moment). A REINDEX CONCURRENTLY that fails leaves an invalid ``*_ccnew`` index: it is
dropped at once, and any left by an earlier interrupted run is listed by the preview and dropped
first. SQL Server: ``REORGANIZE`` or ``REBUILD WITH (ONLINE = ON ...)`` per index by the 5 / 30 % /
1000 pages rule. An offline operation is chosen only when the operator allowed it.

Progress is the engine's own, read from a second connection while the statement runs:
``pg_stat_progress_create_index`` / ``pg_stat_progress_vacuum`` (and ``_analyze``);
``sys.dm_exec_requests.percent_complete`` and ``sys.index_resumable_operations``.
"""

from __future__ import annotations

import contextlib
import math
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
from queueops.fragments import qualified_name
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


def _plan_pg(ctx: PlanContext) -> Plan:
    q, opts = ctx.queue, ctx.options
    sqlf, frags = ctx.sql("rebuild"), ctx.frags()
    qualified = qualified_name(q, "postgresql")
    table = ctx.session.run(sqlf.render("table", {}, {"qualified_table": qualified}))[0]
    if not table["table_exists"]:
        raise ActionError(f"table {qualified} of queue {q.name!r} does not exist")
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
    # Live rows: pg_class.reltuples (set by ANALYZE / VACUUM) when known, else pg_stat's counter,
    # which lags behind the sessions' changes by up to a second or more.
    dead = int(table["dead_tuples"])
    live = float(table["reltuples"]) if table["reltuples"] is not None and table["reltuples"] >= 0 \
        else int(table["live_tuples"])
    live_fraction = live / (live + dead) if live + dead else 1.0
    rows, steps = [], []
    for r in indexes:
        name, schema = r["index_name"], r["index_schema"]
        bloat = leaf_frag = density = None
        problem = identifier_problem(name, "postgresql")
        if r["method"] == "btree" and r["valid"] and table["has_pgstatindex"] and not problem:
            try:
                s = ctx.session.run(sqlf.render("index_stats", {}, {"qualified_index": quote_table(schema, name, "postgresql")}))[0]
                density = _nan_none(s["avg_leaf_density"])
                bloat = pg_index_bloat_pct(int(s["index_size"]), int(s["leaf_pages"]), density, int(r["fillfactor"]),
                                           live_fraction)
                leaf_frag = _nan_none(s["leaf_fragmentation"])
            except TargetError as exc:
                warnings.append(f"pgstatindex({name}) failed, its bloat is unknown: {exc}")
        ix = PgIndex(name, r["method"], int(r["pages"]), bool(r["valid"]), bool(r["leftover"]), bloat, leaf_frag)
        if problem:
            decision = IndexDecision("none", f"index name cannot be quoted safely ({problem}): maintain it by hand")
        else:
            decision = pg_index_operation(ix, _thresholds(opts), concurrently=concurrently,
                                          allow_offline=opts.allow_offline, forced=name in opts.indexes)
        rows.append({"index": name, "method": r["method"], "bytes": int(r["bytes"]), "pages": int(r["pages"]),
                     "valid": bool(r["valid"]), "bloat_pct": bloat, "leaf_density_pct": density,
                     "leaf_fragmentation_pct": leaf_frag, "operation": decision.operation, "reason": decision.reason,
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
    return Plan("rebuild", q, ctx.target, opts, preview, observed={"qualified_table": qualified})


# ---------------------------------------------------------------------------------------------
# SQL Server


def _plan_mssql(ctx: PlanContext) -> Plan:
    q, opts = ctx.queue, ctx.options
    sqlf, frags = ctx.sql("rebuild"), ctx.frags()
    qualified = qualified_name(q, "mssql")
    server = ctx.session.run(sqlf.render("server", {}, {"qualified_table": qualified}))[0]
    if not server["table_exists"]:
        raise ActionError(f"table {qualified} of queue {q.name!r} does not exist")
    caps = mssql_caps(server["engine_edition"], server["major_version"], server.get("edition") or "")
    raw = ctx.session.run(sqlf.render("indexes", {}, {"qualified_table": qualified}))
    by_id: dict[int, dict[str, Any]] = {}
    for r in raw:  # one row per partition: sum the pages, keep the worst fragmentation
        d = by_id.setdefault(int(r["index_id"]), {**r, "page_count": 0, "avg_fragmentation_in_percent": None})
        d["page_count"] += int(r["page_count"] or 0)
        frag = r["avg_fragmentation_in_percent"]
        if frag is not None:
            d["avg_fragmentation_in_percent"] = max(float(frag), d["avg_fragmentation_in_percent"] or 0.0)
    _unknown_indexes(opts, [d["index_name"] for d in by_id.values()])
    warnings: list[str] = []
    for r in ctx.session.run(sqlf.render("resumable", {}, {"qualified_table": qualified})):
        name = next((d["index_name"] for i, d in by_id.items() if i == int(r["index_id"])), r["index_id"])
        warnings.append(f"a resumable rebuild of {name} is {'paused' if int(r['state']) == 1 else 'running'} at "
                        f"{float(r['percent_complete']):.1f} %: rebuilding it with --resumable resumes it")
    if not caps.online:
        warnings.append(f"{caps.label}: no online index rebuilds; fragmented indexes get REORGANIZE instead")
    rows, steps = [], []
    for d in by_id.values():
        name = d["index_name"]
        ix = MssqlIndex(name, int(d["index_id"]), str(d["type_desc"]), int(d["page_count"]),
                        _nan_none(d["avg_fragmentation_in_percent"]), bool(d["is_disabled"]),
                        bool(d["allow_page_locks"]), int(d["legacy_lob_columns"] or 0) > 0)
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
    return Plan("rebuild", q, ctx.target, opts, preview, observed={"qualified_table": qualified, "index_ids": index_ids})


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


def _drop_leftovers(runner: Runner, session: Session) -> list[str]:
    """Drop invalid *_ccnew / *_ccold indexes a failed REINDEX CONCURRENTLY left on the table."""
    sqlf = runner.sql("rebuild")
    dropped = []
    for r in runner.execute(sqlf.render("indexes", {}, {"qualified_table": runner.plan.observed["qualified_table"]}),
                            session=session):
        if r["leftover"] and not identifier_problem(r["index_name"], "postgresql"):
            index = quote_table(r["index_schema"], r["index_name"], "postgresql")
            runner.execute(sqlf.render("drop_leftover", {"index": index}), obj=index, session=session)
            dropped.append(r["index_name"])
    return dropped


def _cleanup_after_failure(runner: Runner, exc: BaseException) -> str:
    """Best effort; on a lost session a fresh one is opened. Returns a note for the result."""
    try:
        if not connection_lost(runner.session, exc) and not isinstance(exc, (KeyboardInterrupt,)):
            dropped = _drop_leftovers(runner, runner.session)
        else:
            fresh = open_session(runner.plan.target, runner.cfg.base_dir, f"{runner.application}-cleanup")
            try:
                dropped = _drop_leftovers(runner, fresh)
            finally:
                fresh.close()
        return f"dropped leftover {', '.join(dropped)}" if dropped else ""
    except Exception as cleanup_exc:  # noqa: BLE001 - reported, and the next preview lists leftovers
        return f"could not drop the leftover index ({cleanup_exc}); the next preview lists it"


def run(plan: Plan, runner: Runner) -> list[dict[str, Any]]:
    opts: RebuildOptions = plan.options  # type: ignore[assignment]
    steps = plan.preview.steps
    runner.set_statement_timeout(opts.max_duration_minutes * 60_000)
    results: list[dict[str, Any]] = []
    for i, step in enumerate(steps, start=1):
        op = step.label.partition(" ")[0]
        runner.report(step.label, step=i, steps=len(steps), rows=runner.rows, message="starting")
        started = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            try:
                runner.execute(step.statement, step=step.label, obj=_step_object(step, runner),
                               poll=_poller(runner, step, i, len(steps)), poll_interval_s=POLL_S)
                break
            except BaseException as exc:
                note = ""
                if op == "reindex_concurrently" and runner.dialect == "postgresql":
                    note = _cleanup_after_failure(runner, exc)
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
        runner.committed(i)
        results.append({"step": i, "statement": step.label, "seconds": round(time.monotonic() - started, 3),
                        "attempts": attempts})
        runner.report(step.label, done=1, total=1, step=i, steps=len(steps), rows=runner.rows, message="done")
    with contextlib.suppress(Exception):
        runner.set_statement_timeout(plan.target.statement_timeout_ms)
    return results
