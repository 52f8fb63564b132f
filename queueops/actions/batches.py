"""The batch loop shared by requeue and archive: small batches, each its own transaction, progress
and the audit advanced after every commit, a pause between batches, a cap on the total."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queueops.actions.context import Runner
from queueops.actions.decide import batch_count, next_batch_size
from queueops.actions.session import sleep


def run_batches(runner: Runner, *, planned_rows: int, batch_size: int, cap: int | None, pause_s: float,
                batch: Callable[[int], list[Any]], more: Callable[[], bool] | None = None) -> list[dict[str, Any]]:
    """Call ``batch(n)`` until it returns fewer than ``n`` items (nothing more it may take: the
    rest is locked by other sessions or gone) or ``cap`` items are done in total. With ``more``
    (the action works through a fixed list of keys), a short batch does not end the loop: it
    goes on while ``more()`` says keys are left. ``batch`` commits or rolls back as a whole; what
    it returns are the item keys it committed.

    ``cap`` is what the operator confirmed (the preview's count): the loop never asks for more
    than what is left of it, so the execution never touches more items than the preview showed.
    Each batch's summary goes to ``runner.done_rows`` as the batch commits (an interrupted or
    failed action's result lists them); the list is returned.
    """
    total = batch_count(planned_rows, batch_size)
    done = 0
    summaries = runner.done_rows
    batches = 0
    runner.report("batches", done=0, total=total, rows=0, message=f"0 of {planned_rows} rows")
    while True:
        n = next_batch_size(batch_size, done, cap)
        if n == 0:
            break
        items = batch(n)
        batches += 1
        if items:
            done += len(items)
            runner.committed(done)
            summaries.append({"batch": len(summaries) + 1, "rows": len(items),
                              "first_item": items[0], "last_item": items[-1]})
            runner.report("batches", done=batches, total=max(total, batches), rows=done,
                          message=f"{done} of {planned_rows} rows")
        if (not more() if more is not None else len(items) < n) or (cap is not None and done >= cap):
            break
        if pause_s:
            sleep(pause_s)
    return summaries
