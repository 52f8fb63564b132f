"""requeue: give stuck work back to the queue.

Lease kind: clear the lease of items leased longer ago than the lease timeout. Status kind: set
items that have been processing longer than that back to the first ready value. The cutoff
(database clock minus the timeout) is fixed by the preview and reused by the execution, and the
batch statement has exactly the preview's predicate, so the preview's count is the number of
rows the execution touches when nothing changes in between. A row that leaves the set (renewed,
finished, re-leased) is not touched, and each row is written only if its lease value is still
the one observed.

What binds the execution to the preview: the cutoff, and the preview's count as a cap on the
total (each batch asks for at most what is left of it). A lease normally only moves forward, so
a row should not enter the set after the preview -- but it can: a consumer whose clock is behind
the database's writes a lease that is already older than the cutoff, and an application that
claims a status item without setting ``status_changed_at`` moves a long-ready item straight into
it. Such rows are taken only within the confirmed count, oldest first, never beyond it. When
fewer rows qualified than the preview counted, the result and the audit record say so.

With ``keys`` (``--key``, the console's drill-down): every statement -- count, sample, batch and the
final count -- gains ``AND key IN (:keys)``, one bound value per key, beside the queue's own
predicate (``{open_and}``), so only those items are released, and only if they are stuck by the
same rules (cutoff, failed, exhausted) and their lease is still the one observed.
"""

from __future__ import annotations

from typing import Any

from queueops import mapping, readiness, sqlfiles
from queueops.actions.batches import run_batches
from queueops.actions.context import PlanContext, Runner
from queueops.actions.decide import batch_count
from queueops.actions.model import SAMPLE_ROWS, ActionError, NotOffered, Plan, Preview, RequeueOptions, Step
from queueops.config import Queue

LIMIT_ALL = 2**31 - 1
# The selected keys' predicate, put beside {open_and} (in every requeue block's WHERE, once): the key
# is the queue's quoted fragment, the keys bound values (ASCII text keys cast to varchar on SQL Server,
# as archive's, so a varchar key's index is sought); rendered by sqlfiles like the blocks.
_KEYS_AND = " AND {key} IN (:keys)"


def _render(sqlf: sqlfiles.SqlFile, block: str, frags: dict[str, str], values: dict[str, Any],
            keys: list[Any] | None) -> sqlfiles.Statement:
    """A requeue block, restricted to ``keys`` (already bound, :meth:`CompiledQueue.bind`) when given."""
    if not keys:
        return sqlf.render(block, frags, values)
    text = sqlf.block(block)
    if text.count("{open_and}") != 1:
        raise ActionError(f"internal: requeue block {block!r} cannot be restricted to keys")
    return sqlfiles.render(text.replace("{open_and}", "{open_and}" + _KEYS_AND), sqlf.dialect, frags,
                           {**values, "keys": keys}, name=sqlf.name)


def check(queue: Queue, opts: RequeueOptions) -> None:
    rule, reason = _preset_rule(queue)
    if rule == "refuse":
        raise NotOffered(f"requeue is refused on queue {queue.name!r} (preset {queue.preset!r}): {reason}")
    if queue.kind not in ("lease", "status"):
        raise ActionError(f"requeue applies to lease and status queues; {queue.name!r} is a {queue.kind} queue "
                          f"({_NO_REQUEUE[queue.kind]})")
    if queue.kind == "status" and not queue.status_changed_at:
        raise ActionError(f"queue {queue.name!r} has no status_changed_at column in config: without it "
                          "nobody can tell how long an item has been processing")
    if queue.kind == "status" and (queue.heartbeat_from is not None or queue.timeout_column):
        rule = ("their worker's heartbeat (heartbeat_from)" if queue.heartbeat_from
                else "their own time limit (timeout_column)")
        raise ActionError(f"queue {queue.name!r} judges its processing items by {rule}: requeue selects by the "
                          "item's status-change time against lease_timeout_s and would not release the same items; "
                          "use the library's own rescue")
    if opts.bump_attempts and not queue.attempts_column:
        raise ActionError(f"--bump-attempts needs attempts_column in the config of queue {queue.name!r}")


# Why each other kind has nothing to requeue, in the words of that kind.
_NO_REQUEUE = {
    "delete": "its items leave by being deleted: a dequeuer that dies rolls its DELETE back and the item is "
              "waiting again, there is no lease to release",
    "due": "an item comes back by itself when its due time passes: there is no lease to release; if the due "
           "column is set forward when an item is taken, map the queue as kind = \"lease\" on that column",
    "ring": "a slot is freed by the consumer's pop and its reference count: there is no lease to release",
}


def _preset_rule(queue: Queue) -> tuple[str, str]:
    """The library preset's word on requeue (allow / warn / refuse, and why); allow without a preset."""
    if not queue.preset:
        return "allow", ""
    from queueops import presets

    return presets.get(queue.preset).action_rule("requeue")


def _values(c: mapping.CompiledQueue, cutoff: Any) -> dict[str, Any]:
    return {"cutoff": cutoff, "processing_values": c.values["processing_values"],
            "ready_value": c.queue.ready_values[0]}


def _follow(queue: Queue, frags: dict[str, str], bump: bool) -> tuple[str, dict[str, str]]:
    """The block suffix and fragments for a lease queue that maps readiness fields (issue 31):
    ``{live}`` keeps exhausted items out (with --bump-attempts, also those the bump would exhaust),
    ``{bump_set}`` adds the attempt. ('', frags) for any other queue: the blocks of before."""
    if queue.kind not in ("lease", "status") or "exhausted" not in frags:
        return "", frags
    live = f"NOT {frags['exhausted_next' if bump else 'exhausted']}"
    bump = {} if bump else {"bump_set": "", "bump_col": ""}
    return ("_follow_past" if queue.lease_ready == "past" else "_follow"), {**frags, "live": live, **bump}


# SQL Server escalates a statement's row locks to a table lock past about 5,000 on one object.
ESCALATION_LOCKS = 5_000


def _escalation_warning(ctx: PlanContext, q: Queue) -> list[str]:
    """SQL Server (issue 33, item 11): without an index that delivers the stuck items in order (the
    stuck_leases statement's), each batch's ``TOP ... ORDER BY`` under UPDLOCK reads and sorts every
    stuck item, holding an update lock on each: past ~5,000 the server may escalate to a table lock,
    which blocks every dequeuer for the batch. Said in the preview, with the index that avoids it."""
    if ctx.dialect != "mssql":
        return []
    from queueops import indexadvice

    need = indexadvice.needed("stuck_leases", q)
    if need is None:
        return []
    rows = ctx.session.run(sqlfiles.load("mssql", "catalog_indexes").render(
        values={"qualified_table": ctx.compiled.table}))
    if indexadvice.served(need, indexadvice.indexes_from_rows(rows)):
        return []
    return [f"no index delivers the stuck items in order ({', '.join(need.columns)}): each batch reads and sorts "
            f"every stuck item under update locks, and past about {ESCALATION_LOCKS:,} row locks SQL Server may "
            "escalate to a table lock that blocks every dequeuer for the batch; create the index first "
            f"({indexadvice.create_index(q, need, 'mssql')}), or keep --max-items under {ESCALATION_LOCKS:,}"]


def _exhausted_warning(ctx: PlanContext, q: Queue, sqlf: sqlfiles.SqlFile, follow: str, frags: dict[str, str],
                       values: dict[str, Any], keys: list[Any] | None, what: str, held: str) -> list[str]:
    """Items held too long but at max_attempts are never released (issue 29: Oban would never fetch
    them, they sorted first and stalled its fetch): the preview says how many and why, so an operator
    does not read the smaller count as the whole stuck set. Counted by the same count block with
    {live} turned round."""
    if not follow or frags.get("exhausted", "false") in ("false", "(1 = 0)"):
        return []
    n = int(ctx.session.run(_render(sqlf, f"count_{q.kind}{follow}", {**frags, "live": frags["exhausted"]},
                                    {**values, "limit_n": LIMIT_ALL}, keys))[0]["n"])
    if not n:
        return []
    return [f"{n} {what} {held} at max_attempts not released: the library never takes an item at its attempt "
            "limit again (set back to ready it would only block the queue); the library's own rescue fails or "
            "discards it (Oban's Lifeline: discarded), or leave it to an operator to fail"]


def plan(ctx: PlanContext) -> Plan:
    q, opts = ctx.queue, ctx.options
    check(q, opts)
    verdict = readiness.requeue_verdict(q, readiness.read(ctx.session.run, q, ctx.dialect))
    if verdict.refusal:
        raise NotOffered(f"requeue is refused on queue {q.name!r}: {verdict.refusal}; fix: {verdict.fix}")
    timeout = opts.lease_timeout_s or q.lease_timeout_s
    follow, frags = _follow(q, ctx.frags(), opts.bump_attempts)
    # lease_ready = "past": what is held too long is a lock further ahead than the timeout.
    cutoff = ctx.cutoff(-timeout if follow == "_follow_past" else timeout)
    sqlf, kind = ctx.sql("requeue"), q.kind
    values = _values(ctx.compiled, cutoff)
    limit = opts.max_items or LIMIT_ALL
    # Lease items whose error is set failed: never released (blocks *_unfailed; *_follow say it
    # with {failed}, which error_at refines).
    unfailed = "_unfailed" if kind == "lease" and q.error_column and not follow else ""
    keys = opts.keys
    bound = ctx.compiled.bind(keys) if keys else None  # as compared with the key column
    count = int(ctx.session.run(_render(sqlf, f"count_{kind}{follow}{unfailed}", frags,
                                        {**values, "limit_n": limit}, bound))[0]["n"])
    # With keys the preview lists every selected item that qualifies: exactly what a batch takes.
    sample = ctx.session.run(_render(sqlf, f"sample_{kind}{follow}{unfailed}", frags,
                                     {**values, "sample_n": len(keys) if keys else SAMPLE_ROWS}, bound))
    if follow:
        block = f"batch_{kind}{follow}"
    else:
        block = (f"batch_{kind}_attempts" if opts.bump_attempts else f"batch_{kind}") + unfailed
    batch_stmt = _render(sqlf, block, frags, {**values, "batch_n": opts.batch_size}, bound)
    what = "lease(s)" if kind == "lease" else "processing item(s)"
    batches = batch_count(count, opts.batch_size)
    warnings = []
    warnings += [f"{fld} = {value!r}: {reason}; fix: {fix}" for fld, value, reason, fix in verdict.warnings]
    if count == 0 and follow == "_follow_past":
        warnings.append(f"nothing to requeue: no lock further ahead than {timeout:g} s (lease_ready = \"past\": "
                        "a lock that has passed is ready, and the library takes it again itself)")
    elif count == 0:
        warnings.append(f"nothing to requeue: no {what} older than {timeout:g} s")
    else:
        warnings.append("a consumer still working on an expired lease loses it: its finishing statement must "
                        "compare the lease value (compare-and-set), or the item is processed twice")
    held = (f"locked further ahead than {timeout:g} s" if follow == "_follow_past"
            else f"older than {timeout:g} s")
    warnings += _exhausted_warning(ctx, q, sqlf, follow, frags, values, bound, what, held)
    if keys and count < len(keys):
        warnings.append(f"{count} of the {len(keys)} selected key(s) qualify; the others are not released: not "
                        f"{held}, failed, exhausted, already free or not found")
    warnings += _escalation_warning(ctx, q)
    rule, reason = _preset_rule(q)
    if rule == "warn":
        warnings.append(f"preset {q.preset!r}: {reason}")
    if q.watermark:
        warnings.append("this queue has a watermark: released items with keys below it stay stranded until "
                        "watermark-reset")
    sets = (f" (setting {frags['release_set']})" if "release_set" in frags
            else f" (also setting {frags['owner_set'].removeprefix(', ')})" if frags.get("owner_set") else "")
    summary = (f"release {count} {what} of queue {q.name!r}{sets} {held} (cutoff {cutoff}) "
               f"in {batches} batch(es) of at most {opts.batch_size}"
               + (f", capped at {opts.max_items}" if opts.max_items else "")
               + (", adding 1 to attempts" if opts.bump_attempts else "")
               + (f", only among the {len(keys)} selected key(s)" if keys else ""))
    preview = Preview(
        action="requeue", queue=q.name, target=q.target, dialect=ctx.dialect, summary=summary,
        steps=[Step("batch", batch_stmt, repeat=True)], rows=sample, row_count=count, warnings=warnings,
        destructive=False,
        details={"cutoff": cutoff, "lease_timeout_s": timeout, "batches": batches, "batch_size": opts.batch_size,
                 "max_items": opts.max_items, "bump_attempts": opts.bump_attempts, "kind": kind,
                 **({"keys": list(keys)} if keys else {})},
    )
    return Plan("requeue", q, ctx.target, opts, preview,
                observed={"cutoff": cutoff, "count": count, "block": block, "follow": follow})


def run(plan: Plan, runner: Runner) -> list[dict[str, Any]]:
    opts: RequeueOptions = plan.options  # type: ignore[assignment]
    q = plan.queue
    sqlf = runner.sql("requeue")
    follow, frags = _follow(q, dict(runner.compiled.names), opts.bump_attempts)
    values = _values(runner.compiled, plan.observed["cutoff"])
    keys = runner.compiled.bind(opts.keys) if opts.keys else None

    def batch(n: int) -> list[Any]:
        rows = runner.execute(_render(sqlf, plan.observed["block"], frags, {**values, "batch_n": n}, keys),
                              step="batch")
        return [r["item"] for r in rows]

    confirmed = int(plan.observed["count"])  # the preview's count, already capped by --max-items
    summaries = run_batches(runner, planned_rows=confirmed, batch_size=opts.batch_size, cap=confirmed,
                            pause_s=opts.pause_s, batch=batch)
    if runner.rows < confirmed:
        runner.note(f"the preview counted {confirmed} item(s), {runner.rows} were released: {confirmed - runner.rows} "
                    "no longer qualified (renewed, finished or re-leased since the preview) or were held by other "
                    "sessions (skipped)")
    unfailed = "_unfailed" if q.kind == "lease" and q.error_column and not follow else ""
    left = int(runner.execute(_render(sqlf, f"count_{q.kind}{follow}{unfailed}", frags,
                                      {**values, "limit_n": LIMIT_ALL}, keys))[0]["n"])
    if left:
        summaries.append({"left": left, "note": "still older than the cutoff, not released: held by other sessions "
                                                "(skipped, never waited for), beyond --max-items, or entered the set "
                                                "after the preview (never beyond the confirmed count); preview again"})
    return summaries
