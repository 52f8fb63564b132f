"""terminate: end the session that is a queue's root cause (it holds cleanup back or holds the lock).

The collectors already name it: the oldest snapshot / xmin holder (dead tuples and version ghosts
cannot be cleaned up while it lives) and the head blocker of the sessions waiting on the queue's
table. This action ends that session -- PostgreSQL ``pg_terminate_backend`` (or, with
``cancel_only``, ``pg_cancel_backend``: the running statement only), SQL Server ``KILL`` -- so the
operator does not leave the console for psql or SSMS at 3 a.m.

Guards, at preview *and* again at execution: only a session that is a root cause of this queue
now; the same session (id, session start) in the same transaction as the preview, else refused;
never the queueops session itself, a system or background process, or a login on the deny list
(:func:`queueops.actions.decide.terminate_refusal`). After the signal the root-cause metrics and
the queue's ghosts are sampled again and shown before -> after, with VACUUM offered where dead
tuples were pinned.
"""

from __future__ import annotations

import time
from typing import Any

from queueops import judge
from queueops.actions.context import PlanContext, Runner
from queueops.actions.decide import pick_cause, terminate_changed, terminate_refusal
from queueops.actions.model import ActionError, Plan, Preview, Refused, Step, TerminateOptions
from queueops.config import Config, Queue, Target

GONE_WAIT_S = 15.0
POLL_S = 0.2
IDENTITY = ("session_id", "session_start", "xact_start", "xact_id")
SAMPLE_COLLECTORS = ("oldest_snapshot", "blocking_chains", "lock_waits", "ghost_records")
TARGET_METRICS = ("oldest_snapshot_age_s", "snapshot_transactions", "blocked_sessions", "head_blockers",
                  "version_store_kb")
QUEUE_METRICS = ("lock_waiters", "lock_blockers", "ghost_records", "dead_tuples")
SHOWN = ("cause", "blocked", "session_id", "login", "application", "client_addr", "process_type", "state",
         "session_start", "xact_start", "xact_age_s", "wait_event", "query", "xid_age", "xact_id", "log_bytes",
         "log_reserved_bytes")


def check(queue: Queue, opts: TerminateOptions) -> None:
    """Every queue kind has a table that a session can block or whose cleanup it can hold back."""


def min_age_s(queue: Queue, opts: TerminateOptions) -> float:
    """From what transaction age a snapshot holder counts as the root cause: the option, else the
    queue's old-snapshot warn level (:func:`queueops.judge.snapshot_levels`: its threshold on
    ``oldest_snapshot_age_s``, else 60 s), the age from which the console shows the holder and the
    alert fires."""
    if opts.min_age_s is not None:
        return opts.min_age_s
    return judge.snapshot_levels(queue.threshold(judge.OLD_SNAPSHOT))[0]


def sample(cfg: Config, target: Target, queue: Queue) -> dict[str, float | None]:
    """The root-cause metrics of the target and the queue's ghosts, now (the collectors' own SQL)."""
    from collectors import registry, runner

    res = runner.run_collectors(cfg, target, [registry.by_name(n) for n in SAMPLE_COLLECTORS])
    out: dict[str, float | None] = {}
    for r in res.rows:
        if (r.queue == "" and r.metric in TARGET_METRICS) or (r.queue == queue.name and r.metric in QUEUE_METRICS):
            out[r.metric] = r.value
    return out


def _identity(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in IDENTITY if k in row}


def _is_same(candidate: dict[str, Any], observed: dict[str, Any]) -> bool:
    return terminate_changed(observed, candidate) is None


def _signal_statement(ctx_sql: Any, dialect: str, block: str, ident: dict[str, Any]) -> Any:
    if dialect == "mssql":
        return ctx_sql.render("kill", {"session_n": str(int(ident["session_id"]))},
                              {"session_id": int(ident["session_id"]), "session_start": ident["session_start"]})
    return ctx_sql.render(block, {}, {"session_id": ident["session_id"], "session_start": ident["session_start"],
                                      "xact_start": ident.get("xact_start")})


def _describe(c: dict[str, Any], queue: Queue) -> str:
    if c["cause"] == "blocker":
        n = int(c.get("blocked") or 0)
        return (f"blocks the queue table of {queue.name!r}" + (f" ({n} session(s) waiting behind it)" if n else
                " (holds a table lock that blocks every change)"))
    return "holds the oldest snapshot of the database: dead tuples / row versions cannot be cleaned up"


def plan(ctx: PlanContext) -> Plan:
    q, opts, dialect = ctx.queue, ctx.options, ctx.dialect
    if opts.cancel_only and dialect == "mssql":
        raise ActionError("--cancel-only: SQL Server cannot cancel another session's statement without ending it; "
                          "KILL ends the session (its transaction rolls back)")
    sqlf = ctx.sql("terminate")
    qualified = ctx.compiled.table
    floor = min_age_s(q, opts)
    deny = ctx.cfg.actions.terminate_deny_logins
    own = ctx.session.session_id
    raw = ctx.session.run(sqlf.render("candidates", {}, {"qualified_table": qualified}))
    candidates, young = [], []
    for c in raw:
        if c["cause"] == "snapshot" and (c["xact_age_s"] is None or float(c["xact_age_s"]) < floor):
            young.append(c)
            continue
        c["refusal"] = terminate_refusal(c, own_session_id=own, deny_logins=deny)
        candidates.append(c)
    if opts.session is not None:
        found = ctx.session.run(sqlf.render("session", {}, {"session_id": opts.session}))
        if not found:
            raise ActionError(f"no session {opts.session} on target {ctx.target.name!r}")
        reason = terminate_refusal(found[0], own_session_id=own, deny_logins=deny)
        if reason:
            raise ActionError(f"refused: {reason}")
        chosen = pick_cause(candidates, opts.session)
        if chosen is None:
            causes = ", ".join(f"{c['session_id']} ({c['cause']})" for c in candidates) or "none"
            raise ActionError(f"refused: session {opts.session} is not a root cause of queue {q.name!r} now (it "
                              f"neither blocks its table nor holds the oldest snapshot older than {floor:g} s); "
                              f"root causes now: {causes}")
    else:
        chosen = pick_cause([c for c in candidates if not c["refusal"]])
    before = sample(ctx.cfg, ctx.target, q)
    others = [{**{k: c.get(k) for k in ("session_id", "cause", "blocked", "login", "application")},
               "refused": c["refusal"]} for c in candidates if c is not chosen]
    # A young snapshot holder is worth a word only where a snapshot is the question (nothing chosen,
    # or a snapshot holder chosen); beside a lock blocker it is noise (some consumer's transaction
    # of a few milliseconds, whose start can even read a hair after this statement's now()).
    warnings = [f"session {c['session_id']} holds the oldest snapshot for {max(0.0, float(c['xact_age_s'] or 0)):.0f}"
                f" s, under {floor:g} s: not a root cause yet (--min-age-s)" for c in young
                if chosen is None or chosen["cause"] == "snapshot"]
    warnings += [f"session {o['session_id']} ({o['cause']}) is a root cause too: "
                 + (f"never ended: {o['refused']}" if o["refused"] else f"end it with --session {o['session_id']}")
                 for o in others]
    signal = "cancel" if opts.cancel_only else "terminate"
    details: dict[str, Any] = {"min_age_s": floor, "before": before, "candidates": others, "signal": signal,
                               "qualified_table": qualified}
    if chosen is None:
        warnings.insert(0, f"nothing to end: no session blocks the table of queue {q.name!r} or holds the oldest "
                           f"snapshot for {floor:g} s or more")
        preview = Preview(action="terminate", queue=q.name, target=q.target, dialect=dialect,
                          summary=f"no root-cause session to end for queue {q.name!r}", steps=[], rows=[],
                          row_count=0, warnings=warnings, destructive=True, details=details)
        return Plan("terminate", q, ctx.target, opts, preview, observed={"qualified_table": qualified})
    ident = _identity(chosen)
    stmt = _signal_statement(sqlf, dialect, signal, ident)
    row = {k: chosen.get(k) for k in SHOWN if k in chosen}
    pins: dict[str, Any] = {}
    if chosen["cause"] == "blocker":
        pins["sessions_waiting"] = int(chosen.get("blocked") or 0)
        pins["lock_waiters"] = before.get("lock_waiters")
    else:
        pins.update({k: before.get(k) for k in ("dead_tuples", "ghost_records", "version_store_kb") if k in before})
    row["pins"] = pins
    if dialect == "mssql":
        log_bytes = int(chosen.get("log_bytes") or 0)
        row["rollback"] = f"{log_bytes:,} bytes of log to roll back (sys.dm_tran_database_transactions)"
        if log_bytes:
            warnings.append(f"KILL rolls back {log_bytes:,} bytes of log: about as long as the transaction took to "
                            "write them; the session holds its locks until the rollback ends")
    else:
        row["rollback"] = ("its open transaction rolls back at once (PostgreSQL has no undo to apply)"
                           if signal == "terminate" else "only the running statement is cancelled")
    if signal == "cancel" and str(chosen.get("state") or "").startswith("idle"):
        warnings.append(f"session {ident['session_id']} is {chosen.get('state')}: there is no running statement to "
                        "cancel, so cancelling changes nothing; terminate ends it")
    warnings.append("an application that opens the same transaction again after reconnecting brings the problem "
                    "back: fix its transaction handling too")
    verb = "cancel the running statement of" if signal == "cancel" else ("KILL" if dialect == "mssql" else "end")
    age = chosen.get("xact_age_s")
    summary = (f"{verb} session {ident['session_id']} ({chosen.get('login')}, {chosen.get('application') or 'no app'}"
               f", {chosen.get('client_addr') or 'local'}) on target {q.target!r}: it {_describe(chosen, q)}; in "
               f"transaction since {chosen.get('xact_start')}" + (f" ({float(age):.0f} s)" if age is not None else "")
               + f", state {chosen.get('state')}; only if it is still the same session in the same transaction")
    preview = Preview(action="terminate", queue=q.name, target=q.target, dialect=dialect, summary=summary,
                      steps=[Step(signal, stmt)], rows=[row], row_count=1, warnings=warnings, destructive=True,
                      details=details)
    return Plan("terminate", q, ctx.target, opts, preview,
                observed={"qualified_table": qualified, "session": ident, "cause": chosen["cause"],
                          "signal": signal, "before": before})


def _session_object(obs: dict[str, Any]) -> str:
    """A command row's object when the statement targets a server session, not a table."""
    return f"session {obs['session_id']}"


def _recheck(plan: Plan, runner: Runner) -> None:
    """Refuse unless the session is still the preview's one, still allowed, still a root cause."""
    obs = plan.observed["session"]
    sqlf = runner.sql("terminate")
    found = runner.execute(sqlf.render("session", {}, {"session_id": obs["session_id"]}), obj=_session_object(obs))
    now = found[0] if found else None
    reason = terminate_changed(obs, now) or terminate_refusal(
        now, own_session_id=runner.session.session_id, deny_logins=runner.cfg.actions.terminate_deny_logins)
    if reason:
        raise Refused(reason)
    causes = runner.execute(sqlf.render("candidates", {}, {"qualified_table": plan.observed["qualified_table"]}))
    # The preview's floor holds at confirm too: a blocker whose waiters are gone must not pass as a
    # snapshot holder merely because its transaction has an xid (a row lock takes one).
    floor = float(plan.preview.details.get("min_age_s") or 0)
    causes = [c for c in causes if c["cause"] != "snapshot"
              or (c.get("xact_age_s") is not None and float(c["xact_age_s"]) >= floor)]
    if not any(_is_same(c, obs) for c in causes):
        raise Refused(f"session {obs['session_id']} is no longer a root cause of queue {plan.queue.name!r} (it "
                      f"neither blocks its table nor holds the oldest snapshot for {floor:g} s or more now)")


def _wait_gone(runner: Runner, obs: dict[str, Any]) -> tuple[bool, float | None]:
    """Wait until the ended session is gone (the signal is asynchronous; SQL Server may roll back
    a while). Returns (gone, last rollback percent on SQL Server)."""
    sqlf = runner.sql("terminate")
    deadline = time.monotonic() + GONE_WAIT_S
    percent = None
    while True:
        left = runner.execute(sqlf.render("gone", {}, {"session_id": obs["session_id"],
                                                       "session_start": obs["session_start"]}), obj=_session_object(obs))
        if not left or not int(left[0]["present"]):
            return True, percent
        if runner.dialect == "mssql":
            rows = runner.execute(sqlf.render("rollback_progress", {}, {"session_id": obs["session_id"]}),
                                  obj=_session_object(obs))
            percent = float(rows[0]["percent_complete"]) if rows and rows[0]["percent_complete"] is not None else None
        runner.report("waiting for the session to end", done=percent, total=100 if percent is not None else None,
                      message=f"session {obs['session_id']} " + (f"rolling back {percent:.0f} %" if percent is not None
                                                                 else "still there"))
        if time.monotonic() > deadline:
            return False, percent
        time.sleep(POLL_S)


def run(plan: Plan, runner: Runner) -> list[dict[str, Any]]:
    if plan.nothing_to_do:
        return [{"note": "nothing to do: no root-cause session"}]
    _recheck(plan, runner)
    obs, signal = plan.observed["session"], plan.observed["signal"]
    stmt = _signal_statement(runner.sql("terminate"), runner.dialect, signal, obs)
    started = time.monotonic()
    rows = runner.execute(stmt, step=signal, obj=_session_object(obs))
    if not rows:  # the compare-and-set found another session (or transaction) under this id
        raise Refused(f"session {obs['session_id']} changed between the check and the signal")
    if not rows[0]["signalled"]:
        raise ActionError(f"the server did not signal session {obs['session_id']} (not allowed for this login?)")
    runner.committed(1)
    if signal == "cancel":
        time.sleep(0.5)
        gone, percent = False, None
    else:
        gone, percent = _wait_gone(runner, obs)
    out: list[dict[str, Any]] = [{"session_id": obs["session_id"], "signal": signal if runner.dialect == "postgresql"
                                  else "KILL", "ended": gone, "seconds": round(time.monotonic() - started, 3),
                                  **({"rollback_percent": percent} if percent is not None else {})}]
    runner.report("sampling again", message="root-cause metrics and ghosts, before -> after")
    after = sample(runner.cfg, plan.target, plan.queue)
    before = plan.observed.get("before") or {}
    for metric in (*TARGET_METRICS, *QUEUE_METRICS):
        if metric in before or metric in after:
            out.append({"metric": metric, "before": before.get(metric), "after": after.get(metric)})
    if plan.observed.get("cause") == "snapshot" and runner.dialect == "postgresql":
        out.append({"offer": "VACUUM", "command": f"queueops act rebuild --queue {plan.queue.name} --vacuum-only",
                    "why": "the dead tuples the snapshot pinned are removable now; VACUUM removes them (autovacuum "
                           "will too, later)"})
    if not gone and signal == "terminate":
        raise ActionError(f"session {obs['session_id']} was signalled but is still there after {GONE_WAIT_S:g} s "
                          "(SQL Server: a long rollback; look again)")
    return out
