"""The mapping fields pg-boss 12 needed (pgboss12 preset): a time limit in seconds
(``timeout_unit``), a heartbeat on the item's own row (``row_heartbeat``), and rows kept out of
every count by a boolean flag (``closed_when_true``). What each renders, where each is refused, and
what a column of the wrong type costs; no database (the real library is tests/libraries)."""

from __future__ import annotations

import pytest

from queueops import coltypes, config
from queueops.fragments import fragments_for

STATUS = {"kind": "status", "status_column": "state", "status_changed_at": "started_on"}


def _parse(dialect: str = "postgresql", **queue: object) -> config.Config:
    url = "postgresql://u@h/d" if dialect == "postgresql" else "mssql+pyodbc://u@h/d?driver=FreeTDS"
    return config.parse({"targets": [{"name": "a", "dialect": dialect, "url": url}],
                         "queues": [{"name": "j", "target": "a", "table": "job", "key": "id", **queue}]})


def test_the_stuck_rule_reads_seconds_and_the_rows_own_heartbeat() -> None:
    interval = fragments_for(_parse(**STATUS, timeout_column="expire_in").queue("j"), "postgresql")
    assert interval["worker_gone"] == '("started_on" + "expire_in" < now())'
    seconds = fragments_for(_parse(**STATUS, timeout_column="expire_seconds", timeout_unit="seconds").queue("j"),
                            "postgresql")
    assert seconds["worker_gone"] == """("started_on" + "expire_seconds" * interval '1 second' < now())"""
    beat = {"column": "heartbeat_on", "seconds_column": "heartbeat_seconds"}
    both = fragments_for(_parse(**STATUS, timeout_column="expire_seconds", timeout_unit="seconds",
                                row_heartbeat=beat).queue("j"), "postgresql")
    # either rule fails the job, as pg-boss's supervisor runs both; a job without heartbeats is
    # judged by its expiry alone (never NULL: lease_timeout_s does not decide)
    assert both["worker_gone"] == (
        """(("started_on" + "expire_seconds" * interval '1 second' < now()) OR coalesce((CASE WHEN """
        """"heartbeat_seconds" IS NOT NULL THEN "heartbeat_on" + "heartbeat_seconds" * interval '1 second' """
        """< now() END), false))""")
    alone = fragments_for(_parse(**STATUS, row_heartbeat=beat).queue("j"), "postgresql")
    # without a limit of its own, an item that sends no heartbeats is NULL: its age decides
    assert alone["worker_gone"].startswith('(CASE WHEN "heartbeat_seconds" IS NOT NULL THEN')


def test_closed_rows_are_in_no_count_in_both_dialects() -> None:
    pg = fragments_for(_parse(**STATUS, closed_when_true=["blocked"]).queue("j"), "postgresql")
    assert pg["open_and"] == ' AND NOT "blocked"'
    ms = fragments_for(_parse("mssql", kind="status", status_column="state",
                              closed_when_true=["Blocked"]).queue("j"), "mssql")
    assert ms["open_and"] == " AND [Blocked] = 0"


@pytest.mark.parametrize(("fields", "message"), [
    ({**STATUS, "timeout_unit": "seconds"}, "timeout_unit says what timeout_column holds"),
    ({"kind": "lease", "lease_column": "locked_at", "row_heartbeat": {"column": "b", "seconds_column": "s"}},
     "row_heartbeat applies to a status queue"),
    ({"kind": "ring", "sequence_table": "s", "push_column": "p", "pop_column": "q", "closed_when_true": ["x"]},
     "closed_when_true does not apply to a ring"),
])
def test_a_field_where_it_cannot_apply_is_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(config.ConfigError, match=message):
        _parse(**fields)


def test_a_librarys_stuck_rule_on_sql_server_is_refused_not_ignored() -> None:
    """SQL Server's stuck_leases compares the status change with lease_timeout_s only: a library's
    own rule there would be silently replaced by it."""
    with pytest.raises(config.ConfigError, match=r"timeout_column.*PostgreSQL's stuck_leases only"):
        _parse("mssql", kind="status", status_column="State", status_changed_at="StartedAt",
               timeout_column="ExpireSeconds", timeout_unit="seconds")


def _types(q: config.Queue, **columns: tuple[str, str]) -> dict[tuple[str, str], coltypes.ColumnType]:
    table = coltypes.qualified(q.schema_, q.table, "postgresql")
    return {(table, col): coltypes.ColumnType(table, col, "pg_catalog", name, name, category)
            for col, (name, category) in columns.items()}


def test_a_stuck_rule_column_of_the_wrong_type_leaves_stuck_uncollected_and_says_why() -> None:
    q = _parse(**STATUS, timeout_column="expire_in", timeout_unit="seconds",
               row_heartbeat={"column": "heartbeat_on", "seconds_column": "heartbeat_seconds"},
               closed_when_true=["blocked"]).queue("j")
    found = coltypes.problems(q, _types(q, expire_in=("interval", "other"), heartbeat_on=("timestamptz", "timestamp"),
                                        heartbeat_seconds=("text", "text"), blocked=("int4", "integer")), "postgresql")
    by_field = {p.field: p for p in found}
    assert set(by_field) == {"timeout_column", "row_heartbeat.seconds_column", "closed_when_true[0]"}, found
    assert "is interval, not integer (timeout_unit = \"seconds\")" in by_field["timeout_column"].message
    assert by_field["timeout_column"].drops == ("worker_gone",)
    assert "every per-queue statement" in by_field["closed_when_true[0]"].message
    fine = coltypes.problems(q, _types(q, expire_in=("int4", "integer"), heartbeat_on=("timestamptz", "timestamp"),
                                       heartbeat_seconds=("int4", "integer"), blocked=("bool", "boolean")), "postgresql")
    assert not fine
