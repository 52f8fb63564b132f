"""Every SQL Server system-view column our T-SQL reads is documented in the reference.

SQL Server cannot run here, so a column that does not exist (or means something else) would
only fail on a customer's server. The documented set is extracted from
``../shared/reference/mssql-dmvs.md`` when the test runs (see ``dmvref``), so editing the
reference is the only way to widen it.
"""

from __future__ import annotations

import logging

import pytest

from queueops import sqlfiles
from tests.collectors import dmvref
from tests.test_mssql_sql_parses import CASES, render_for_parse

logging.getLogger("sqlglot").setLevel(logging.ERROR)

# Catalog views the reference does not cover at all (it documents DMVs). They are allowed only
# with the columns listed here, each for a stated reason; every dm_* view, and any object the
# reference documents, is checked against the reference alone.
OUTSIDE_REFERENCE = {
    "columns": {"name", "object_id", "column_id", "system_type_id", "max_length", "precision", "scale",
                "is_identity"},  # config check --live and archive's column list (catalog, not a DMV)
    "indexes": {"name", "object_id", "index_id", "type_desc", "is_disabled", "allow_page_locks"},  # rebuild
}

# Columns of documented objects that the reference file does not list, each checked by the lead
# against the Microsoft page the reference itself cites, and each needed for a stated reason.
# Keep this list short; it is reported in the issue notes.
SUPPLEMENT = {
    # S19 sys-index-resumable-operations: match a resumable rebuild's row to its index (progress).
    "index_resumable_operations": {"object_id", "index_id"},
    # S1 sys-dm-db-index-physical-stats: one row per partition; rebuild orders and reports by it.
    "dm_db_index_physical_stats": {"partition_number"},
    # sys-dm-exec-sessions (the reference names the view, lists no columns): the SQL Server
    # integration suite finds the action's own session by its application name to kill it.
    "dm_exec_sessions": {"session_id", "program_name"},
}


@pytest.fixture(scope="module")
def documented() -> dict[str, set[str]]:
    if not dmvref.REFERENCE.exists():
        pytest.fail(f"the reference {dmvref.REFERENCE} is missing: it is the source of truth for T-SQL columns")
    return dmvref.documented_columns()


def test_the_reference_yields_the_columns_it_plainly_documents(documented: dict[str, set[str]]) -> None:
    # A few facts read by eye from the reference: if extraction breaks, this says so first.
    assert {"ghost_record_count", "version_ghost_record_count", "avg_fragmentation_in_percent",
            "page_count", "avg_page_space_used_in_percent"} <= documented["dm_db_index_physical_stats"]
    assert {"cntr_value", "cntr_type", "counter_name", "object_name", "instance_name"} \
        <= documented["dm_os_performance_counters"]
    assert {"blocking_session_id", "session_id", "sql_handle", "wait_type"} <= documented["dm_exec_requests"]
    assert "sqlserver_start_time" in documented["dm_os_sys_info"]
    assert "row_lock_wait_count" in documented["dm_db_index_operational_stats"]
    # ...and nothing it does not: the reference names dm_exec_sessions but documents no column.
    assert not documented.get("dm_exec_sessions")
    assert "wait_type" not in documented["dm_db_index_physical_stats"]


def test_the_checker_catches_an_undocumented_column(documented: dict[str, set[str]]) -> None:
    uses, problems = dmvref.sys_column_uses(
        "SELECT r.session_id, r.status FROM sys.dm_exec_requests AS r "
        "CROSS APPLY sys.dm_db_index_physical_stats(DB_ID(), 1, NULL, NULL, 'LIMITED') AS ps")
    assert uses == {("dm_exec_requests", "session_id"), ("dm_exec_requests", "status")}
    assert "status" not in documented["dm_exec_requests"]
    _, problems = dmvref.sys_column_uses("SELECT session_id FROM sys.dm_exec_requests AS r, sys.dm_os_sys_info AS i")
    assert problems  # unqualified next to two sources: the checker cannot tell, so it refuses


@pytest.mark.parametrize(("name", "block"), CASES, ids=[f"{n}:{b}" for n, b in CASES])
def test_tsql_reads_only_documented_columns(name: str, block: str, documented: dict[str, set[str]]) -> None:
    stmt = render_for_parse(sqlfiles.load("mssql", name), block)
    uses, problems = dmvref.sys_column_uses(stmt.sql)
    assert not problems, f"{name}:{block}: {problems}"
    bad = []
    for obj, col in sorted(uses):
        allowed = OUTSIDE_REFERENCE.get(obj) if obj not in documented else documented[obj]
        if (allowed is None or col not in allowed) and col not in SUPPLEMENT.get(obj, set()):
            bad.append(f"sys.{obj}.{col}")
    assert not bad, f"{name}:{block} reads columns the reference does not document: {', '.join(bad)}"
