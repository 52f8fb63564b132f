"""Each finding rule fires on its crafted input and stays quiet on a healthy near-miss."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from pipeline import findings as fnd
from pipeline import rollups as ru
from pipeline.params import Params
from pipeline.thresholds import Thresholds
from tests.pipeline.lakes import T0, row, series, utc, write_lake

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]  # Spark on a busy 2-core machine

S = timedelta(seconds=1)
HOLDER = json.dumps({"kind": "backend", "pid": 4242, "state": "idle in transaction", "query": "SELECT 1"})


def _rows() -> list:
    r: list = []
    five = 300
    # ghosts rising on t1 while t1 holds a 15-minute-old snapshot; on t2 they rise with no old snapshot.
    r += series(T0, five, [1000.0 + 400 * i for i in range(12)], "q_ghost", "ghost_records")
    r += series(T0, five, [300.0 + 60 * i for i in range(12)], "", "oldest_snapshot_age_s", note=HOLDER)
    r += series(T0, five, [1000.0 + 400 * i for i in range(12)], "q_ghost2", "ghost_records", target="t2")
    r += series(T0, five, [5.0] * 12, "", "oldest_snapshot_age_s", target="t2")
    # stuck leases: four samples > 0 in a row, and runs of two (the judge's rule is one sample,
    # queueops.judge.STUCK_SAMPLES: both are stuck; with stuck_cycles = 3 only the first would be).
    r += series(T0, 15, [0, 0, 2, 2, 2, 2, 0], "q_stuck", "stuck_leases")
    r += series(T0, 15, [95.0] * 7, "q_stuck", "oldest_lease_age_s")
    r += series(T0, 15, [0, 1, 1, 0, 1, 1, 0], "q_stuck_ok", "stuck_leases")
    # watermark: negative drift with stranded items versus a small positive drift.
    r += series(T0 + 600 * S, 15, [3, -5, -5, -5], "q_strand", "watermark_drift")
    r += series(T0 + 600 * S, 15, [0, 5, 5, 5], "q_strand", "stranded_count")
    r += series(T0, 15, [3, 4, 3], "q_wm_ok", "watermark_drift")
    # fragmentation: above crit on a big index; above on a small one; low on a big one.
    r += [row(T0 + 900 * S, "q_frag", "fragmentation_pct", 75.0, note='{"index": "pk_q"}'),
          row(T0 + 900 * S, "q_frag", "page_count", 5000.0)]
    r += [row(T0 + 900 * S, "q_frag_small", "fragmentation_pct", 90.0), row(T0 + 900 * S, "q_frag_small", "page_count", 200.0)]
    r += [row(T0 + 900 * S, "q_frag_low", "fragmentation_pct", 10.0), row(T0 + 900 * S, "q_frag_low", "page_count", 5000.0)]
    # lock timeouts (server counters): 20 in five minutes on t1, 1 in five minutes on t2.
    r += series(T0 + 1200 * S, 60, [100, 104, 108, 112, 116, 120], "", "lock_timeouts_total")
    r += series(T0 + 1200 * S, 60, [7, 7, 7, 8, 8, 8], "", "lock_timeouts_total", target="t2")
    # PostgreSQL lock waiters: on three samples versus on one.
    r += series(T0, 15, [2, 3, 3, 0], "q_lockwait", "lock_waiters")
    r += series(T0, 15, [0, 1, 0, 0], "q_lock_ok", "lock_waiters")
    # A table lock held on three samples while the short-timeout waiters were never caught waiting,
    # versus a holder seen on one sample only.
    r += series(T0, 15, [0, 1, 1, 1, 0], "q_held", "lock_blockers")
    r += series(T0, 15, [0, 0, 0, 0, 0], "q_held", "lock_waiters")
    r += series(T0, 15, [0, 1, 0, 0, 0], "q_held_ok", "lock_blockers")
    # consumers stalled: the oldest item ages 1 s/s while depth stays 50 (crit: > 1800 s at the end).
    r += series(T0, 300, [100.0 + 300 * i for i in range(12)], "q_stall", "oldest_age_s")
    r += series(T0, 300, [50.0, 51, 50, 50, 49, 50, 50, 51, 50, 50, 50, 50], "q_stall", "depth")
    # ... versus ageing while depth grows (a backlog, not a stall), and a steady flow.
    r += series(T0, 300, [100.0 + 300 * i for i in range(12)], "q_busy", "oldest_age_s")
    r += series(T0, 300, [10.0 * (i + 1) for i in range(12)], "q_busy", "depth")
    r += series(T0, 300, [5.0, 6, 5, 4, 5, 6, 5, 5, 4, 5, 6, 5], "q_flow", "oldest_age_s")
    r += series(T0, 300, [20.0] * 12, "q_flow", "depth")
    return r


@pytest.fixture(scope="module")
def found(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], dict]:
    lake: Path = tmp_path_factory.mktemp("findings") / "lake"
    write_lake(lake, _rows())
    files = [str(p) for p in sorted(lake.rglob("*.parquet"))]
    p = Params()
    rolled = ru.rollups_and_signals(ru.prepare(ru.read_lake(spark, files)), p).cache()
    rows = fnd.all_findings(rolled, Thresholds(), p).collect()
    rolled.unpersist()
    out = {}
    for r in rows:
        key = (r["rule"], r["target"], r["queue"])
        assert key not in out, f"one finding per rule, queue and hour: {key}"
        out[key] = {k: utc(v) if k.endswith(("_ts", "_start")) else v for k, v in r.asDict().items()}
    return out


def _queues(found: dict, rule: str) -> set[tuple[str, str]]:
    return {(t, q) for (r, t, q) in found if r == rule}


def test_ghosts_held_by_snapshot(found: dict) -> None:
    assert _queues(found, "ghosts_held_by_snapshot") == {("t1", "q_ghost")}
    f = found[("ghosts_held_by_snapshot", "t1", "q_ghost")]
    ev = json.loads(f["evidence"])
    assert ev["first"] == 1000 and ev["last"] == 5400 and ev["snapshot_age_s"] == 960
    assert json.loads(ev["holder"])["pid"] == 4242
    assert f["severity"] == "crit"  # snapshot older than snapshot_age_crit_s (600 s)
    assert f["metric"] == "ghost_records" and "snapshot" in f["action"]


def test_stuck_leases(found: dict) -> None:
    assert _queues(found, "stuck_leases") == {("t1", "q_stuck"), ("t1", "q_stuck_ok")}
    short = found[("stuck_leases", "t1", "q_stuck_ok")]
    assert json.loads(short["evidence"])["samples_held"] == 4 and short["value"] == 1.0
    f = found[("stuck_leases", "t1", "q_stuck")]
    # samples at 30, 45, 60, 75 s are > 0; one sample is the judge's rule, so each of them holds.
    assert f["first_ts"] == (T0 + 30 * S) and f["last_ts"] == (T0 + 75 * S)
    assert json.loads(f["evidence"])["samples_held"] == 4
    assert f["value"] == 2.0 and f["severity"] == "crit"
    assert "queueops act requeue --queue q_stuck" in f["action"]


def test_stranded_items(found: dict) -> None:
    assert _queues(found, "stranded_items") == {("t1", "q_strand")}
    f = found[("stranded_items", "t1", "q_strand")]
    assert f["value"] == -5.0 and f["severity"] == "crit"
    assert f["first_ts"] == T0 + 615 * S and f["last_ts"] == T0 + 645 * S
    assert json.loads(f["evidence"])["max_stranded"] == 5
    assert "watermark-reset --queue q_strand" in f["action"]


def test_fragmentation(found: dict) -> None:
    assert _queues(found, "fragmentation") == {("t1", "q_frag")}
    f = found[("fragmentation", "t1", "q_frag")]
    ev = json.loads(f["evidence"])
    assert (f["value"], ev["page_count"], f["threshold"], f["severity"]) == (75.0, 5000, 30.0, "crit")
    assert json.loads(ev["note"])["index"] == "pk_q"


def test_lock_timeout_burst(found: dict) -> None:
    assert _queues(found, "lock_timeout_burst") == {("t1", "")}
    f = found[("lock_timeout_burst", "t1", "")]
    ev = json.loads(f["evidence"])
    # the 00:20-00:25 window holds the deltas of 00:21..00:24 (16); 00:25 closes the next window.
    assert ev["peak_5m"] == 16 and ev["hour_total"] == 20 and f["severity"] == "warn"


def test_lock_waits(found: dict) -> None:
    assert _queues(found, "lock_waits") == {("t1", "q_lockwait"), ("t1", "q_held")}
    f = found[("lock_waits", "t1", "q_lockwait")]
    assert (f["value"], json.loads(f["evidence"])["samples"], f["severity"]) == (3.0, 3, "warn")
    held = found[("lock_waits", "t1", "q_held")]
    ev = json.loads(held["evidence"])
    assert (held["value"], ev["holder_samples"], ev["blocking_holders"], held["severity"]) == (0.0, 3, 1.0, "warn")


def test_consumers_stalled(found: dict) -> None:
    assert _queues(found, "consumers_stalled") == {("t1", "q_stall")}
    f = found[("consumers_stalled", "t1", "q_stall")]
    ev = json.loads(f["evidence"])
    assert ev["age_per_s"] == pytest.approx(1.0) and ev["depth_min"] == 49 and ev["depth_max"] == 51
    assert f["severity"] == "crit"  # 3400 s > the default critical 1800 s


def test_every_finding_is_complete(found: dict) -> None:
    assert set(fnd.RULES) == {r for (r, _, _) in found}
    for f in found.values():
        assert f["hour_start"] == T0 and (f["date"], f["hour"]) == ("2026-11-20", "00")
        assert f["severity"] in ("warn", "crit") and f["summary"] and f["action"]
        assert f["first_ts"] <= f["last_ts"]
        json.loads(f["evidence"])


def test_per_queue_threshold_override(spark: Any) -> None:
    """A queue's own fragmentation threshold (from config) replaces the default."""
    prof = spark.createDataFrame(
        [("t1", "db", "q_frag", 75.0, 5000.0), ("t1", "db", "other", 75.0, 5000.0)],
        "target string, database string, queue string, fragmentation_pct__max double, page_count__max double")
    th = Thresholds(overrides={("t1", "q_frag", "fragmentation_pct"): (80.0, 95.0, "above")})
    got = th.attach_wide(prof, ["fragmentation_pct"]).collect()
    levels = {r["queue"]: (r["fragmentation_pct_warn"], r["fragmentation_pct_crit"]) for r in got}
    assert levels == {"q_frag": (80.0, 95.0), "other": (30.0, 60.0)}


def test_the_profile_carries_each_queues_old_snapshot_levels_resolved_by_the_judge(spark: Any) -> None:
    """The findings compare the snapshot's age with levels judge.snapshot_levels resolved per queue:
    its own (crit 50 alone warns from the pipeline's default only up to 50), else the pipeline's."""
    from queueops import config as config_mod
    from queueops import judge

    prof = spark.createDataFrame([("t1", "own"), ("t1", "other"), ("t2", "own")], "target string, queue string")
    th = Thresholds(overrides={("t1", "own", judge.OLD_SNAPSHOT): (None, 50.0, "above")})
    got = th.attach_snapshot_levels(prof, (90.0, 900.0)).collect()
    levels = {(r["target"], r["queue"]): (r["snapshot_warn_s"], r["snapshot_crit_s"]) for r in got}
    assert levels == {("t1", "own"): (50.0, 50.0), ("t1", "other"): (90.0, 900.0), ("t2", "own"): (90.0, 900.0)}
    assert levels[("t1", "own")] == judge.snapshot_levels(config_mod.Threshold(crit=50), (90.0, 900.0))
