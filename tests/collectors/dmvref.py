"""Which SQL Server system-view columns the reference documents, and which our T-SQL reads.

Both sides are computed, never typed in: the documented set is parsed from
``/work/shared/reference/mssql-dmvs.md`` at test time, the used set from ``sql/mssql/**.sql``
with sqlglot's T-SQL parser. A column counts as documented for an object when the reference:

* reads it from that object in one of its SQL examples (parsed with sqlglot; an unqualified
  column in a single-source query belongs to that source),
* writes it dotted (``dm_exec_requests.percent_complete``), or
* lists it in backticks (or in a table) in a bullet that names the object, including the
  bullet's sub-bullets and a table that follows it, or in a section whose heading names the
  object. A section that names exactly one object lends it the underscored names of bullets
  that name none, unless another rule already attributes that name to a different object.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import sqlglot
from sqlglot import exp

REFERENCE = Path("/work/shared/reference/mssql-dmvs.md")

_OBJECT = re.compile(r"\b(?:sys\.)?(dm_[a-z_]+|index_resumable_operations)\b")
_DOTTED = re.compile(r"\b(?:sys\.)?(dm_[a-z_]+|index_resumable_operations)\.([a-z_][a-z0-9_]*)\b")
_BACKTICK = re.compile(r"`([^`]+)`")
_IDENT = re.compile(r"^[a-z][a-z0-9_]*$")


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
def _units(section: list[str]) -> list[list[str]]:
    """Split a section into bullet units: a top-level bullet, its sub-bullets, a following table."""
    units: list[list[str]] = []
    current: list[str] | None = None
    for line in section:
        if line.startswith("- "):
            current = [line]
            units.append(current)
        elif current is not None and (line.startswith((" ", "|")) and line.strip()):
            current.append(line)
        elif line.startswith("|"):
            current = [line]
            units.append(current)
        else:
            current = None if not line.strip() else current
    return units


def _names_in(lines: Iterable[str]) -> set[str]:
    names: set[str] = set()
    for line in lines:
        for tok in _BACKTICK.findall(line):
            tok = tok.strip()
            if _IDENT.match(tok) and not _OBJECT.fullmatch(tok):
                names.add(tok)
        if line.startswith("|") and not set(line) <= set("|-: "):
            cell = line.split("|")[1]
            for part in re.split(r"[,(]", cell):
                part = part.strip().strip("`")
                if _IDENT.match(part) and "_" in part:
                    names.add(part)
    return names


def _objects_in(lines: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for line in lines:
        for tok in _BACKTICK.findall(line):
            m = _OBJECT.search(tok)
            if m and not _DOTTED.search(tok):
                out.add(m.group(1))
    return out


def documented_columns(text: str | None = None) -> dict[str, set[str]]:
    text = text if text is not None else REFERENCE.read_text(encoding="utf-8")
    documented: dict[str, set[str]] = defaultdict(set)
    # 1. SQL examples, parsed.
    for block in re.findall(r"```sql\n(.*?)```", text, re.S):
        try:
            uses, _ = sys_column_uses(block)
        except sqlglot.errors.ParseError:
            continue
        for obj, col in uses:
            documented[obj].add(col)
    # 2. Dotted mentions anywhere.
    for obj, col in _DOTTED.findall(text):
        documented[obj].add(col)
    # 3. Bullets and headings.
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    sections = re.split(r"^## ", prose, flags=re.M)[1:]
    fallback: list[tuple[str, set[str]]] = []
    direct: set[str] = {c for cols in documented.values() for c in cols}
    for section in sections:
        lines = section.splitlines()
        heading_objs = _objects_in(lines[:1])
        section_objs = _objects_in(lines)
        for unit in _units(lines[1:]):
            objs = _objects_in(unit[:1]) or heading_objs
            names = _names_in(unit)
            if objs:
                for obj in objs:
                    documented[obj] |= names
                direct |= names
            elif len(section_objs) == 1:
                fallback.append((next(iter(section_objs)), {n for n in names if "_" in n}))
    for obj, names in fallback:
        documented[obj] |= {n for n in names if n not in direct or n in documented[obj]}
    return dict(documented)
