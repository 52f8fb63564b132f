"""``queueops act ACTION --queue NAME``: preview, confirm, run and audit one remediation action.

The preview is always shown first (exact SQL, parameters, what it touches). ``--dry-run`` stops
there; ``--yes`` confirms; without either, an interactive terminal asks for the queue name and
anything else cancels. Exit codes: 0 done (or previewed), 1 failed or interrupted, 2 bad request
or no confirmation, 3 refused (viewer, stale preview).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

from queueops import actions
from queueops.commands.common import add_config_arg, fail, load_config, print_json

EXIT = {"ok": 0, "failed": 1, "interrupted": 1, "refused": 3}

# flag -> (option name, actions it applies to)
_FLAGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "max_items": ("max_items", ("requeue", "archive")),
    "batch_size": ("batch_size", ("requeue", "archive")),
    "pause_s": ("pause_s", ("requeue", "archive")),
    "bump_attempts": ("bump_attempts", ("requeue",)),
    "lease_timeout_s": ("lease_timeout_s", ("requeue",)),
    "key": ("keys", ("requeue",)),
    "older_than_s": ("older_than_s", ("archive",)),
    "mode": ("mode", ("archive",)),
    "archive_table": ("archive_table", ("archive",)),
    "archive_data_table": ("archive_data_table", ("archive",)),
    "archive_schema": ("archive_schema", ("archive",)),
    "buffer": ("buffer", ("watermark-reset",)),
    "index": ("indexes", ("rebuild",)),
    "min_pages": ("min_pages", ("rebuild",)),
    "reorganize_pct": ("reorganize_pct", ("rebuild",)),
    "rebuild_pct": ("rebuild_pct", ("rebuild",)),
    "allow_offline": ("allow_offline", ("rebuild",)),
    "resumable": ("resumable", ("rebuild",)),
    "no_vacuum": ("vacuum", ("rebuild",)),
    "wait_minutes": ("wait_minutes", ("rebuild",)),
    "max_duration_minutes": ("max_duration_minutes", ("rebuild",)),
    "lock_retries": ("lock_retries", ("rebuild",)),
    "vacuum_only": ("vacuum_only", ("rebuild",)),
    "session": ("session", ("terminate",)),
    "cancel_only": ("cancel_only", ("terminate",)),
    "min_age_s": ("min_age_s", ("terminate",)),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "act", help="preview and run a remediation action (requeue, rebuild, watermark-reset, archive, terminate)",
        description="Preview an action (exact SQL, parameters, rows or indexes it touches), then run it after "
                    "confirmation (--yes), with progress on stderr and an audit record in the store.",
        epilog="examples:\n"
               "  queueops act requeue --queue lease --dry-run\n"
               "  queueops act requeue --queue lease --max-items 1000 --yes\n"
               "  queueops act requeue --queue lease --key 1041 --key 1042 --yes\n"
               "  queueops act watermark-reset --queue delete --yes --json\n"
               "  queueops act rebuild --queue status --yes\n"
               "  queueops act archive --queue status --older-than-s 3600 --pause-s 0.2 --yes\n"
               "  queueops act terminate --queue delete --dry-run --json\n",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=actions.ACTIONS, metavar="ACTION", help=", ".join(actions.ACTIONS))
    p.add_argument("--queue", required=True, metavar="NAME")
    add_config_arg(p)
    p.add_argument("--dry-run", action="store_true", help="preview only, change nothing")
    p.add_argument("--yes", action="store_true", help="confirm: run the action after the preview")
    p.add_argument("--json", action="store_true", help="print the preview (or the result) as one JSON object")
    g = p.add_argument_group("requeue / archive")
    g.add_argument("--max-items", type=int, metavar="N", help="touch at most N items")
    g.add_argument("--batch-size", type=int, metavar="N", help="items per batch, one transaction each")
    g.add_argument("--pause-s", type=float, metavar="S", help="pause between batches")
    g.add_argument("--bump-attempts", action="store_true", default=None, help="requeue: attempts + 1")
    g.add_argument("--lease-timeout-s", type=float, metavar="S", help="requeue: override the queue's lease timeout")
    g.add_argument("--key", action="append", metavar="KEY",
                   help="requeue: only this item, if it is stuck (repeatable, at most 1000; exact match)")
    g.add_argument("--older-than-s", type=float, metavar="S", help="archive: finished at least S seconds ago")
    g.add_argument("--mode", choices=("delete", "move"), help="archive: delete (default) or move to archive tables")
    g.add_argument("--archive-table", metavar="TABLE", help="archive --mode move: destination of queue rows")
    g.add_argument("--archive-data-table", metavar="TABLE", help="archive --mode move: destination of payload rows")
    g.add_argument("--archive-schema", metavar="SCHEMA", help="archive: schema of the archive tables")
    w = p.add_argument_group("watermark-reset")
    w.add_argument("--buffer", type=int, metavar="N", help="keys kept below the lowest pending key")
    r = p.add_argument_group("rebuild")
    r.add_argument("--index", action="append", metavar="NAME", help="only this index, whatever its figures (repeatable)")
    r.add_argument("--min-pages", type=int, metavar="N", help="skip smaller indexes (default 1000)")
    r.add_argument("--reorganize-pct", type=float, metavar="P", help="light maintenance from P %% (default 5)")
    r.add_argument("--rebuild-pct", type=float, metavar="P", help="rebuild from P %% (default 30)")
    r.add_argument("--allow-offline", action="store_true", default=None,
                   help="allow an OFFLINE rebuild where online is impossible (blocks the queue)")
    r.add_argument("--resumable", action="store_true", default=None, help="SQL Server: RESUMABLE = ON")
    r.add_argument("--no-vacuum", action="store_false", default=None, help="PostgreSQL: skip VACUUM (ANALYZE)")
    r.add_argument("--wait-minutes", type=int, metavar="N", help="SQL Server: WAIT_AT_LOW_PRIORITY MAX_DURATION")
    r.add_argument("--max-duration-minutes", type=int, metavar="N", help="bound of each index statement")
    r.add_argument("--lock-retries", type=int, metavar="N", help="retries after a lock timeout (default 3)")
    r.add_argument("--vacuum-only", action="store_true", default=None,
                   help="PostgreSQL: only VACUUM (ANALYZE) the table (e.g. after terminate released a snapshot)")
    t = p.add_argument_group("terminate")
    t.add_argument("--session", type=int, metavar="ID", help="end this session (it must be a root cause of the queue)")
    t.add_argument("--cancel-only", action="store_true", default=None,
                   help="PostgreSQL: cancel the running statement instead of ending the session")
    t.add_argument("--min-age-s", type=float, metavar="S",
                   help="a snapshot holder counts from this transaction age (default: the queue's "
                        "oldest_snapshot_age_s warn level, else 60)")
    p.set_defaults(func=_act, parser=p)


def options_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The options given on the command line, refusing flags of another action."""
    opts: dict[str, Any] = {}
    for flag, (name, applies) in _FLAGS.items():
        value = getattr(args, flag, None)
        if value is None:
            continue
        if args.action not in applies:
            raise actions.ActionError(f"--{flag.replace('_', '-')} does not apply to {args.action} "
                                      f"(only to {', '.join(applies)})")
        opts[name] = value
    return opts


# ---------------------------------------------------------------------------------------------
# Output


def _print_preview(p: actions.Preview, out: Any = None) -> None:
    from queueops.actions.model import jsonable, shown_sql

    out = out or sys.stdout

    print(f"{p.action} on queue {p.queue} (target {p.target}, {p.dialect})", file=out)
    print(f"  {p.summary}", file=out)
    if p.destructive:
        print("  DESTRUCTIVE: rows leave the queue table / the queue is blocked while it runs", file=out)
    for w in p.warnings:
        print(f"  warning: {w}", file=out)
    print(f"  touches: {p.row_count}", file=out)
    for step in p.steps:
        print(f"\n  -- {step.label}{' (per batch)' if step.repeat else ''}", file=out)
        # As the server receives it: psycopg's doubled '%' undone (issue 33, item 11: the text
        # preview showed LIKE N'%%...' where the JSON preview and the audit showed '%').
        for line in shown_sql(step.statement.sql, p.dialect).splitlines():
            print(f"  {line}", file=out)
        if step.statement.params:
            print(f"  -- params: {jsonable(list(step.statement.params))}", file=out)
    if p.rows:
        print(f"\n  {min(len(p.rows), 20)} of {max(p.row_count, len(p.rows))} shown:", file=out)
        cols = list(p.rows[0])
        print("  " + "  ".join(cols), file=out)
        for row in p.rows[:20]:
            print("  " + "  ".join(str(jsonable(row.get(c))) for c in cols), file=out)
    print(file=out)


class ProgressBar:
    """A one-line progress bar on stderr (a line per update, at most one a second, when not a TTY)."""

    def __init__(self, stream: Any = None, width: int = 30):
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last = 0.0
        self.dirty = False

    def __call__(self, p: actions.Progress) -> None:
        now = time.monotonic()
        final = p.fraction == 1.0 or p.message in ("done",)
        if not self.tty and not final and now - self.last < 1.0:
            return
        self.last = now
        frac = p.fraction
        bar = ("#" * int(round((frac or 0) * self.width))).ljust(self.width, ".") if frac is not None else "?" * 3
        count = f"{p.done:g}/{p.total:g}" if p.done is not None and p.total else ""
        step = f"[{p.step}/{p.steps}] " if p.steps else ""
        text = f"{step}{p.phase} [{bar}] {count} {p.message}".rstrip()
        if p.rows:
            text += f" ({p.rows} rows)"
        if self.tty:
            self.stream.write("\r\033[K" + text[:200])
            self.dirty = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.dirty:
            self.stream.write("\n")
            self.stream.flush()


def _sigterm(_signum: int, _frame: Any) -> None:
    raise actions.Interrupted()


# ---------------------------------------------------------------------------------------------


def _act(args: argparse.Namespace) -> int:
    from queueops import roles
    from queueops.engine import TargetError

    cfg = load_config(args)
    try:
        opts = options_from_args(args)
        plan = actions.plan(cfg, args.action, args.queue, opts)
    except actions.NotOffered as exc:
        return fail(str(exc), EXIT["refused"])
    except actions.ActionError as exc:
        return fail(str(exc), 2)
    except TargetError as exc:
        return fail(f"preview failed: {exc}", 1)
    if args.json and (args.dry_run or not args.yes):
        print_json(plan.preview.to_json())
    elif not args.json:
        _print_preview(plan.preview)
    if args.dry_run:
        return 0
    if not args.yes:
        if not sys.stdin.isatty():
            return fail("not executed: confirmation required; re-run with --yes (or --dry-run to only preview)", 2)
        answer = input(f"Type the queue name ({plan.queue.name}) to run {plan.action}, anything else cancels: ")
        if answer.strip() != plan.queue.name:
            return fail("cancelled; nothing was changed", 2)
    actor = roles.resolve(cfg)
    bar = ProgressBar()
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        result = actions.execute(cfg, plan, actor=actor, progress=bar)
    finally:
        bar.close()
        signal.signal(signal.SIGTERM, previous)
    if args.json:
        print_json(result.to_json())
    else:
        from queueops.actions.model import jsonable

        record = f"audit #{result.audit_id}" if result.audit_id is not None else "no audit record: not run"
        line = f"{result.outcome}: {result.rows_affected or 0} row(s)/object(s) affected ({record})"
        print(line)
        for row in result.rows:
            print(f"  {jsonable(row)}")
        for note in result.notes:
            print(f"note: {note}")
    if result.error:
        print(f"queueops: {result.outcome}: {result.error}", file=sys.stderr)
    return EXIT.get(result.outcome, 1)
