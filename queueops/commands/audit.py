"""``queueops audit``: the action audit log (who ran what, on which queue, with what outcome).

Reading the log first marks records of actions whose process died as ``interrupted`` (see
:mod:`queueops.actions.audit`). ``--id N`` shows one record in full: its SQL, parameters, the
preview the operator confirmed and every statement it executed (its command rows, in order).
``--sign-ins`` lists the console's sign-in log instead (:mod:`queueops.store.sessions`).
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from queueops.actions import ACTIONS
from queueops.commands.common import add_config_arg, fail, load_config, print_json

OUTCOMES = ("running", "ok", "failed", "interrupted", "refused")

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="list the action audit log",
                       description="List audited actions, newest first. A record still 'running' whose process is "
                                   "gone is marked 'interrupted' first.")
    add_config_arg(p)
    p.add_argument("--queue", metavar="NAME")
    p.add_argument("--action", choices=ACTIONS)
    p.add_argument("--user", metavar="NAME")
    p.add_argument("--target", metavar="NAME")
    p.add_argument("--outcome", action="append", choices=OUTCOMES, help="repeatable")
    p.add_argument("--since", metavar="WHEN", help="a duration back from now (30m, 12h, 7d) or an ISO time")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="at most N records (default 50)")
    p.add_argument("--id", type=int, metavar="N", help="show one record in full")
    p.add_argument("--json", action="store_true", help="one JSON object per record")
    p.add_argument("--sign-ins", action="store_true",
                   help="the console's sign-in log instead: every attempt (ok, failed, locked by the throttle) "
                        "and sign-out, with --user, --since, --limit")
    p.set_defaults(func=_audit, parser=p)


def parse_since(text: str | None, now: datetime | None = None) -> datetime | None:
    """``30m`` / ``12h`` / ``7d`` back from now, or an ISO 8601 time (UTC if no offset)."""
    if not text:
        return None
    now = now or datetime.now(UTC)
    m = _DURATION.match(text.strip())
    if m:
        unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[m.group(2)]
        return now - timedelta(**{unit: float(m.group(1))})
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--since {text!r}: expected a duration (30m, 12h, 7d) or an ISO time") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _public(rec: dict[str, Any], full: bool) -> dict[str, Any]:
    from queueops.actions.model import jsonable

    out = {k: rec.get(k) for k in ("id", "start_time", "end_time", "user_name", "role", "action", "target", "queue",
                                   "outcome", "rows_affected", "error", "host", "pid", "last_heard", "noticed_at")}
    if full:
        out["command"] = rec.get("command")
        out["commands"] = rec.get("commands", [])
        for k in ("params", "preview"):
            try:
                out[k] = json.loads(rec.get(k) or "null")
            except ValueError:
                out[k] = rec.get(k)
    return jsonable(out)


def _command(row: dict[str, Any]) -> dict[str, Any]:
    """A command row as shown: its parameters parsed, its duration in seconds (None while open)."""
    try:
        params = json.loads(row.get("params") or "[]")
    except ValueError:
        params = row.get("params")
    end, start = row.get("end_time"), row.get("start_time")
    return {"seq": row["seq"], "step": row["step"], "object": row["object"], "statement": row["statement"],
            "params": params, "start_time": start, "end_time": end, "rows": row["rows"], "error": row["error"],
            "seconds": round((end - start).total_seconds(), 3) if end and start else None}


def _print_commands(rows: list[dict[str, Any]]) -> None:
    """Every statement the action ran, in order (one block each), as the server received it."""
    print(f"\ncommands: {len(rows)} statement(s) executed")
    for c in rows:
        state = "OPEN (no end: the process stopped during it)" if c["end_time"] is None else (
            f"{c['seconds']} s, {c['rows']} row(s)" + (f", ERROR {c['error']}" if c["error"] else ""))
        print(f"\n#{c['seq']} {c['step'] or '(check)'} on {c['object']} at {c['start_time']}: {state}")
        print(f"{c['statement']}\n-- params: {json.dumps(c['params'])}")


def _audit(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from queueops.actions import audit
    from queueops.store import open_engine

    cfg = load_config(args)
    try:
        return _show(args, open_engine(cfg), audit)
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).splitlines()[0][:300]
        return fail(f"the audit log cannot be read: the store ({cfg.store.url}) is unavailable: {first}", 1)


def _sign_ins(args: argparse.Namespace, store: Any) -> int:  # noqa: ANN401 - Engine
    from queueops.actions.model import jsonable
    from queueops.store import sessions

    try:
        since = parse_since(args.since)
    except ValueError as exc:
        return fail(str(exc), 2)
    rows = sessions.read_log(store, since=since, user=args.user, limit=args.limit)
    if args.json:
        for r in rows:
            print_json(jsonable(r))
        return 0
    if not rows:
        print("no sign-in records match")
        return 0
    print(f"{'time (UTC)':19}  {'user':24} {'address':16} {'outcome':11} detail")
    for r in rows:
        print(f"{r['ts'].strftime('%Y-%m-%d %H:%M:%S'):19}  {r['user_name'][:24]:24} {r['address'][:16]:16} "
              f"{r['outcome']:11} {r['detail'][:80]}")
    return 0


def _show(args: argparse.Namespace, store: Any, audit: Any) -> int:  # noqa: ANN401 - Engine, the audit module
    if getattr(args, "sign_ins", False):
        return _sign_ins(args, store)
    if args.id is not None:
        from queueops.actions.executor import commands

        rec = audit.entry(store, args.id)
        if rec is None:
            return fail(f"no audit record #{args.id}", 1)
        rec["commands"] = [_command(c) for c in commands(store, args.id)]
        if args.json:
            print_json(_public(rec, True))
        else:
            full = _public(rec, True)
            for k, v in full.items():
                if k in ("command", "params", "preview", "commands"):
                    continue
                print(f"{k:14} {v}")
            print(f"\n{full['command']}\n-- params: {json.dumps(full['params'])}")
            _print_commands(full["commands"])
            print(f"\npreview: {json.dumps(full['preview'], indent=2)[:4000]}")
        return 0
    try:
        since = parse_since(args.since)
    except ValueError as exc:
        return fail(str(exc), 2)
    recs = audit.entries(store, queue=args.queue, action=args.action, user=args.user, outcome=args.outcome,
                         target=args.target, since=since, limit=args.limit)
    if args.json:
        for rec in recs:
            print_json(_public(rec, False))
        return 0
    if not recs:
        print("no audit records match")
        return 0
    print(f"{'id':>5}  {'start (UTC)':19}  {'user':12} {'role':8} {'action':15} {'queue':14} {'outcome':11} "
          f"{'rows':>7}  error")
    for r in recs:
        start = r["start_time"].strftime("%Y-%m-%d %H:%M:%S") if r["start_time"] else ""
        rows = "" if r["rows_affected"] is None else str(r["rows_affected"])
        print(f"{r['id']:>5}  {start:19}  {r['user_name'][:12]:12} {r['role'][:8]:8} {r['action'][:15]:15} "
              f"{r['queue'][:14]:14} {r['outcome']:11} {rows:>7}  {(r['error'] or '')[:80]}")
    return 0
