"""Findings and recommendations for one queue: pure functions of its config and current values.

Each rule turns evidence (numbers, the root-cause sessions) into advice taken from the seeds'
fixes, and names the action the console offers for it:

* stuck leases → requeue (lease-queue seed: a consumer died holding leases);
* stranded items / a lagging watermark → watermark reset, the watermark pattern (watermark-queue);
* ghosts / dead tuples that cleanup cannot remove → end the transaction holding the snapshot, and
  the watermark pattern so dequeues stop reading through them (watermark-queue, tables-as-queues);
* lock waits → READPAST (SQL Server) / FOR UPDATE SKIP LOCKED (PostgreSQL) dequeues, and the
  blocker (tables-as-queues, high-performance-queue);
* fragmentation → rebuild / reorganize / vacuum online; payload split into QueueMeta / QueueData
  (high-performance-queue); a preallocated ring buffer for hot insert/delete queues (ring-buffer);
* finished items piling up → archiving in small batches with a pause (high-performance-queue).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from console.health import format_age, format_value
from queueops.config import Queue
from queueops.judge import SNAPSHOT_WARN_S, metric_state, snapshot_state

Severity = Literal["crit", "warn", "info"]
ORDER = {"crit": 0, "warn": 1, "info": 2}

SEEDS = {
    "lease-queue": "Implementing a Simple Queue in SQL Server (lease column, test-and-set pop)",
    "watermark-queue": "Fixing Queues with Watermarks (scan from the lowest key worth reading)",
    "tables-as-queues": "Using tables as Queues (DELETE TOP(1) … OUTPUT with ROWLOCK, READPAST)",
    "high-performance-queue": "Building High Performance Queue in Database (QueueMeta/QueueData, "
                              "READPAST, archiving in small batches)",
    "ring-buffer-queue": "Table Pattern: Database Message Queues (preallocated ring buffer)",
}


@dataclass(frozen=True)
class RootCause:
    """A session that explains a symptom: the snapshot holder or a blocker (from target rows)."""

    kind: Literal["snapshot", "blocker", "other"]
    metric: str
    age_s: float | None
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def session(self) -> str:
        d = self.details
        for key in ("pid", "session_id", "blocking_pid", "blocking_session_id", "spid"):
            if d.get(key) is not None:
                return f"session {d[key]}"
        return "a session"

    @property
    def who(self) -> str:
        d = self.details
        parts = [str(d[k]) for k in ("usename", "user", "login_name", "login") if d.get(k)][:1]
        parts += [str(d[k]) for k in ("application_name", "program_name", "application", "app") if d.get(k)][:1]
        parts += [str(d[k]) for k in ("client_addr", "host_name", "client") if d.get(k)][:1]
        return ", ".join(parts)

    @property
    def summary(self) -> str:
        who = f" ({self.who})" if self.who else ""
        age = f" for {format_age(self.age_s)}" if self.age_s is not None else ""
        what = {"snapshot": "holds the oldest snapshot", "blocker": "blocks other sessions",
                "other": self.metric.replace("_", " ")}[self.kind]
        return f"{self.session}{who} {what}{age}"


def classify(metric: str) -> Literal["snapshot", "blocker", "other"]:
    m = metric.lower()
    if any(k in m for k in ("xmin", "snapshot", "version_store", "oldest_transaction", "oldest_xact")):
        return "snapshot"
    if any(k in m for k in ("block", "lock_chain", "head_blocker")):
        return "blocker"
    return "other"


# Rows that repeat another row's details (same holder, other unit): not a second root cause.
DUPLICATES = frozenset({"oldest_xmin_age_xids"})
# A snapshot younger than the judge's old-snapshot level is ordinary work, not a root cause; one
# past it is worth a recommendation even before the ghosts cross their threshold (the pipeline's
# ghosts_held_by_snapshot rule uses the same levels).
SNAPSHOT_MIN_AGE_S = SNAPSHOT_WARN_S


def root_causes(rows: Sequence[tuple[str, float | None, Mapping[str, Any] | None]]) -> list[RootCause]:
    """Target-wide rows ``(metric, value, details)`` → root causes, the longest-standing first.

    A row without details (a plain counter, ``{}`` when nothing holds a snapshot, ``[]`` when
    nobody blocks) is not a root cause; a list of details (the head blockers) is one cause each.
    The value of a root-cause row is its age in seconds unless the details carry an explicit age.
    """
    out = []
    for metric, value, details in rows:
        if not details or metric in DUPLICATES:
            continue
        items = details.get("items") if set(details) == {"items"} else [details]
        for item in items or ():
            if not isinstance(item, Mapping) or not item:
                continue
            kind = classify(metric)
            age = _age(item, value if len(items) == 1 else None)
            if kind == "snapshot" and (age is None or age < SNAPSHOT_MIN_AGE_S):
                continue
            out.append(RootCause(kind, metric, age, dict(item)))
    return sorted(out, key=lambda r: (-(r.age_s or 0)))


def _age(details: Mapping[str, Any], value: float | None) -> float | None:
    for key in ("age_s", "xact_age_s", "duration_s", "wait_s", "wait_age_s", "elapsed_s"):
        v = details.get(key)
        if isinstance(v, (int, float)):
            return float(v)
    return value


@dataclass(frozen=True)
class Recommendation:
    severity: Severity
    title: str
    evidence: str
    advice: str
    seed: str = ""
    action: str | None = None  # the action the console offers for it (requeue, rebuild, ...)


def _state(queue: Queue, metric: str, values: Mapping[str, float | None],
           recent: Mapping[str, int] | None = None) -> str:
    """The judge's verdict on one metric (guards and samples required included), as the Overview's."""
    v = values.get(metric)
    thr = queue.threshold(metric)
    return "ok" if v is None or thr is None else metric_state(metric, values, thr, (recent or {}).get(metric))


def _sev(state: str) -> Severity:
    return "crit" if state == "crit" else "warn" if state == "warn" else "info"


def recommend(queue: Queue, dialect: str, values: Mapping[str, float | None],
              causes: Sequence[RootCause] = (), recent: Mapping[str, int] | None = None) -> list[Recommendation]:
    """Every recommendation that applies to ``queue`` now, the most severe first (``recent``: see
    :func:`console.health.queue_health`)."""
    recs: list[Recommendation] = []
    v = values.get
    mssql = dialect == "mssql"
    skip_locked = "READPAST (WITH (ROWLOCK, READPAST))" if mssql else "FOR UPDATE SKIP LOCKED"
    snapshot = next((c for c in causes if c.kind == "snapshot"), None)
    lock_state = _state(queue, "lock_waiters", values)
    blocker = next((c for c in causes if c.kind == "blocker"), None)

    stuck = v("stuck_leases")
    stuck_state = _state(queue, "stuck_leases", values, recent)
    if stuck and stuck > 0 and stuck_state in ("warn", "crit"):
        oldest = v("oldest_lease_age_s")
        recs.append(Recommendation(
            _sev(stuck_state),
            f"{format_value('stuck_leases', stuck)} stuck lease(s)",
            f"items leased longer than the lease timeout ({format_age(queue.lease_timeout_s)})"
            + (f"; the oldest for {format_age(oldest)}" if oldest is not None else ""),
            "A consumer took these items and never finished them (it crashed or hangs). Requeue them: "
            "only leases older than the timeout are released, each only if its lease is still the one "
            "observed, so a slow but live consumer keeps its item. Then find out why the consumer died.",
            "lease-queue", "requeue"))

    drift = v("watermark_drift")
    if drift is not None and drift < 0 and queue.watermark:
        recs.append(Recommendation(
            "crit", "Items stranded below the watermark",
            f"watermark drift {format_value('watermark_drift', drift)}: the watermark is past ready items, "
            "which no dequeue will ever read",
            "Reset the watermark to the lowest ready key (minus the configured buffer). The reset only "
            "applies if the watermark still holds the value shown in the preview.",
            "watermark-queue", "watermark-reset"))

    ghosts_state = _state(queue, "ghost_records", values)
    if ghosts_state in ("warn", "crit"):
        ghosts = format_value("ghost_records", v("ghost_records"))
        if snapshot is not None:
            recs.append(Recommendation(
                _sev(ghosts_state), "Cleanup is held back by an open transaction",
                f"{ghosts} {'ghost records' if mssql else 'dead tuples'}; {snapshot.summary}",
                ("Ghost records kept for row versioning cannot be cleaned up while that snapshot "
                 "transaction is open." if mssql else
                 "Dead tuples cannot be vacuumed while that transaction pins the xmin horizon.")
                + " End or fix the long transaction; vacuuming or rebuilding before that does not help.",
                "watermark-queue"))
        else:
            recs.append(Recommendation(
                _sev(ghosts_state), "Cleanup is falling behind",
                f"{ghosts} {'ghost records' if mssql else 'dead tuples'} and no transaction holding them",
                "Ghost cleanup is not keeping up with the delete rate." if mssql else
                "Autovacuum is not keeping up; run VACUUM (ANALYZE) (rebuild action) and lower the "
                "table's autovacuum_vacuum_scale_factor.",
                "tables-as-queues", "rebuild"))
        if queue.kind in ("delete", "status") and not queue.watermark:
            recs.append(Recommendation(
                "info", "Use the watermark pattern",
                "every dequeue scans from the start of the index through the deleted rows",
                "Keep the lowest key worth scanning in a one-row table and start every dequeue's range "
                "scan there: the cost per dequeue stays flat while ghosts pile up (the seed: 30k rows in "
                "23 s instead of 2 min 50 s, and linear instead of quadratic growth).",
                "watermark-queue"))

    snap_state = snapshot_state(snapshot.age_s) if snapshot is not None else "ok"
    if snapshot is not None and ghosts_state not in ("warn", "crit") and snap_state in ("warn", "crit"):
        recs.append(Recommendation(
            _sev(snap_state), "A long transaction holds cleanup back",
            snapshot.summary,
            ("While it is open, the version store keeps every row version and ghost cleanup cannot "
             "remove them" if mssql else "While it is open, VACUUM cannot remove the dead tuples of any "
             "table in this database")
            + ": ghosts pile up in every queue and dequeues that scan from the start of the index slow "
              "down. End or fix that transaction (its session is under root causes).",
            "watermark-queue"))

    if blocker is not None and lock_state not in ("warn", "crit"):
        recs.append(Recommendation(
            "warn", "A session blocks others", blocker.summary,
            "Sessions wait behind it; if it is idle in a transaction, its client forgot to commit. "
            f"Dequeuers that use {skip_locked} skip the rows it holds but still wait for a table lock.",
            "tables-as-queues"))

    if drift is not None and drift > 0 and queue.watermark and ghosts_state in ("warn", "crit"):
        recs.append(Recommendation(
            "info", "The watermark lags behind",
            f"the lowest ready key is {format_value('watermark_drift', drift)} keys past the watermark",
            "Dequeues scan that gap, through ghosts; advance the watermark more often.",
            "watermark-queue"))

    timeouts = v("lock_timeouts_per_s")
    held = v("lock_blockers")
    if lock_state in ("warn", "crit") or (timeouts is not None and timeouts > 0) or (held is not None and held > 0):
        evidence = []
        if v("lock_waiters"):
            evidence.append(f"{format_value('lock_waiters', v('lock_waiters'))} session(s) waiting on a lock")
        if held:
            evidence.append(f"{held:.0f} session(s) holding a table lock that blocks every change")
        if timeouts:
            evidence.append(f"{timeouts:.2f} lock timeouts/s")
        if blocker is not None:
            evidence.append(blocker.summary)
        recs.append(Recommendation(
            _sev(lock_state if lock_state != "ok" else "warn"), "Dequeuers wait on locks",
            "; ".join(evidence) or "lock waits on the queue table",
            f"Dequeue with {skip_locked} so consumers skip rows that another session holds instead of "
            "waiting on them, and keep dequeue transactions short. The blocking session is listed under "
            "root causes.", "tables-as-queues"))

    frag_state = _state(queue, "fragmentation_pct", values)
    if frag_state in ("warn", "crit"):
        frag = format_value("fragmentation_pct", v("fragmentation_pct"))
        recs.append(Recommendation(
            _sev(frag_state), "Index fragmented / bloated",
            f"fragmentation {frag}" + (f" over {format_value('page_count', v('page_count'))} pages"
                                       if v("page_count") is not None else ""),
            ("Reorganize, or rebuild online (REBUILD WITH (ONLINE = ON)) where the edition allows; "
             "the preview says which one and why." if mssql else
             "REINDEX INDEX CONCURRENTLY rebuilds it without blocking dequeuers; VACUUM (ANALYZE) "
             "returns dead space."), "high-performance-queue", "rebuild"))
        if queue.kind == "status" and not queue.data_table:
            recs.append(Recommendation(
                "info", "Split the payload from the queue (QueueMeta / QueueData)",
                "the status queue keeps its payload in the hot table",
                "Keep only the columns dequeues search on in a narrow QueueMeta table and move the payload "
                "to QueueData: many more rows per page, fewer page splits, and indexes that can be rebuilt "
                "online.", "high-performance-queue"))
        if queue.kind in ("delete", "lease"):
            recs.append(Recommendation(
                "info", "Consider a preallocated ring buffer",
                "constant inserts and deletes keep fragmenting this queue's index",
                "A ring of preallocated slots updated in place (push and pop sequences) never splits "
                "pages or grows ghosts; the seed reports it far ahead of insert/delete queues under load.",
                "ring-buffer-queue"))

    if queue.kind == "status":
        total, depth = v("rows_total"), v("depth")
        finished = v("count_done")  # the depth collector's per-status count, when it has one
        if finished is None and total is not None and depth is not None:
            finished = total - depth - (v("count_processing") or 0)
        if finished is not None and finished > max(10_000.0, 10 * (depth or 0)):
            recs.append(Recommendation(
                "warn", "Finished items pile up in the queue table",
                f"about {format_value('rows_total', finished)} of {format_value('rows_total', total)} rows "
                "are no longer ready",
                "Archive finished items continuously in small batches with a pause between batches (the "
                "archive action), never in one large delete that fragments the table and blocks dequeues.",
                "high-performance-queue", "archive"))

    age_state = _state(queue, "oldest_age_s", values)
    depth_state = _state(queue, "depth", values)
    if age_state in ("warn", "crit") and depth_state == "ok" and not (stuck and stuck > 0):
        recs.append(Recommendation(
            _sev(age_state), "Items wait although the queue is short",
            f"oldest item waiting {format_age(v('oldest_age_s'))} with depth "
            f"{format_value('depth', v('depth'))}",
            "Consumers have stalled or are too few: check they are running and not blocked "
            f"(root causes); make sure dequeues use {skip_locked}.", "tables-as-queues"))

    if queue.kind == "ring" and queue.capacity and (v("depth") or 0) >= 0.9 * queue.capacity:
        recs.append(Recommendation(
            "warn", "Ring buffer nearly full",
            f"occupancy {format_value('depth', v('depth'))} of {queue.capacity} slots",
            "Pushes stall when the ring is full: add consumers or capacity.", "ring-buffer-queue"))

    recs.sort(key=lambda r: ORDER[r.severity])
    return recs
