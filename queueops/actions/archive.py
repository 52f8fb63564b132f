"""archive: take finished items out of a status queue, in small batches with a pause between them.

The archiving strategy of high-performance-queue: keep the queue table small around the clock
without a maintenance window, in a background job, never in the dequeue. ``delete`` removes the
finished items (and their payload rows in the data table); ``move`` first copies both to archive
tables of the same layout. Each batch is one transaction that archives whole items or nothing,
so an interrupted archive leaves no half-moved item and a re-run simply continues.
"""

from __future__ import annotations

from typing import Any

from queueops import coltypes
from queueops.actions.batches import run_batches
from queueops.actions.context import PlanContext, Runner
from queueops.actions.decide import batch_count, layout_problem
from queueops.actions.model import SAMPLE_ROWS, ActionError, ArchiveOptions, Conflict, Plan, Preview, Step
from queueops.actions.session import transaction
from queueops.config import Queue
from queueops.fragments import DEFAULT_SCHEMA, fragments_for, qualified_name
from queueops.identifiers import quote_table

LIMIT_ALL = 2**31 - 1


def check(queue: Queue, opts: ArchiveOptions) -> None:
    if queue.kind != "status":
        raise ActionError(f"archive applies to status queues (finished items stay in the table with a done "
                          f"status); {queue.name!r} is a {queue.kind} queue, whose finished items are already gone")
    if not (queue.status_changed_at or queue.enqueued_at):
        raise ActionError(f"queue {queue.name!r} has neither status_changed_at nor enqueued_at in config: "
                          "nothing tells how old a finished item is")
    if opts.mode == "move":
        if not opts.archive_table:
            raise ActionError("--mode move needs --archive-table (a table with the queue table's columns)")
        if queue.data_table and not opts.archive_data_table:
            raise ActionError(f"queue {queue.name!r} keeps payloads in {queue.data_table!r}: --mode move also needs "
                              "--archive-data-table (a table with the data table's columns)")
    elif opts.archive_table or opts.archive_data_table:
        raise ActionError("--archive-table and --archive-data-table only apply to --mode move")


def _frags(queue: Queue, dialect: str, archive: dict[str, str]) -> dict[str, str]:
    frags = fragments_for(queue, dialect)
    frags["age"] = frags.get("status_changed_at") or frags["enqueued_at"]
    frags.update(archive)
    return frags


def _columns(ctx: PlanContext, qualified: str) -> tuple[list[tuple[str, str]], list[str]]:
    rows = ctx.session.run(ctx.sql("archive").render("columns", {}, {"qualified_table": qualified}))
    return [(r["name"], r["type"]) for r in rows], [r["name"] for r in rows if r.get("is_identity")]


def plan(ctx: PlanContext) -> Plan:
    q, opts, dialect = ctx.queue, ctx.options, ctx.dialect
    check(q, opts)
    archive: dict[str, str] = {}
    warnings: list[str] = []
    if opts.mode == "move":
        schema = opts.archive_schema or q.schema_
        archive["archive_table"] = ctx.quoted_table(opts.archive_table, schema, "archive table")
        pairs = [(qualified_name(q, dialect), archive["archive_table"], q.table, opts.archive_table)]
        if q.data_table:
            archive["archive_data_table"] = ctx.quoted_table(opts.archive_data_table, schema, "archive data table")
            pairs.append((quote_table(q.schema_ or DEFAULT_SCHEMA[dialect], q.data_table, dialect), archive["archive_data_table"],
                          q.data_table, opts.archive_data_table))
        for source, dest, source_name, dest_name in pairs:
            src_cols, _ = _columns(ctx, source)
            dst_cols, identity = _columns(ctx, dest)
            problem = layout_problem(src_cols, dst_cols, identity)
            if problem:
                raise ActionError(f"archive table {dest_name!r} {problem}; create it with the columns of "
                                  f"{source_name!r}, in the same order (PostgreSQL: CREATE TABLE ... (LIKE ...))")
    frags = _frags(q, dialect, archive)
    if not q.status_changed_at:
        warnings.append("no status_changed_at in config: age is measured from enqueued_at")
    cutoff = ctx.cutoff(opts.older_than_s)
    sqlf = ctx.sql("archive")
    values = {"cutoff": cutoff, "done_values": coltypes.bind_compared_values(q.done_values, dialect)}
    count = int(ctx.session.run(sqlf.render("count", frags, {**values, "limit_n": opts.max_items or LIMIT_ALL}))[0]["n"])
    sample = ctx.session.run(sqlf.render("sample", frags, {**values, "sample_n": SAMPLE_ROWS}))
    steps = _steps(q, opts, frags, dialect, values, opts.batch_size)
    batches = batch_count(count, opts.batch_size)
    if count == 0:
        warnings.append(f"nothing to archive: no item with status in {list(q.done_values)} finished more than "
                        f"{opts.older_than_s:g} s ago")
    verb = "move" if opts.mode == "move" else "delete"
    dest = f" to {archive['archive_table']}" if opts.mode == "move" else ""
    summary = (f"{verb} {count} finished item(s) of queue {q.name!r} older than {opts.older_than_s:g} s"
               f"{dest}{' with their payload rows' if q.data_table else ''}, in {batches} batch(es) of at most "
               f"{opts.batch_size} with {opts.pause_s:g} s between batches"
               + (f", capped at {opts.max_items}" if opts.max_items else ""))
    preview = Preview(
        action="archive", queue=q.name, target=q.target, dialect=dialect, summary=summary, steps=steps,
        rows=sample, row_count=count, warnings=warnings, destructive=True,
        details={"cutoff": cutoff, "older_than_s": opts.older_than_s, "mode": opts.mode, "batches": batches,
                 "batch_size": opts.batch_size, "pause_s": opts.pause_s, "max_items": opts.max_items,
                 "archive_table": archive.get("archive_table"),
                 "archive_data_table": archive.get("archive_data_table")},
    )
    return Plan("archive", q, ctx.target, opts, preview, observed={"cutoff": cutoff, "count": count, "archive": archive})


def _steps(q: Queue, opts: ArchiveOptions, frags: dict[str, str], dialect: str, values: dict[str, Any],
           n: int, item_ids: list[Any] | None = None) -> list[Step]:
    """The statements of one batch, in order (``item_ids``: the keys the pick returned)."""
    from queueops import sqlfiles

    sqlf = sqlfiles.load(dialect, "actions/archive")
    ids = {"item_ids": coltypes.bind_compared_values(item_ids, dialect) if item_ids else ["<picked keys>"]}
    steps = [Step("pick", sqlf.render("pick", frags, {**values, "batch_n": n}), repeat=True)]
    if q.data_table:
        if opts.mode == "move":
            steps.append(Step("copy payload rows", sqlf.render("copy_data", frags, ids), repeat=True))
        steps.append(Step("delete payload rows", sqlf.render("delete_data", frags, ids), repeat=True))
    if opts.mode == "move":
        steps.append(Step("copy queue rows", sqlf.render("copy", frags, ids), repeat=True))
    steps.append(Step("delete queue rows", sqlf.render("delete", frags, {**values, **ids}), repeat=True))
    return steps


def _object(label: str, frags: dict[str, str]) -> str:
    """The table a batch step writes (its command row's object)."""
    return {"copy payload rows": frags.get("archive_data_table"), "delete payload rows": frags.get("data_table"),
            "copy queue rows": frags.get("archive_table")}.get(label) or frags["table"]


def run(plan: Plan, runner: Runner) -> list[dict[str, Any]]:
    opts: ArchiveOptions = plan.options  # type: ignore[assignment]
    q = plan.queue
    frags = _frags(q, runner.dialect, plan.observed["archive"])
    values = {"cutoff": plan.observed["cutoff"],
              "done_values": coltypes.bind_compared_values(q.done_values, runner.dialect)}

    def batch(n: int) -> list[Any]:
        with transaction(runner.session):
            pick = _steps(q, opts, frags, runner.dialect, values, n)[0]
            picked = [r["item"] for r in runner.execute(pick.statement, step=pick.label)]
            if not picked:
                return []
            removed: list[Any] = []
            for step in _steps(q, opts, frags, runner.dialect, values, n, picked)[1:]:
                rows = runner.execute(step.statement, step=step.label, obj=_object(step.label, frags))
                if step.label == "delete queue rows":
                    removed = [r["item"] for r in rows]
            if len(removed) != len(picked):
                # Impossible while the pick's row locks hold; if it ever happens, undo the batch.
                raise Conflict(f"batch picked {len(picked)} items but removed {len(removed)}: rolled back, "
                               "nothing of this batch was archived")
            return removed

    summaries = run_batches(runner, planned_rows=plan.observed["count"], batch_size=opts.batch_size,
                            cap=opts.max_items, pause_s=opts.pause_s, batch=batch)
    sqlf = runner.sql("archive")
    left = int(runner.execute(sqlf.render("count", frags, {**values, "limit_n": LIMIT_ALL}))[0]["n"])
    if left:
        summaries.append({"left": left, "note": "still finished and older than the cutoff: held by other "
                                                "sessions (skipped) or beyond --max-items; run again to continue"})
    return summaries
