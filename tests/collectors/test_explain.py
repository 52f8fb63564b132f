"""The fast collectors never scan a large queue table: EXPLAIN ANALYZE of their real statements.

Each lab queue table holds 100,000 rows (the ready, processing and leased shares of a busy
queue). A fast collector's statement for all five queues is run under EXPLAIN (ANALYZE) in a
collector session, and every executed node that reads a queue table (heap or index) must

* not be a sequential scan, and
* read (return or filter away) at most 1.5 x the count cap per loop: an ordered index read
  that stops at the cap, or a seek; a full read of the table would be 100,000.

The ring's slot table is exempt from the first rule: it has exactly ``capacity`` rows by design.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from collectors import registry, runner
from collectors.runner import COUNT_CAP
from queueops import config as config_mod
from tests.collectors.conftest import short_config
from tests.collectors.labdata import seed
from tests.collectors.plans import explain, explain_all, nodes, rows_read

ROWS = 100_000
QUEUE_TABLES = {"q_delete", "q_status_meta", "q_lease", "q_due"}
BOUNDED = {"q_ring_slot"}  # capacity rows, read whole on purpose (slots_in_use)
FAST_QUEUE_COLLECTORS = [c.name for c in registry.COLLECTORS if c.cadence == "fast" and c.scope == "queue"]
LIMIT = 1.5 * COUNT_CAP


@pytest.fixture(scope="module")
def big_lab(lab) -> Iterator[tuple[config_mod.Config, dict[str, str]]]:  # noqa: ANN001
    lab.reset()
    with lab.connect() as conn:
        seed(conn, ROWS)
        index_table = dict(conn.execute("SELECT indexname, tablename FROM pg_indexes WHERE schemaname = 'lab'").fetchall())
    try:
        yield config_mod.load(short_config(lab.config_path, lease_timeout_s=5)), index_table
    finally:
        lab.reset()


def violations(plan: dict[str, Any], index_table: dict[str, str]) -> list[str]:
    out = []
    for n in nodes(plan):
        table = n.get("Relation Name") or index_table.get(n.get("Index Name", ""))
        if table not in QUEUE_TABLES or not n.get("Actual Loops"):
            continue
        if n["Node Type"] == "Seq Scan":
            out.append(f"Seq Scan on {table} read {rows_read(n):.0f} rows")
        per_loop = rows_read(n) / n["Actual Loops"]
        if per_loop > LIMIT:
            out.append(f"{n['Node Type']} on {table} ({n.get('Index Name', '')}) read {per_loop:.0f} rows per loop")
    return out


@pytest.mark.parametrize("collector", FAST_QUEUE_COLLECTORS)
def test_fast_collectors_read_only_a_bounded_part_of_a_big_queue(big_lab, collector: str) -> None:  # noqa: ANN001
    cfg, index_table = big_lab
    plan = explain(cfg, collector)
    assert not violations(plan, index_table), violations(plan, index_table)


def test_no_collector_statement_is_compiled_by_jit(big_lab, lab) -> None:  # noqa: ANN001
    """The server's default (jit = on) compiles a statement whose estimated cost is above
    jit_above_cost. Depth's was (1,056,984 with six pg_stats reads per partition; the planner's
    default row counts for catalogue functions such as pg_partition_tree and unnest): LLVM compiled
    it every cycle, 0.3 s of a 0.4 s statement here, 4.4 s once it read a partitioned table's
    partitions. Its one read of pg_stats per source costs 3,299 now, but a cost is the planner's
    guess: the collectors' session turns JIT off. Checked with every statement past the cost."""
    cfg, _ = big_lab
    t = cfg.targets[0]
    depth = runner.build_statement(registry.by_name("depth"), t, cfg.queues_of(t.name))
    assert depth is not None
    with lab.connect() as conn:  # a session with the server's settings compiles it
        assert conn.execute("SHOW jit").fetchone()[0] == "on"
        conn.execute("SET jit_above_cost = 0")
        assert "JIT" in conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + depth.sql, depth.params).fetchone()[0][0]
    for collector in FAST_QUEUE_COLLECTORS:
        assert "JIT" not in explain_all(cfg, collector, jit_above_cost=0), collector


def test_the_check_catches_a_full_scan(big_lab, lab) -> None:  # noqa: ANN001
    # The naive exact counts a monitoring script would run: the check above must reject them.
    _, index_table = big_lab
    with lab.connect() as conn:
        for naive in ("SELECT count(*) FROM lab.q_delete", "SELECT count(*) FROM lab.q_status_meta WHERE status = 2"):
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + naive).fetchone()[0][0]["Plan"]
            assert violations(plan, index_table), naive


def test_the_seek_collectors_touch_a_handful_of_rows(big_lab) -> None:  # noqa: ANN001
    cfg, index_table = big_lab
    for collector in ("oldest_age_s", "watermark_drift"):
        plan = explain(cfg, collector)
        touched = [rows_read(n) for n in nodes(plan)
                   if (n.get("Relation Name") or index_table.get(n.get("Index Name", ""))) in QUEUE_TABLES]
        assert touched and max(touched) <= 2, (collector, touched)


def test_values_on_the_big_lab_are_estimates_that_say_so(big_lab) -> None:  # noqa: ANN001
    from tests.collectors.conftest import collect

    cfg, _ = big_lab
    c = collect(cfg, "depth", "stuck_leases")
    # 100,000 rows is far above the cap (ten times it): the live-row counter answers, not a count.
    assert c.row("delete", "depth").note == "estimate (pg_stat_user_tables.n_live_tup; not counted: far above the cap)"
    assert abs(c.value("delete", "depth") - ROWS) < 0.05 * ROWS
    assert c.row("status", "count_done").note == "estimate (pg_stats MCV)"
    assert abs(c.value("status", "count_done") - 0.88 * ROWS) < 0.05 * ROWS
    assert c.row("lease", "depth").note == "estimate (pg_stats null_frac)"
    assert abs(c.value("lease", "depth") - 0.9 * ROWS) < 0.05 * ROWS
    assert c.row("due", "depth").note == "estimate (pg_stats histogram)"
    assert abs(c.value("due", "depth") - 0.5 * ROWS) < 0.05 * ROWS
    # ANALYZE reads a 30,000-row sample: a 1 % value's estimate has a standard error of about
    # sqrt(0.01 * 0.99 / 30000) * ROWS = 57 rows here, so the bound is four of those, not 5 %.
    assert abs(c.value("status", "count_processing") - ROWS / 100) < 0.25 * ROWS / 100
