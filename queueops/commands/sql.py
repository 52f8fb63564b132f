"""``queueops sql``: every statement queueops would send for a config, rendered without a connection.

For a DBA who reviews before granting access (issue 33): per target, the session setup and the
catalog reads; per queue, each collector's statement and the live check's catalog reads; per queue
and action, the statements the action's preview and execution send. Parameters are listed beside
each statement, in order (``?`` on SQL Server, ``%s`` on PostgreSQL). A value an action reads from
the database first (its cutoff, the keys it picked, a session's login time) is shown as a named
placeholder in angle brackets, as the previews show ``<picked keys>``; a value an operator gives
(``--batch-size``) is shown at its default. Nothing here connects anywhere.

The collectors are rendered per queue, to be read one by one (and as the service runs them again
after a failure or a timeout, and always for ghost_records / fragmentation_pct); the service joins
one collector's per-queue statements of a target with ``UNION ALL`` into one round trip (split on
SQL Server past 2,000 parameters): ``--joined`` renders them as sent.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from collectors import registry, runner
from queueops import coltypes, mapping, readiness, sessions, sqlfiles
from queueops.commands.common import add_config_arg, load_config, print_json
from queueops.config import Config, Queue, Target
from queueops.identifiers import quote_table

ACTIONS = ("requeue", "archive", "watermark-reset", "rebuild", "terminate")


@dataclass
class Rendered:
    """One statement as queueops would send it."""

    target: str
    dialect: str
    queue: str  # '' for a target-wide statement
    group: str  # session | catalog | collector | action
    name: str  # the collector or action (or the catalog file)
    block: str  # the SQL file and block it is rendered from
    sql: str
    params: list[Any] = field(default_factory=list)
    note: str = ""

    def shown_params(self) -> list[str]:
        return [_shown(p) for p in self.params]


def _shown(value: Any) -> str:
    if isinstance(value, Observed):
        return str(value)
    return repr(value)


class Observed(str):
    """A value the action reads from the database at preview time: shown as ``<what>``."""

    def __new__(cls, what: str) -> Observed:
        return super().__new__(cls, f"<{what}>")


# What each bound value of an action block is, when it is read from the database by the preview
# (or picked by the operator among what the preview showed).
OBSERVED = {
    "cutoff": "cutoff: the database clock minus the age, read once by the preview",
    "item_ids": "picked keys",
    "confirmed_keys": "previewed keys",
    "last_key": "highest previewed key",
    "session_id": "session_id of the previewed root cause",
    "session_start": "login_time of that session, as the preview read it",
    "old_value": "watermark as the preview read it",
    "new_value": "new watermark: the lowest pending key minus the buffer",
    "index_id": "index_id of the index being rebuilt",
    "skip_n": "--max-items minus 1",
    "keys": "keys selected with --key",
}
# Fragments an action fills from what it observed (never from config): shown by name.
OBSERVED_FRAGMENTS = {
    "session_n": "<session_id>",
    "index": "[<index name>]",
}


def _render(sqlf: sqlfiles.SqlFile, block: str, frags: dict[str, str], values: dict[str, Any]) -> sqlfiles.Statement:
    """Render ``block``; every bound value not in ``values`` is an observed placeholder."""
    text = re.sub(r"'(?:[^']|'')*'|--[^\n]*", "", sqlf.block(block))
    wanted = set(re.findall(r"(?<![:\w]):([a-zA-Z_]\w*)", text))
    filled = dict(values)
    for name in wanted - filled.keys():
        what = Observed(OBSERVED.get(name, name))
        filled[name] = [what] if name.endswith(("_ids", "_keys", "keys", "_values")) else what
    return sqlf.render(block, {**OBSERVED_FRAGMENTS, **frags}, filled)


def _row(target: Target, queue: Queue | None, group: str, name: str, block: str, stmt: sqlfiles.Statement,
         note: str = "") -> Rendered:
    from queueops.actions.model import shown_sql

    # As the server receives it (psycopg's doubled '%' undone), as the previews show it.
    return Rendered(target.name, target.dialect, queue.name if queue else "", group, name, block,
                    shown_sql(stmt.sql, target.dialect), list(stmt.params), note)


def _refused(target: Target, queue: Queue, action: str, reason: str) -> Rendered:
    return Rendered(target.name, target.dialect, queue.name, "action", action, "", "", [],
                    f"not offered on this queue, nothing is sent: {reason}")


# ---------------------------------------------------------------------------------------------
# per target


def target_statements(cfg: Config, target: Target, collectors: list[str] | None = None) -> Iterator[Rendered]:
    """The collector session's setup, the catalog types read and every target-wide collector."""
    yield _row(target, None, "session", "collect", "session_collect:main", sessions.reading(target))
    if target.dialect == "mssql":  # config check --live: version, edition, each login's permissions
        check = sqlfiles.load("mssql", "server_check")
        yield _row(target, None, "catalog", "server_check", "server_check:server", check.render("server"),
                   "config check --live, with each login")
        for q in cfg.queues_of(target.name):
            yield _row(target, q, "catalog", "server_check", "server_check:table",
                       check.render("table", {}, {"qualified_table": mapping.compile_queue(q, "mssql").table}),
                       "config check --live, with each login")
    queues = cfg.queues_of(target.name)
    pairs = [(quote_table(s or ("dbo" if target.dialect == "mssql" else "public"), t, target.dialect), c)
             for q in queues for _f, s, t, c in coltypes.mapped_columns(q)]
    if pairs:
        yield _row(target, None, "catalog", "catalog_types", "catalog_types:main",
                   coltypes._statement(target.dialect, list(dict.fromkeys(pairs))))  # noqa: SLF001
    for c in registry.COLLECTORS:
        if c.scope != "target" or (collectors and c.name not in collectors):
            continue
        for stmt in runner.build_statements(c, target, queues):
            yield _row(target, None, "collector", c.name, f"{c.name}:main", stmt)
        if target.dialect == "mssql" and sqlfiles.load("mssql", c.name).has_block("main_pvs"):
            for stmt in runner.build_statements(c, target, queues, server={"major_version": 15}):
                yield _row(target, None, "collector", c.name, f"{c.name}:main_pvs", stmt,
                           "instead of main on SQL Server 2019+, Azure SQL Database and Managed Instance")


def queue_collectors(target: Target, queue: Queue, collectors: list[str] | None = None) -> Iterator[Rendered]:
    for c in registry.COLLECTORS:
        if c.scope != "queue" or (collectors and c.name not in collectors):
            continue
        stmts = runner.build_statements(c, target, [queue])
        if not stmts:
            yield Rendered(target.name, target.dialect, queue.name, "collector", c.name, "", "", [],
                           "no block applies to this queue's mapping: not collected")
        for stmt in stmts:
            yield _row(target, queue, "collector", c.name, c.name, stmt)


def queue_catalog(target: Target, queue: Queue) -> Iterator[Rendered]:
    """The live check's and the actions' catalog reads of one queue table."""
    values = {"qualified_table": mapping.compile_queue(queue, target.dialect).table}
    yield _row(target, queue, "catalog", "catalog_columns", "catalog_columns:main",
               sqlfiles.load(target.dialect, "catalog_columns").render("main", {}, values))
    if target.dialect == "mssql":
        yield _row(target, queue, "catalog", "catalog_indexes", "catalog_indexes:main",
                   sqlfiles.load("mssql", "catalog_indexes").render("main", {}, values))
    for stmt, block in _readiness(queue, target.dialect):
        yield _row(target, queue, "catalog", "catalog_readiness", f"catalog_readiness:{block}", stmt)


def _readiness(queue: Queue, dialect: str) -> list[tuple[sqlfiles.Statement, str]]:
    """The statements :func:`queueops.readiness.read` sends (recorded, never run)."""
    sent: list[sqlfiles.Statement] = []

    answers: list[list[dict[str, Any]]] = [
        [{"column_name": queue.key, "not_null": True, "comment": ""}],  # columns: the table exists
        [],  # side_locks
        [{"ahead_s": 0.0}],  # lease_ahead (lease queues only)
    ]

    def record(stmt: sqlfiles.Statement) -> list[dict[str, Any]]:
        sent.append(stmt)
        return answers[min(len(sent), len(answers)) - 1]

    readiness.read(record, queue, dialect)
    blocks = ["columns", "side_locks", "lease_ahead"]
    return list(zip(sent, blocks, strict=False))


# ---------------------------------------------------------------------------------------------
# per queue and action

_KINDS = ("delete", "status", "lease", "due", "ring")


def _for_kind(block: str, kind: str) -> bool:
    """A block named for another queue kind (``count_status`` for a lease queue) does not apply."""
    parts = block.split("_")
    return not any(k in parts and k != kind for k in _KINDS)


def action_statements(cfg: Config, target: Target, queue: Queue, action: str) -> Iterator[Rendered]:
    from queueops.actions import archive, rebuild, requeue, terminate, watermark
    from queueops.actions.model import OPTIONS, SAMPLE_ROWS, ActionError

    dialect = target.dialect
    opts = OPTIONS[action]()
    module = {"requeue": requeue, "archive": archive, "watermark-reset": watermark, "rebuild": rebuild,
              "terminate": terminate}[action]
    try:
        if action == "archive":
            module.check(queue, OPTIONS[action](mode="move", archive_table="<archive-table>",
                                                archive_data_table="<archive-data-table>"))
        else:
            module.check(queue, opts)
    except ActionError as exc:
        yield _refused(target, queue, action, str(exc))
        return
    session = sqlfiles.load(dialect, "actions/session")
    compiled = mapping.compile_queue(queue, dialect)
    base = {"qualified_table": compiled.table, "sample_n": SAMPLE_ROWS, "limit_n": requeue.LIMIT_ALL}
    frags = dict(compiled.names)
    if dialect == "postgresql":
        from queueops.actions.session import IDLE_IN_TRANSACTION_MS

        setup = session.render("main", {}, {"lock_timeout": f"{target.lock_timeout_ms}ms",
                                            "statement_timeout": f"{target.statement_timeout_ms}ms",
                                            "idle_timeout": f"{IDLE_IN_TRANSACTION_MS}ms"})
    else:
        setup = session.render("main", {"lock_timeout_ms": str(int(target.lock_timeout_ms))})
    yield _row(target, queue, "action", action, "actions/session:main", setup,
               "the action session's setup" + ("" if dialect == "postgresql" else
                                               f" (statement timeout: the driver's query timeout, "
                                               f"{target.statement_timeout_ms} ms)"))

    def clock(age_s: float) -> Rendered:
        whole = int(age_s)
        values = ({"age_s": float(age_s)} if dialect == "postgresql"
                  else {"age_whole_s": whole, "age_ms_part": int(round((age_s - whole) * 1000))})
        return _row(target, queue, "action", action, "actions/session:clock", session.render("clock", {"clock": compiled.names["clock"]}, values),
                    "the cutoff: read once by the preview, bound into the statements below")

    def blocks(name: str, chosen: list[str], f: dict[str, str], values: dict[str, Any]) -> Iterator[Rendered]:
        sqlf = sqlfiles.load(dialect, f"actions/{name}")
        for block in chosen:
            if not sqlf.has_block(block):
                continue
            try:
                stmt = _render(sqlf, block, f, {**base, **values})
            except sqlfiles.MissingFragment:
                continue
            yield _row(target, queue, "action", action, f"actions/{name}:{block}", stmt)

    if action == "requeue":
        timeout = queue.lease_timeout_s
        for stmt, block in _readiness(queue, dialect):
            yield _row(target, queue, "action", action, f"catalog_readiness:{block}", stmt)
        follow, f = requeue._follow(queue, frags, False)  # noqa: SLF001
        yield clock(-timeout if follow == "_follow_past" else timeout)
        unfailed = "_unfailed" if queue.kind == "lease" and queue.error_column and not follow else ""
        kind = queue.kind
        chosen = [f"count_{kind}{follow}{unfailed}", f"sample_{kind}{follow}{unfailed}"]
        chosen += ([f"batch_{kind}{follow}"] if follow else
                   [f"batch_{kind}{unfailed}"] + ([f"batch_{kind}_attempts{unfailed}"] if queue.attempts_column else []))
        values = {**requeue._values(compiled, Observed(OBSERVED["cutoff"])),  # noqa: SLF001
                  "batch_n": opts.batch_size}
        yield from blocks("requeue", chosen, f, values)
        if dialect == "mssql":  # the preview's index read: may a batch escalate to a table lock?
            yield _row(target, queue, "action", action, "catalog_indexes:main",
                       sqlfiles.load("mssql", "catalog_indexes").render("main", {}, {"qualified_table": frags["table"]}))
    elif action == "archive":
        yield clock(opts.older_than_s)
        schema = queue.schema_ or ("dbo" if dialect == "mssql" else "public")
        extra = {"archive_table": quote_table(schema, "<archive-table>", dialect)}
        if queue.data_table:
            extra["archive_data_table"] = quote_table(schema, "<archive-data-table>", dialect)
        f = archive._frags(compiled, extra)  # noqa: SLF001
        values = {"done_values": compiled.values["done_values"], "batch_n": opts.batch_size,
                  "sample_n": archive.KEYS_MAX + 1}
        sqlf = sqlfiles.load(dialect, "actions/archive")
        for table in ([compiled.table, extra["archive_table"]]
                      + ([compiled.data_table, extra["archive_data_table"]]
                         if queue.data_table else [])):
            yield _row(target, queue, "action", action, "actions/archive:columns",
                       sqlf.render("columns", {}, {"qualified_table": table}), "--mode move only")
        yield from blocks("archive", [b for b in sqlf.blocks if b != "columns"], f, values)
    elif action == "watermark-reset":
        sqlf = sqlfiles.load(dialect, "actions/watermark_reset")
        chosen = [b for b in sqlf.blocks if _for_kind(b, queue.kind)]
        yield from blocks("watermark_reset", chosen, frags, watermark._pending(compiled.values))  # noqa: SLF001
    elif action == "rebuild":
        sqlf = sqlfiles.load(dialect, "actions/rebuild")
        values = {"wait_minutes": opts.wait_minutes, "max_duration_minutes": opts.max_duration_minutes}
        f = {**frags, "wait_minutes": str(opts.wait_minutes), "max_duration_minutes": str(opts.max_duration_minutes)}
        yield from blocks("rebuild", list(sqlf.blocks), f, values)
        if dialect == "mssql":  # read from a second session while the rebuild runs
            yield from blocks("progress", list(sqlfiles.load(dialect, "actions/progress").blocks), f,
                              {"session_id": Observed("session_id of the rebuild's own session")})
    elif action == "terminate":
        sqlf = sqlfiles.load(dialect, "actions/terminate")
        yield from blocks("terminate", list(sqlf.blocks), frags, {})


# ---------------------------------------------------------------------------------------------


def joined_collectors(cfg: Config, target: Target, queues: list[Queue],
                      collectors: list[str] | None = None) -> Iterator[Rendered]:
    """Each queue-scoped collector's statement(s) for all ``queues`` of the target at once, as the
    service sends them (one UNION ALL; split on SQL Server past 2,000 parameters)."""
    for c in registry.COLLECTORS:
        if c.scope != "queue" or (collectors and c.name not in collectors):
            continue
        for stmt in runner.build_statements(c, target, queues):
            yield _row(target, None, "collector", c.name, f"{c.name} (joined)", stmt,
                       f"every queue of the target at once: {', '.join(q.name for q in queues)}")


def render_all(cfg: Config, *, targets: list[str] | None = None, queues: list[str] | None = None,
               collectors: list[str] | None = None, actions: list[str] | None = None,
               joined: bool = False) -> list[Rendered]:
    """Every statement of ``cfg`` (filtered), in the order target, then queue by queue (``joined``:
    the queue-scoped collectors as sent, one statement for the target's queues)."""
    out: list[Rendered] = []
    only_actions = actions is not None and collectors is None
    only_collectors = collectors is not None and actions is None
    for target in cfg.targets:
        if targets and target.name not in targets:
            continue
        if not only_actions and not queues:
            out += target_statements(cfg, target, collectors)
        chosen = [q for q in cfg.queues_of(target.name) if not queues or q.name in queues]
        if joined and not only_actions and chosen:
            out += joined_collectors(cfg, target, chosen, collectors)
        for q in chosen:
            if not only_actions:
                if collectors is None:
                    out += queue_catalog(target, q)
                if not joined:
                    out += queue_collectors(target, q, collectors)
            if not only_collectors:
                for action in actions or ACTIONS:
                    out += action_statements(cfg, target, q, action)
    return out


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sql", help="print every statement queueops would send, without connecting",
                       description="Render, without a connection, every statement queueops sends for a config: "
                                   "per target its session setup, catalog reads and target-wide collectors; per "
                                   "queue its catalog reads, collectors and actions, each with its parameters in "
                                   "order. Values an action reads at preview time are shown as <placeholders>. "
                                   "For a DBA to review before granting access.")
    add_config_arg(p)
    p.add_argument("--target", action="append", metavar="NAME", help="only this target (repeatable)")
    p.add_argument("--queue", action="append", metavar="NAME", help="only this queue (repeatable)")
    p.add_argument("--collector", action="append", metavar="NAME", help="only this collector (repeatable); "
                   "with no --action, no action statements")
    p.add_argument("--action", action="append", choices=ACTIONS, help="only this action (repeatable); with no "
                   "--collector, no collector statements")
    p.add_argument("--joined", action="store_true", help="the queue-scoped collectors as the service sends "
                   "them: one statement for all queues of a target (default: one per queue, to read)")
    p.add_argument("--json", action="store_true", help="one JSON document: a list of statements")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    cfg = load_config(args)
    for what, names, known in (("target", args.target, [t.name for t in cfg.targets]),
                               ("queue", args.queue, [q.name for q in cfg.queues]),
                               ("collector", args.collector, [c.name for c in registry.COLLECTORS])):
        unknown = [n for n in names or [] if n not in known]
        if unknown:
            print(f"queueops: unknown {what}(s) {', '.join(unknown)} (known: {', '.join(known)})")
            return 2
    rows = render_all(cfg, targets=args.target, queues=args.queue, collectors=args.collector, actions=args.action,
                      joined=args.joined)
    try:
        _print(rows, args.json)
    except BrokenPipeError:  # `queueops sql ... | head`: the reader has what it wanted
        import os
        import sys

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _print(rows: list[Rendered], as_json: bool) -> None:
    if as_json:
        print_json([{**asdict(r), "params": r.shown_params()} for r in rows])
        return
    for r in rows:
        where = f"{r.target}" + (f" / queue {r.queue}" if r.queue else "")
        print(f"-- {where} / {r.group} {r.name} ({r.block or 'none'}){': ' + r.note if r.note else ''}")
        if r.sql:
            print(r.sql.rstrip().rstrip(";") + ";")
            if r.params:
                print("-- parameters: " + json.dumps(r.shown_params(), ensure_ascii=False))
        print()
