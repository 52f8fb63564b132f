"""Root causes per queue from one cycle's rows, as numbers the alert rules can judge.

The console names a root cause (the session holding the oldest snapshot, a session holding a
queue's table, the head of a chain of waiters) from the collectors' JSON notes and judges it with
:func:`queueops.judge.snapshot_state` / :func:`queueops.judge.blocker_state`. An alert sees only
rows of numbers, and the snapshot and head-blocker rows are target-wide (queue ``''``), so no
per-queue threshold rule ever saw them: the ``snapshot-hold`` fault turned the Overview amber and
paged nobody (issue 32). This module turns the same notes into one row per queue and cause, whose
value is the cause's age, so that rules at the judge's own levels (:func:`levels`) give the alert
the severity the Overview gives the queue.

The rows are always written for every queue of a target seen in the cycle (0 when there is no
such cause): a cause that is gone must resolve its alert, and an alert never resolves on a
missing row. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from queueops import judge
from queueops.config import Queue
from queueops.rows import SnapshotRow

SNAPSHOT = "cause_snapshot_age_s"          # the target's oldest snapshot, spread to each of its queues
TABLE_LOCK = "cause_table_lock_age_s"      # the oldest transaction holding this queue's table lock
HEAD_BLOCKER = "cause_head_blocker_age_s"  # the oldest head of a chain whose waiters are this queue's
METRICS = (SNAPSHOT, TABLE_LOCK, HEAD_BLOCKER)  # what an [[alerts.rules]] rule may name besides the catalog's

# Snapshot holders without a session that still pin the horizon (the console names them too).
SESSIONLESS = frozenset({"prepared transaction", "replication slot"})


def levels(snapshot: judge.Levels | None = None) -> dict[str, tuple[str, str, str, float]]:
    """Each alert rule on a cause: name -> (metric, judge rule id, severity, level in seconds). The
    levels are the judge's: the old-snapshot rule (60 s / 600 s, or a queue's own from its
    ``snapshot`` threshold, :func:`~queueops.judge.snapshot_levels`), a table lock that stops
    dequeues (warn at once, crit from :data:`~queueops.judge.LOCK_HOLD_CRIT_S`), the head of
    waiters on a row lock (warn from :data:`~queueops.judge.BLOCKER_MIN_AGE_S`). A table lock's
    warning is the ``lock_blockers`` count itself (at least one holder), since an age of 0 is also
    "none"."""
    warn, crit = judge.snapshot_levels(snapshot)
    return {
        "cause:snapshot:warn": (SNAPSHOT, "ghosts_held_by_snapshot", "warn", warn),
        "cause:snapshot:crit": (SNAPSHOT, "ghosts_held_by_snapshot", "crit", crit),
        "cause:table_lock:warn": ("lock_blockers", "blocker", "warn", 1.0),
        "cause:table_lock:crit": (TABLE_LOCK, "blocker", "crit", judge.LOCK_HOLD_CRIT_S),
        "cause:head_blocker:warn": (HEAD_BLOCKER, "blocker", "warn", judge.BLOCKER_MIN_AGE_S),
        "cause:head_blocker:crit": (HEAD_BLOCKER, "blocker", "crit", judge.LOCK_HOLD_CRIT_S),
    }


def snapshot_thresholds(queues: Iterable[Queue]) -> dict[tuple[str, str], judge.Levels | None]:
    """Each queue's threshold on :data:`~queueops.judge.OLD_SNAPSHOT`, by (target, queue): what the
    report judges a target's old snapshot with on each of its queues, as the console and the alerts
    do (:func:`~queueops.judge.snapshot_levels`)."""
    return {(q.target, q.name): q.threshold(judge.OLD_SNAPSHOT) for q in queues}


def _details(note: str) -> Any:
    if not note or not note.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(note)
    except ValueError:
        return None


def _pid(item: Mapping[str, Any]) -> int | None:
    v = item.get("pid")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _age(item: Mapping[str, Any]) -> float:
    v = item.get("xact_age_s")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def cause_rows(rows: Iterable[SnapshotRow]) -> list[SnapshotRow]:
    """One row per queue and cause (:data:`SNAPSHOT`, :data:`TABLE_LOCK`, :data:`HEAD_BLOCKER`) for
    each target and queue in ``rows``; each only when the rows it is read from are in this cycle
    (a slow cycle without them changes nothing)."""
    rows = list(rows)
    queues: dict[str, dict[str, SnapshotRow]] = {}   # target -> queue -> a row of it (ts, database)
    snapshot: dict[str, float] = {}                   # target -> age of a holder the console names
    heads: dict[str, list[Mapping[str, Any]] | None] = {}
    holders: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    waiters: dict[tuple[str, str], set[int]] = {}
    for r in rows:
        if r.queue:
            queues.setdefault(r.target, {}).setdefault(r.queue, r)
        if r.metric == "oldest_snapshot_age_s" and not r.queue:
            d = _details(r.note)
            named = isinstance(d, dict) and (_pid(d) is not None or d.get("kind") in SESSIONLESS)
            snapshot[r.target] = float(r.value or 0.0) if named else 0.0
        elif r.metric == "head_blockers" and not r.queue:
            d = _details(r.note)
            heads[r.target] = [h for h in d if isinstance(h, Mapping)] if isinstance(d, list) else []
        elif r.metric == "lock_blockers" and r.queue:
            d = _details(r.note)
            items = d.get("holders") if isinstance(d, dict) else None
            holders[(r.target, r.queue)] = [h for h in items or () if isinstance(h, Mapping)]
        elif r.metric == "lock_waiters" and r.queue:
            d = _details(r.note)
            pids = d.get("pids") if isinstance(d, dict) else None
            waiters[(r.target, r.queue)] = {p for p in pids or () if isinstance(p, int)}
    out: list[SnapshotRow] = []
    for target, by_queue in queues.items():
        for queue, seen in by_queue.items():
            def row(metric: str, value: float, note: str, seen: SnapshotRow = seen) -> SnapshotRow:
                return replace(seen, metric=metric, value=value, note=note)

            if target in snapshot:
                out.append(row(SNAPSHOT, snapshot[target], "oldest_snapshot_age_s of the target"))
            held = holders.get((target, queue))
            if held is not None:
                out.append(row(TABLE_LOCK, max((_age(h) for h in held), default=0.0),
                               "lock_blockers: the oldest holder's transaction age"))
            if target in heads:
                table_pids = {_pid(h) for h in held or ()}
                mine = waiters.get((target, queue), set())
                ages = [_age(h) for h in heads[target] or ()
                        if _pid(h) is not None and _pid(h) not in table_pids
                        and ("waiters" not in h or mine & set(h.get("waiters") or ()))]
                out.append(row(HEAD_BLOCKER, max(ages, default=0.0),
                               "head_blockers whose waiters wait on this queue's table"))
    return out
