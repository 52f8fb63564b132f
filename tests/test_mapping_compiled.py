"""A queue's mapping is compiled once per (queue, dialect, types snapshot, limits) and every reader
sees the same object: the runner's statements, its mapping errors and the live check's age warning."""

from __future__ import annotations

from collectors import registry, runner
from queueops import coltypes, mapping
from queueops import config as config_mod


def _cfg() -> config_mod.Config:
    return config_mod.parse({
        "targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h/db"}],
        "queues": [{"name": "jobs", "target": "t", "kind": "status", "schema": "s", "table": "jobs", "key": "id",
                    "enqueued_at": "created", "status_column": "state", "status_changed_at": "changed",
                    "ready_values": ["todo"], "processing_values": ["doing"], "done_values": ["done"]}],
    })


def _types(created: str) -> mapping.Types:
    table = '"s"."jobs"'
    return {(table, "state"): coltypes.ColumnType(table, "state", "s", "job_state", "s.job_state", "enum",
                                                  ("todo", "doing", "done")),
            (table, "created"): coltypes.ColumnType(table, "created", "pg_catalog", created, created,
                                                    "timestamp" if created == "timestamptz" else "integer")}


def test_one_compile_per_queue_and_types_snapshot() -> None:
    cfg = _cfg()
    q, types = cfg.queues[0], _types("timestamptz")
    first = runner.compiled(q, "postgresql", types)
    assert runner.compiled(q, "postgresql", types) is first
    assert runner.compiled(q, "postgresql", _types("timestamptz")) is not first  # a new snapshot: compiled again
    assert runner.compiled(q, "postgresql") is not first
    # Typed: the status constants name the enum; untyped: the configured values' own type.
    assert first.fragments["ready_list"] == "'todo'::\"s\".\"job_state\""
    assert runner.compiled(q, "postgresql").fragments["ready_list"] == "'todo'::\"pg_catalog\".\"text\""
    assert first.table == first.values["qualified_table"] == '"s"."jobs"'


def test_a_column_of_the_wrong_type_drops_its_fragment_and_is_a_mapping_error() -> None:
    cfg = _cfg()
    q = cfg.queues[0]
    bad = mapping.compile_queue(q, "postgresql", _types("int8"))
    assert "enqueued_at" in bad.names and "enqueued_at" not in bad.fragments
    assert [p.field for p in bad.problems] == ["enqueued_at"]
    # The collector that needs it renders nothing for this queue; the one that does not still does.
    assert runner.build_statement(registry.by_name("oldest_age_s"), cfg.targets[0], [q], _types("int8")) is None
    assert runner.build_statement(registry.by_name("depth"), cfg.targets[0], [q], _types("int8")) is not None
