"""The one judge: threshold semantics, guards, rule parameters and advice texts, by rule id.

The console (Overview, queue page, findings), the alert rules and the Spark pipeline's findings
all take their judgement from here, so a queue cannot be red on one screen and green on another,
nor alert where the console shows nothing. Pure Python: no Streamlit, no Spark, no I/O; the
metric facts (default levels, guards, samples required) come from the catalog
(``sql/metrics.toml``, :mod:`queueops.catalog`).

Decisions recorded here (each was written differently in several places before):

* ``above`` levels fire at or above the level, ``below`` levels strictly under it
  (``watermark_drift < 0`` means stranded items; a drift of exactly 0 is healthy).
* Fragmentation counts only on an index of at least :data:`MIN_PAGES` pages (the floor below
  which the rebuild action does nothing: Microsoft's guidance, Ola Hallengren's IndexOptimize) in
  a table of at least :data:`MIN_ROWS` rows. Otherwise a tiny index would be red forever with an
  advice that its own action refuses. A guard metric that was not sampled does not suppress.
* The old-snapshot rule is :data:`SNAPSHOT_WARN_S` = 60 s / :data:`SNAPSHOT_CRIT_S` = 600 s (the
  pipeline's levels; the console used 30 s / 120 s). A queue workload's transactions take
  milliseconds, so a minute-old snapshot is already abnormal and worth naming as a root cause,
  while 30 s flagged ordinary batch jobs and reports; ten minutes is where the ghosts it pins
  reach the hundreds of thousands in the lab and dequeues visibly slow down. A queue whose
  thresholds set :data:`OLD_SNAPSHOT` has its own levels (:func:`snapshot_levels`), and every
  surface reads them from there: the console's root cause, its alert, the report, the
  pipeline's finding and the terminate action's cut-off (before, only the action read them, and
  the per-queue alert rule they made watched a target-wide metric no queue row carries, so it
  never fired).
* Stuck leases are judged on :data:`STUCK_SAMPLES` = 1 sample (the console's rule; the pipeline
  required 3 consecutive ones). The metric already counts only leases older than the lease
  timeout -- that timeout is the patience -- and the requeue action releases exactly the leases
  one observation finds expired, so the advice and the action agree. The console, which samples
  every ``cache_s`` and starts with no history, could not count consecutive samples reliably
  anyway; three would only delay the page by two collection intervals.
* A queue has one state (:func:`queue_state`): the worst of its metrics' verdicts and of its
  findings' severities, so a root cause with healthy metrics (a snapshot held for minutes, a
  session holding the queue's table between two dequeue attempts) is a warning on the Overview
  and on the queue's pill alike, never "ok" beside a red finding (issue 32). A root cause is at
  least as severe as the symptom it causes (:func:`blocker_state`, :data:`LOCK_HOLD_CRIT_S`).
* A value past its level that a guard leaves out says why (:func:`ignored`) instead of reading
  as healthy.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from queueops import catalog

State = Literal["ok", "warn", "crit", "unknown"]
Guard = tuple[str, str, float]  # (other metric of the same queue and cycle, op, level)

OPS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
}


class Levels(Protocol):
    """Anything with warn / crit / direction (``queueops.config.Threshold``)."""

    warn: float | None
    crit: float | None
    direction: str


def _entry_int(metric: str, attr: str, default: float) -> int:
    m = catalog.get(metric)
    v = getattr(m, attr, None) if m is not None else None
    return int(v if v is not None else default)


FRAGMENTATION = "fragmentation_pct"
STUCK = "stuck_leases"
MIN_PAGES: int = _entry_int(FRAGMENTATION, "min_pages", 1000)
MIN_ROWS: int = _entry_int(FRAGMENTATION, "min_rows", 1000)
STUCK_SAMPLES: int = _entry_int(STUCK, "samples", 1)
SNAPSHOT_WARN_S = 60.0
SNAPSHOT_CRIT_S = 600.0
# The target-wide metric the old-snapshot rule judges; a queue's threshold on it is the queue's
# old-snapshot levels (the snapshot pins every table of its database, each queue judges it).
OLD_SNAPSHOT = "oldest_snapshot_age_s"


def judge(value: float | None, threshold: Levels | None) -> State:
    """The state of one value against one threshold (``ok`` when the metric has no threshold)."""
    if value is None:
        return "unknown"
    if threshold is None:
        return "ok"
    if threshold.direction == "below":
        if threshold.crit is not None and value < threshold.crit:
            return "crit"
        if threshold.warn is not None and value < threshold.warn:
            return "warn"
        return "ok"
    if threshold.crit is not None and value >= threshold.crit:
        return "crit"
    if threshold.warn is not None and value >= threshold.warn:
        return "warn"
    return "ok"


def op_for(direction: str) -> str:
    """The comparison an alert rule uses for a threshold direction."""
    return "<" if direction == "below" else ">="


def severity(value: float, threshold: Levels) -> float:
    """How far past its nearest level a value is (1.0 = exactly at it); orders equals worst first."""
    level = threshold.crit if threshold.crit is not None else threshold.warn
    if level is None:
        return 0.0
    if threshold.direction == "below":
        return float(level - value + 1)
    return float(value) / level if level > 0 else float(value) + 1


def guards(metric: str) -> tuple[Guard, ...]:
    """What else must hold for ``metric`` to count (from the catalog's min_pages / min_rows)."""
    m = catalog.get(metric)
    if m is None:
        return ()
    out: list[Guard] = []
    if m.min_pages is not None:
        out.append(("page_count", ">=", float(m.min_pages)))
    if m.min_rows is not None:
        out.append(("rows_total", ">=", float(m.min_rows)))
    return tuple(out)


def guards_hold(metric: str, values: Mapping[str, float | None]) -> bool:
    """Every guard of ``metric`` holds on ``values``; a guard metric not sampled does not suppress."""
    for other, op, level in guards(metric):
        v = values.get(other)
        if v is not None and not OPS[op](float(v), level):
            return False
    return True


def samples_required(metric: str) -> int:
    m = catalog.get(metric)
    return max(1, m.samples) if m is not None else 1


def metric_state(metric: str, values: Mapping[str, float | None], threshold: Levels | None,
                 streak: int | None = None) -> State:
    """The state of ``metric`` for one queue: its level, unless a guard fails or the breach is too
    recent. ``streak`` is how many consecutive latest samples were past the level (``None``: only
    this one is known); fewer than the catalog's ``samples`` is not a breach yet."""
    value = values.get(metric)
    state = judge(value, threshold)
    if state in ("ok", "unknown"):
        return state
    if not guards_hold(metric, values):
        return "ok"
    if (streak if streak is not None else 1) < samples_required(metric):
        return "ok"
    return state


def streak(recent: Sequence[float | None], threshold: Levels | None) -> int:
    """Consecutive samples, newest last in ``recent``, whose value is past ``threshold``'s lowest level."""
    n = 0
    for v in reversed(recent):
        if v is None or judge(v, threshold) not in ("warn", "crit"):
            break
        n += 1
    return n


def snapshot_levels(threshold: Levels | None = None,
                    defaults: tuple[float, float] = (SNAPSHOT_WARN_S, SNAPSHOT_CRIT_S)) -> tuple[float, float]:
    """The old-snapshot rule's (warn, crit) ages in seconds for a queue whose threshold on
    :data:`OLD_SNAPSHOT` is ``threshold``: its levels where it sets them, else ``defaults``
    (:data:`SNAPSHOT_WARN_S` / :data:`SNAPSHOT_CRIT_S`). A level left out never crosses the one set
    (``crit = 30`` alone warns from 30 s too; ``warn = 900`` alone is critical from 900 s).

    ``defaults`` is there for the Spark pipeline, whose ``[pipeline.params]`` may move the
    fallback levels (``snapshot_age_s`` / ``snapshot_age_crit_s``): it resolves each queue's levels
    here, on the driver (:meth:`pipeline.thresholds.Thresholds.attach_snapshot_levels`), instead of
    restating this rule in SQL, so the two cannot drift apart."""
    default_warn, default_crit = (float(d) for d in defaults)
    warn = threshold.warn if threshold is not None else None
    crit = threshold.crit if threshold is not None else None
    if warn is None:
        warn = default_warn if crit is None else min(default_warn, float(crit))
    if crit is None:
        crit = max(default_crit, float(warn))
    return float(warn), float(crit)


def snapshot_state(age_s: float | None, threshold: Levels | None = None) -> State:
    """The old-snapshot rule: warn from :data:`SNAPSHOT_WARN_S`, critical from :data:`SNAPSHOT_CRIT_S`,
    or from the queue's own levels (:func:`snapshot_levels` of its ``threshold``)."""
    if age_s is None:
        return "unknown"
    warn, crit = snapshot_levels(threshold)
    return "crit" if age_s >= crit else "warn" if age_s >= warn else "ok"


# A session holding a table lock that stops a queue's dequeues (LOCK TABLE, VACUUM FULL, an
# offline REINDEX): a warning from the first sample -- nothing is dequeued while it holds it -- and
# critical from this many seconds of its transaction (the old-snapshot rule's warning level: a
# queue's own transactions take milliseconds).
LOCK_HOLD_CRIT_S = SNAPSHOT_WARN_S

# The head of a chain of waiters that does not hold the table itself (a row lock): ordinary for a
# moment on a busy queue, a root cause from this many seconds of its transaction.
BLOCKER_MIN_AGE_S = 10.0


def blocker_state(age_s: float | None, holds_table: bool) -> State:
    """The state a blocking session gives the queue it holds up. A session holding a table lock
    that stops the queue's dequeues: warn at once (nothing is dequeued while it holds it), crit
    from :data:`LOCK_HOLD_CRIT_S` of its transaction. The head of waiters on a row lock: ok under
    :data:`BLOCKER_MIN_AGE_S`, then warn, crit from :data:`LOCK_HOLD_CRIT_S`."""
    age = age_s if age_s is not None else 0.0
    if age >= LOCK_HOLD_CRIT_S:
        return "crit"
    return "warn" if holds_table or age >= BLOCKER_MIN_AGE_S else "ok"


def worst_state(states: Iterable[str]) -> State:
    """The worst of ``crit`` / ``warn`` / ``ok`` (anything else counts as ``ok``)."""
    found = [s for s in states if s in ("crit", "warn")]
    return "crit" if "crit" in found else "warn" if found else "ok"


def queue_state(metric_states: Iterable[str], finding_severities: Iterable[str] = (), known: bool = True) -> State:
    """A queue's one state, the same on every screen, alert and report: the worst of its metrics'
    verdicts (:func:`metric_state`) and of its findings' severities (``crit`` / ``warn``; ``info``
    does not count). A queue that could not be sampled (``known`` false) is ``unknown`` unless a
    finding is critical -- a root cause seen on its target (a session holding its table) outranks
    not knowing its depth -- and is never ``ok``."""
    worst = worst_state((*metric_states, *finding_severities))
    if not known and worst != "crit":
        return "unknown"
    return worst


def ignored(metric: str, values: Mapping[str, float | None], threshold: Levels | None) -> str:
    """Why the judge leaves a value past its level out of the queue's state ('' when it does not):
    a guard that fails (:func:`guards`), e.g. fragmentation of an index under the page floor,
    which the rebuild action would not touch."""
    if judge(values.get(metric), threshold) not in ("warn", "crit"):
        return ""
    names = {"page_count": "pages in the index", "rows_total": "rows in the table"}
    for other, op, level in guards(metric):
        v = values.get(other)
        if v is not None and not OPS[op](float(v), level):
            return (f"not judged: {float(v):,.0f} {names.get(other, other)}, under the floor of {level:,.0f} "
                    f"({other} {op} {level:,.0f}); the rebuild action does nothing below it")
    return ""


# The articles the fixes come from (the queue kinds' seeds), by id.
SOURCES: dict[str, str] = {
    "lease-queue": "Implementing a Simple Queue in SQL Server (lease column, test-and-set pop)",
    "watermark-queue": "Fixing Queues with Watermarks (scan from the lowest key worth reading)",
    "tables-as-queues": "Using tables as Queues (DELETE TOP(1) ... OUTPUT with ROWLOCK, READPAST)",
    "high-performance-queue": "Building High Performance Queue in Database (QueueMeta / QueueData, "
                              "READPAST, archiving in small batches)",
    "ring-buffer-queue": "Table Pattern: Database Message Queues (preallocated ring buffer)",
}

SKIP_LOCKED = {"mssql": "READPAST (WITH (ROWLOCK, READPAST))", "postgresql": "FOR UPDATE SKIP LOCKED"}


@dataclass(frozen=True)
class Rule:
    """What a health rule says, wherever it fires: the console's recommendation, an alert, a
    pipeline finding. ``advice`` may hold ``{q}`` (the queue's name) and ``{skip_locked}`` (the
    dialect's way to skip held rows). Where the engines differ, ``advice`` is the engine-neutral text
    (the pipeline's findings, which span targets) and ``postgresql`` / ``mssql`` the precise ones."""

    title: str
    advice: str
    source: str = ""  # a key of SOURCES
    action: str | None = None  # the queueops action that applies the fix
    postgresql: str | None = None
    mssql: str | None = None


_LOCKS = ("Find the session holding the lock on the queue table (root-cause panel: blocking chains) and end "
          "it if it is stuck. Dequeue with {skip_locked} so consumers skip the rows another session holds "
          "instead of waiting on them, and keep dequeue transactions short")

# Every rule, by id: the console's recommendations, the pipeline's findings (their ``rule`` column)
# and the catalog's ``finding`` / ``advice`` fields name these ids.
RULES: dict[str, Rule] = {
    "stuck_leases": Rule(
        "Stuck leases",
        "A consumer took these items and never finished them (it crashed or hangs). Requeue them "
        "(`queueops act requeue --queue {q}`): only leases older than the lease timeout are released, in "
        "batches, each only if its lease is still the one observed, so a slow but live consumer keeps its "
        "item. Then find out why the consumer died.", "lease-queue", "requeue"),
    "stranded_items": Rule(
        "Items stranded below the watermark",
        "Reset the watermark (`queueops act watermark-reset --queue {q}`) to the lowest ready key minus the "
        "configured buffer: items below the watermark are never dequeued. The reset applies only if the "
        "watermark still holds the value shown in the preview.", "watermark-queue", "watermark-reset"),
    "ghosts_held_by_snapshot": Rule(
        "A long transaction holds cleanup back",
        "End the transaction holding the oldest snapshot (its session is under root causes). While it is "
        "open, ghost cleanup / VACUUM cannot remove deleted rows and every dequeue scans through them; "
        "vacuuming or rebuilding before that does not help. For a delete queue, the watermark pattern "
        "keeps dequeues off the ghosts.", "watermark-queue",
        postgresql="While that transaction is open, VACUUM cannot remove the dead tuples of any table in this "
        "database: they pile up in every queue and dequeues that scan from the start of the index slow "
        "down. End or fix the transaction (its session is under root causes); vacuuming or rebuilding "
        "before that does not help.",
        mssql="While that snapshot transaction is open, the version store keeps every row version and ghost "
              "cleanup cannot remove the ghost records: they pile up in every queue and dequeues that scan "
              "from the start of the index slow down. End or fix the transaction (its session is under root "
              "causes); rebuilding before that does not help."),
    "cleanup_behind": Rule(
        "Cleanup is falling behind",
        "Cleanup is not keeping up with the delete rate and no transaction holds it back: "
        "`queueops act rebuild --queue {q}` (PostgreSQL: VACUUM (ANALYZE), and lower the table's "
        "autovacuum_vacuum_scale_factor; SQL Server: reorganize the index, which removes ghost records).",
        "tables-as-queues", "rebuild",
        postgresql="Autovacuum is not keeping up with the delete rate: run VACUUM (ANALYZE) (`queueops act rebuild "
        "--queue {q} --vacuum-only`) and lower the table's autovacuum_vacuum_scale_factor.",
        mssql="Ghost cleanup is not keeping up with the delete rate: reorganize the index "
              "(`queueops act rebuild --queue {q}`), which removes ghost records as it goes."),
    "use_watermark": Rule(
        "Use the watermark pattern",
        "Keep the lowest key worth scanning in a one-row table and start every dequeue's range scan there: "
        "the cost per dequeue stays flat while ghosts pile up (the article: 30k rows in 23 s instead of "
        "2 min 50 s, and linear instead of quadratic growth).", "watermark-queue"),
    "watermark_lags": Rule(
        "The watermark lags behind",
        "Dequeues scan the gap between the watermark and the lowest ready key, through ghosts: advance the "
        "watermark more often.", "watermark-queue"),
    "blocker": Rule(
        "A session blocks others",
        "Sessions wait behind it; if it is idle in a transaction, its client forgot to commit. Dequeuers "
        "that use {skip_locked} skip the rows it holds but still wait for a table lock.", "tables-as-queues"),
    "lock_waits": Rule("Dequeuers wait on locks", _LOCKS + ".", "tables-as-queues"),
    "lock_timeout_burst": Rule(
        "Lock timeouts burst", _LOCKS + "; split metadata from payload (QueueMeta / QueueData) to cut lock "
        "contention.", "high-performance-queue"),
    "fragmentation": Rule(
        "Index fragmented / bloated",
        "Rebuild or reorganize the index: `queueops act rebuild --queue {q}` (SQL Server REORGANIZE, or "
        "REBUILD WITH (ONLINE = ON) where the edition allows; PostgreSQL REINDEX INDEX CONCURRENTLY). Keep "
        "payloads in a side table so the queue index stays small and can be rebuilt online.",
        "high-performance-queue", "rebuild",
        postgresql="REINDEX INDEX CONCURRENTLY (`queueops act rebuild --queue {q}`) rebuilds it without blocking "
        "dequeuers; VACUUM (ANALYZE) returns dead space. Keeping payloads in a side table keeps the queue "
        "index small.",
        mssql="Reorganize, or rebuild online (REBUILD WITH (ONLINE = ON)) where the edition allows "
              "(`queueops act rebuild --queue {q}`; the preview says which one and why). Keeping payloads in "
              "a side table keeps the queue index rebuildable online."),
    "split_payload": Rule(
        "Split the payload from the queue (QueueMeta / QueueData)",
        "Keep only the columns dequeues search on in a narrow QueueMeta table and move the payload to "
        "QueueData: many more rows per page, fewer page splits, and indexes that can be rebuilt online.",
        "high-performance-queue"),
    "ring_buffer": Rule(
        "Consider a preallocated ring buffer",
        "A ring of preallocated slots updated in place (push and pop sequences) never splits pages or "
        "grows ghosts; the article reports it far ahead of insert/delete queues under load.",
        "ring-buffer-queue"),
    "finished_pile_up": Rule(
        "Finished items pile up in the queue table",
        "Archive finished items continuously in small batches with a pause between batches "
        "(`queueops act archive --queue {q}`), never in one large delete that fragments the table and "
        "blocks dequeues.", "high-performance-queue", "archive"),
    "consumers_stalled": Rule(
        "Items wait although the queue is short",
        "Consumers are not taking the oldest item while the queue stays short: check that they run and "
        "are not blocked (root causes) or failing on the head item (a poison message: move it aside); "
        "make sure dequeues use {skip_locked}.", "tables-as-queues"),
    "ring_full": Rule(
        "Ring buffer nearly full",
        "Pushes stall when the ring is full: add consumers or capacity.", "ring-buffer-queue"),
}


def counter_increase(prev: float, cur: float, restarted: bool) -> float:
    """The increase of a cumulative counter over one interval: the difference, or, when the total
    dropped or its epoch changed (the server restarted, the statistics were reset), the new value
    counted from zero -- never a negative rate. The collectors' rates (collectors/counters.py) and
    the pipeline's deltas (pipeline/rollups.py, the same rule in Spark SQL) both follow it; a
    restart mid-interval makes it a lower bound of the true increase."""
    return cur if restarted or cur < prev else cur - prev


def advice(rule: str, queue: str = "{q}", dialect: str = "") -> str:
    """A rule's advice text for ``dialect`` (``""``: the engine-neutral text, with both ways to skip
    held rows), the queue's name filled in (``{q}`` left as is by default, for the pipeline to fill)."""
    r = RULES[rule]
    text = {"mssql": r.mssql, "postgresql": r.postgresql}.get(dialect) or r.advice
    skip = SKIP_LOCKED.get(dialect, " / ".join(SKIP_LOCKED.values()))
    return text.replace("{skip_locked}", skip).replace("{q}", queue)


def metric_advice(metric: str, queue: str = "{q}", dialect: str = "") -> str:
    """The advice of the rule the catalog ties ``metric`` to (its ``advice``, else its ``finding``),
    '' for a metric without one: what an alert on the metric tells the person it wakes."""
    m = catalog.get(metric)
    rule = (m.advice or m.finding) if m is not None else None
    return advice(rule, queue, dialect) if rule in RULES else ""
