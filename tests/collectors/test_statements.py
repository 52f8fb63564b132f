"""The statements the runner really sends, for both dialects, are well formed.

SQL Server cannot run here, so the whole statement of each collector (every lab queue's block
wrapped and joined with UNION ALL, or the target block) is parsed as T-SQL, and for both dialects
the placeholders are counted against the bound values: a block that binds one value too few
would only fail on a customer's server.
"""

from __future__ import annotations

import re

import pytest
import sqlglot

from collectors import registry, runner
from queueops import config as config_mod

_LITERAL_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*")


def lab_like(dialect: str) -> config_mod.Config:
    lab = {"target": "t", "schema": "lab"}
    return config_mod.parse({
        "targets": [{"name": "t", "dialect": dialect,
                     "url": "postgresql://u@h/db" if dialect == "postgresql" else "mssql+pyodbc://u@h/db?driver=FreeTDS"}],
        "queues": [
            {**lab, "name": "delete", "kind": "delete", "table": "q_delete", "key": "id", "enqueued_at": "enqueued_at",
             "watermark": {"table": "q_delete_watermark", "column": "low_key"}},
            {**lab, "name": "status", "kind": "status", "table": "q_status_meta", "key": "id", "enqueued_at": "enqueued_at",
             "status_column": "status", "status_changed_at": "status_changed_at", "ready_values": [0, 5],
             "processing_values": [1], "done_values": [2, 3]},
            {**lab, "name": "lease", "kind": "lease", "table": "q_lease", "key": "id", "enqueued_at": "created_at",
             "lease_column": "processing_started_at", "error_column": "errors"},
            {**lab, "name": "due", "kind": "due", "table": "q_due", "key": "id", "enqueued_at": "enqueued_at",
             "due_column": "due_at"},
            {**lab, "name": "ring", "kind": "ring", "table": "q_ring_slot", "key": "slot", "enqueued_at": "enqueued_at",
             "sequence_table": "q_ring_seq", "push_column": "push_seq", "pop_column": "pop_seq",
             "refcount_column": "reference_count", "capacity": 1024},
            {**lab, "name": "ring2", "kind": "ring", "table": "r2", "key": "slot", "sequence_table": "r2_seq",
             "push_column": "push_seq", "pop_column": "pop_seq"},  # no capacity: ring_basic
        ],
    })


CASES = [(d, c.name) for d in ("postgresql", "mssql") for c in registry.COLLECTORS]


@pytest.mark.parametrize(("dialect", "name"), CASES, ids=[f"{d}:{n}" for d, n in CASES])
def test_whole_statement_binds_every_placeholder(dialect: str, name: str) -> None:
    cfg = lab_like(dialect)
    t = cfg.targets[0]
    stmt = runner.build_statement(registry.by_name(name), t, cfg.queues_of("t"))
    assert stmt is not None
    code = _LITERAL_OR_COMMENT.sub("", stmt.sql)
    placeholders = len(re.findall(r"(?<!%)%s", code)) if dialect == "postgresql" else code.count("?")
    assert placeholders == len(stmt.params), (placeholders, len(stmt.params))
    if dialect == "mssql":
        parsed = sqlglot.parse(stmt.sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
        assert len(parsed) == 1 and not isinstance(parsed[0], sqlglot.exp.Command)


def test_a_ring_without_capacity_gets_the_basic_block_and_unknown_kinds_nothing() -> None:
    cfg = lab_like("postgresql")
    stmt = runner.build_statement(registry.by_name("ring_occupancy"), cfg.targets[0], cfg.queues_of("t"))
    assert stmt is not None and stmt.params.count("ring") == 1 and stmt.params.count("ring2") == 1
    assert "slots_in_use" in stmt.sql  # the full block for 'ring'
    none = runner.build_statement(registry.by_name("ring_occupancy"), cfg.targets[0],
                                  [q for q in cfg.queues if q.kind != "ring"])
    assert none is None  # no queue it applies to: no round trip at all
