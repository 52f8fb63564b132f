"""``queueops discover``: list every queue table on a server, ranked, with its evidence, then the near
misses (queue-like tables no mapping kind can read as they are: the mapping each would need and what
to add by hand); ``--all`` adds every other table read with why it is not a queue (a side table names
the queue table it serves). ``--json``: one object per table read. ``--write``: the proposals as
``[[queues]]`` sections (each under a comment with its evidence)."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path

from queueops import discovery, engine, presets, secrets
from queueops.commands.common import add_config_arg, fail, load_config, print_json
from queueops.config import Target


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "discover", help="find the queue tables on a server (catalog and statistics only)",
        description="Reads the server's catalog and activity statistics (never a queue table's rows), "
                    "matches every table against the library presets (queueops/presets) and judges the rest "
                    "by shape and activity. Prints each queue table found, best first, with the kind it "
                    "guesses and why, then the near misses (queue-like tables it cannot map by itself) with "
                    "what each needs by hand; --all adds every other table read and why it is not a queue.")
    add_config_arg(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--target", metavar="NAME", help="a target of the config file")
    src.add_argument("--url", metavar="URL", help="postgresql://user@host:5432/db or mssql+pyodbc://...")
    p.add_argument("--password", metavar="REF", help="with --url: env:NAME or file:PATH")
    p.add_argument("--name", default="discovered", metavar="NAME", help="with --url: the target's name (default "
                   "discovered)")
    p.add_argument("--write", metavar="FILE", help="write (or append to) a config with the queues found")
    p.add_argument("--all", action="store_true", help="also list every other table read, one line each: why it is "
                   "not a queue (a side table: which queue table it serves)")
    p.add_argument("--json", action="store_true", help="one JSON object per table read (proposed: true / false, "
                   "near_miss, rejected_because, side_of)")
    p.set_defaults(func=_run)


def _target(args: argparse.Namespace) -> tuple[Target, Path]:
    if args.target:
        cfg = load_config(args)
        try:
            return cfg.target(args.target), cfg.base_dir
        except KeyError:
            raise SystemExit(fail(f"no target {args.target!r} in {cfg.source}", 2)) from None
    dialect = "mssql" if args.url.startswith("mssql") else "postgresql"
    if args.password and not secrets.is_reference(args.password):
        raise SystemExit(fail("--password must be env:NAME or file:PATH (never a literal)", 2))
    return Target(name=args.name, dialect=dialect, url=args.url, password=args.password), Path.cwd()


def _target_toml(t: Target, base: Path) -> str:
    lines = ["[[targets]]", f'name = "{t.name}"', f'dialect = "{t.dialect}"', f'url = "{t.url}"']
    if t.password:
        ref = t.password
        if ref.startswith("file:") and not Path(ref[5:]).is_absolute():
            ref = f"file:{(base / ref[5:]).resolve()}"
        lines.append(f'password = "{ref}"')
    return "\n".join(lines) + "\n"


# A new config acts as viewer from the command line (previews only) until someone names an operator:
# said in the file, so that the README's next command (act ... --yes) is not a silent refusal.
IDENTITY = """\
# Actions from the command line run as [identity] user (else your OS user) with the role
# [identity] roles gives it; anyone unlisted is a viewer, whose actions are refused (previews
# work). To act, uncomment and name yourself:
# [identity]
# user = "alice"
# roles = { alice = "operator" }

"""


def _write(path: Path, target: Target, base: Path, found: list[discovery.Proposal]) -> int:
    """Write a new config, or append the queues not yet mapped (same target, schema and table)."""
    head = ""
    taken: set[str] = set()
    if path.exists():
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        taken = {q.get("name") for q in raw.get("queues", [])}
        default = "dbo" if target.dialect == "mssql" else "public"
        mapped = set()
        for q in raw.get("queues", []):
            try:
                q = presets.expand(q)
            except KeyError:
                pass
            mapped.add((q.get("target"), q.get("schema") or default, q.get("table")))
        found = [p for p in found if (target.name, p.table.schema, p.table.name) not in mapped]
        if target.name not in {t.get("name") for t in raw.get("targets", [])}:
            head = _target_toml(target, base)
        if not found and not head:
            return 0  # nothing new: the file stays as it is
        text = path.read_text(encoding="utf-8").rstrip("\n") + "\n\n"
    else:
        head, text = _target_toml(target, base), "# written by queueops discover: check each queue's evidence\n\n" + IDENTITY
    body = discovery.render_toml(found, target.name, taken) if found else ""
    path.write_text(text + head + ("\n" if head and body else "") + body, encoding="utf-8")
    return len(found)


def _would_need(p: discovery.Proposal) -> str:
    """A near miss's mapping as TOML pairs: what it would take, before what is added by hand."""
    pairs = [f"kind = {discovery.toml_value(p.kind)}" if p.kind else "kind = (none fits yet)"]
    pairs += [f"{k} = {discovery.toml_value(v)}" for k, v in p.mapping.items() if k not in ("schema", "table")]
    return ", ".join(pairs)


def _print_text(everything: list[discovery.Proposal], target: str, n_tables: int, show_all: bool) -> None:
    """Proposals first (each with its evidence and what the mapping cannot say), then the near
    misses (the mapping each would need, what to add by hand), then with --all one line per other
    table: why it is not a queue."""
    found = [f for f in everything if f.proposed]
    near = [f for f in everything if f.near_miss and not f.side_of]
    rest = [f for f in everything if not f.proposed and f not in near]
    for i, p in enumerate(found, 1):
        print(f"{i:3}. {p.table.qualified}  {p.kind}  {p.label}  score {p.score:g}")
        for e in p.evidence:
            print(f"       {e}")
        for a in p.advice:
            print(f"       check: {a}")
    if near:
        print("near misses: queue-like tables discover cannot map by itself (what each needs, added by hand):")
    for p in near:
        print(f"  -  {p.table.qualified}  near miss: {p.rejected_because}")
        for e in p.evidence:
            print(f"       {e}")
        print(f"       would need: {_would_need(p)}")
        for a in p.advice:
            print(f"       by hand: {a}")
    if show_all and rest:
        print("other tables read, not queues:")
        for p in rest:
            print(f"  -  {p.table.qualified}: {p.rejected_because}")
    tail = f"{len(near)} near miss(es)" + (f", {len(rest)} other table(s) not queues" if rest else "")
    if rest and not show_all:
        tail += " (--all says why)"
    print(f"{len(found)} queue table(s) found on target {target!r} ({n_tables} tables read: {tail})")


def _run(args: argparse.Namespace) -> int:
    target, base = _target(args)
    try:
        with engine.connection(target, "collect", base, application="queueops discover") as conn:
            tables = discovery.read_catalog(conn)
    except engine.TargetError as exc:
        return fail(str(exc))
    everything = discovery.survey(tables, target.dialect)
    found = [f for f in everything if f.proposed]
    if args.json:
        for i, f in enumerate(everything, 1):
            print_json(f.as_dict(i))
    else:
        _print_text(everything, target.name, len(tables), args.all)
    if args.write:
        n = _write(Path(args.write), target, base, found)
        if not args.json:
            print(f"{args.write}: {n} queue(s) written")
    return 0
