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


def test_the_stuck_read_is_chosen_from_the_catalog_types() -> None:
    """stuck_leases reads the processing items through what catalog_types reported (issue 29): an
    index leading with the status column, else a partial index on exactly the processing values;
    with neither the same bounded read, and its note says the table is read."""
    cfg = _cfg()
    q, table = cfg.queues[0], '"s"."jobs"'
    base = _types("timestamptz")[(table, "state")]

    def frags(**kw: object) -> dict[str, str]:
        types = {**_types("timestamptz"), (table, "state"): coltypes.ColumnType(**{**base.__dict__, **kw})}
        return dict(mapping.compile_queue(q, "postgresql", types).fragments)

    assert (frags(leads_index=True)["stuck_indexed"], frags(leads_index=True)["stuck_partial"]) == ("true", "false")
    served = frags(partials=(("jobs_doing", ("doing",), '"id"'),))
    assert (served["stuck_indexed"], served["stuck_partial"]) == ("false", "true")
    assert served["processing_in"] == "IN ('doing'::\"s\".\"job_state\")"
    wider = frags(partials=(("jobs_open", ("todo", "doing"), '"id"'),))  # a superset is not relied on
    assert (wider["stuck_indexed"], wider["stuck_partial"]) == ("false", "false")
    stmt = runner.build_statement(registry.by_name("stuck_leases"), cfg.targets[0], [q], {})
    assert stmt is not None and "read of every " in stmt.sql and "doing" in stmt.params
