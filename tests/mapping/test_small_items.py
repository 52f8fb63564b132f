"""The small items of issue 13 ("What was seen" 8): the PostgreSQL name limit is PostgreSQL's, quote
look-alikes are refused as the README says, and a preview shows the SQL the server receives."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg import sql

from queueops import actions
from queueops import config as config_mod
from queueops.identifiers import identifier_problem
from tests.conftest import Lab
from tests.mapping.conftest import target_section

QUEUE = '[[queues]]\nname = "q"\ntarget = "{target}"\nkind = "delete"\nschema = "s"\ntable = "{table}"\nkey = "id"\n'


def load(tmp_path: Path, dialect: str, table: str) -> config_mod.Config:
    url = "postgresql://u@h/db" if dialect == "postgresql" else "mssql+pyodbc://u@h:1433/db?driver=FreeTDS"
    path = tmp_path / "q.toml"
    path.write_text(f'[[targets]]\nname = "t"\ndialect = "{dialect}"\nurl = "{url}"\n\n'
                    + QUEUE.format(target="t", table=table))
    return config_mod.load(path)


def test_a_long_postgresql_name_gets_the_postgresql_limit(tmp_path: Path) -> None:
    with pytest.raises(config_mod.ConfigError) as err:
        load(tmp_path, "postgresql", "t" * 200)
    assert "postgresql allows at most 63" in str(err.value) and "128" not in str(err.value)
    with pytest.raises(config_mod.ConfigError) as err:
        load(tmp_path, "mssql", "t" * 200)
    assert "mssql allows at most 128" in str(err.value)
    assert load(tmp_path, "mssql", "t" * 100).queues[0].table == "t" * 100  # fine on SQL Server


@pytest.mark.parametrize("char", ["\u201d", "\u02bc", "\u2018", "\u00ab", "\u2032"])
def test_quote_look_alikes_are_refused_as_the_readme_says(tmp_path: Path, char: str) -> None:
    name = f"jobs{char}x"
    for dialect in ("postgresql", "mssql"):
        assert "look-alike of a quote" in (identifier_problem(name, dialect) or "")
    with pytest.raises(config_mod.ConfigError, match="look-alike of a quote"):
        load(tmp_path, "postgresql", name)
    assert identifier_problem("qa äct", "postgresql") is None  # other Unicode letters stay allowed


def test_a_preview_shows_the_sql_the_server_receives(lab: Lab, schema: str, tmp_path: Path) -> None:
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, leased_at timestamptz)").format(
            sql.Identifier(schema, "lease%q")))
    path = tmp_path / "pct.toml"
    path.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/store.db"\n\n[identity]\ndefault_role = "operator"\n\n'
                    + target_section(lab) + f'\n[[queues]]\nname = "pct"\ntarget = "lab"\nkind = "lease"\n'
                    f'schema = "{schema}"\ntable = "lease%q"\nkey = "id"\nlease_column = "leased_at"\n')
    plan = actions.plan(config_mod.load(path), "requeue", "pct", {"batch_size": 10, "pause_s": 0})
    assert f'"{schema}"."lease%q"' in plan.preview.sql and "%%" not in plan.preview.sql
    assert all("%%" not in s["sql"] for s in plan.preview.to_json()["statements"])
    assert "%%" in plan.preview.steps[0].statement.sql  # what psycopg is given: it un-escapes it
