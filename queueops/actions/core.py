"""``plan`` and ``execute``: the one entry point of every action, for the CLI and the console alike.

``plan`` reads (on a read-only session) and returns a :class:`~queueops.actions.model.Plan` whose
preview the operator confirms. ``execute`` checks the actor's role, writes the audit record
*before* anything runs, runs the action on its own session with progress callbacks, and completes
the audit record whatever happens (ok / failed / interrupted). It never raises for an outcome:
the :class:`~queueops.actions.model.Result` says what happened.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Engine

from queueops import roles, secrets
from queueops.actions import archive, audit, executor, rebuild, requeue, terminate, watermark
from queueops.actions.context import PlanContext, Runner, audit_committer
from queueops.actions.model import (
    ACTIONS,
    OPTIONS,
    ActionError,
    Conflict,
    Interrupted,
    Plan,
    ProgressCallback,
    Refused,
    Result,
)
from queueops.actions.session import Session, connection_lost, open_session
from queueops.config import Config
from queueops.engine import TargetError

MODULES: dict[str, ModuleType] = {
    "requeue": requeue,
    "rebuild": rebuild,
    "watermark-reset": watermark,
    "archive": archive,
    "terminate": terminate,
}
# A preview older than this is not executed: what it showed may no longer be what would run.
MAX_PLAN_AGE_S = 900.0


def _options(action: str, options: dict[str, Any] | None) -> Any:
    try:
        return OPTIONS[action].model_validate(options or {})
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "(options)"
            problems.append(f"{field}: {err['msg'].removeprefix('Value error, ')} (got {err.get('input')!r})")
        raise ActionError(f"bad options for {action}: " + "; ".join(problems)) from None


def refusal(cfg: Config, action: str, queue: str, options: dict[str, Any] | None = None) -> str:
    """Why ``action`` can never be planned on ``queue`` with these options, from the config alone
    (the checks :func:`plan` makes before it connects); '' when it can be. What ``config check``
    tells of an autopilot policy that would be refused every time it fires."""
    try:
        if action not in MODULES:
            raise ActionError(f"unknown action {action!r}; actions: {', '.join(ACTIONS)}")
        MODULES[action].check(cfg.queue(queue), _options(action, options))
    except ActionError as exc:
        return str(exc)
    except KeyError:
        return f"no queue named {queue!r} in the config"
    return ""


def plan(cfg: Config, action: str, queue: str, options: dict[str, Any] | None = None) -> Plan:
    """Preview ``action`` on ``queue``: read what it would touch, change nothing.

    Raises :class:`ActionError` for a request that cannot be planned (unknown queue or action,
    bad option, kind not applicable) and :class:`~queueops.engine.TargetError` when the target
    cannot be read; both messages are safe to show.
    """
    if action not in MODULES:
        raise ActionError(f"unknown action {action!r}; actions: {', '.join(ACTIONS)}")
    try:
        q = cfg.queue(queue)
    except KeyError:
        known = ", ".join(x.name for x in cfg.queues) or "none"
        raise ActionError(f"no queue named {queue!r} in the config (queues: {known})") from None
    target = cfg.target(q.target)
    opts = _options(action, options)
    module = MODULES[action]
    module.check(q, opts)  # fail before connecting when the request cannot apply
    session = open_session(target, cfg.base_dir, f"queueops-action-{action}-preview", read_only=True)
    try:
        return module.plan(PlanContext(cfg, target, q, opts, session))
    finally:
        session.close()


NOTHING_TO_DO = "nothing to do: the preview found nothing to change; not run, no audit record"


def _result(plan: Plan, actor: roles.Actor, outcome: str, rows: int | None, error: str, audit_id: int | None,
            started: datetime, out_rows: list[dict[str, Any]] | None = None, notes: list[str] | None = None) -> Result:
    return Result(action=plan.action, queue=plan.queue.name, target=plan.target.name, outcome=outcome,  # type: ignore[arg-type]
                  rows_affected=rows, error=secrets.mask(error), audit_id=audit_id, user=actor.user, role=actor.role,
                  started=started, ended=datetime.now(UTC), rows=out_rows or [], preview=plan.preview,
                  notes=[secrets.mask(n) for n in notes or []])


def _with_notes(error: str, notes: list[str]) -> str:
    """The audit record's error text: the error, then the result's notes (an ``ok`` record's only text)."""
    return "; ".join([*([error] if error else []), *(f"note: {n}" for n in notes)])


def execute(cfg: Config, plan: Plan, *, user: str | None = None, actor: roles.Actor | None = None,
            progress: ProgressCallback | None = None, store: Engine | None = None,
            max_plan_age_s: float = MAX_PLAN_AGE_S) -> Result:
    """Run a confirmed plan as ``user`` (the console's signed-in user; the CLI passes None: the
    config's or the OS user). ``progress`` is called on the caller's thread.

    Viewers are refused (and audited as refused); so is a preview older than ``max_plan_age_s``.
    Ctrl-C (KeyboardInterrupt) or SIGTERM (:class:`Interrupted`) during the action cancels the
    running statement, completes the audit record as ``interrupted`` and returns the result.
    """
    from queueops.store import open_engine

    actor = actor or roles.resolve(cfg, user)
    started = datetime.now(UTC)
    journal = audit.new_journal_path()
    try:
        store = store or open_engine(cfg)
        audit.reconcile(store)
        if not actor.can_act:
            reason = (f"{actor.user} has the role {actor.role!r}: only operators run actions "
                      f"({'the console users file' if actor.source == 'console:local' else 'config [identity] roles'})")
            rid = audit.refuse(store, actor, plan, reason)
            return _result(plan, actor, "refused", 0, reason, rid, started)
        if plan.age_s > max_plan_age_s:
            reason = f"the preview is {plan.age_s:.0f} s old (limit {max_plan_age_s:.0f} s): preview again"
            rid = audit.refuse(store, actor, plan, reason)
            return _result(plan, actor, "refused", 0, reason, rid, started)
        if plan.nothing_to_do:
            # The confirmed preview changes nothing: nothing runs, so there is no audit record (the
            # log records what was done to a queue) and no progress. A row that qualifies only
            # after the preview was not confirmed by anyone: preview again to act on it.
            return _result(plan, actor, "ok", 0, NOTHING_TO_DO, None, started)
        rid = audit.begin(store, actor, plan, journal)
    except Exception as exc:  # noqa: BLE001 - the store is unavailable: an action never runs unaudited
        reason = (f"not run: the audit log in the store cannot be written ({type(exc).__name__}: "
                  f"{str(exc).splitlines()[0][:300]}); an action never runs without its audit record; "
                  "nothing was changed")
        return _result(plan, actor, "failed", 0, reason, None, started)

    application = f"queueops-action-{plan.action}-{rid}"
    session: Session | None = None
    runner: Runner | None = None
    log = executor.CommandLog(store, rid, plan.target.dialect)
    outcome, error, out_rows = "ok", "", []
    try:
        session = open_session(plan.target, cfg.base_dir, application)
        runner = Runner(cfg, plan, session, application, progress, audit_committer(store, rid), log)
        out_rows = MODULES[plan.action].run(plan, runner)
    except Conflict as exc:
        outcome, error = "failed", f"conflict: {exc}"
    except Refused as exc:
        outcome, error = "refused", f"refused: {exc}; nothing was changed"
    except (KeyboardInterrupt, Interrupted):
        outcome, error = "interrupted", ("stopped by the operator (Ctrl-C / SIGTERM): the running statement was "
                                         "cancelled and rolled back; committed batches stay done")
    except TargetError as exc:
        if connection_lost(session, exc):
            outcome, error = "interrupted", (f"the connection to {plan.target.name} was lost mid-action; the batch "
                                             f"in flight was rolled back, committed batches stay done: {exc}")
        else:
            outcome, error = "failed", str(exc)
    except ActionError as exc:
        outcome, error = "failed", str(exc)
    except Exception as exc:  # noqa: BLE001 - recorded and returned; an action must always be audited
        lost = connection_lost(session, exc)
        outcome = "interrupted" if lost else "failed"
        error = (f"the connection to {plan.target.name} was lost mid-action; the batch in flight was rolled "
                 f"back, committed batches stay done: " if lost else "") + f"{type(exc).__name__}: {exc}"
    finally:
        rows = runner.rows if runner else 0
        notes = list(runner.notes) if runner else []
        if runner and not out_rows:  # failed or interrupted: what it committed before it stopped
            out_rows = list(runner.done_rows)
        if runner:
            runner.close()
        if session:
            session.close()
        if log.lost:
            note = (f"{log.lost} statement(s) ran without their command row: the store was unavailable "
                    "when they started")
            error = f"{error}; {note}" if error else note
        late = _finish(store, rid, outcome, rows, _with_notes(error, notes), journal)
    if late:
        error = f"{error}; {late}" if error else late
    return _result(plan, actor, outcome, rows, error, rid, started, out_rows, notes)


def _finish(store: Engine, rid: int, outcome: str, rows: int, error: str, journal: str) -> str:
    """Complete the audit record; returns "" or, when the store cannot take it, a note saying
    where the completion waits (the next reader of the audit log writes it)."""
    # The store may be busy (SQLite writer lock); the record must not stay "running" for a live
    # process that finished, so retry a few times before falling back to the journal.
    for attempt in range(5):
        try:
            audit.finish(store, rid, outcome, rows, error)
            return ""
        except Exception as exc:  # noqa: BLE001
            if attempt == 4:
                problem = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                break
            time.sleep(0.2 * (attempt + 1))
    kept = audit.write_journal(journal, rid, outcome, rows, error)
    where = (f"is kept in {kept} and written to the store by the next reader of the audit log (queueops audit, "
             "the console)") if kept else "could not be kept locally either: this output is its only record"
    return (f"the audit record #{rid} could not be completed (the store is unavailable: {problem}); its "
            f"outcome ({outcome}, {rows} rows) {where}")
