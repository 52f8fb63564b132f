"""The one place where an action's statements run, CommandExecute-style (Ola Hallengren).

Every statement an action executes on its target goes through :func:`execute`: a command row
(``audit_commands``: statement, parameters, object, start, end, rows, error) is written under the
action's audit record *before* the statement runs and completed after it, so the log holds each
statement as run, a failing statement's row carries its error, and an action whose process is
killed leaves its last row open (no end time). A statement that belongs to a preview step is
checked against the statement the operator confirmed before it runs: the execution may only bind
this batch's values (its size, the keys it picked), never a different statement.

The engine's progress polls (a second, monitoring session reading ``pg_stat_progress_*`` /
``sys.dm_exec_requests`` twice a second) are not the action's statements and are not logged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, insert, select, update

from queueops import secrets
from queueops.actions.model import ActionError, Preview, dumps, shown_sql
from queueops.actions.session import Session, run_watched
from queueops.sqlfiles import Statement
from queueops.store.schema import audit_commands

# A bound list renders one placeholder per element (``IN (:item_ids)``): the preview shows the
# statement with one, a batch binds as many as it picked. Collapsing such a run of placeholders to
# one is the only difference allowed between a preview step's statement and the one executed.
_PLACEHOLDER_LIST = re.compile(r"(%s|\?)(?:\s*,\s*(?:%s|\?))+")


def statement_shape(sql: str) -> str:
    """``sql`` with every list of bound placeholders collapsed to one placeholder."""
    return _PLACEHOLDER_LIST.sub(r"\1", sql)


def same_as_previewed(sql: str, previewed: str) -> bool:
    """Whether ``sql`` is the preview's statement: byte-identical, or identical but for the number
    of placeholders of a bound list (the keys a batch picked)."""
    return sql == previewed or statement_shape(sql) == statement_shape(previewed)


def previewed_step(preview: Preview, label: str, stmt: Statement) -> None:
    """Refuse to run ``stmt`` as preview step ``label`` unless it is that step's statement."""
    shown = [s.statement.sql for s in preview.steps if s.label == label]
    if not shown:
        raise ActionError(f"internal: the preview has no step {label!r}; nothing of this step was run")
    if not any(same_as_previewed(stmt.sql, sql) for sql in shown):
        raise ActionError(f"internal: the statement of step {label!r} is not the one the preview showed; "
                          "it was not run")


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class CommandLog:
    """Writes one action's command rows. ``store`` None (no audit record: nothing to log under)
    makes every call a no-op, so the executor's path is the same either way."""

    store: Engine | None
    audit_id: int | None
    dialect: str
    seq: int = 0
    ids: list[int] = field(default_factory=list)
    lost: int = 0  # statements run while the store could not take their command row

    def begin(self, stmt: Statement, step: str, obj: str) -> int | None:
        """Insert the open row. A store that goes away mid-action does not stop it (the action's
        audit record was written before it started and its completion waits in the local journal,
        see :mod:`queueops.actions.audit`): the statement runs and :attr:`lost` counts it."""
        if self.store is None or self.audit_id is None:
            return None
        self.seq += 1
        try:
            with self.store.begin() as conn:
                res = conn.execute(insert(audit_commands).values(
                    audit_id=self.audit_id, seq=self.seq, step=step, statement=shown_sql(stmt.sql, self.dialect),
                    params=secrets.mask(dumps(list(stmt.params))), object=obj, start_time=utcnow(), end_time=None,
                    rows=None, error=""))
                cid = int(res.inserted_primary_key[0])
        except Exception:  # noqa: BLE001 - the store is unavailable: counted, said in the result
            self.lost += 1
            return None
        self.ids.append(cid)
        return cid

    def end(self, cid: int | None, rows: int | None, error: str = "") -> None:
        """Complete the row (best effort: the statement has run, its action's outcome must not
        depend on a busy store; the audit record itself is completed with retries)."""
        if cid is None or self.store is None:
            return
        for _attempt in range(3):
            try:
                with self.store.begin() as conn:
                    conn.execute(update(audit_commands).where(audit_commands.c.id == cid)
                                 .values(end_time=utcnow(), rows=rows, error=secrets.mask(error)[:4000]))
                return
            except Exception:  # noqa: BLE001, S112 - retried, then the row stays open (honest: unknown end)
                continue


def execute(log: CommandLog, session: Session, stmt: Statement, *, step: str = "", obj: str = "",
            preview: Preview | None = None, poll: Callable[[], None] | None = None,
            poll_interval_s: float = 0.5) -> list[dict[str, Any]]:
    """Run ``stmt`` on ``session`` as its own logged command; returns its rows.

    ``step``: the preview step this statement is (checked against ``preview`` first); ``poll``:
    run it in a worker thread and call ``poll`` meanwhile (long index statements, see
    :func:`queueops.actions.session.run_watched`).
    """
    if step and preview is not None:
        previewed_step(preview, step, stmt)
    cid = log.begin(stmt, step, obj)
    try:
        rows = run_watched(session, stmt, poll, poll_interval_s) if poll else session.run(stmt)
    except BaseException as exc:
        log.end(cid, None, f"{type(exc).__name__}: {exc}")
        raise
    log.end(cid, len(rows))
    return rows


def commands(store: Engine, audit_id: int) -> list[dict[str, Any]]:
    """The command rows of one audit record, in the order they ran."""
    return commands_of(store, [audit_id])[audit_id]


def commands_of(store: Engine, audit_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """The command rows of several audit records (one query), keyed by audit id."""
    if not audit_ids:
        return {}
    c = audit_commands.c
    out: dict[int, list[dict[str, Any]]] = {i: [] for i in audit_ids}
    with store.connect() as conn:
        for r in conn.execute(select(audit_commands).where(c.audit_id.in_(audit_ids)).order_by(c.audit_id, c.seq)):
            d = dict(r._mapping)
            for k in ("start_time", "end_time"):
                v = d.get(k)
                if isinstance(v, datetime) and v.tzinfo is None:
                    d[k] = v.replace(tzinfo=UTC)
            out[int(d["audit_id"])].append(d)
    return out
