"""Findings and recommendations for one queue: pure functions of its config and current values.

This module decides *which* of the judge's rules apply to a queue now and how severe, from the
judge's verdicts on its values and the root-cause sessions (the snapshot holder, the blockers),
and writes the evidence in the console's units. *What* a rule says -- its title, advice, source
article and the action that fixes it -- is the judge's (:data:`queueops.judge.RULES`), the same
text the alerts and the pipeline's findings carry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from console.health import QueueHealth, format_age, format_value, queue_health
from queueops.config import Queue
from queueops.judge import (
    OLD_SNAPSHOT,
    RULES,
    SNAPSHOT_WARN_S,
    SOURCES,
    advice,
    blocker_state,
    metric_state,
    snapshot_state,
    worst_state,
)

Severity = Literal["crit", "warn", "info"]
ORDER = {"crit": 0, "warn": 1, "info": 2}

@dataclass(frozen=True)
class RootCause:
    """A session that explains a symptom: the snapshot holder, or a blocker -- the head of sessions
    waiting on a lock, or a session holding a table lock that stops a queue's dequeues (its
    details carry the lock ``mode``), whether or not a waiter is caught at the sampling instant."""

    kind: Literal["snapshot", "blocker", "other"]
    metric: str
    age_s: float | None
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int | None:
        for key in ("pid", "session_id"):
            v = self.details.get(key)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        return None

    @property
    def holds_table(self) -> bool:
        """A table-lock holder (``lock_blockers``), not only the head of a chain of waiters."""
        return bool(self.details.get("mode"))

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
        if self.holds_table:
            table = self.details.get("table")
            what = f"holds {self.details['mode']} on " + (f"queue {table}'s table" if table else "the queue table")
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

# Rows whose details are lists of sessions under a key, not one session: the table-lock holders.
HOLDERS = "lock_blockers"
# Snapshot holders without a session (a prepared transaction, a replication slot) are named by
# their gid / slot in ``query``: a root cause, but nothing to end from the console.
SESSIONLESS = frozenset({"prepared transaction", "replication slot"})


def root_causes(rows: Sequence[tuple[str, float | None, Mapping[str, Any] | None]],
                snapshot_min_age_s: float = SNAPSHOT_WARN_S) -> list[RootCause]:
    """Target-wide rows ``(metric, value, details)`` → root causes, the longest-standing first.

    A row without details (a plain counter, ``{}`` when nothing holds a snapshot, ``[]`` when
    nobody blocks) is not a root cause; a list of details (the head blockers) is one cause each;
    ``lock_blockers``' ``holders`` are one cause each (the lock's ``mode`` in their details). A
    session without a pid is not a root cause (there is no card without a session to name and
    end), except a prepared transaction or replication slot holding the oldest snapshot. The age
    is the details' own (``xact_age_s``...); a row's value is its age only for a lone snapshot row.
    A snapshot holder younger than ``snapshot_min_age_s`` (the queue's old-snapshot warn level,
    :func:`queueops.judge.snapshot_levels`) is ordinary work, not one; one past it is worth a
    recommendation even before the ghosts cross their threshold.
    """
    out: dict[tuple[str, object], RootCause] = {}
    for metric, value, details in rows:
        if not details or metric in DUPLICATES:
            continue
        if metric == HOLDERS:
            items = details.get("holders") or []
        elif set(details) == {"items"}:
            items = details.get("items") or []
        else:
            items = [details]
        kind = classify(metric)
        if kind == "other":
            continue  # waiters' pid lists and other notes: evidence, not a session to name
        for item in items:
            if not isinstance(item, Mapping) or not item:
                continue
            age = _age(item, value if kind == "snapshot" and len(items) == 1 else None)
            cause = RootCause(kind, metric, age, dict(item))
            if cause.pid is None and not (kind == "snapshot" and item.get("kind") in SESSIONLESS):
                continue
            if kind == "snapshot" and (age is None or age < snapshot_min_age_s):
                continue
            key = (kind, cause.pid if cause.pid is not None else id(item))
            seen = out.get(key)
            if seen is not None:  # the head of a chain that also holds the table lock: one cause
                merged = {**seen.details, **{k: v for k, v in item.items() if v is not None}}
                age = max(a for a in (seen.age_s, age, -1.0) if a is not None)
                cause = RootCause(kind, seen.metric if seen.holds_table else metric, age if age >= 0 else None,
                                  merged)
            out[key] = cause
    return sorted(out.values(), key=lambda r: (-(r.age_s or 0)))


def for_queue(causes: Sequence[RootCause], waiter_pids: Sequence[int] = ()) -> list[RootCause]:
    """The root causes that concern one queue: the snapshot holder (it pins the dead tuples of every
    table of its database), the sessions holding its table (already this queue's rows), and the
    heads of chains whose waiters include the queue's ``lock_waiters`` -- a head blocker holding
    up only another table is not this queue's cause (a head from an older collector that does not
    list its waiters counts for every queue, as before)."""
    mine = set(waiter_pids)
    out = []
    for c in causes:
        if c.kind == "blocker" and not c.holds_table and "waiters" in c.details:
            if not mine & set(c.details.get("waiters") or ()):
                continue
        out.append(c)
    return out


Row = tuple[str, float | None, Mapping[str, Any] | None]


def causes_of(target_rows: Sequence[Row], queue: str, queue_rows: Sequence[Row],
              snapshot_min_age_s: float = SNAPSHOT_WARN_S) -> list[RootCause]:
    """One queue's root causes from its target's rows and its own (``(metric, value, details)``):
    :func:`root_causes` of both, the table-lock holders named with the queue, kept to what concerns
    the queue (:func:`for_queue`, by the pids in its ``lock_waiters`` note)."""
    rows: list[Row] = list(target_rows)
    waiters: list[int] = []
    for metric, value, details in queue_rows:
        if metric == HOLDERS and details:
            details = {**details, "holders": [{**h, "table": queue} for h in details.get("holders") or ()
                                              if isinstance(h, Mapping)]}
        if metric == "lock_waiters" and details:
            waiters = [p for p in details.get("pids") or () if isinstance(p, int)]
        rows.append((metric, value, details))
    return for_queue(root_causes(rows, snapshot_min_age_s), waiters)


def _age(details: Mapping[str, Any], value: float | None) -> float | None:
    for key in ("age_s", "xact_age_s", "duration_s", "wait_s", "wait_age_s", "elapsed_s"):
        v = details.get(key)
        if isinstance(v, (int, float)):
            return float(v)
    return value


@dataclass(frozen=True)
class Recommendation:
    """One rule that applies to a queue now: the judge's rule (title, advice, source, action, by
    ``rule`` id, :data:`queueops.judge.RULES`) with this queue's evidence and severity."""

    severity: Severity
    rule: str
    evidence: str
    advice: str

    @property
    def title(self) -> str:
        return RULES[self.rule].title

    @property
    def source(self) -> str:
        """The article the fix comes from, by name ('' for none)."""
        return SOURCES.get(RULES[self.rule].source, "")

    @property
    def action(self) -> str | None:
        """The action the console offers for it (requeue, rebuild, ...)."""
        return RULES[self.rule].action


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
    :func:`console.health.queue_health`). Which rules fire and how severe is decided here from the
    judge's verdicts; what each says is the judge's."""
    recs: list[Recommendation] = []

    def add(severity: Severity, rule: str, evidence: str) -> None:
        recs.append(Recommendation(severity, rule, evidence, advice(rule, queue.name, dialect)))

    v = values.get
    mssql = dialect == "mssql"
    ghost_word = "ghost records" if mssql else "dead tuples"
    snapshot = next((c for c in causes if c.kind == "snapshot"), None)
    lock_state = _state(queue, "lock_waiters", values)
    blocker = next((c for c in causes if c.kind == "blocker"), None)

    stuck = v("stuck_leases")
    stuck_state = _state(queue, "stuck_leases", values, recent)
    if stuck and stuck > 0 and stuck_state in ("warn", "crit"):
        oldest = v("oldest_lease_age_s")
        add(_sev(stuck_state), "stuck_leases",
            f"{format_value('stuck_leases', stuck)} stuck lease(s): items leased longer than the lease timeout "
            f"({format_age(queue.lease_timeout_s)})"
            + (f"; the oldest for {format_age(oldest)}" if oldest is not None else ""))

    drift = v("watermark_drift")
    if drift is not None and drift < 0 and queue.watermark:
        add("crit", "stranded_items",
            f"watermark drift {format_value('watermark_drift', drift)}: the watermark is past ready items, "
            "which no dequeue will ever read")

    ghosts_state = _state(queue, "ghost_records", values)
    snap_state = snapshot_state(snapshot.age_s, queue.threshold(OLD_SNAPSHOT)) if snapshot is not None else "ok"
    if ghosts_state in ("warn", "crit"):
        ghosts = format_value("ghost_records", v("ghost_records"))
        if snapshot is not None:
            add(_sev(ghosts_state), "ghosts_held_by_snapshot", f"{ghosts} {ghost_word}; {snapshot.summary}")
        else:
            add(_sev(ghosts_state), "cleanup_behind", f"{ghosts} {ghost_word} and no transaction holding them")
        if queue.kind in ("delete", "status") and not queue.watermark:
            add("info", "use_watermark", "every dequeue scans from the start of the index through the deleted rows")
    elif snapshot is not None and snap_state in ("warn", "crit"):
        add(_sev(snap_state), "ghosts_held_by_snapshot", snapshot.summary)

    age_state = _state(queue, "oldest_age_s", values)
    if blocker is not None:
        # The cause is at least as severe as the symptom it causes here (waiters, the oldest item's
        # age): the page must not show the symptom red and its cause amber.
        symptoms = [lock_state, age_state if not (v("stuck_leases") or 0) > 0 else "ok"]
        sev = worst_state([blocker_state(blocker.age_s, blocker.holds_table), *symptoms])
        evidence = [blocker.summary]
        if blocker.details.get("state"):
            evidence.append(str(blocker.details["state"]))
        if v("lock_waiters"):
            evidence.append(f"{format_value('lock_waiters', v('lock_waiters'))} session(s) waiting on this table now")
        if age_state in ("warn", "crit"):
            evidence.append(f"the oldest item has waited {format_age(v('oldest_age_s'))}")
        if sev in ("warn", "crit"):
            add(_sev(sev), "blocker", "; ".join(evidence))

    if drift is not None and drift > 0 and queue.watermark and ghosts_state in ("warn", "crit"):
        add("info", "watermark_lags",
            f"the lowest ready key is {format_value('watermark_drift', drift)} keys past the watermark")

    # Lock timeouts are server-wide counters (the target's row), not evidence about one queue's table.
    held = v("lock_blockers")
    if blocker is None and (lock_state in ("warn", "crit") or (held is not None and held > 0)):
        evidence = []
        if v("lock_waiters"):
            evidence.append(f"{format_value('lock_waiters', v('lock_waiters'))} session(s) waiting on a lock")
        if held:
            evidence.append(f"{held:.0f} session(s) holding a table lock that blocks every change")
        add(_sev(lock_state if lock_state != "ok" else "warn"), "lock_waits",
            "; ".join(evidence) or "lock waits on the queue table")

    frag_state = _state(queue, "fragmentation_pct", values)
    if frag_state in ("warn", "crit"):
        frag = format_value("fragmentation_pct", v("fragmentation_pct"))
        add(_sev(frag_state), "fragmentation",
            f"fragmentation {frag}" + (f" over {format_value('page_count', v('page_count'))} pages"
                                       if v("page_count") is not None else ""))
        if queue.kind == "status" and not queue.data_table:
            add("info", "split_payload", "the status queue keeps its payload in the hot table")
        if queue.kind in ("delete", "lease"):
            add("info", "ring_buffer", "constant inserts and deletes keep fragmenting this queue's index")

    if queue.kind == "status":
        total, depth = v("rows_total"), v("depth")
        finished = v("count_done")  # the depth collector's per-status count, when it has one
        if finished is None and total is not None and depth is not None:
            finished = total - depth - (v("count_processing") or 0)
        if finished is not None and finished > max(10_000.0, 10 * (depth or 0)):
            add("warn", "finished_pile_up",
                f"about {format_value('rows_total', finished)} of {format_value('rows_total', total)} rows "
                "are no longer ready")

    depth_state = _state(queue, "depth", values)
    if age_state in ("warn", "crit") and depth_state == "ok" and not (stuck and stuck > 0) and blocker is None:
        add(_sev(age_state), "consumers_stalled",
            f"oldest item waiting {format_age(v('oldest_age_s'))} with depth {format_value('depth', v('depth'))}")

    if queue.kind == "ring" and queue.capacity and (v("depth") or 0) >= 0.9 * queue.capacity:
        add("warn", "ring_full", f"occupancy {format_value('depth', v('depth'))} of {queue.capacity} slots")

    recs.sort(key=lambda r: ORDER[r.severity])
    return recs


def assess(queue: Queue, dialect: str, values: Mapping[str, float | None], causes: Sequence[RootCause] = (),
           reachable: bool = True, error: str = "", recent: Mapping[str, int] | None = None
           ) -> tuple[QueueHealth, list[Recommendation]]:
    """A queue's health and its findings, as every page shows them: the findings first
    (:func:`recommend`), then the state the judge gives metrics and findings together
    (:func:`queueops.judge.queue_state` through :func:`console.health.queue_health`)."""
    recs = recommend(queue, dialect, values, causes, recent) if reachable else []
    health = queue_health(queue, values, reachable=reachable, error=error, recent=recent,
                          findings=[(r.severity, r.rule, f"{r.title}: {r.evidence}") for r in recs])
    return health, recs
