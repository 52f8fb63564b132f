"""Which SQL Server system-view columns the project's reference documents, and which our T-SQL reads.

The documented set is ``docs/reference/mssql-system-views.toml`` (one table per object, with the
Microsoft page its columns come from); the used set is computed from ``sql/mssql/**.sql`` with
sqlglot's T-SQL parser, never typed in.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "mssql-system-views.toml"


# --------------------------------------------------------------------------------------------
# The T-SQL side: (object, column) pairs read from sys.* sources
# --------------------------------------------------------------------------------------------
def _sys_object(node: exp.Expression) -> str | None:
    """``sys.x`` for a table or a table-valued function in FROM / JOIN / APPLY, else None."""
    if isinstance(node, exp.Table):
        if node.db and node.db.lower() == "sys":
            name = node.this.name if isinstance(node.this, exp.Anonymous) else node.name
            return name.lower()
        return None
    if isinstance(node, exp.Lateral):
        inner = node.this
        if isinstance(inner, exp.Dot) and isinstance(inner.this, exp.Identifier) and inner.this.name.lower() == "sys":
            fn = inner.expression
            if isinstance(fn, exp.Anonymous):
                return str(fn.this).lower()
    return None


def _direct_sources(select: exp.Select) -> list[tuple[str | None, exp.Expression]]:
    """(alias, node) of the FROM item and every JOIN / APPLY of one SELECT."""
    items: list[exp.Expression] = []
    frm = select.args.get("from_") or select.args.get("from")
    if frm is not None:
        items.append(frm.this)
    for join in select.args.get("joins") or []:
        items.append(join.this)
    out = []
    for node in items:
        alias = node.alias_or_name if isinstance(node, (exp.Table, exp.Subquery, exp.Lateral)) else None
        out.append((alias or None, node))
    return out


def _own_columns(select: exp.Select) -> Iterable[exp.Column]:
    """Columns that belong to this SELECT (not to a nested SELECT)."""
    for col in select.find_all(exp.Column):
        owner = col.find_ancestor(exp.Select)
        if owner is select:
            yield col


def sys_column_uses(sql: str) -> tuple[set[tuple[str, str]], list[str]]:
    """Every (sys object, column) a T-SQL text reads, and problems (unqualified, ambiguous)."""
    uses: set[tuple[str, str]] = set()
    problems: list[str] = []
    for tree in sqlglot.parse(sql, read="tsql"):
        if tree is None:
            continue
        aliases: dict[str, str] = {}
        for select in tree.find_all(exp.Select):
            for alias, node in _direct_sources(select):
                obj = _sys_object(node)
                if obj and alias:
                    if aliases.get(alias.lower(), obj) != obj:
                        problems.append(f"alias {alias!r} names both sys.{aliases[alias.lower()]} and sys.{obj}")
                    aliases[alias.lower()] = obj
        for select in tree.find_all(exp.Select):
            sources = _direct_sources(select)
            sys_here = [(a, _sys_object(n)) for a, n in sources if _sys_object(n)]
            for col in _own_columns(select):
                if col.table:
                    obj = aliases.get(col.table.lower())
                    if obj:
                        uses.add((obj, col.name.lower()))
                elif sys_here:
                    if len(sources) == 1:
                        uses.add((sys_here[0][1], col.name.lower()))
                    else:
                        problems.append(f"unqualified column {col.name!r} next to sys.{sys_here[0][1]}")
    return uses, problems


# --------------------------------------------------------------------------------------------
# The reference side: documented (object, column) pairs
# --------------------------------------------------------------------------------------------
def load_reference(path: Path = REFERENCE) -> dict[str, dict[str, Any]]:
    """``{object: {"page": url, "kind": ..., "columns": {column: meaning}}}`` from the TOML file."""
    return tomllib.loads(path.read_text(encoding="utf-8"))["objects"]


def documented_columns(path: Path = REFERENCE) -> dict[str, set[str]]:
    """``{object: {column, ...}}``: what the reference documents, object names without ``sys.``."""
    return {obj: {c.lower() for c in entry["columns"]} for obj, entry in load_reference(path).items()}
