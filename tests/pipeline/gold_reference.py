"""A fixed lake and the digest of the gold tables the pipeline made of it, to prove a rework of the
job changes no output.

The lake mixes every rule's crafted input (``test_findings``), the incremental story's hours
(``conftest.hour_rows``, on their own target) and five hours of noisy samples across midnight:
3 queues x 10 metrics every 60 s, a counter with restarts and gaps, null values, a ``stats_reset``
epoch change and a SQL Server instant ``cntr_type``. :func:`digest` reduces each gold table to
row counts and one hash per column (doubles to 9 significant digits, through 12), except :data:`TOLERANT`
columns, kept as values and compared within :data:`REL_TOL`. ``data/gold_reference.json`` holds
the digest of the pipeline as it was before its performance rework (issue 17). Regenerate it only
for an intended change of output:

    .venv/bin/python -m tests.pipeline.gold_reference write
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parent / "data" / "gold_reference.json"
TABLES = ("rollups", "findings", "forecasts", "fleet")
# The slope and the evidence (its per-minute rates) are compared as values, within REL_TOL: the job
# before the rework computed the slope against seconds since 1970, which cancelled about eight of its
# digits (up to 1.4e-8 relative on this lake), so those digits moved with how Spark merged partial
# aggregates. The rework computes it against the window's start, exact to ~1e-15.
TOLERANT = {"rollups": ("slope_per_s",), "findings": ("evidence",)}
REL_TOL = 1e-6
# ... or within this absolutely: a flat series' slope is zero up to rounding (regr_slope gave
# -7.9e-18 for one hour of this lake, the hour merged from its 5-minute sums gives 0.0).
ABS_TOL = 1e-12
METRICS = ["depth", "oldest_age_s", "stuck_leases", "ghost_records", "fragmentation_pct", "page_count",
           "watermark_drift", "lock_waiters", "rows_total", "row_lock_waits_total"]


def _noisy_rows() -> list:
    import numpy as np

    from tests.pipeline.lakes import T0, row

    rng = np.random.default_rng(17)
    start = T0 - timedelta(hours=2)
    rows: list = []
    counters = {q: 0.0 for q in range(3)}
    for step in range(5 * 60):
        ts = start + timedelta(seconds=60 * step)
        if step == 150:  # the statistics were reset: counters restart even where the total did not drop
            rows.append(row(ts, "", "stats_reset", 1000.0 + step, target="tn"))
        elif step % 10 == 0:
            rows.append(row(ts, "", "stats_reset", 1000.0, target="tn"))
        for q in range(3):
            if 200 <= step < 215 and q == 1:  # a gap longer than max_gap_s
                continue
            for name in METRICS:
                if name == "row_lock_waits_total":
                    counters[q] += float(rng.poisson(3))
                    if rng.random() < 0.01:
                        counters[q] = float(rng.integers(0, 5))
                    value: float | None = counters[q]
                elif name == "stuck_leases":
                    value = float(rng.random() < 0.3)
                elif name == "watermark_drift":
                    value = float(rng.integers(-2, 6))
                else:
                    value = round(float(rng.gamma(2.0, 50.0)), 3)
                if rng.random() < 0.02:
                    value = None
                rows.append(row(ts, f"n{q}", name, value, target="tn"))
        note = '{"cntr_type": 65792}'
        rows.append(row(ts, "", "lock_waits_total", float(step % 7), target="tn", note=note))
    return rows


def build_lake(lake: Path) -> None:
    """Write the reference lake (deterministic)."""
    from tests.pipeline.conftest import hour_rows
    from tests.pipeline.lakes import write_lake
    from tests.pipeline.test_findings import _rows

    story = [(r[0], "ts9", *r[2:]) for h in range(4) for r in hour_rows(h)]
    write_lake(lake, [*_rows(), *story, *_noisy_rows()])


def _rounded(v: Any) -> Any:
    """Numbers inside a finding's JSON evidence, rounded like the columns."""
    if isinstance(v, float):
        return float(f"{v:.9g}")
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    return v


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "null"
    if isinstance(v, float):
        # Through 12 digits first: a value on a decimal tie at the 9th digit (93.49211875, a mean over
        # 160 samples) would otherwise print differently when a sum's last bit moves with the order
        # it was added in (93.49211874999999), which is no change of output.
        return f"{float(f'{v:.12g}'):.9g}"
    if isinstance(v, str) and v.startswith("{"):
        try:
            return json.dumps(_rounded(json.loads(v)), sort_keys=True)
        except ValueError:
            return v
    if isinstance(v, (list, tuple)) or type(v).__name__ == "ndarray":
        return "[" + ",".join(_cell(x) for x in v) + "]"
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


def digest(out: Path) -> dict[str, Any]:
    """Each gold table: row count and a hash per column over the rows in a canonical order; the
    :data:`TOLERANT` columns as values, to compare within :data:`REL_TOL`."""
    from queueops import judge
    from queueops.report.data import _read

    result: dict[str, Any] = {}
    for name in TABLES:
        df = _read(out, name, None)
        cells = {c: [_cell(v) for v in df[c].tolist()] for c in sorted(df.columns)}
        if name == "findings":
            # The advice is the judge's prose, which may be reworded: pinned is that each finding
            # carries its rule's advice for its queue, not the words (tests/pipeline/test_judge_parity.py).
            cells["action"] = ["(the judge's advice)" if a == judge.advice(r, q) else a
                               for a, r, q in zip(cells["action"], cells["rule"], cells["queue"], strict=True)]
        loose = TOLERANT.get(name, ())
        key = [c for c in sorted(cells) if c not in loose]
        order = sorted(range(len(df)), key=lambda i: [cells[c][i] for c in key])
        result[name] = {"rows": len(df), "columns": {
            c: hashlib.sha256("\n".join(vals[i] for i in order).encode()).hexdigest()[:16]
            for c, vals in cells.items() if c not in loose}}
        result[name]["values"] = {c: [_loose(df[c].iloc[i]) for i in order] for c in loose}
    return result


def _loose(v: Any) -> Any:
    if isinstance(v, str) and v.startswith("{"):
        return json.loads(v)
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(f"{v:.12g}")


def close(a: Any, b: Any) -> bool:
    """Equal, numbers within :data:`REL_TOL` or :data:`ABS_TOL` (recursively through evidence objects)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, (int, float)) or isinstance(b, float) and isinstance(a, (int, float)):
        return abs(a - b) <= REL_TOL * max(abs(a), abs(b)) + ABS_TOL
    return a == b


def compute(spark: Any, base: Path) -> dict[str, Any]:
    """Build the lake under ``base``, run the pipeline (full), return the gold tables' digest."""
    from pipeline.params import Params
    from pipeline.run import run

    lake, out = base / "lake", base / "gold"
    build_lake(lake)
    # The reference was recorded when stuck leases needed 3 consecutive samples; issue 15 made the
    # rule one sample everywhere (queueops.judge.STUCK_SAMPLES). Pinned so the reference still
    # checks the rework's arithmetic, not that decision.
    run(spark, str(lake), str(out), full=True, params=Params(stuck_cycles=3))
    return digest(out)


if __name__ == "__main__" and sys.argv[1:] == ["write"]:
    import tempfile

    from pipeline.spark import get_session

    session = get_session("local[2]", app_name="queueops-gold-reference", shuffle_partitions=2)
    with tempfile.TemporaryDirectory() as tmp:
        REFERENCE.parent.mkdir(exist_ok=True)
        REFERENCE.write_text(json.dumps(compute(session, Path(tmp)), indent=1, sort_keys=True) + "\n")
    session.stop()
    print(f"wrote {REFERENCE}")
