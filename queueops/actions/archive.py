"""archive: take finished items out of a status queue, in small batches with a pause between them.

The archiving strategy of high-performance-queue: keep the queue table small around the clock
without a maintenance window, in a background job, never in the dequeue. ``delete`` removes the
finished items (and their payload rows in the data table); ``move`` first copies both to archive
tables of the same layout. Each batch is one transaction that archives whole items or nothing,
so an interrupted archive leaves no half-moved item and a re-run simply continues.

**The execution archives only what was confirmed.** The cutoff alone does not bind it: without
``status_changed_at`` an item's age is its ``enqueued_at``, so an item that finishes after the
preview is at once "finished and old enough" (issue 30: a preview of 10, then 500 processing items
of the same age finish, and an unbound execution removed 510). Two bindings, chosen by the
preview's count:

* **Up to** :data:`KEYS_MAX` **items: the previewed keys.** The preview reads the keys themselves
  (one ordered read of at most ``KEYS_MAX + 1`` keys, which is also the sample) and the plan
  keeps them; each batch picks the next chunk of them (``pick_keys``: ``key IN (...)`` plus the
  status and age, re-checked under the batch's row locks). An item that finished after the
  preview is never archived, whatever its key; a previewed item that changed meanwhile is left.
* **Beyond: the preview's count as a cap, its highest key as a bound.** Keeping a million keys
  in the plan (and in the console's session) is what this avoids: the plan keeps two values, the
  highest key ``k`` (the highest that qualifies; with ``--max-items`` the ``max_items``-th in key
  order) and the count ``n`` of the items that qualify up to it. Each batch picks ``key <= k`` in key order and asks for at most
  what is left of ``n``, so the execution never removes more than ``n`` items nor any item with
  a higher key (an item inserted after the preview, with an ever-increasing key). What it cannot
  tell apart is an item *below* ``k`` that finished after the preview: the batches take the
  lowest keys first, so such an item may be archived instead of a previewed one -- never in
  addition (the total stays within ``n``). A queue with ``status_changed_at`` set on every change
  has no such item: finishing gives it a fresh age, newer than the cutoff. Where that matters, an
  archive in slices of ``--max-items`` up to ``KEYS_MAX`` is bound to its keys, each slice exactly.
  Memory: two values, whatever the count; the preview reads ``KEYS_MAX + 1`` rows, the count, and
  one key (an index range scan each).

Either way, when fewer items were archived than the preview counted (changed, gone or held by
another session meanwhile), the result's notes and the audit record say so.
"""

from __future__ import annotations

from typing import Any

from queueops import mapping
from queueops.actions.batches import run_batches
from queueops.actions.context import PlanContext, Runner
from queueops.actions.decide import batch_count, layout_problem
from queueops.actions.model import SAMPLE_ROWS, ActionError, ArchiveOptions, Conflict, Plan, Preview, Step
from queueops.actions.session import transaction
from queueops.config import Queue
from queueops.fragments import DEFAULT_SCHEMA

LIMIT_ALL = 2**31 - 1
# Up to this many items the preview keeps their keys and the execution archives exactly those
# (a few hundred kB in the plan at most); beyond, the count and the highest key bind it.
KEYS_MAX = 10_000
# Bound keys per statement in the keys mode: far below SQL Server's 2100 parameters a request
# whatever the batch size.
KEYS_PER_STATEMENT = 1000


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


def _frags(c: mapping.CompiledQueue, archive: dict[str, str]) -> dict[str, str]:
    frags = dict(c.names)
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
        # Always schema-qualified (issue 33, item 11: INSERT INTO [JobsArchive] went to the action
        # login's default schema): the archive schema, else the queue's, else the engine's default.
        schema = opts.archive_schema or q.schema_ or DEFAULT_SCHEMA[dialect]
        archive["archive_table"] = ctx.quoted_table(opts.archive_table, schema, "archive table")
        pairs = [(ctx.compiled.table, archive["archive_table"], q.table, opts.archive_table)]
        if q.data_table:
            archive["archive_data_table"] = ctx.quoted_table(opts.archive_data_table, schema, "archive data table")
            pairs.append((ctx.compiled.data_table, archive["archive_data_table"], q.data_table,
                          opts.archive_data_table))
        for source, dest, source_name, dest_name in pairs:
            src_cols, _ = _columns(ctx, source)
            dst_cols, identity = _columns(ctx, dest)
            problem = layout_problem(src_cols, dst_cols, identity)
            if problem:
                raise ActionError(f"archive table {dest_name!r} {problem}; create it with the columns of "
                                  f"{source_name!r}, in the same order (PostgreSQL: CREATE TABLE ... (LIKE ...))")
    frags = _frags(ctx.compiled, archive)
    if not q.status_changed_at:
        warnings.append("no status_changed_at in config: age is measured from enqueued_at")
    cutoff = ctx.cutoff(opts.older_than_s)
    sqlf = ctx.sql("archive")
    values = {"cutoff": cutoff, "done_values": ctx.compiled.values["done_values"]}
    limit = opts.max_items or LIMIT_ALL
    # One ordered read of the first KEYS_MAX + 1 items: the sample, and -- when that is all of them
    # -- the very keys the execution archives.
    head = ctx.session.run(sqlf.render("sample", frags, {**values, "sample_n": min(limit, KEYS_MAX + 1)}))
    sample = head[:SAMPLE_ROWS]
    keys: list[Any] | None = None
    last_key: Any = None
    if len(head) <= KEYS_MAX:
        keys = [r["item"] for r in head]
        count = len(keys)
    else:
        last_key = _last_key(ctx, sqlf, frags, values, opts.max_items)
        count = 0 if last_key is None else int(ctx.session.run(sqlf.render(
            "count_bounded", frags, {**values, "limit_n": limit, "last_key": ctx.compiled.bind([last_key])[0]}))[0]["n"])
    binding = {"keys": keys, "last_key": last_key}
    steps = _steps(ctx.compiled, opts, frags, values, opts.batch_size, binding=binding,
                   chunk=next(iter(_chunks(keys, opts)), None))
    batches = batch_count(count, opts.batch_size)
    if count == 0:
        warnings.append(f"nothing to archive: no item with status in {list(q.done_values)} finished more than "
                        f"{opts.older_than_s:g} s ago")
    verb = "move" if opts.mode == "move" else "delete"
    dest = f" to {archive['archive_table']}" if opts.mode == "move" else ""
    bound = (f"exactly these {count} item(s) (their keys are fixed by this preview; an item that finishes "
             "later is not archived)" if keys is not None else
             f"at most these {count} item(s): never more in total, none with a key above {last_key!r}")
    summary = (f"{verb} {count} finished item(s) of queue {q.name!r} older than {opts.older_than_s:g} s"
               f"{dest}{' with their payload rows' if q.data_table else ''}, in {batches} batch(es) of at most "
               f"{opts.batch_size} with {opts.pause_s:g} s between batches"
               + (f", capped at {opts.max_items}" if opts.max_items else "") + f"; {bound}")
    preview = Preview(
        action="archive", queue=q.name, target=q.target, dialect=dialect, summary=summary, steps=steps,
        rows=sample, row_count=count, warnings=warnings, destructive=True,
        details={"cutoff": cutoff, "older_than_s": opts.older_than_s, "mode": opts.mode, "batches": batches,
                 "batch_size": opts.batch_size, "pause_s": opts.pause_s, "max_items": opts.max_items,
                 "archive_table": archive.get("archive_table"),
                 "archive_data_table": archive.get("archive_data_table"),
                 "bound": ({"by": "keys", "keys": count} if keys is not None else
                           {"by": "count and highest key", "count": count, "last_key": last_key})},
    )
    return Plan("archive", q, ctx.target, opts, preview,
                observed={"cutoff": cutoff, "count": count, "archive": archive, **binding})


def _last_key(ctx: PlanContext, sqlf: Any, frags: dict[str, str], values: dict[str, Any],
              max_items: int | None) -> Any:
    """The highest key of the items a large archive may take: the ``max_items``-th in key order
    (the execution takes the lowest keys first), else -- or when fewer qualify -- the highest that
    qualifies. None when nothing qualifies."""
    if max_items:
        rows = ctx.session.run(sqlf.render("nth_key", frags, {**values, "skip_n": max_items - 1}))
        if rows:
            return rows[0]["item"]
    rows = ctx.session.run(sqlf.render("last_key", frags, values))
    return rows[0]["item"] if rows else None


def _chunks(keys: list[Any] | None, opts: ArchiveOptions) -> list[list[Any]]:
    """The previewed keys in the chunks the batches take them in (key order, as read)."""
    if not keys:
        return []
    n = min(opts.batch_size, KEYS_PER_STATEMENT)
    return [keys[i:i + n] for i in range(0, len(keys), n)]


def _steps(c: mapping.CompiledQueue, opts: ArchiveOptions, frags: dict[str, str], values: dict[str, Any],
           n: int, item_ids: list[Any] | None = None, *, binding: dict[str, Any],
           chunk: list[Any] | None = None) -> list[Step]:
    """The statements of one batch, in order (``item_ids``: the keys the pick returned; ``chunk``:
    in the keys mode, the previewed keys this batch takes). Keys bind as compared with the key
    column (a varchar key is sought on SQL Server, not scanned)."""
    from queueops import sqlfiles

    q = c.queue
    sqlf = sqlfiles.load(c.dialect, "actions/archive")
    ids = {"item_ids": c.bind(item_ids) if item_ids else ["<picked keys>"]}
    if binding["keys"] is not None:
        confirmed = chunk or ["<previewed keys>"]
        pick = sqlf.render("pick_keys", frags, {**values, "confirmed_keys": c.bind(confirmed)})
    else:
        pick = sqlf.render("pick", frags, {**values, "batch_n": n, "last_key": c.bind([binding["last_key"]])[0]})
    steps = [Step("pick", pick, repeat=True)]
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
    frags = _frags(runner.compiled, plan.observed["archive"])
    values = {"cutoff": plan.observed["cutoff"], "done_values": runner.compiled.values["done_values"]}
    binding = {"keys": plan.observed.get("keys"), "last_key": plan.observed.get("last_key")}
    chunks = _chunks(binding["keys"], opts)
    confirmed = int(plan.observed["count"])

    def batch(n: int) -> list[Any]:
        chunk = None
        if binding["keys"] is not None:
            if not chunks:
                return []
            chunk = chunks.pop(0)  # at most min(batch size, what is left of the count) keys
        with transaction(runner.session):
            steps = _steps(runner.compiled, opts, frags, values, n, binding=binding, chunk=chunk)
            pick = steps[0]
            picked = [r["item"] for r in runner.execute(pick.statement, step=pick.label)]
            if not picked:
                return []
            removed: list[Any] = []
            for step in _steps(runner.compiled, opts, frags, values, n, picked, binding=binding, chunk=chunk)[1:]:
                rows = runner.execute(step.statement, step=step.label, obj=_object(step.label, frags))
                if step.label == "delete queue rows":
                    removed = [r["item"] for r in rows]
            if len(removed) != len(picked):
                # Impossible while the pick's row locks hold; if it ever happens, undo the batch.
                raise Conflict(f"batch picked {len(picked)} items but removed {len(removed)}: rolled back, "
                               "nothing of this batch was archived")
            return removed

    summaries = run_batches(runner, planned_rows=confirmed, batch_size=opts.batch_size, cap=confirmed,
                            pause_s=opts.pause_s, batch=batch,
                            more=(lambda: bool(chunks)) if binding["keys"] is not None else None)
    if runner.rows < confirmed:
        runner.note(f"the preview counted {confirmed} item(s), {runner.rows} were archived: {confirmed - runner.rows} "
                    "no longer qualified (changed or removed since the preview) or were held by other sessions "
                    "(skipped)")
    sqlf = runner.sql("archive")
    left = int(runner.execute(sqlf.render("count", frags, {**values, "limit_n": LIMIT_ALL}))[0]["n"])
    if left:
        summaries.append({"left": left, "note": "still finished and older than the cutoff, not archived: held by "
                                                "other sessions (skipped), beyond --max-items, or finished after the "
                                                "preview (not confirmed); preview again to archive them"})
    return summaries
