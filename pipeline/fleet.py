"""Fleet view: the top-N queues by each problem across every target, over the last day.

Read from the gold hourly rollups and findings of the ``fleet_hours`` before ``as_of`` (never the
raw lake), so it costs the same whatever the lake's size. Only queues that actually have the
problem appear (a value above zero).
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline import metrics as m
from pipeline.params import Params
from pipeline.rollups import sql_list

FLEET_COLUMNS = ["as_of", "problem", "rank", "target", "queue", "value", "detail"]

# problem -> (metrics, aggregate, column of their hourly rows, what the value is)
PROBLEMS: dict[str, tuple[tuple[str, ...], str, str, str]] = {
    "depth": ((m.DEPTH,), "max", "max", "peak depth"),
    "oldest_age_s": ((m.OLDEST_AGE,), "max", "max", "peak age of the oldest item (s)"),
    "ghosts": (m.GHOSTS, "max", "max", "peak ghost records (PostgreSQL: dead tuples)"),
    "fragmentation_pct": ((m.FRAGMENTATION,), "max", "max", "peak fragmentation (%)"),
    "stuck_leases": ((m.STUCK_LEASES,), "max", "max", "peak stuck leases"),
    "stranded_items": ((m.WATERMARK_DRIFT,), "max", "-min", "most negative watermark drift, as positive"),
    "lock_timeouts": ((*m.LOCK_TIMEOUTS, *m.LOCK_TIMEOUT_EVENTS), "sum",
                      f"CASE WHEN metric IN ({sql_list(m.LOCK_TIMEOUT_EVENTS)}) THEN sum ELSE delta END",
                      "lock timeouts"),
    "lock_waiters": ((m.LOCK_WAITERS,), "max", "max", "peak sessions waiting on a lock"),
}


def fleet(hourly: DataFrame, found: DataFrame, p: Params, as_of: datetime) -> DataFrame:
    end_us = int(as_of.timestamp()) * 1_000_000
    start_us = end_us - int(p.fleet_hours * 3600) * 1_000_000
    span = f"unix_micros({{c}}) >= {start_us}L AND unix_micros({{c}}) < {end_us}L"
    names = sorted({n for names, *_ in PROBLEMS.values() for n in names})
    aggs = [F.expr(f"{fn}(CASE WHEN metric IN ({sql_list(metrics)}) THEN {column} END) AS `{problem}`")
            for problem, (metrics, fn, column, _d) in PROBLEMS.items()]
    per_queue = (hourly.where(f"window = '1h' AND metric IN ({sql_list(names)}) AND "
                              + span.format(c="window_start"))
                 .groupBy("target", "queue").agg(*aggs))
    stack = ", ".join(f"'{pb}', CAST(`{pb}` AS DOUBLE), '{d}'" for pb, (*_, d) in PROBLEMS.items())
    values = per_queue.selectExpr("target", "queue", f"stack({len(PROBLEMS)}, {stack}) AS (problem, value, detail)")
    f = (found.where(span.format(c="hour_start")).groupBy("target", "queue")
         .agg(F.expr("CAST(count(rule) AS DOUBLE) AS value"),
              F.expr("sum(CASE WHEN severity = 'crit' THEN 1 ELSE 0 END) AS crit"),
              F.expr("concat_ws(', ', array_sort(collect_set(rule))) AS rules"))
         .selectExpr("target", "queue", "'findings' AS problem", "value",
                     "format_string('%d critical; %s', crit, rules) AS detail"))
    return (values.unionByName(f).where("value > 0")
            .selectExpr("*", "row_number() OVER (PARTITION BY problem ORDER BY value DESC, target, queue) AS rank")
            .where(f"rank <= {int(p.top_n)}")
            .selectExpr(f"timestamp_micros({end_us}L) AS as_of", "problem", "rank", "target", "queue", "value",
                        "detail")
            .select(*FLEET_COLUMNS))
