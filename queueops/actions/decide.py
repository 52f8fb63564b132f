"""Pure judgement for the actions: no database, no I/O, so every rule is tested exhaustively.

Index maintenance follows the common thresholds (Microsoft's 2017 "reorganize and rebuild indexes"
guidance and Ola Hallengren's IndexOptimize defaults): below 1000 pages nothing; below 5 %
nothing; 5-30 % REORGANIZE; 30 % and above REBUILD, online. An offline rebuild blocks every dequeue
for its whole duration, so it is never chosen unless the operator allowed it explicitly; without
that permission the online alternative (REORGANIZE) is chosen and the preview says why.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from queueops.judge import MIN_PAGES  # the one page floor: the console and alerts judge with it too

REORGANIZE_PCT = 5.0
REBUILD_PCT = 30.0

Operation = Literal[
    "none", "reorganize", "rebuild_online_low_priority", "rebuild_online", "rebuild_resumable",
    "rebuild_offline", "reindex_concurrently", "reindex_offline", "drop_leftover",
]
ONLINE_OPERATIONS = {"reorganize", "rebuild_online_low_priority", "rebuild_online", "rebuild_resumable",
                     "reindex_concurrently", "drop_leftover"}


@dataclass(frozen=True)
class IndexDecision:
    operation: Operation
    reason: str

    @property
    def offline(self) -> bool:
        return self.operation in ("rebuild_offline", "reindex_offline")

    @property
    def acts(self) -> bool:
        return self.operation != "none"


@dataclass(frozen=True)
class Thresholds:
    reorganize_pct: float = REORGANIZE_PCT
    rebuild_pct: float = REBUILD_PCT
    min_pages: int = MIN_PAGES


# ---------------------------------------------------------------------------------------------
# SQL Server


@dataclass(frozen=True)
class MssqlCaps:
    """What the server can do online (EngineEdition and major version from SERVERPROPERTY)."""

    online: bool
    wait_at_low_priority: bool
    resumable: bool
    label: str


def mssql_caps(engine_edition: int | None, major_version: int | None, edition: str = "") -> MssqlCaps:
    """Online rebuilds where Ola Hallengren allows them (EngineEdition 3, 5, 8); WAIT_AT_LOW_PRIORITY
    from 2014 (12); RESUMABLE from 2017 (14); Azure SQL Database (5) and Managed Instance (8) have both."""
    cloud = engine_edition in (5, 8)
    online = engine_edition in (3, 5, 8)
    major = major_version or 0
    label = f"{edition or 'edition'} (EngineEdition {engine_edition}, version {major_version})"
    return MssqlCaps(online=online, wait_at_low_priority=online and (cloud or major >= 12),
                     resumable=online and (cloud or major >= 14), label=label)


@dataclass(frozen=True)
class MssqlIndex:
    name: str
    index_id: int
    type_desc: str  # CLUSTERED, NONCLUSTERED, XML, SPATIAL, ...
    pages: int
    fragmentation_pct: float | None
    disabled: bool = False
    allow_page_locks: bool = True
    legacy_lob: bool = False  # image / text / ntext in the table


def mssql_index_operation(ix: MssqlIndex, caps: MssqlCaps, t: Thresholds = Thresholds(), *,
                          allow_offline: bool = False, resumable: bool = False,
                          forced: bool = False) -> IndexDecision:
    """REORGANIZE or REBUILD (online when possible) for one index, and why.

    ``forced``: the operator named this index, so the page-count and low-fragmentation skips do
    not apply (the choice between REORGANIZE and REBUILD still does).
    """
    if ix.disabled:
        return IndexDecision("none", "disabled: a rebuild would enable it; not done by queueops")
    if ix.fragmentation_pct is None:
        return IndexDecision("none", "fragmentation unknown")
    frag = ix.fragmentation_pct
    if not forced and ix.pages < t.min_pages:
        return IndexDecision("none", f"{ix.pages} pages < {t.min_pages}: too small for fragmentation to matter")
    if not forced and frag < t.reorganize_pct:
        return IndexDecision("none", f"fragmentation {frag:.1f} % < {t.reorganize_pct:g} %")
    if frag < t.rebuild_pct:
        if ix.allow_page_locks:
            return IndexDecision("reorganize", f"fragmentation {frag:.1f} % is between {t.reorganize_pct:g} "
                                 f"and {t.rebuild_pct:g} %: REORGANIZE (online, light, stoppable)")
        why = f"fragmentation {frag:.1f} % calls for REORGANIZE, impossible with ALLOW_PAGE_LOCKS = OFF"
    else:
        why = f"fragmentation {frag:.1f} % >= {t.rebuild_pct:g} %"
    # A rebuild: online if at all possible.
    blocker = _online_blocker(ix, caps)
    if blocker is None:
        if resumable and caps.resumable:
            return IndexDecision("rebuild_resumable", f"{why}: REBUILD ONLINE, RESUMABLE (progress reported; "
                                 "WAIT_AT_LOW_PRIORITY is not combined with RESUMABLE)")
        if caps.wait_at_low_priority:
            return IndexDecision("rebuild_online_low_priority", f"{why}: REBUILD ONLINE, waiting at low priority "
                                 "for its final schema lock so dequeuers never queue behind it")
        return IndexDecision("rebuild_online", f"{why}: REBUILD ONLINE (this version has no WAIT_AT_LOW_PRIORITY)")
    if allow_offline:
        return IndexDecision("rebuild_offline", f"{why}; ONLINE impossible ({blocker}): OFFLINE REBUILD chosen "
                             "explicitly (--allow-offline); it blocks the queue for its whole duration")
    if ix.allow_page_locks and frag >= t.rebuild_pct:
        return IndexDecision("reorganize", f"{why}, but ONLINE is impossible ({blocker}) and an offline rebuild "
                             "blocks every dequeue: REORGANIZE instead (pass --allow-offline to rebuild offline)")
    return IndexDecision("none", f"{why}, but ONLINE is impossible ({blocker}) and an offline rebuild blocks "
                         "every dequeue: skipped (pass --allow-offline to rebuild offline)")


def _online_blocker(ix: MssqlIndex, caps: MssqlCaps) -> str | None:
    if not caps.online:
        return f"{caps.label} has no online index operations"
    if ix.type_desc.upper() in ("XML", "SPATIAL"):
        return f"{ix.type_desc} indexes are never rebuilt online"
    if ix.legacy_lob and ix.type_desc.upper() == "CLUSTERED":
        return "the table has image/text/ntext columns"
    return None


# ---------------------------------------------------------------------------------------------
# PostgreSQL


@dataclass(frozen=True)
class PgIndex:
    name: str
    method: str
    pages: int
    valid: bool = True
    leftover: bool = False  # an invalid <index>_ccnew / _ccold from a failed REINDEX CONCURRENTLY
    bloat_pct: float | None = None
    leaf_fragmentation_pct: float | None = None

    @property
    def fragmentation_pct(self) -> float | None:
        """The worse of bloat (unused space) and leaf fragmentation (out-of-order leaf pages)."""
        known = [v for v in (self.bloat_pct, self.leaf_fragmentation_pct) if v is not None]
        return max(known) if known else None


def pg_index_bloat_pct(index_bytes: int, leaf_pages: int, avg_leaf_density: float | None,
                       fillfactor: int = 90, live_fraction: float = 1.0, block_size: int = 8192) -> float | None:
    """Share of the index that a fresh build would not need (an estimate from pgstatindex figures).

    A fresh b-tree fills its leaf pages to the fillfactor; the bytes in use are leaf_pages x density,
    so the ideal size is that over the fillfactor. Empty and deleted pages count as waste, which is
    what a FIFO queue's index mostly is after churn (density alone would hide them). Before a
    vacuum, leaf pages still hold the entries of dead rows, which pgstatindex counts as used:
    ``live_fraction`` (live / (live + dead) rows of the table) discounts them.
    """
    total_pages = index_bytes // block_size - 1  # the metapage is always there
    if total_pages <= 0:
        return 0.0  # the metapage alone (an index built on no rows): nothing a rebuild would reclaim
    if avg_leaf_density is None or math.isnan(avg_leaf_density):
        return None
    if leaf_pages <= 0:
        return 0.0
    live = max(0.0, min(1.0, live_fraction))
    ideal = leaf_pages * (avg_leaf_density / 100.0) * live / (max(10, min(100, fillfactor)) / 100.0)
    if ideal > 0:
        ideal = max(1.0, ideal)  # a fresh build of any live entry needs a whole leaf page: a one-leaf index is minimal
    return round(max(0.0, min(100.0, 100.0 * (1.0 - ideal / total_pages))), 1)


def pg_index_operation(ix: PgIndex, t: Thresholds = Thresholds(), *, concurrently: bool = True,
                       allow_offline: bool = False, forced: bool = False) -> IndexDecision:
    """REINDEX CONCURRENTLY for one index, or nothing, and why. PostgreSQL has no REORGANIZE:
    light bloat is left to VACUUM, which the rebuild action runs on the table anyway."""
    if ix.leftover:
        return IndexDecision("drop_leftover", "invalid leftover of an interrupted REINDEX CONCURRENTLY: "
                             "it slows every write and is never used; DROP INDEX CONCURRENTLY")
    if not ix.valid:
        return IndexDecision("none", "invalid index (not a REINDEX leftover): fix it by hand")
    if ix.method != "btree" and not forced:
        return IndexDecision("none", f"{ix.method} index: no fragmentation figure; name it to reindex anyway")
    frag = ix.fragmentation_pct
    if not forced:
        if ix.pages < t.min_pages:
            return IndexDecision("none", f"{ix.pages} pages < {t.min_pages}: too small to matter")
        if frag is None:
            return IndexDecision("none", "bloat unknown (pgstattuple not installed or not allowed); "
                                 "name the index to reindex it anyway")
        if frag < t.reorganize_pct:
            return IndexDecision("none", f"bloat/fragmentation {frag:.1f} % < {t.reorganize_pct:g} %")
        if frag < t.rebuild_pct:
            return IndexDecision("none", f"bloat/fragmentation {frag:.1f} % < {t.rebuild_pct:g} %: VACUUM is "
                                 "enough (PostgreSQL has no REORGANIZE)")
    why = "named by the operator" if forced else f"bloat/fragmentation {frag:.1f} % >= {t.rebuild_pct:g} %"
    if concurrently:
        return IndexDecision("reindex_concurrently", f"{why}: REINDEX CONCURRENTLY (writes continue)")
    if allow_offline:
        return IndexDecision("reindex_offline", f"{why}; this server has no REINDEX CONCURRENTLY (< 12): "
                             "OFFLINE REINDEX chosen explicitly; it blocks writes for its whole duration")
    return IndexDecision("none", f"{why}, but this server has no REINDEX CONCURRENTLY (< 12) and an offline "
                         "REINDEX blocks the queue: skipped (pass --allow-offline)")


# ---------------------------------------------------------------------------------------------
# Watermark, batches, archive layout


def new_watermark(lowest_pending: int | None, buffer: int) -> int:
    """Lowest pending key minus the buffer, or 0 when the queue is empty (docs/actions.md)."""
    if lowest_pending is None:
        return 0
    return int(lowest_pending) - int(buffer)


def batch_count(rows: int, batch_size: int) -> int:
    return 0 if rows <= 0 else -(-rows // batch_size)


def next_batch_size(batch_size: int, done: int, max_items: int | None) -> int:
    """Rows to ask for in the next batch: the batch size, cut to what the cap leaves."""
    if max_items is None:
        return batch_size
    return max(0, min(batch_size, max_items - done))


def layout_problem(source: Sequence[tuple[str, str]], archive: Sequence[tuple[str, str]],
                   archive_identity: Sequence[str] = ()) -> str | None:
    """Why ``INSERT INTO archive SELECT * FROM source`` would fail or scramble columns, or None."""
    if not archive:
        return "does not exist"
    if archive_identity:
        return f"has identity column(s) {', '.join(archive_identity)}: an archive must store the keys as they are"
    if len(source) != len(archive):
        return f"has {len(archive)} columns, the queue table {len(source)}"
    for i, ((sn, st), (an, at)) in enumerate(zip(source, archive, strict=True), start=1):
        if sn != an or _base_type(st) != _base_type(at):
            return f"column {i} is {an} {at}, the queue table's is {sn} {st}"
    return None


def _base_type(t: str) -> str:
    # Strict (same type, same length/precision): a narrower archive column would fail or truncate.
    return re.sub(r"\s+", " ", t.strip().lower())


# ---------------------------------------------------------------------------------------------
# terminate: which session may be ended


# Application names of queueops' own sessions (collectors, actions, console checks): never ended
# by queueops. The lab's workload ('queueops-lab-*') plays the application and is not one of them.
QUEUEOPS_APPLICATIONS = ("queueops-action-", "queueops-collect", "queueops-console", "queueops-check")


def terminate_refusal(session: dict | None, *, own_session_id: int | None,
                      deny_logins: Sequence[str] = ()) -> str | None:
    """Why ``session`` (a row of ``actions/terminate.sql``: session_id, login, application,
    user_process, process_type) must never be ended, or None.

    Checked at preview and again at execution: the queueops session itself (the one running the
    action, or any collector / action / console session of queueops), a system or background
    process (PostgreSQL ``backend_type`` other than ``client backend``; SQL Server
    ``is_user_process = 0``), a login on the configured deny list.
    """
    if not session:
        return "the session no longer exists"
    sid = session.get("session_id")
    if own_session_id is not None and sid == own_session_id:
        return f"session {sid} is the queueops session running this action"
    app = str(session.get("application") or "")
    if app.startswith(QUEUEOPS_APPLICATIONS):
        return f"session {sid} belongs to queueops itself (application {app!r}): never ended by queueops"
    if not session.get("user_process"):
        kind = session.get("process_type") or "system process"
        return f"session {sid} is a system or background process ({kind}): never ended by queueops"
    login = str(session.get("login") or "")
    denied = {d.casefold() for d in deny_logins}
    if login.casefold() in denied:
        return f"session {sid} runs as login {login!r}, which is on the deny list ([actions] terminate_deny_logins)"
    return None


def terminate_changed(observed: dict, now: dict | None) -> str | None:
    """Why the session ``now`` is not the one the preview showed (``observed``), or None.

    Same session id, same session start (a reused id is another session) and same transaction
    (start time, and on SQL Server its id): a new transaction is not the one that held the
    snapshot or the lock."""
    sid = observed.get("session_id")
    if not now or now.get("session_id") != sid:
        return f"session {sid} has ended since the preview"
    if now.get("session_start") != observed.get("session_start"):
        return f"session id {sid} now belongs to another session (started {now.get('session_start')})"
    if "xact_id" in observed and now.get("xact_id") != observed.get("xact_id"):
        return (f"session {sid} is in another transaction now (id {now.get('xact_id')}, the preview's "
                f"{observed.get('xact_id')})")
    if now.get("xact_start") != observed.get("xact_start"):
        return (f"session {sid} is in another transaction now (started {now.get('xact_start')}, the preview's "
                f"started {observed.get('xact_start')})")
    return None


def pick_cause(candidates: Sequence[dict], session_id: int | None = None) -> dict | None:
    """The root cause to end: the named session if it is one, else the first candidate (blockers of
    the queue's table come first, most sessions blocked first, then the oldest snapshot holder)."""
    if session_id is not None:
        return next((c for c in candidates if c.get("session_id") == session_id), None)
    return candidates[0] if candidates else None
