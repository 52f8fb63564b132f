"""Tunable parameters of the Spark pipeline's rollups, rules, forecasts and fleet view.

They live in the core (pure Python, no Spark) because the config validates ``[pipeline.params]``
against them and the core must not import the pipeline; :mod:`pipeline.params` re-exports them.

Per-queue warn / critical levels come from the queueops config's thresholds
(:mod:`pipeline.thresholds`); these are the rule mechanics around them. ``[pipeline.params]`` in
the config overrides any of them by name (``queueops config check`` rejects unknown names).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from queueops import judge


@dataclass(frozen=True)
class Params:
    # Rollups. A counter interval longer than this is a gap: its increase is not attributed.
    # Must stay <= 3600 s: an incremental run reads one hour before the hours it recomputes.
    max_gap_s: float = 600.0
    # Quantiles kept per hourly rollup (exact percentiles at this step) to derive the day's p95.
    sketch_step_pct: float = 1.0

    # Findings.
    # The judge's rules (queueops/judge.py), shared with the console and the alerts.
    stuck_cycles: int = judge.STUCK_SAMPLES          # stuck leases on this many consecutive samples
    snapshot_age_s: float = judge.SNAPSHOT_WARN_S    # an "old" snapshot / xmin holder
    snapshot_age_crit_s: float = judge.SNAPSHOT_CRIT_S
    ghost_min_rise: float = 100.0          # ghosts / dead tuples must rise at least this much in the hour
    lock_timeout_burst: float = 5.0        # lock timeouts in one 5-minute window
    lock_timeout_rate_crit: float = 1.0    # per second (SQLWATCH: critical above 1/s)
    lock_wait_cycles: int = 2              # samples with waiters >= the warn threshold
    stall_min_age_rise_s: float = 60.0     # oldest age must grow this much within the hour
    stall_min_slope: float = 0.5           # ... at this many seconds per second (1.0 = nobody consumes)
    flat_depth_rel: float = 0.1            # depth "flat": max - min <= rel * mean ...
    flat_depth_abs: float = 2.0            # ... or <= this many items

    # Forecasts.
    forecast_hours: float = 6.0            # trend window
    forecast_min_points: int = 6           # 5-minute means needed
    forecast_min_r2: float = 0.6
    forecast_horizon_factor: float = 4.0   # no projection further than this many windows ahead

    # Fleet view.
    fleet_hours: float = 24.0
    top_n: int = 10

    def __post_init__(self) -> None:
        if not 0 < self.max_gap_s <= 3600:
            raise ValueError("max_gap_s must be in (0, 3600]: incremental runs read one hour of margin")
        if self.stuck_cycles < 1 or self.lock_wait_cycles < 1:
            raise ValueError("cycle counts must be >= 1")
        if not 0 < self.sketch_step_pct <= 50:
            raise ValueError("sketch_step_pct must be in (0, 50]")

    @classmethod
    def names(cls) -> set[str]:
        return {f.name for f in fields(cls)}

    def with_overrides(self, overrides: dict[str, Any] | None) -> Params:
        if not overrides:
            return self
        unknown = set(overrides) - self.names()
        if unknown:
            raise ValueError(f"unknown pipeline parameter(s): {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(sorted(self.names()))})")
        cast = {f.name: f.type for f in fields(self)}
        return replace(self, **{k: int(v) if cast[k] in ("int", int) else float(v) for k, v in overrides.items()})
