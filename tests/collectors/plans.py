"""EXPLAIN (ANALYZE, FORMAT JSON) of a collector's real statement, and the scans in the plan."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from collectors import registry, runner
from queueops import config as config_mod
from queueops import engine, sessions


def explain(cfg: config_mod.Config, collector: str, target: str | None = None) -> dict[str, Any]:
    """Run the collector's statement under EXPLAIN ANALYZE in a collector session; the root plan."""
    return explain_all(cfg, collector, target)["Plan"]


def explain_all(cfg: config_mod.Config, collector: str, target: str | None = None,
                jit_above_cost: float | None = None) -> dict[str, Any]:
    """The whole EXPLAIN (ANALYZE, FORMAT JSON) result: the plan, and its JIT entry if any (with
    ``jit_above_cost``, set in the collectors' own session after its setup)."""
    t = cfg.target(target) if target else cfg.targets[0]
    stmt = runner.build_statement(registry.by_name(collector), t, cfg.queues_of(t.name))
    assert stmt is not None
    conn = engine.connect(t, "collect", cfg.base_dir)
    try:
        conn.execute(sessions.reading(t))
        cur = conn.raw.cursor()
        if jit_above_cost is not None:
            cur.execute("SELECT set_config('jit_above_cost', %s, false)", (str(jit_above_cost),))
        cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + stmt.sql, stmt.params)
        return cur.fetchone()[0][0]
    finally:
        conn.close()


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def scans_of(plan: dict[str, Any], tables: set[str]) -> list[dict[str, Any]]:
    """Every plan node that reads one of ``tables`` (heap or index)."""
    out = []
    for n in nodes(plan):
        if n.get("Relation Name") in tables:
            out.append(n)
    return out


def rows_read(node: dict[str, Any]) -> float:
    """Rows a scan node produced or filtered away, over all its loops."""
    return (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)) * node.get("Actual Loops", 0)
