"""watermark-reset: move the watermark back to (lowest pending key - buffer), releasing stranded items.

Items whose key is below the watermark are never dequeued again (the dequeue scans keys >=
watermark): ``watermark_drift < 0``. The reset writes the new value only if the watermark still
holds the value the preview observed (compare-and-set), so a concurrent update -- a dequeuer
moving it, another reset -- is never overwritten; the execution then reports a conflict and
writes nothing.
"""

from __future__ import annotations

from typing import Any

from queueops import coltypes
from queueops.actions.context import PlanContext, Runner
from queueops.actions.decide import new_watermark
from queueops.actions.model import SAMPLE_ROWS, ActionError, Conflict, Plan, Preview, Step, WatermarkOptions
from queueops.config import Queue
from queueops.fragments import fragments_for


def check(queue: Queue, opts: WatermarkOptions) -> None:
    if queue.watermark is None:
        raise ActionError(f"queue {queue.name!r} has no watermark in config (watermark = {{ table, column, buffer }})")
    if queue.kind == "ring":
        raise ActionError("a ring queue's position is its push/pop sequences, not a watermark")


def _integral(value: Any) -> bool:
    """Whether a key or watermark value is an integer (a GUID or text key has no arithmetic)."""
    if isinstance(value, bool):
        return False
    try:
        return int(value) == value
    except (TypeError, ValueError):
        return False


def _pending(queue: Queue, dialect: str) -> dict[str, Any]:
    # A processing item may come back (requeue, failure): keep it reachable too.
    if queue.kind != "status":
        return {}
    return {"pending_values": coltypes.bind_compared_values([*queue.ready_values, *queue.processing_values], dialect)}


def plan(ctx: PlanContext) -> Plan:
    q, opts = ctx.queue, ctx.options
    check(q, opts)
    assert q.watermark is not None
    sqlf, frags = ctx.sql("watermark_reset"), ctx.frags()
    # Arithmetic on the key and the watermark needs integers: refuse a GUID or text key by its type.
    types = coltypes.read_types_with(ctx.session.run, ctx.dialect, [q])
    for p in coltypes.problems(q, types, ctx.dialect):
        if p.field in ("key", "watermark.column"):
            raise ActionError(f"{p.field} = {p.value!r} {p.message.removesuffix('; watermark_drift not collected')}"
                              "; nothing to reset")
    obs = ctx.session.run(sqlf.render(f"observe_{q.kind}", frags, _pending(q, ctx.dialect)))[0]
    if int(obs["wm_rows"]) != 1:
        raise ActionError(f"watermark table {q.watermark.table!r} has {obs['wm_rows']} rows; a watermark is one row")
    old, lowest = obs["old_value"], obs["lowest_pending"]
    if old is None:
        raise ActionError(f"watermark {q.watermark.table}.{q.watermark.column} is NULL; set it by hand first")
    for what, value in ((f"watermark {q.watermark.table}.{q.watermark.column}", old), (f"key {q.key!r}", lowest)):
        if value is not None and not _integral(value):
            raise ActionError(f"{what} holds {value!r} ({type(value).__name__}): a watermark works on integer keys "
                              "only (drift is key minus watermark); nothing to reset")
    buffer = q.watermark.buffer if opts.buffer is None else opts.buffer
    new = new_watermark(lowest, buffer)
    stranded = int(obs["stranded"])
    sample = ctx.session.run(sqlf.render(f"sample_{q.kind}", frags,
                                         {**_pending(q, ctx.dialect), "old_value": old, "sample_n": SAMPLE_ROWS}))
    apply = sqlf.render("apply", frags, {"new_value": new, "old_value": old})
    changes = new != old
    warnings = []
    if not changes:
        warnings.append(f"nothing to do: the watermark already is {old}")
    elif new > old:
        warnings.append(f"this moves the watermark forward ({old} -> {new}): scans skip the keys below "
                        f"{new}, none of which is pending now")
    drift_before = None if lowest is None else int(lowest) - int(old)
    drift_after = None if lowest is None else int(lowest) - int(new)
    summary = (f"set watermark {q.watermark.table}.{q.watermark.column} of queue {q.name!r} from {old} to {new} "
               f"(lowest pending key {lowest if lowest is not None else 'none: queue empty'}, buffer {buffer}), "
               f"releasing {stranded} stranded item(s); only if it still is {old}")
    row = {"old_value": old, "new_value": new, "lowest_pending": lowest, "buffer": buffer,
           "stranded": stranded, "drift_before": drift_before, "drift_after": drift_after}
    preview = Preview(
        action="watermark-reset", queue=q.name, target=q.target, dialect=ctx.dialect, summary=summary,
        steps=[Step("compare-and-set", apply)], rows=[row], row_count=1 if changes else 0, warnings=warnings,
        destructive=False, details={**row, "stranded_items": sample},
    )
    return Plan("watermark-reset", q, ctx.target, opts, preview,
                observed={"old_value": old, "new_value": new, "changes": changes})


def run(plan: Plan, runner: Runner) -> list[dict[str, Any]]:
    q = plan.queue
    if not plan.observed["changes"]:
        return [{"old_value": plan.observed["old_value"], "new_value": plan.observed["new_value"], "written": False}]
    old, new = plan.observed["old_value"], plan.observed["new_value"]
    stmt = runner.sql("watermark_reset").render("apply", fragments_for(q, runner.dialect),
                                                {"new_value": new, "old_value": old})
    rows = runner.execute(stmt, step="compare-and-set", obj=fragments_for(q, runner.dialect).get("wm_table", ""))
    if not rows:
        raise Conflict(f"the watermark no longer is {old} (someone changed it after the preview): nothing was "
                       "written; preview again")
    runner.committed(len(rows))
    runner.report("done", done=1, total=1, rows=len(rows), message=f"watermark {old} -> {new}")
    return [{"old_value": old, "new_value": rows[0]["new_value"], "written": True}]
