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


# Scripts that may share one identifier with Latin (Unicode TR39's "highly restrictive" level):
# Japanese mixes Han, Hiragana and Katakana; Chinese Han and Bopomofo; Korean Han and Hangul.
_SCRIPT_SETS: tuple[frozenset[str], ...] = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
# Cyrillic and Greek letters that render like a Latin letter in common fonts (from Unicode's
# confusables.txt): a name made only of them reads like an ASCII name and names another table.
_LATIN_LOOKALIKES = frozenset(
    "аеорсухіјѕԁԛԝһӏꙇԍАВЕКМНОРСТХУІЈЅԌ"  # Cyrillic
    "αεικνορτυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ"  # Greek
)


def _script(ch: str) -> str | None:
    """The script of a letter, by its Unicode name; None for digits, marks, punctuation (common)."""
    if not unicodedata.category(ch).startswith("L"):
        return None
    word = unicodedata.name(ch, "").split(" ")[0]
    if word in ("CJK", "IDEOGRAPHIC"):
        return "HAN"
    if word in ("KATAKANA-HIRAGANA", "MODIFIER", "HALFWIDTH", "FULLWIDTH"):  # shared, or refused by NFKC
        return None
    return word or None


def _script_problem(name: str) -> str | None:
    """Why ``name`` mixes scripts the way a spoof does (Latin ``l`` and ``b`` around a Cyrillic
    ``а``), or is a whole-script look-alike of a Latin name; None for an honest name."""
    scripts = {s for ch in name if (s := _script(ch))}
    if len(scripts) > 1 and not any(scripts <= allowed for allowed in _SCRIPT_SETS):
        odd = next(ch for ch in name if _script(ch) not in (None, "LATIN"))
        return (f"mixes the scripts {', '.join(sorted(s.lower() for s in scripts))} (U+{ord(odd):04X} "
                f"{unicodedata.name(odd, '?').lower()}): a look-alike of another name")
    letters = [ch for ch in name if _script(ch)]
    if letters and scripts <= {"CYRILLIC", "GREEK"} and all(ch in _LATIN_LOOKALIKES for ch in letters):
        return (f"is written in {', '.join(sorted(s.lower() for s in scripts))} letters that all look like "
                "Latin ones: a look-alike of an ASCII name")
    return None


def identifier_problem(name: object, dialect: str = "postgresql", *, check_length: bool = True) -> str | None:
    """Return why ``name`` is not acceptable as an identifier, or None when it is.

    Conservative on purpose: quote characters (and their Unicode look-alikes), statement
    separators and comment markers are never part of a real queue table's name, and refusing them
    makes hostile config visible. Unicode is allowed only in NFKC-normal form, so look-alike
    characters (fullwidth letters, ligatures) that render like ASCII but name a different object
    are refused; so are names mixing scripts (``lаb`` with a Cyrillic ``а``) beyond the
    combinations real languages use, and names whose letters are all Cyrillic or Greek look-alikes
    of Latin ones. ``check_length=False`` leaves the length to a check that knows the dialect.
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
    return _script_problem(name)


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
