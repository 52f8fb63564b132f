"""Presets as data: every file loads and is complete, ``preset = NAME`` expands to a complete queue
(overrides win), the library's rescue rules bound the default lease timeout and the requeue action,
and every SQL Server preset's collector statements parse as T-SQL with their placeholders bound."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlglot

from collectors import registry, runner
from queueops import config as config_mod
from queueops import presets
from queueops.actions import requeue
from queueops.actions.model import ActionError, RequeueOptions

ROOT = Path(__file__).resolve().parents[2]
NAMES = sorted(presets.all_presets())
REQUIRED = {"procrastinate", "pgqueuer", "pgboss", "oban", "river", "good_job", "solid_queue", "que", "pgmq",
            "hangfire", "nservicebus", "rebus", "masstransit", "simple_queue"}
_LITERAL_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*")


def _cfg(dialect: str, *queues: dict[str, object]) -> config_mod.Config:
    url = "postgresql://u@h/db" if dialect == "postgresql" else "mssql+pyodbc://u@h/db?driver=FreeTDS"
    return config_mod.parse({"targets": [{"name": "t", "dialect": dialect, "url": url}], "queues": list(queues)})


def _queue(name: str) -> dict[str, object]:
    q: dict[str, object] = {"name": name, "target": "t", "preset": name}
    if "table" not in presets.get(name).queue:
        q["table"] = "q_orders" if name == "pgmq" else "Orders"  # one table per queue: discovery names it
    return q


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
    if p.tested == "real":
        assert name in ("procrastinate", "pgqueuer", "pgboss")


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
