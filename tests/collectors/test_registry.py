"""The registry, the SQL files and docs/metrics.md agree: a collector is a file per dialect."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collectors import registry
from queueops import sqlfiles

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("delete", "status", "lease", "due", "ring")


@pytest.mark.parametrize("dialect", ["postgresql", "mssql"])
def test_every_collector_has_a_file_per_dialect_named_after_it(dialect: str) -> None:
    for c in registry.COLLECTORS:
        sqlf = sqlfiles.load(dialect, c.name)  # raises when missing
        assert sqlf.doc, f"{dialect}/{c.name}.sql: the leading comment says what it measures and why it is cheap"
        if c.scope == "target":
            assert sqlf.has_block("main")
        else:
            assert any(sqlf.has_block(b) for b in (*KINDS, "any", "all", "ring_basic")), c.name


@pytest.mark.parametrize("dialect", ["postgresql", "mssql"])
def test_the_metrics_a_file_emits_are_declared(dialect: str) -> None:
    literal = re.compile(r"(?:^\s*|VALUES\s*)\(\s*'([a-z][a-z0-9_]*)'\s*,|THEN '([a-z][a-z0-9_]*_total)'|ELSE '([a-z][a-z0-9_]*_total)' END AS metric"
                         r"|'([a-z][a-z0-9_]*)' AS metric", re.M)
    for c in registry.COLLECTORS:
        text = sqlfiles.load(dialect, c.name).text
        body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
        emitted = {g for m in literal.finditer(body) for g in m.groups() if g}
        assert emitted, c.name
        assert emitted <= set(c.metrics), f"{dialect}/{c.name}.sql emits undeclared {sorted(emitted - set(c.metrics))}"


def test_the_design_metrics_are_all_collected() -> None:
    declared = {m for c in registry.COLLECTORS for m in c.metrics}
    assert {"depth", "rows_total", "oldest_age_s", "ghost_records", "version_ghost_records", "fragmentation_pct",
            "page_count", "page_density_pct", "stuck_leases", "oldest_lease_age_s", "lock_timeouts_total",
            "lock_waiters", "watermark_drift", "stranded_count", "oldest_snapshot_age_s", "head_blockers"} <= declared


def test_cadence_and_lookup() -> None:
    assert {c.name for c in registry.by_cadence("slow")} == {"ghost_records", "fragmentation_pct"}
    assert registry.by_name("depth").cadence == "fast"
    with pytest.raises(KeyError, match="known"):
        registry.by_name("nope")


def test_docs_describe_every_metric() -> None:
    doc = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    for c in registry.COLLECTORS:
        assert f"`{c.name}`" in doc, c.name
        for m in c.metrics:
            assert f"`{m}`" in doc, f"docs/metrics.md does not describe {m}"
