"""The action audit log (store table ``audit_log``, shaped like Ola Hallengren's CommandLog).

A record is inserted *before* an action touches anything (outcome ``running``), its
``rows_affected`` is advanced after every committed batch, and it is completed after the action
(``ok`` / ``failed`` / ``interrupted``) -- so an action whose process dies mid-way stays visible.
Refused attempts (a viewer, a stale preview) are recorded as ``refused`` without running.

"interrupted" must be true, not a guess: each record names the process running it (host, pid and
the process's start time, in the preview JSON under ``runner``). A ``running`` record is marked
``interrupted`` only when that process is provably gone (:func:`queueops.proc.process_gone`):
same host, and the pid no longer exists, now belongs to a process started at another time (a
reused pid), or is a dead process not yet reaped (a zombie: gone from the moment it died, not
when its parent got round to it). Records of other hosts are left alone: from here nobody can
tell whether they are still running. An interrupted record keeps both times: ``end_time`` and
``last_heard`` are when the process was last heard of (its start, then each committed batch),
``noticed_at`` is when its death was seen; it died between the two.

When the store is unavailable at the moment an action ends, its completion cannot be written: it
goes to a small local journal file instead (named in the record's ``runner`` at the start, so
any reader on that host finds it), and the next :func:`reconcile` -- any reader of the audit log
-- writes it to the record with the true outcome and row count. A record is marked
``interrupted`` only when its process is gone *and* left no journaled completion.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, and_, insert, select, update

from queueops import proc, secrets
from queueops.actions.model import Plan, dumps
from queueops.roles import Actor
from queueops.store.schema import audit_log

OUTCOMES = ("running", "ok", "failed", "interrupted", "refused")


def utcnow() -> datetime:
    return datetime.now(UTC)


# ---------------------------------------------------------------------------------------------
# Which process runs an action, and is it still there


def journal_dir() -> Path:
    """Where completions that could not reach the store wait (per OS user, survives a reboot)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "queueops" / "audit-journal"


def new_journal_path() -> str:
    """A journal file name for one action (created only if the store fails at its end)."""
    return str(journal_dir() / f"{uuid.uuid4().hex}.json")


def this_process(journal: str | None = None) -> dict[str, Any]:
    out = proc.this_process()
    if journal:
        out["journal"] = journal
    return out


def write_journal(path: str, audit_id: int, outcome: str, rows: int | None, error: str) -> str | None:
    """Keep a completion the store could not take; returns the file written (None if even that
    failed: then only the caller's output tells the outcome). Falls back to the temp folder."""
    body = json.dumps({"audit_id": audit_id, "outcome": outcome, "rows": rows, "error": secrets.mask(error),
                       "end_time": utcnow().isoformat()})
    for target in (Path(path), Path(tempfile.gettempdir()) / "queueops-audit-journal" / Path(path).name):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".tmp")
            tmp.write_text(body)
            tmp.chmod(0o600)
            tmp.replace(target)  # a reader never sees half a file
            return str(target)
        except OSError:
            continue
    return None


def _read_journal(runner: dict[str, Any], audit_id: int) -> tuple[dict[str, Any], Path] | None:
    """The journaled completion of record ``audit_id``, if its process wrote one on this host."""
    path = runner.get("journal")
    if not path or runner.get("host") != socket.gethostname():
        return None
    name = Path(str(path)).name
    for candidate in (Path(str(path)), Path(tempfile.gettempdir()) / "queueops-audit-journal" / name):
        try:
            body = json.loads(candidate.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(body, dict) and body.get("audit_id") == audit_id and body.get("outcome") in OUTCOMES:
            return body, candidate
    return None


process_gone = proc.process_gone


# ---------------------------------------------------------------------------------------------
# Writing


def _preview_json(plan: Plan | None, extra: dict[str, Any] | None = None, journal: str | None = None) -> str:
    body: dict[str, Any] = plan.preview.to_json() if plan else {}
    body["runner"] = this_process(journal)
    if extra:
        body.update(extra)
    return secrets.mask(dumps(body))


def begin(engine: Engine, actor: Actor, plan: Plan, journal: str | None = None) -> int:
    """Insert the ``running`` record (before anything runs); returns its id. ``journal``: where
    this process would keep the completion if the store is unavailable when the action ends."""
    now = utcnow()
    with engine.begin() as conn:
        res = conn.execute(insert(audit_log).values(
            start_time=now, last_heard=now, end_time=None, user_name=actor.user, role=actor.role, action=plan.action,
            target=plan.target.name, queue=plan.queue.name, command=plan.preview.sql,
            params=dumps(plan.preview.params), preview=_preview_json(plan, journal=journal), rows_affected=0,
            outcome="running", error=""))
        return int(res.inserted_primary_key[0])


def refuse(engine: Engine, actor: Actor, plan: Plan, reason: str) -> int:
    """Record an attempt that was refused before anything ran."""
    now = utcnow()
    with engine.begin() as conn:
        res = conn.execute(insert(audit_log).values(
            start_time=now, end_time=now, user_name=actor.user, role=actor.role, action=plan.action,
            target=plan.target.name, queue=plan.queue.name, command=plan.preview.sql,
            params=dumps(plan.preview.params), preview=_preview_json(plan), rows_affected=0,
            outcome="refused", error=secrets.mask(reason)))
        return int(res.inserted_primary_key[0])


def advance(engine: Engine, audit_id: int, rows: int) -> None:
    """Record the rows committed so far (after each batch), so an interrupted record is exact."""
    with engine.begin() as conn:
        conn.execute(update(audit_log).where(and_(audit_log.c.id == audit_id, audit_log.c.outcome == "running"))
                     .values(rows_affected=rows, last_heard=utcnow()))


def finish(engine: Engine, audit_id: int, outcome: str, rows: int | None, error: str = "",
           ended: datetime | None = None) -> bool:
    """Complete a ``running`` record; False if it was no longer running (already completed)."""
    if outcome not in OUTCOMES or outcome == "running":
        raise ValueError(f"bad outcome {outcome!r}")
    ended = ended or utcnow()
    with engine.begin() as conn:
        res = conn.execute(update(audit_log)
                           .where(and_(audit_log.c.id == audit_id, audit_log.c.outcome == "running"))
                           .values(outcome=outcome, end_time=ended, last_heard=ended, rows_affected=rows,
                                   error=secrets.mask(error)))
        return bool(res.rowcount)


def _complete_from_journal(engine: Engine, rid: int, runner: dict[str, Any]) -> bool:
    found = _read_journal(runner, int(rid))
    if found is None:
        return False
    body, path = found
    try:
        ended = datetime.fromisoformat(body["end_time"])
    except (KeyError, TypeError, ValueError):
        ended = None
    note = (f"(recorded late: the store was unavailable when the action ended"
            f"{' at ' + ended.isoformat(timespec='seconds') if ended else ''})")
    error = f"{body.get('error') or ''} {note}".strip()
    finish(engine, int(rid), body["outcome"], body.get("rows"), error, ended)
    path.unlink(missing_ok=True)
    return True


def reconcile(engine: Engine) -> list[int]:
    """Complete ``running`` records from their journaled completion (their action ended while the
    store was away), then mark those whose process is provably gone as ``interrupted``; returns
    the ids marked interrupted."""
    with engine.connect() as conn:
        running = conn.execute(select(audit_log.c.id, audit_log.c.preview, audit_log.c.start_time,
                                      audit_log.c.last_heard).where(audit_log.c.outcome == "running")).all()
    marked = []
    for rid, preview, started, heard in running:
        try:
            runner = json.loads(preview or "{}").get("runner") or {}
        except (ValueError, AttributeError):
            runner = {}
        # Gone first, journal second: a process writes its journal before it exits, so one seen
        # gone has left whatever journal it will ever leave.
        gone = process_gone(runner)
        if _complete_from_journal(engine, rid, runner) or not gone:
            continue
        # It died after it was last heard of and before now: end_time is the last sign of life
        # (the closest bound of the death), noticed_at when the death was seen; both are kept.
        last = _aware(heard or started)
        noticed = utcnow()
        with engine.begin() as conn:
            res = conn.execute(
                update(audit_log).where(and_(audit_log.c.id == rid, audit_log.c.outcome == "running"))
                .values(outcome="interrupted", end_time=last, last_heard=last, noticed_at=noticed,
                        error=f"the process running this action (pid {runner.get('pid')} on "
                              f"{runner.get('host')}) ended before completing it: last heard of at "
                              f"{last.isoformat(timespec='seconds')}, found gone at "
                              f"{noticed.isoformat(timespec='seconds')}; rows_affected counts "
                              "the batches it committed (each batch is all or nothing)"))
            if res.rowcount:
                marked.append(int(rid))
    return marked


# ---------------------------------------------------------------------------------------------
# Reading


def _aware(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)  # SQLite hands back naive UTC
    return value


def _row(r: Any) -> dict[str, Any]:
    d = dict(r._mapping)
    for k in ("start_time", "end_time", "last_heard", "noticed_at"):
        d[k] = _aware(d.get(k))
    try:
        runner = json.loads(d.get("preview") or "{}").get("runner") or {}
    except (ValueError, AttributeError):
        runner = {}
    d["host"], d["pid"] = runner.get("host"), runner.get("pid")
    return d


def entries(engine: Engine, *, queue: str | None = None, action: str | None = None, user: str | None = None,
            outcome: Sequence[str] | str | None = None, target: str | None = None,
            since: datetime | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """Audit records, newest first, after marking dead ``running`` records interrupted."""
    reconcile(engine)
    a = audit_log.c
    stmt = select(audit_log).order_by(a.start_time.desc(), a.id.desc()).limit(max(1, limit))
    if queue:
        stmt = stmt.where(a.queue == queue)
    if action:
        stmt = stmt.where(a.action == action)
    if user:
        stmt = stmt.where(a.user_name == user)
    if target:
        stmt = stmt.where(a.target == target)
    if outcome:
        stmt = stmt.where(a.outcome.in_([outcome] if isinstance(outcome, str) else list(outcome)))
    if since is not None:
        stmt = stmt.where(a.start_time >= since)
    with engine.connect() as conn:
        return [_row(r) for r in conn.execute(stmt)]


def entry(engine: Engine, audit_id: int) -> dict[str, Any] | None:
    reconcile(engine)
    with engine.connect() as conn:
        r = conn.execute(select(audit_log).where(audit_log.c.id == audit_id)).first()
    return _row(r) if r is not None else None
