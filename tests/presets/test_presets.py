"""Presets as data: every file loads and is complete, ``preset = NAME`` expands to a complete queue
(overrides win), the library's rescue rules bound the default lease timeout and the requeue action,
and every SQL Server preset's collector statements parse as T-SQL with their placeholders bound."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlglot

from collectors import registry, runner
from queueops import config as config_mod
from queueops import indexadvice, presets
from queueops.actions import requeue
from queueops.actions.model import ActionError, RequeueOptions
from queueops.fragments import fragments_for

ROOT = Path(__file__).resolve().parents[2]
NAMES = sorted(presets.all_presets())
REQUIRED = {"procrastinate", "pgqueuer", "pgboss", "oban", "river", "good_job", "solid_queue", "que", "pgmq",
            "hangfire", "nservicebus", "rebus", "masstransit", "simple_queue"}
# Presets marked tested = "real": the tests/libraries module that runs the library's own code on them.
REAL_LIBRARY_TESTS = {"procrastinate": "test_real_libraries.py", "pgqueuer": "test_real_libraries.py",
                      "pgboss": "test_real_libraries.py", "pgboss11": "test_real_libraries.py",
                      "pgboss12": "test_real_libraries.py", "graphile_worker": "test_real_libraries.py",
                      "pgmq": "test_conformance_pgmq.py"}
_LITERAL_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*")


def _cfg(dialect: str, *queues: dict[str, object]) -> config_mod.Config:
    url = "postgresql://u@h/db" if dialect == "postgresql" else "mssql+pyodbc://u@h/db?driver=FreeTDS"
    return config_mod.parse({"targets": [{"name": "t", "dialect": dialect, "url": url}], "queues": list(queues)})


def _queue(name: str) -> dict[str, object]:
    q: dict[str, object] = {"name": name, "target": "t", "preset": name}
    if "table" not in presets.get(name).queue:
        q["table"] = "q_orders" if name == "pgmq" else "Orders"  # one table per queue: discovery names it
    if "partition" in presets.get(name).requires:  # a table of many queues: the queue's own part
        q["partition"] = PARTITIONS[name]
    return q


PARTITIONS = {"masstransit": {"column": "QueueId", "value": 7}, "hangfire": {"column": "Queue", "value": "default"}}


def test_a_preset_of_a_shared_table_refuses_a_queue_without_its_partition() -> None:
    """Issue 33: MassTransit's MessageDelivery and Hangfire's JobQueue hold every queue; without the
    queue's partition the preset read every queue as one (faulted deliveries counted ready)."""
    for name, part in PARTITIONS.items():
        with pytest.raises(config_mod.ConfigError, match=rf"partition = \(missing\): preset '{name}' needs it"):
            _cfg("mssql", {"name": name, "target": "t", "preset": name})
        q = _cfg("mssql", {"name": name, "target": "t", "preset": name, "partition": part}).queues[0]
        assert f"[{part['column']}] = " in fragments_for(q, "mssql")["open_and"]
    for name in ("rebus", "nservicebus"):  # a table per queue: no default table
        with pytest.raises(config_mod.ConfigError, match=rf"table = \(missing\): preset '{name}' needs it"):
            _cfg("mssql", {"name": name, "target": "t", "preset": name})


def test_every_library_of_the_issue_has_a_preset_and_docs_row() -> None:
    assert REQUIRED <= set(NAMES)
    doc = (ROOT / "docs" / "presets.md").read_text()
    for name in NAMES:
        assert f"`{name}`" in doc, f"docs/presets.md has no row for preset {name}"


@pytest.mark.parametrize("name", NAMES)
def test_preset_expands_to_a_complete_queue(name: str) -> None:
    p = presets.get(name)
    q = _cfg(p.engine, _queue(name)).queues[0]
    assert q.kind == p.queue["kind"] and q.preset == name
    # lease_timeout_s defaults above the library's own stale-job limit
    assert q.lease_timeout_s > p.rescue.stale_after_s
    # every column the preset maps is in its signature or named in the mapping (no silent default)
    for field in ("key", "status_column", "lease_column", "due_column", "enqueued_at", "status_changed_at"):
        if field in p.queue:
            assert getattr(q, field) == p.queue[field]
    if p.tested == "real":  # the library's own code runs in a module of tests/libraries
        assert name in REAL_LIBRARY_TESTS
        assert f'"{name}"' in (ROOT / "tests" / "libraries" / REAL_LIBRARY_TESTS[name]).read_text()


def test_overrides_win_and_unknown_preset_is_refused() -> None:
    q = _cfg("postgresql", {"name": "jobs", "target": "t", "preset": "pgqueuer", "schema": "app",
                            "lease_timeout_s": 600, "thresholds": {"depth": {"warn": 5, "crit": 9}}}).queues[0]
    assert (q.schema_, q.table, q.lease_timeout_s, q.threshold("depth").warn) == ("app", "pgqueuer", 600, 5)
    with pytest.raises(config_mod.ConfigError) as err:
        _cfg("postgresql", {"name": "jobs", "target": "t", "preset": "celery"})
    assert "queues[0](name='jobs').preset = 'celery': no preset 'celery'" in str(err.value)


@pytest.mark.parametrize("name", NAMES)
def test_requeue_follows_the_preset(name: str) -> None:
    p = presets.get(name)
    q = _cfg(p.engine, _queue(name)).queues[0]
    if p.actions.requeue == "refuse":
        with pytest.raises(ActionError, match="refused"):
            requeue.check(q, RequeueOptions())
    elif q.kind in ("lease", "status") and (q.kind == "lease" or q.status_changed_at):
        requeue.check(q, RequeueOptions())


MSSQL = [n for n in NAMES if presets.get(n).engine == "mssql"]
CASES = [(c.name) for c in registry.COLLECTORS]


@pytest.mark.parametrize("collector", CASES)
def test_mssql_presets_statements_parse_as_tsql(collector: str) -> None:
    cfg = _cfg("mssql", *[_queue(n) for n in MSSQL])
    stmt = runner.build_statement(registry.by_name(collector), cfg.targets[0], cfg.queues_of("t"))
    if stmt is None:
        return
    code = _LITERAL_OR_COMMENT.sub("", stmt.sql)
    assert code.count("?") == len(stmt.params)
    parsed = sqlglot.parse(stmt.sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
    assert len(parsed) == 1 and not isinstance(parsed[0], sqlglot.exp.Command)


def test_lease_timeout_override_below_the_library_rescue_is_warned(tmp_path: Path) -> None:
    """config check tells (exit 0, file, queue, field, value) a lease_timeout_s override at or below
    the library's own stale-job limit or heartbeat; the presets' own defaults are never warned."""
    assert not config_mod.preset_warnings(_cfg("postgresql", *(_queue(n) for n in NAMES
                                                               if presets.get(n).engine == "postgresql")))
    cfg = tmp_path / "queueops.toml"
    cfg.write_text('[[targets]]\nname = "t"\ndialect = "postgresql"\nurl = "postgresql://u@h/db"\n\n'
                   '[[queues]]\nname = "jobs"\ntarget = "t"\npreset = "pgboss"\nlease_timeout_s = 120\n\n'
                   '[[queues]]\nname = "beats"\ntarget = "t"\npreset = "oban"\nlease_timeout_s = 4000\n\n'
                   '[[queues]]\nname = "pgq"\ntarget = "t"\npreset = "pgqueuer"\nlease_timeout_s = 10\n\n'
                   # GoodJob has no lease in its mapping (stuck_leases unavailable): nothing to warn about
                   '[[queues]]\nname = "gj"\ntarget = "t"\npreset = "good_job"\nlease_timeout_s = 5\n')
    out = subprocess.run([sys.executable, "-m", "queueops.cli", "config", "check", "--config", str(cfg)],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    warned = [line for line in out.stdout.splitlines() if ": warning: " in line]
    assert len(warned) == 2, out.stdout
    assert warned[0] == (f"{cfg}: warning: queues[0](name='jobs').lease_timeout_s = 120.0: is not above 1020 s, "
                         "the library's own stale-job limit (preset 'pgboss'): stuck_leases counts jobs the "
                         "library still considers alive or rescues itself; fix: raise it above the library's "
                         "limit, or remove the override")
    assert "queues[2](name='pgq').lease_timeout_s = 10.0: is not above 30 s" in warned[1]
    assert "ok with 2 warning(s)" in out.stdout


def test_open_when_null_is_validated_and_rendered_quoted() -> None:
    q = _cfg("postgresql", _queue("que")).queues[0]
    assert q.open_when_null == ["finished_at", "expired_at"]
    frags = fragments_for(q, "postgresql")
    assert frags["open_and"] == ' AND "finished_at" IS NULL AND "expired_at" IS NULL'
    assert fragments_for(q, "mssql")["open_where"] == " WHERE [finished_at] IS NULL AND [expired_at] IS NULL"
    stmt = runner.build_statement(registry.by_name("depth"), _cfg("postgresql").targets[0], [q])
    # the ready and total counts, and (issue 29) the not-due read and the advisory-locked jobs above the cap
    assert stmt is not None and stmt.sql.count('"finished_at" IS NULL AND "expired_at" IS NULL') == 4
    need = indexadvice.needed("depth", q)
    assert need is not None and indexadvice.create_index(q, need, "postgresql") == (
        'CREATE INDEX CONCURRENTLY ON "public"."que_jobs" ("run_at") WHERE "finished_at" IS NULL '
        'AND "expired_at" IS NULL')
    # A queue without it renders exactly as before (empty fragments).
    plain = _cfg("postgresql", {"name": "p", "target": "t", "kind": "delete", "table": "t1", "key": "id"}).queues[0]
    assert (fragments_for(plain, "postgresql")["open_and"], fragments_for(plain, "postgresql")["open_where"]) == ("", "")
    for bad, message in (({"open_when_null": ["x;drop"]}, "not a safe identifier"),
                         ({"open_when_null": ["run_at"]}, "'run_at' is also due_column"),
                         ({"open_when_null": ["a", "a"]}, "names a column twice")):
        with pytest.raises(config_mod.ConfigError, match=message):
            _cfg("postgresql", {**_queue("que"), **bad})
    with pytest.raises(config_mod.ConfigError, match="does not apply to a ring"):
        _cfg("postgresql", {"name": "r", "target": "t", "kind": "ring", "table": "s", "key": "id",
                            "sequence_table": "q", "push_column": "a", "pop_column": "b", "open_when_null": ["c"]})


def test_a_metric_a_preset_marks_unavailable_is_said_not_shown_as_a_figure() -> None:
    """graphile-worker's count_exhausted read 0 'at least' for 200,020 permanently failed jobs: the
    collector's row of a metric the preset marks unavailable becomes no value and the preset's reason."""
    from datetime import UTC, datetime

    from queueops.rows import SnapshotRow

    cfg = _cfg("postgresql", _queue("graphile_worker"), {"name": "plain", "target": "t", "kind": "delete",
                                                         "table": "q", "key": "id"})
    now = datetime.now(UTC)
    rows = [SnapshotRow(now, "t", "db", "graphile_worker", "count_exhausted", 0.0, "at least (cap of runnable items read)"),
            SnapshotRow(now, "t", "db", "graphile_worker", "depth", 5718.0, "estimate"),
            SnapshotRow(now, "t", "db", "plain", "count_exhausted", 3.0, "exact")]
    marked = runner.mark_unavailable(rows, cfg.queues)
    assert marked[0].value is None
    assert marked[0].note == ("not available (graphile_worker preset): "
                              + presets.get("graphile_worker").unavailable["count_exhausted"])
    assert marked[1:] == rows[1:]  # another metric, and another queue's same metric, are untouched


def test_a_preset_naming_an_unknown_metric_unavailable_is_refused() -> None:
    raw = presets.get("pgmq").model_dump(by_alias=True)
    raw["unavailable"] = {"done": "finished jobs are deleted"}  # the metric is count_done
    with pytest.raises(ValueError, match="names 'done', not a metric of sql/metrics.toml"):
        presets.Preset.model_validate(raw)


def test_the_advice_for_a_closed_when_true_queue_is_an_index_on_exactly_its_waiting_rows() -> None:
    """pg-boss 12's job_i11 holds the waiting rows (the ready values, blocked false); a table
    without such an index is advised one, with the ready values as literals (quotes doubled), each
    flag negated, and on a partitioned table the plain CREATE INDEX and what it locks."""
    q = _cfg("postgresql", {**_queue("pgboss12"), "ready_values": ["created", "re'try"]}).queues[0]
    need = indexadvice.ready_rows(q)
    assert indexadvice.create_index(q, need, "postgresql") == (
        'CREATE INDEX CONCURRENTLY ON "pgboss"."job" ("id") WHERE "state" IN (\'created\', \'re\'\'try\') '
        'AND NOT "blocked"')
    partitioned = indexadvice.create_index(q, need, "postgresql", partitioned=True)
    assert partitioned.startswith('CREATE INDEX ON "pgboss"."job" ("id") WHERE "state" IN (\'created\', '
                                  '\'re\'\'try\') AND NOT "blocked"  -- a partitioned table: CONCURRENTLY cannot run')
