"""watermark-reset: move the watermark back to (lowest pending key - buffer), releasing stranded items.

Items whose key is below the watermark are never dequeued again (the dequeue scans keys >=
watermark): ``watermark_drift < 0``. What the operator confirms is the new value, and how it is
written depends on the direction:

* **Back** (the usual reset: releasing stranded items). A lower watermark never strands anything,
  it only makes the dequeue scan more keys, so the confirmed value is written whatever the
  consumers did between preview and confirmation -- on a live queue they move the watermark
  forward every few seconds, and a compare-and-set on the previewed old value failed every time
  from the console (issue 32). The row is locked and read first, so the result says where it had
  moved; a watermark found already at or behind the confirmed value is left as it is.
* **Forward** (nothing pending below the new value). Moving it forward would strand an item that
  came back below it meanwhile, so it stays a compare-and-set on the previewed old value: a
  concurrent update wins, and the execution reports a conflict and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queueops import coltypes, mapping
from queueops.actions.context import PlanContext, Runner
from queueops.actions.decide import new_watermark
from queueops.actions.model import SAMPLE_ROWS, ActionError, Conflict, Plan, Preview, Step, WatermarkOptions
from queueops.actions.session import transaction
from queueops.config import Queue


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


def _pending(values: Mapping[str, Any]) -> dict[str, Any]:
    """A status queue's pending values (ready and processing: a processing item may come back), from
    its compiled mapping's values; none for another kind."""
    return {"pending_values": values["pending_values"]} if "pending_values" in values else {}


def plan(ctx: PlanContext) -> Plan:
    q, opts = ctx.queue, ctx.options
    check(q, opts)
    assert q.watermark is not None
    sqlf, frags = ctx.sql("watermark_reset"), ctx.frags()
    # Arithmetic on the key and the watermark needs integers: refuse a GUID or text key by its type.
    types = coltypes.read_types_with(ctx.session.run, ctx.dialect, [q])
    for p in mapping.compile_queue(q, ctx.dialect, types).problems:
        if p.field in ("key", "watermark.column"):
            raise ActionError(f"{p.field} = {p.value!r} {p.message.removesuffix('; watermark_drift not collected')}"
                              "; nothing to reset")
    obs = ctx.session.run(sqlf.render(f"observe_{q.kind}", frags, _pending(ctx.compiled.values)))[0]
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
                                         {**_pending(ctx.compiled.values), "old_value": old, "sample_n": SAMPLE_ROWS}))
    changes = new != old
    back = new < old
    steps = _steps(sqlf, frags, new, old, back)
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
               f"releasing {stranded} stranded item(s); "
               + (f"written even if consumers have moved it forward since (a lower watermark strands nothing), "
                  f"never over a value already below {new}" if back else f"only if it still is {old}"))
    row = {"old_value": old, "new_value": new, "lowest_pending": lowest, "buffer": buffer,
           "stranded": stranded, "drift_before": drift_before, "drift_after": drift_after}
    preview = Preview(
        action="watermark-reset", queue=q.name, target=q.target, dialect=ctx.dialect, summary=summary,
        steps=steps, rows=[row], row_count=1 if changes else 0, warnings=warnings,
        destructive=False, details={**row, "stranded_items": sample},
    )
    return Plan("watermark-reset", q, ctx.target, opts, preview,
                observed={"old_value": old, "new_value": new, "changes": changes})


def _steps(sqlf: Any, frags: dict[str, str], new: Any, old: Any, back: bool) -> list[Step]:
    if back:
        return [Step("lock", sqlf.render("lock", frags, {})),
                Step("move back", sqlf.render("move_back", frags, {"new_value": new}))]
    return [Step("compare-and-set", sqlf.render("apply", frags, {"new_value": new, "old_value": old}))]


def run(plan: Plan, runner: Runner) -> list[dict[str, Any]]:
    old, new = plan.observed["old_value"], plan.observed["new_value"]
    if not plan.observed["changes"]:
        return [{"old_value": old, "new_value": new, "written": False}]
    frags = runner.compiled.names
    steps = _steps(runner.sql("watermark_reset"), frags, new, old, new < old)
    obj = frags.get("wm_table", "")
    if new < old:
        with transaction(runner.session):
            found = runner.execute(steps[0].statement, step=steps[0].label, obj=obj)
            now = found[0]["value"] if found else None
            if now is None or now <= new:
                runner.note(f"the watermark already is {now}, at or behind the confirmed {new} (someone moved it "
                            "back since the preview): nothing was written")
                return [{"old_value": now, "new_value": new, "written": False}]
            rows = runner.execute(steps[1].statement, step=steps[1].label, obj=obj)
            if not rows:  # impossible under the row lock just taken; never report a write that did not happen
                raise Conflict(f"the watermark ({now}) could not be moved back to {new}: nothing was written")
        if now != old:
            runner.note(f"the watermark had moved from {old} to {now} since the preview (consumers advance it); "
                        f"it was set to the confirmed {new}")
    else:
        rows = runner.execute(steps[0].statement, step=steps[0].label, obj=obj)
        if not rows:
            raise Conflict(f"the watermark no longer is {old} (someone changed it after the preview): nothing was "
                           "written; a forward move is only made over the value the preview saw: preview again")
        now = old
    runner.committed(len(rows))
    runner.report("done", done=1, total=1, rows=len(rows), message=f"watermark {now} -> {new}")
    return [{"old_value": now, "new_value": rows[0]["new_value"], "written": True}]
