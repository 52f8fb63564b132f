"""Every SQL Server system-view column our T-SQL reads is documented in the project's reference.

SQL Server cannot run here, so a column that does not exist (or means something else) would
only fail on a customer's server. The documented set is ``docs/reference/mssql-system-views.toml``
(see ``dmvref``): reading a new column means checking it on the object's Microsoft page and
adding it there, in review.
"""

from __future__ import annotations

import logging
import re

import pytest

from queueops import sqlfiles
from tests.collectors import dmvref
from tests.test_mssql_sql_parses import CASES, render_for_parse

logging.getLogger("sqlglot").setLevel(logging.ERROR)


@pytest.fixture(scope="module")
def documented() -> dict[str, set[str]]:
    return dmvref.documented_columns()


def test_every_object_names_its_microsoft_page_and_says_what_each_column_holds() -> None:
    for obj, entry in dmvref.load_reference().items():
        assert re.fullmatch(r"https://learn\.microsoft\.com/en-us/sql/\S+", entry["page"]), obj
        assert entry["kind"] in {"view", "function", "catalog"}, obj
        assert entry["columns"], f"{obj} lists no column"
        for col, meaning in entry["columns"].items():
            assert re.fullmatch(r"[a-z][a-z0-9_]*", col), f"{obj}.{col}"
            assert len(meaning) > 10, f"{obj}.{col} says nothing about what it holds"


def test_the_checker_catches_an_undocumented_column(documented: dict[str, set[str]]) -> None:
    uses, problems = dmvref.sys_column_uses(
        "SELECT r.session_id, r.status_code FROM sys.dm_exec_requests AS r "
        "CROSS APPLY sys.dm_db_index_physical_stats(DB_ID(), 1, NULL, NULL, 'LIMITED') AS ps")
    assert uses == {("dm_exec_requests", "session_id"), ("dm_exec_requests", "status_code")}
    assert "status_code" not in documented["dm_exec_requests"]
    _, problems = dmvref.sys_column_uses("SELECT session_id FROM sys.dm_exec_requests AS r, sys.dm_os_sys_info AS i")
    assert problems  # unqualified next to two sources: the checker cannot tell, so it refuses


def test_every_object_the_tsql_reads_is_in_the_reference(documented: dict[str, set[str]]) -> None:
    read: set[str] = set()
    for name, block in CASES:
        uses, _ = dmvref.sys_column_uses(render_for_parse(sqlfiles.load("mssql", name), block).sql)
        read |= {obj for obj, _ in uses}
    assert read, "no statement read a system view: the extraction is broken"
    assert read <= set(documented), f"objects read but not in the reference: {sorted(read - set(documented))}"


@pytest.mark.parametrize(("name", "block"), CASES, ids=[f"{n}:{b}" for n, b in CASES])
def test_tsql_reads_only_documented_columns(name: str, block: str, documented: dict[str, set[str]]) -> None:
    stmt = render_for_parse(sqlfiles.load("mssql", name), block)
    uses, problems = dmvref.sys_column_uses(stmt.sql)
    assert not problems, f"{name}:{block}: {problems}"
    bad = [f"sys.{obj}.{col}" for obj, col in sorted(uses) if col not in documented.get(obj, set())]
    assert not bad, f"{name}:{block} reads columns the reference does not document: {', '.join(bad)}"
