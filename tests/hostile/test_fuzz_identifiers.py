"""Property-based fuzz of identifier quoting and the config loader (hypothesis).

The claims under test: a name from config either is refused with a reason, or reaches the
database only inside the dialect's quotes and names exactly itself; and the config loader answers
any input with a Config or a ConfigError that names the field -- never another exception.
"""

from __future__ import annotations

import string

import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from queueops import config as config_mod
from queueops import sqlfiles
from queueops.identifiers import identifier_problem, quote_ident

NASTY = st.sampled_from(['"', "'", "]", "[", ";", "--", "/*", "*/", "%s", "%", ":x", "{table}", "\\", "\x00",
                         "ｓ", "\u200b", "é", " ", "$", "`", "\n", "ﬁ"])
NAMES = st.one_of(
    st.text(min_size=0, max_size=80),
    st.lists(st.one_of(NASTY, st.text(alphabet=string.ascii_letters + "_ $%:{}", min_size=1, max_size=6)),
             min_size=1, max_size=8).map("".join),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=NAMES)
def test_postgres_quoting_names_exactly_the_identifier(lab, name: str) -> None:  # noqa: ANN001
    """Accepted names survive the full path (fragment -> render -> psycopg) as one exact identifier."""
    if identifier_problem(name, "postgresql"):
        with pytest.raises(ValueError):
            quote_ident(name, "postgresql")
        return
    stmt = sqlfiles.render("SELECT 1 AS {col}, :v AS bound", "postgresql", {"col": quote_ident(name, "postgresql")},
                           {"v": name})
    with lab.connect() as conn:
        cur = conn.execute(stmt.sql, stmt.params)
        row = cur.fetchone()
        assert [d.name for d in cur.description] == [name, "bound"]
        assert row == (1, name)


@settings(max_examples=300, deadline=None)
@given(name=NAMES)
def test_tsql_quoting_names_exactly_the_identifier(name: str) -> None:
    if identifier_problem(name, "mssql"):
        with pytest.raises(ValueError):
            quote_ident(name, "mssql")
        return
    stmt = sqlfiles.render("SELECT 1 AS {col}", "mssql", {"col": quote_ident(name, "mssql")}, {})
    tree = sqlglot.parse_one(stmt.sql, read="tsql")
    assert tree.expressions[0].alias == name
    assert len(tree.expressions) == 1


IDENT_FIELDS = ["name", "table", "key", "schema", "enqueued_at", "lease_column"]


@settings(max_examples=400, deadline=None)
@given(
    kind=st.one_of(st.sampled_from(config_mod.KINDS), st.text(max_size=10)),
    values=st.fixed_dictionaries({f: st.one_of(NAMES, st.integers(), st.none()) for f in IDENT_FIELDS}),
    dialect=st.sampled_from(["postgresql", "mssql", "oracle"]),
    extra=st.dictionaries(st.text(max_size=8), st.integers(), max_size=2),
)
def test_config_loader_answers_everything_with_config_or_named_errors(kind, values, dialect, extra) -> None:  # noqa: ANN001
    queue = {k: v for k, v in values.items() if v is not None}
    queue.update(kind=kind, target="t")
    queue.update(extra)
    raw = {"targets": [{"name": "t", "dialect": dialect, "url": "postgresql://u@h/db"}], "queues": [queue]}
    try:
        cfg = config_mod.parse(raw, "fuzz.toml")
    except config_mod.ConfigError as exc:
        assert exc.problems
        for p in exc.problems:
            assert p.field and p.message
            assert str(exc).count("fuzz.toml: ") == len(exc.problems)
        return
    q = cfg.queues[0]
    for fld in ("table", "key", "schema_", "enqueued_at", "lease_column"):
        value = getattr(q, fld)
        if value is not None:
            assert identifier_problem(value, dialect) is None
