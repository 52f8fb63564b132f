"""SQL lives in ``sql/<dialect>/NAME.sql`` and is loaded by name, never built from strings in Python.

A file may hold several *blocks*, introduced by a line ``-- @block NAME``; a collector picks the
block for a queue's kind (``delete``, ``status``, ...) and joins the blocks of all queues of a
target with ``UNION ALL`` so that one cycle is one round trip. Inside a block:

* ``{name}`` is a *fragment*: a quoted identifier (``{table}``, ``{key}``, ...) or a validated
  integer from config. Fragments are rendered by :func:`fragments_for` from config, always quoted.
* ``:name`` is a *bound value*: it becomes the driver's placeholder and the value travels
  separately. A list value expands to one placeholder per element (for ``IN (:values)``). A
  :class:`Cast` value (or list element) is still bound, its placeholder wrapped in
  ``CAST(? AS <type>)``: how SQL Server is told the type a value is compared in (see
  :func:`queueops.coltypes.bind_compared_values`).

Placeholders inside string literals and comments are left alone.

A catalogue lookup several files need is written once, as a block of a file under
``sql/<dialect>/fragments/``, and *included* where a statement writes ``{{file.block(EXPR)}}``: the
block's text (its comment lines dropped) with ``{{arg}}`` replaced by ``EXPR``, expanded when the
file is loaded, before any rendering (``{{tree.leaves(c.oid)}}``: the partitions holding a table's
rows). An include names SQL text from the project's own files only, never config.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

PARAMSTYLE = {"postgresql": "pyformat", "mssql": "qmark"}
_BLOCK = re.compile(r"^--\s*@block\s+(\S+)\s*$", re.M)
_TOKEN = re.compile(
    r"(?P<str>'(?:[^']|'')*')"
    r"|(?P<comment>--[^\n]*)"
    r"|(?P<frag>\{(?P<fname>[a-z_][a-z0-9_]*)\})"
    r"|(?P<cast>::)"
    r"|(?P<param>:(?P<pname>[a-zA-Z_][a-zA-Z0-9_]*))"
    r"|(?P<pct>%)",
)


# The types a Cast may name: a short, fixed vocabulary (never text from config or a catalog).
_CAST_TYPE = re.compile(r"[a-z]+(\(\d{1,4}\))?")


@dataclass(frozen=True)
class Cast:
    """A bound value whose placeholder is rendered ``CAST(? AS sql_type)``: the value still travels
    as a parameter; only the type it is compared in is written into the statement."""

    value: Any
    sql_type: str

    def __post_init__(self) -> None:
        if not _CAST_TYPE.fullmatch(self.sql_type):
            raise ValueError(f"not a plain SQL type name: {self.sql_type!r}")


class MissingFragment(KeyError):
    """The block needs an identifier this queue does not declare: the metric does not apply."""


@dataclass(frozen=True)
class Statement:
    """SQL text in the driver's paramstyle and its positional parameters."""

    sql: str
    params: tuple[Any, ...] = ()
    name: str = ""

    def __add__(self, other: Statement) -> Statement:
        return Statement(f"{self.sql}\n{other.sql}", self.params + other.params, self.name or other.name)


@dataclass(frozen=True)
class SqlFile:
    dialect: str
    name: str
    text: str
    blocks: dict[str, str] = field(default_factory=dict)

    @property
    def doc(self) -> str:
        """The leading comment lines: what the file measures and why it is cheap."""
        lines = []
        for line in self.text.splitlines():
            if not line.startswith("--") or _BLOCK.match(line):
                break
            lines.append(line[2:].strip())
        return "\n".join(lines).strip()

    def block(self, name: str = "main") -> str:
        try:
            return self.blocks[name]
        except KeyError:
            raise MissingFragment(f"{self.dialect}/{self.name}.sql has no block {name!r}") from None

    def has_block(self, name: str) -> bool:
        return name in self.blocks

    def render(self, block: str = "main", fragments: Mapping[str, str] | None = None,
               values: Mapping[str, Any] | None = None) -> Statement:
        return render(self.block(block), self.dialect, fragments or {}, values or {}, name=self.name)


def _split_blocks(text: str) -> dict[str, str]:
    marks = list(_BLOCK.finditer(text))
    if not marks:
        return {"main": text.strip()}
    blocks = {}
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        blocks[m.group(1)] = text[m.end():end].strip()
    return blocks


_INCLUDE = re.compile(r"\{\{([a-z_]+)\.([a-z_]+)\((.+?)\)\}\}")


def _included(dialect: str, text: str) -> str:
    """``text`` with every ``{{file.block(EXPR)}}`` replaced by that fragment block, ``EXPR`` in place
    of its ``{{arg}}``, on every line that is not a comment. The block's full-line comments are
    dropped: inlined mid-line, a ``--`` would comment out the rest of the including line."""

    def expand(m: re.Match[str]) -> str:
        frag = load(dialect, f"fragments/{m.group(1)}")
        body = " ".join(line.strip() for line in frag.block(m.group(2)).splitlines()
                        if line.strip() and not line.lstrip().startswith("--"))
        if "{{arg}}" not in body:
            raise ValueError(f"sql/{dialect}/fragments/{m.group(1)}.sql block {m.group(2)!r} has no {{{{arg}}}}")
        return body.replace("{{arg}}", m.group(3))

    return "\n".join(line if line.lstrip().startswith("--") else _INCLUDE.sub(expand, line)
                     for line in text.split("\n"))


@cache
def load(dialect: str, name: str) -> SqlFile:
    """Load ``sql/<dialect>/<name>.sql`` (``name`` may contain a sub-folder: ``actions/requeue``)."""
    if dialect not in PARAMSTYLE:
        raise ValueError(f"unknown dialect {dialect!r}")
    if not re.fullmatch(r"[a-z0-9_]+(/[a-z0-9_]+)*", name):
        raise ValueError(f"bad SQL file name {name!r}")
    res = resources.files("sql").joinpath(dialect, *f"{name}.sql".split("/"))
    try:
        text = res.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"no SQL file sql/{dialect}/{name}.sql") from None
    return SqlFile(dialect, name, text, _split_blocks(_included(dialect, text)))


def available(dialect: str, folder: str = "") -> list[str]:
    base = resources.files("sql").joinpath(dialect, *([folder] if folder else []))
    return sorted(p.name[:-4] for p in base.iterdir() if p.name.endswith(".sql"))


def render(text: str, dialect: str, fragments: Mapping[str, str], values: Mapping[str, Any],
           name: str = "") -> Statement:
    style = PARAMSTYLE[dialect]
    params: list[Any] = []

    def placeholder() -> str:
        return "%s" if style == "pyformat" else "?"

    def bind(value: Any) -> str:
        if isinstance(value, Cast):
            params.append(value.value)
            return f"CAST({placeholder()} AS {value.sql_type})"
        params.append(value)
        return placeholder()

    def sub(m: re.Match[str]) -> str:
        if m.group("str") is not None or m.group("comment") is not None or m.group("cast"):
            text = m.group(0)
            return text.replace("%", "%%") if style == "pyformat" else text
        if m.group("frag") is not None:
            key = m.group("fname")
            if key not in fragments or fragments[key] is None:
                raise MissingFragment(key)
            # A quoted identifier may legally contain '%' (e.g. "x%s"); psycopg must see '%%'.
            frag = str(fragments[key])
            return frag.replace("%", "%%") if style == "pyformat" else frag
        if m.group("param") is not None:
            key = m.group("pname")
            if key not in values:
                raise KeyError(f"{name or 'SQL'}: no value bound for :{key}")
            value = values[key]
            if isinstance(value, (list, tuple)):
                if not value:
                    raise ValueError(f"{name or 'SQL'}: empty list bound for :{key}")
                return ", ".join(bind(v) for v in value)
            return bind(value)
        return "%%" if style == "pyformat" else "%"

    sql = _TOKEN.sub(sub, text)
    return Statement(sql, tuple(params), name)


def union_all(statements: Sequence[Statement], name: str = "") -> Statement | None:
    """Join per-queue SELECTs into one statement (one round trip for all queues of a target)."""
    if not statements:
        return None
    # Joins statements rendered from SQL files; no text from config or users is added here.
    sql = "\nUNION ALL\n".join(f"SELECT * FROM ({s.sql}) AS q{i}" for i, s in enumerate(statements))  # noqa: S608
    params: tuple[Any, ...] = ()
    for s in statements:
        params += s.params
    return Statement(sql, params, name or statements[0].name)


def all_files(dialect: str) -> Iterable[tuple[str, str]]:
    """Every ``(relative name, text)`` under ``sql/<dialect>/``, recursively (for parse tests)."""
    root = resources.files("sql").joinpath(dialect)

    def walk(node: Any, prefix: str) -> Iterable[tuple[str, str]]:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir():
                yield from walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".sql"):
                yield f"{prefix}{child.name}", child.read_text(encoding="utf-8")

    yield from walk(root, "")
