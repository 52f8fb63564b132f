"""What an action module gets: at plan time a read-only session and the queue's compiled mapping; at
run time the action session, the same mapping, a way to report progress and to record committed
rows in the audit."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

from queueops import mapping, sqlfiles
from queueops.actions import audit, executor
from queueops.actions.model import ActionError, Plan, Progress, ProgressCallback
from queueops.actions.session import Session, open_session, statement_timeout
from queueops.config import Config, Queue, Target
from queueops.identifiers import identifier_problem, quote_table


@dataclass
class PlanContext:
    cfg: Config
    target: Target
    queue: Queue
    options: Any
    session: Session

    @property
    def dialect(self) -> str:
        return self.target.dialect

    def sql(self, name: str) -> sqlfiles.SqlFile:
        return sqlfiles.load(self.dialect, f"actions/{name}")

    @cached_property
    def compiled(self) -> mapping.CompiledQueue:
        """The queue's mapping (names, values, predicates), compiled once for the plan."""
        return mapping.compile_queue(self.queue, self.dialect)

    def frags(self) -> dict[str, str]:
        """The queue's quoted names and predicates, a copy the action may add to."""
        return dict(self.compiled.names)

    def cutoff(self, age_s: float) -> datetime:
        """The database clock minus ``age_s`` (fixed here, reused by the execution), read as the
        queue's time columns are compared (``{clock}``: a naive UTC value for ``naive_times = "utc"``)."""
        sqlf = sqlfiles.load(self.dialect, "actions/session")
        if self.dialect == "postgresql":
            values: dict[str, Any] = {"age_s": float(age_s)}
        else:
            whole = int(age_s)
            values = {"age_whole_s": whole, "age_ms_part": int(round((age_s - whole) * 1000))}
        return self.session.run(sqlf.render("clock", {"clock": self.compiled.names["clock"]}, values))[0]["cutoff"]

    def quoted_table(self, name: str, schema: str | None, what: str) -> str:
        """A table named by the operator (hostile input): validated, then quoted."""
        for part, label in ((schema, f"{what} schema"), (name, what)):
            if part is not None:
                problem = identifier_problem(part, self.dialect)
                if problem:
                    raise ActionError(f"{label} {part!r} is not a safe identifier: {problem}")
        return quote_table(schema, name, self.dialect)


@dataclass
class Runner:
    """Run-time services for an action: its session, progress reports, committed-row bookkeeping."""

    cfg: Config
    plan: Plan
    session: Session
    application: str
    callback: ProgressCallback | None = None
    on_commit: Callable[[int], None] | None = None
    log: executor.CommandLog | None = None
    rows: int = 0
    # What has been done so far, one summary per committed batch / completed statement, kept as it
    # happens: a failed or interrupted action's result lists what it committed before it stopped.
    done_rows: list[dict[str, Any]] = field(default_factory=list)
    # Notes for the result and the audit record (e.g. fewer items qualified than the preview counted).
    notes: list[str] = field(default_factory=list)
    _monitor: Session | None = field(default=None, repr=False)

    @property
    def dialect(self) -> str:
        return self.plan.target.dialect

    def sql(self, name: str) -> sqlfiles.SqlFile:
        return sqlfiles.load(self.dialect, f"actions/{name}")

    def execute(self, stmt: sqlfiles.Statement, *, step: str = "", obj: str = "", session: Session | None = None,
                poll: Callable[[], None] | None = None, poll_interval_s: float = 0.5) -> list[dict[str, Any]]:
        """Run one statement of the action through :mod:`queueops.actions.executor` (the only way an
        action runs SQL at run time): logged as a command row under the audit record; ``step``
        names the preview step it is, checked against the preview before it runs."""
        log = self.log or executor.CommandLog(None, None, self.dialect)
        return executor.execute(log, session or self.session, stmt, step=step,
                                obj=obj or self.plan.observed.get("qualified_table") or self.table,
                                preview=self.plan.preview, poll=poll, poll_interval_s=poll_interval_s)

    @cached_property
    def compiled(self) -> mapping.CompiledQueue:
        """The queue's mapping, compiled as the plan's was (same config, no catalog types)."""
        return mapping.compile_queue(self.plan.queue, self.dialect)

    @property
    def table(self) -> str:
        """The queue's table, quoted: the object of a statement that names no other."""
        return self.compiled.table

    def set_statement_timeout(self, timeout_ms: int) -> None:
        """Change the bound of the following statements (a logged SET on PostgreSQL)."""
        stmt = statement_timeout(self.session, timeout_ms)
        if stmt is not None:
            self.execute(stmt, obj="(session)")

    def committed(self, rows_total: int) -> None:
        """Called after every committed batch: the audit record then says how far the action got."""
        self.rows = rows_total
        if self.on_commit:
            self.on_commit(rows_total)

    def note(self, text: str) -> None:
        """Say something in the result and the audit record that is not an error."""
        self.notes.append(text)

    def report(self, phase: str, **kw: Any) -> None:
        if self.callback is None:
            return
        with contextlib.suppress(Exception):  # a broken progress display must not break the action
            self.callback(Progress(action=self.plan.action, phase=phase, **kw))

    def monitor(self) -> Session:
        """A second session to read the engine's progress of the action's session."""
        if self._monitor is None:
            self._monitor = open_session(self.plan.target, self.cfg.base_dir, f"{self.application}-progress")
        return self._monitor

    def close(self) -> None:
        if self._monitor is not None:
            self._monitor.close()
            self._monitor = None


def audit_committer(store: Any, audit_id: int) -> Callable[[int], None]:
    """Advance the audit record after a batch; a busy store must not fail a committed batch (the
    final record is written with the total anyway)."""

    def commit(rows: int) -> None:
        with contextlib.suppress(Exception):
            audit.advance(store, audit_id, rows)

    return commit
