"""Parity: the same series judged by the Python judge (console, alerts) and the Spark findings.

Each case is a small series per queue written to a lake; the pipeline's findings over it and the
console's verdict on the same samples (queue health and recommendations, which call
``queueops.judge``) must name the same problems with the same severity -- and the same absences.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from console.findings import RootCause, recommend
from console.health import queue_health
from pipeline.run import run
from pipeline.thresholds import Thresholds
from queueops import config as config_mod
from queueops import judge
from tests.pipeline.conftest import table
from tests.pipeline.lakes import T0, row, series, write_lake

S = timedelta(seconds=1)
LIVE = {"depth": 3.0, "oldest_age_s": 1.0}
HOLDER = '{"pid": 4242, "state": "idle in transaction"}'


def _queue(name: str, target: str = "t1") -> config_mod.Queue:
    return config_mod.Queue(name=name, target=target, kind="lease", table="tbl", key="id",
                            lease_column="leased_at")


def _rows() -> list:
    r: list = []
    r += series(T0, 15, [0, 0, 2, 0, 0], "q_stuck", "stuck_leases")            # stuck on one sample
    r += series(T0, 15, [0, 0, 0, 0, 0], "q_stuck_never", "stuck_leases")
    r += [row(T0 + 900 * S, "q_frag_big", "fragmentation_pct", 75.0),
          row(T0 + 900 * S, "q_frag_big", "page_count", 5000.0)]
    r += [row(T0 + 900 * S, "q_frag_12", "fragmentation_pct", 70.0),            # the 12-page index
          row(T0 + 900 * S, "q_frag_12", "page_count", 12.0)]
    r += [row(T0 + 900 * S, "q_frag_230", "fragmentation_pct", 72.9),           # a big index, 230 rows
          row(T0 + 900 * S, "q_frag_230", "page_count", 5000.0),
          row(T0 + 900 * S, "q_frag_230", "rows_total", 230.0)]
    r += [row(T0 + 900 * S, "q_frag_nopages", "fragmentation_pct", 75.0)]      # guards not sampled
    # ghosts rise while a snapshot just past the old-snapshot level is open (t1), or a younger one (t2)
    old, young = judge.SNAPSHOT_WARN_S + 30, judge.SNAPSHOT_WARN_S - 15
    r += series(T0, 300, [1000.0 + 400 * i for i in range(6)], "q_ghost", "ghost_records")
    r += series(T0, 300, [old] * 6, "", "oldest_snapshot_age_s", note=HOLDER)
    r += series(T0, 300, [1000.0 + 400 * i for i in range(6)], "q_ghost", "ghost_records", target="t2")
    r += series(T0, 300, [young] * 6, "", "oldest_snapshot_age_s", note=HOLDER, target="t2")
    # t3's queue has its own old-snapshot levels (20 s / 50 s): 75 s is critical there, a warning by default
    r += series(T0, 300, [1000.0 + 400 * i for i in range(6)], "q_ghost", "ghost_records", target="t3")
    r += series(T0, 300, [75.0] * 6, "", "oldest_snapshot_age_s", note=HOLDER, target="t3")
    return r


OWN_LEVELS = config_mod.Threshold(warn=20, crit=50)


def _own_queue() -> config_mod.Queue:
    return _queue("q_ghost", "t3").model_copy(update={"thresholds": {"oldest_snapshot_age_s": OWN_LEVELS}})


@pytest.fixture(scope="module")
def pipeline_findings(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    base = tmp_path_factory.mktemp("parity")
    write_lake(base / "lake", _rows())
    cfg = config_mod.parse({"targets": [{"name": "t3", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
                            "queues": [_own_queue().model_dump(by_alias=True, exclude_none=True)]})
    run(spark, str(base / "lake"), str(base / "gold"), full=True, thresholds=Thresholds.from_config(cfg))
    return table(base / "gold", "findings")


@pytest.fixture(scope="module")
def pipeline_verdicts(pipeline_findings: Any) -> dict[tuple[str, str, str], str]:
    return {(r.rule, r.target, r.queue): r.severity for r in pipeline_findings.itertuples()}


def test_the_console_and_the_pipeline_give_the_judges_advice(pipeline_findings: Any) -> None:
    assert len(pipeline_findings) >= 3
    for f in pipeline_findings.itertuples():
        assert f.action == judge.advice(f.rule, f.queue), f.rule
    recs = recommend(_queue("q_stuck"), "postgresql", {**LIVE, "stuck_leases": 2.0})
    assert [(r.rule, r.advice) for r in recs] == [("stuck_leases", judge.advice("stuck_leases", "q_stuck"))]


def _console(queue: config_mod.Queue, values: dict[str, float],
             causes: Sequence[RootCause] = ()) -> dict[str, str]:
    """The console's verdict per rule id: the queue's reasons and the recommendations' actions."""
    h = queue_health(queue, {**LIVE, **values})
    out = {f.metric: f.state for f in h.reasons}
    for rec in recommend(queue, "postgresql", {**LIVE, **values}, causes):
        if rec.rule == "ghosts_held_by_snapshot":
            out["ghosts_held_by_snapshot"] = rec.severity
    return out


def test_stuck_leases_same_samples_same_severity(pipeline_verdicts: dict) -> None:
    assert pipeline_verdicts.get(("stuck_leases", "t1", "q_stuck")) == "crit"
    assert _console(_queue("q_stuck"), {"stuck_leases": 2.0}).get("stuck_leases") == "crit"
    assert ("stuck_leases", "t1", "q_stuck_never") not in pipeline_verdicts
    assert "stuck_leases" not in _console(_queue("q_stuck_never"), {"stuck_leases": 0.0})


def test_fragmentation_same_floor(pipeline_verdicts: dict) -> None:
    assert pipeline_verdicts.get(("fragmentation", "t1", "q_frag_big")) == "crit"
    big = _console(_queue("q_frag_big"), {"fragmentation_pct": 75.0, "page_count": 5000.0})
    assert big.get("fragmentation_pct") == "crit"
    assert ("fragmentation", "t1", "q_frag_12") not in pipeline_verdicts
    small = {"fragmentation_pct": 70.0, "page_count": 12.0}
    assert "fragmentation_pct" not in _console(_queue("q_frag_12"), small)
    assert not any(r.action == "rebuild" for r in recommend(_queue("q_frag_12"), "postgresql", {**LIVE, **small}))


def test_fragmentation_same_row_guard_and_an_unsampled_guard_does_not_suppress(pipeline_verdicts: dict) -> None:
    few_rows = {"fragmentation_pct": 72.9, "page_count": 5000.0, "rows_total": 230.0}
    assert ("fragmentation", "t1", "q_frag_230") not in pipeline_verdicts
    assert "fragmentation_pct" not in _console(_queue("q_frag_230"), few_rows)
    assert pipeline_verdicts.get(("fragmentation", "t1", "q_frag_nopages")) == "crit"
    assert _console(_queue("q_frag_nopages"), {"fragmentation_pct": 75.0}).get("fragmentation_pct") == "crit"


def test_old_snapshot_same_level(pipeline_verdicts: dict) -> None:
    old = RootCause("snapshot", "oldest_snapshot_age_s", judge.SNAPSHOT_WARN_S + 30, {"pid": 4242})
    young = RootCause("snapshot", "oldest_snapshot_age_s", judge.SNAPSHOT_WARN_S - 15, {"pid": 4242})
    assert pipeline_verdicts.get(("ghosts_held_by_snapshot", "t1", "q_ghost")) == "warn"
    assert _console(_queue("q_ghost"), {"ghost_records": 3000.0}, [old]).get("ghosts_held_by_snapshot") == "warn"
    assert ("ghosts_held_by_snapshot", "t2", "q_ghost") not in pipeline_verdicts
    assert "ghosts_held_by_snapshot" not in _console(_queue("q_ghost", "t2"), {"ghost_records": 3000.0}, [young])


def test_a_counter_drop_counts_the_same_in_the_collectors_and_the_pipeline(spark: Any, tmp_path: Any) -> None:
    # 100 -> 130 -> 2 (a restart: counted from zero) -> 32, 15 s apart: an increase of 30 + 2 + 30.
    from collectors.counters import CounterRates
    from queueops.rows import SnapshotRow

    values = [100.0, 130.0, 2.0, 32.0]
    rates = CounterRates()
    increase = 0.0
    for i, v in enumerate(values):
        ts = T0 + 15 * i * S
        for r in rates.derive([SnapshotRow(ts, "t1", "db", "", "deadlocks_total", v, "")]):
            if r.value is not None:
                increase += r.value * 15
    write_lake(tmp_path / "lake", series(T0, 15, values, "", "deadlocks_total"))
    run(spark, str(tmp_path / "lake"), str(tmp_path / "gold"), full=True)
    roll = table(tmp_path / "gold", "rollups")
    five = roll[(roll["window"] == "5m") & (roll["metric"] == "deadlocks_total")].iloc[0]
    assert increase == pytest.approx(62.0)
    assert five["delta"] == pytest.approx(increase) and five["resets"] == 1


def test_a_queues_own_old_snapshot_levels_are_the_pipelines_too(pipeline_verdicts: dict) -> None:
    held = RootCause("snapshot", "oldest_snapshot_age_s", 75.0, {"pid": 4242})
    assert judge.snapshot_state(75.0, OWN_LEVELS) == "crit" and judge.snapshot_state(75.0) == "warn"
    assert pipeline_verdicts.get(("ghosts_held_by_snapshot", "t3", "q_ghost")) == "crit"
    assert _console(_own_queue(), {"ghost_records": 3000.0}, [held]).get("ghosts_held_by_snapshot") == "crit"
