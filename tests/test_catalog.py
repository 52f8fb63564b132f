"""The metric catalog (sql/metrics.toml) is the one source of truth about metrics.

Every metric any SQL file emits (both dialects, every block) has an entry, every entry is emitted
by the SQL of the collector it names, and the counter rule, the config defaults and the
Prometheus exposition follow the catalog's kinds.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import generate_latest

from collectors import registry
from collectors.counters import CounterRates
from queueops import catalog, sqlfiles
from queueops.config import DEFAULT_THRESHOLDS
from queueops.rows import SnapshotRow
from queueops.service.metrics import ServiceMetrics

DIALECTS = ("postgresql", "mssql")
_LITERAL = re.compile(r"(?:^\s*|VALUES\s*)\(\s*'([a-z][a-z0-9_]*)'\s*,|THEN '([a-z][a-z0-9_]*_total)'"
                      r"|ELSE '([a-z][a-z0-9_]*_total)' END AS metric|'([a-z][a-z0-9_]*)' AS metric", re.M)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def emitted(dialect: str, collector: str) -> set[str]:
    """The metric names a collector's SQL file emits, over all of its blocks (comments ignored)."""
    text = sqlfiles.load(dialect, collector).text
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    return {g for m in _LITERAL.finditer(body) for g in m.groups() if g}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_metric_a_sql_file_emits_has_a_catalog_entry(dialect: str) -> None:
    cat = catalog.metrics()
    for c in registry.COLLECTORS:
        names = emitted(dialect, c.name)
        assert names, c.name
        missing = sorted(n for n in names if n not in cat)
        assert not missing, f"{dialect}/{c.name}.sql emits {missing} with no entry in sql/metrics.toml"
        wrong = sorted(n for n in names if c.name not in cat[n].collectors)
        assert not wrong, f"{dialect}/{c.name}.sql emits {wrong}, catalogued under another collector"


def test_every_catalog_entry_is_emitted_by_the_sql_of_its_collectors() -> None:
    known = {c.name for c in registry.COLLECTORS}
    for name, m in catalog.metrics().items():
        for coll in m.collectors:
            assert coll in known, f"{name}: collector {coll!r} is not in collectors/registry.py"
            if m.source == "sql":
                assert any(name in emitted(d, coll) for d in DIALECTS), f"{name}: no SQL of {coll} emits it"


def test_the_catalog_rejects_unknown_fields_and_kinds() -> None:
    with pytest.raises(ValueError, match="unknown field"):
        catalog.parse('[metrics.x]\ncollector = "depth"\ncolour = "red"\n')
    with pytest.raises(ValueError, match="kind"):
        catalog.parse('[metrics.x]\ncollector = "depth"\nkind = "histogram"\n')


def test_config_defaults_and_registry_come_from_the_catalog() -> None:
    assert set(DEFAULT_THRESHOLDS) == set(catalog.thresholds())
    fr = DEFAULT_THRESHOLDS["fragmentation_pct"]
    assert (fr.warn, fr.crit, fr.direction) == catalog.thresholds()["fragmentation_pct"]
    assert registry.by_name("lock_timeouts").metrics == catalog.of_collector("lock_timeouts")


def row(metric: str, value: float, s: float, queue: str = "q") -> SnapshotRow:
    return SnapshotRow(T0 + timedelta(seconds=s), "t", "db", queue, metric, value)


def test_only_catalog_counters_become_rates() -> None:
    """rows_total and lock_waiters_total are levels: no rows_per_s / lock_waiters_per_s rows."""
    rates = CounterRates()
    out = []
    for s, v in ((0, 10.0), (10, 30.0)):
        out += rates.derive([row("rows_total", v, s), row("lock_waiters_total", v, s, ""),
                             row("deadlocks_total", v, s, "")])
    produced = {r.metric for r in out}
    assert produced == {"deadlocks_per_s"}
    assert [r.value for r in out if r.metric == "deadlocks_per_s"] == [None, 2.0]


def test_prometheus_exports_counters_as_counters_with_the_catalogs_help() -> None:
    sm = ServiceMetrics()
    sm.snapshots.update([row("deadlocks_total", 4.0, 0, ""), row("depth", 7.0, 0), row("rows_total", 9.0, 0),
                         row("deadlocks_per_s", 0.5, 0, "")], ttl_s=60)
    text = generate_latest(sm.registry).decode()
    assert re.search(r"^# TYPE queueops_deadlocks(_total)? counter$", text, re.M)
    assert 'queueops_deadlocks_total{queue="",target="t"} 4.0' in text
    assert "# TYPE queueops_depth gauge" in text
    assert "# TYPE queueops_rows_total gauge" in text
    assert f"# HELP queueops_depth {catalog.get('depth').help}" in text  # type: ignore[union-attr]
    assert "# TYPE queueops_deadlocks_per_s gauge" in text
    assert "queueops snapshot metric depth" not in text


def test_catalog_findings_advice_and_actions_name_real_rules_and_actions() -> None:
    from queueops import actions, judge

    for name, m in catalog.metrics().items():
        for rule in (m.finding, m.advice):
            assert not rule or rule in judge.RULES, f"{name}: no rule {rule!r} in queueops.judge.RULES"
        assert not m.action or m.action in actions.ACTIONS, f"{name}: no action {m.action!r}"
    assert catalog.overview_columns()[:3] == ("depth", "oldest_age_s", "stuck_leases")
