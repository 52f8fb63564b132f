"""Identifier validation and quoting, per dialect.

Every table and column name in queueops comes from a config file, which we treat as hostile:
names are validated (so a typo or an injection attempt is reported by ``config check`` before
anything runs) *and* always quoted with the dialect's own rules when rendered into SQL (so a
name that passes validation still cannot change the statement). Quoting is delegated to
SQLAlchemy's identifier preparers, which implement each engine's escaping exactly.
"""

from __future__ import annotations

import unicodedata
from functools import cache

DIALECTS = ("postgresql", "mssql")

# PostgreSQL silently truncates identifiers longer than NAMEDATALEN-1 (63) bytes; SQL Server's
# sysname is 128 characters. A silently truncated name would point at a different table.
MAX_IDENTIFIER = {"postgresql": 63, "mssql": 128}

_FORBIDDEN_FRAGMENTS = ('"', "[", "]", "`", ";", "--", "/*", "*/", "'", "\\")


def _quote_like(ch: str) -> bool:
    """Quotation marks and apostrophes of any script (U+201D, U+02BC, ...): they are NFKC-normal, so
    the NFKC rule lets them through, yet they read like the quotes this module refuses."""
    if unicodedata.category(ch) in ("Pi", "Pf"):
        return True
    name = unicodedata.name(ch, "")
    return "QUOTATION" in name or "APOSTROPHE" in name or "PRIME" in name


def identifier_problem(name: object, dialect: str = "postgresql", *, check_length: bool = True) -> str | None:
    """Return why ``name`` is not acceptable as an identifier, or None when it is.

    Conservative on purpose: quote characters (and their Unicode look-alikes), statement
    separators and comment markers are never part of a real queue table's name, and refusing them
    makes hostile config visible. Unicode is allowed only in NFKC-normal form, so look-alike
    characters (fullwidth letters, ligatures) that render like ASCII but name a different object
    are refused. ``check_length=False`` leaves the length to a check that knows the dialect.
    """
    if not isinstance(name, str):
        return "must be a string"
    if not name:
        return "must not be empty"
    if name != name.strip():
        return "must not start or end with white space"
    limit = MAX_IDENTIFIER.get(dialect, 63)
    size = len(name.encode("utf-8")) if dialect == "postgresql" else len(name)
    if check_length and size > limit:
        unit = "bytes" if dialect == "postgresql" else "characters"
        return f"is {size} {unit} long; {dialect} allows at most {limit}"
    for ch in name:
        if unicodedata.category(ch).startswith("C"):
            return f"contains the control or invisible character U+{ord(ch):04X}"
    for frag in _FORBIDDEN_FRAGMENTS:
        if frag in name:
            return f"contains {frag!r}, which is never part of a safe identifier"
    for ch in name:
        if _quote_like(ch) and not ch.isascii():
            return f"contains U+{ord(ch):04X} ({unicodedata.name(ch, '?').lower()}), a look-alike of a quote"
    if unicodedata.normalize("NFKC", name) != name:
        return "contains Unicode look-alike characters (not in NFKC normal form)"
    return None


@cache
def _preparer(dialect: str):  # noqa: ANN202 - SQLAlchemy's IdentifierPreparer
    # paramstyle="qmark": the preparer of a pyformat dialect doubles '%' for its driver. We want
    # the identifier as SQL sees it; sqlfiles.render escapes '%' for psycopg itself.
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.dialect(paramstyle="qmark").identifier_preparer
    if dialect == "mssql":
        from sqlalchemy.dialects import mssql

        return mssql.dialect(paramstyle="qmark").identifier_preparer
    raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")


def quote_ident(name: str, dialect: str) -> str:
    """Quote one identifier for ``dialect``, always (never "only when needed")."""
    problem = identifier_problem(name, dialect)
    if problem:
        raise ValueError(f"refusing identifier {name!r}: {problem}")
    return _preparer(dialect).quote_identifier(name)


def quote_table(schema: str | None, table: str, dialect: str) -> str:
    """Quote a possibly schema-qualified table name."""
    if schema:
        return f"{quote_ident(schema, dialect)}.{quote_ident(table, dialect)}"
    return quote_ident(table, dialect)
