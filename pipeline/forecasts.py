"""Forecasts: per queue and metric, a linear trend over the last window and when it crosses.

Input: the 5-minute rollups of the last ``forecast_hours`` before ``as_of``; each window is one
point (x = the middle of its first and last sample, y = its mean), fitted by least squares with
Spark's ``regr_*`` aggregates (no Python UDF: executors need nothing but Spark). A forecast is
given only when the data supports one; otherwise ``status`` says why and the crossing is null:

* ``insufficient_data``: fewer than ``forecast_min_points`` windows, or no threshold to cross;
* ``not_rising``: the slope is zero or negative;
* ``poor_fit``: R^2 below ``forecast_min_r2`` (a straight line does not describe the series);
* ``beyond_horizon``: the crossing is further ahead than ``forecast_horizon_factor`` windows;
* ``above``: already at or above the critical level;
* ``ok``: ``eta_crit`` (and ``eta_warn`` while below warn) are the projected crossing times.

The fit's quality (``r2``, ``points``, ``slope_per_h``) is reported in every case.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline import metrics as m
from pipeline.params import Params
from pipeline.rollups import sql_list
from pipeline.thresholds import Thresholds

FORECAST_COLUMNS = ["as_of", "target", "database", "queue", "metric", "window_start", "points", "slope_per_h",
                    "intercept", "r2", "last_value", "fitted_now", "warn", "crit", "eta_warn", "eta_crit",
                    "hours_to_crit", "status"]


def forecasts(rollups5m: DataFrame, th: Thresholds, p: Params, as_of: datetime) -> DataFrame:
    """One row per (target, queue, metric) of :data:`pipeline.metrics.FORECAST` seen in the window."""
    end_us = int(as_of.timestamp()) * 1_000_000
    start_us = end_us - int(p.forecast_hours * 3600) * 1_000_000
    # x: seconds before as_of of the middle of the window's samples (exact for even sampling).
    x = f"((unix_micros(first_ts) + unix_micros(last_ts)) / 2 - {end_us}L) / 1e6"
    pts = (rollups5m.where(f"window = '5m' AND metric IN ({sql_list(m.FORECAST)}) AND mean IS NOT NULL "
                           f"AND unix_micros(window_start) >= {start_us}L AND unix_micros(window_end) <= {end_us}L")
           .selectExpr("target", "database", "queue", "metric", "mean", "last", "last_ts", f"{x} AS x"))
    fit = (pts.groupBy("target", "database", "queue", "metric")
           .agg(*[F.expr(e) for e in ("count(mean) AS points", "regr_slope(mean, x) AS slope",
                                      "regr_intercept(mean, x) AS intercept", "regr_r2(mean, x) AS r2",
                                      "max_by(last, last_ts) AS last_value")]))
    fit = th.attach_long(fit)
    horizon = p.forecast_horizon_factor * p.forecast_hours * 3600
    cross = lambda level: f"CASE WHEN slope > 0 AND {level} IS NOT NULL THEN ({level} - intercept) / slope END"  # noqa: E731
    status = (f"CASE WHEN crit IS NULL OR points < {int(p.forecast_min_points)} THEN 'insufficient_data' "
              "WHEN last_value >= crit THEN 'above' "
              "WHEN slope IS NULL OR slope <= 0 THEN 'not_rising' "
              f"WHEN coalesce(r2, 0D) < {float(p.forecast_min_r2)!r}D THEN 'poor_fit' "
              f"WHEN {cross('crit')} > {float(horizon)!r}D THEN 'beyond_horizon' ELSE 'ok' END")
    ts = lambda secs: f"timestamp_micros(CAST(greatest({secs}, 0D) * 1e6 AS BIGINT) + {end_us}L)"  # noqa: E731
    return (fit.selectExpr("*", f"{status} AS status")
            .selectExpr(f"timestamp_micros({end_us}L) AS as_of", "target", "database", "queue", "metric",
                        f"timestamp_micros({start_us}L) AS window_start", "points", "slope * 3600 AS slope_per_h",
                        "intercept", "r2", "last_value", "intercept AS fitted_now", "warn", "crit",
                        f"CASE WHEN status = 'ok' AND warn IS NOT NULL AND last_value < warn "
                        f"THEN {ts(cross('warn'))} END AS eta_warn",
                        f"CASE WHEN status = 'ok' THEN {ts(cross('crit'))} END AS eta_crit",
                        f"CASE WHEN status = 'ok' THEN greatest({cross('crit')}, 0D) / 3600 END AS hours_to_crit",
                        "status")
            .select(*FORECAST_COLUMNS))
