"""The batch loop shared by requeue and archive: small batches, each its own transaction, progress
and the audit advanced after every commit, a pause between batches, a cap on the total."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from queueops.actions.context import Runner
from queueops.actions.decide import batch_count, next_batch_size
from queueops.actions.session import sleep


def run_batches(runner: Runner, *, planned_rows: int, batch_size: int, max_items: int | None, pause_s: float,
                batch: Callable[[int], list[Any]]) -> list[dict[str, Any]]:
    """Call ``batch(n)`` until it returns fewer than ``n`` items (nothing more it may take: the
    rest is locked by other sessions or gone) or the cap is reached. ``batch`` commits or rolls
    back as a whole; what it returns are the item keys it committed. Returns one summary per batch.
    """
    total = batch_count(planned_rows, batch_size)
    done = 0
    summaries: list[dict[str, Any]] = []
    runner.report("batches", done=0, total=total, rows=0, message=f"0 of {planned_rows} rows")
    while True:
        n = next_batch_size(batch_size, done, max_items)
        if n == 0:
            break
        items = batch(n)
        if items:
            done += len(items)
            runner.committed(done)
            summaries.append({"batch": len(summaries) + 1, "rows": len(items),
                              "first_item": items[0], "last_item": items[-1]})
            runner.report("batches", done=len(summaries), total=max(total, len(summaries)), rows=done,
                          message=f"{done} of {planned_rows} rows")
        if len(items) < n or (max_items is not None and done >= max_items):
            break
        if pause_s:
            sleep(pause_s)
    return summaries
