"""Rollups of narrow snapshot rows: per target, queue, metric and window (5 min, hour, day).

Each window has ``samples`` (non-null values), ``min``, ``mean``, ``max``, ``p95`` (nearest
rank, exact), ``sum``, ``first`` / ``last`` (values at ``first_ts`` / ``last_ts``),
``slope_per_s`` (least-squares trend within the window) and, for root-cause and fragmentation
metrics, ``peak_note`` (the note of the peak value: the holding session, the index). Cumulative
counters also get ``delta`` (increase over the window), ``covered_s`` (seconds of intervals that
produced a delta), ``rate_per_s`` and ``resets``.

Counter semantics (SQL Server /sec counters are running totals):

* each sample closes an interval that started at the key's previous sample; the interval belongs
  to the window holding its end;
* a drop (``value < previous``) is a restart: the delta is the new value (counted from zero),
  never a negative rate, and ``resets`` counts it;
* an interval longer than ``max_gap_s`` is a gap: its increase is unknown and not attributed, so
  rates are over covered time only. Windows without samples have no row (nothing is invented).

5-minute windows are computed from raw rows, hours merged from their 5-minute rows (exact: the
same values as from the raw rows, sums up to the order of addition); the day is derived from the
hourly rows (exact for every column but ``p95``, which merges each hour's quantiles -- rank error
about ``sketch_step_pct`` % -- and ``slope_per_s``, left empty). That keeps an incremental run's
cost at the hours it recomputes, whatever the day's size.

Expressions are written as SQL text: one py4j call per column instead of a dozen keeps planning
cheap, which is most of the cost on small incremental runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType, TimestampType

from pipeline import metrics as m
from pipeline.params import Params

KEYS = m.KEYS
LAKE_SCHEMA = StructType([
    StructField("ts", TimestampType(), True),
    StructField("target", StringType(), True),
    StructField("database", StringType(), True),
    StructField("queue", StringType(), True),
    StructField("metric", StringType(), True),
    StructField("value", DoubleType(), True),
    StructField("note", StringType(), True),
])
ROLLUP_SCHEMA = (
    "window string, window_start timestamp, window_end timestamp, target string, database string, "
    "queue string, metric string, samples bigint, min double, mean double, max double, p95 double, "
    "sum double, first double, last double, first_ts timestamp, last_ts timestamp, slope_per_s double, "
    "peak_note string, delta double, covered_s double, rate_per_s double, resets int, "
    "quantiles array<double>, date string, hour string")
ROLLUP_COLUMNS = [c.split()[0] for c in ROLLUP_SCHEMA.split(", ")]
# Per window, over the samples where a rule's condition held (``signal``): how many, their least and
# greatest value, the first and last such time. Not gold columns: the findings read them from the
# same (cached) aggregation as the rollups.
SIGNAL_COLUMNS = ["sig_samples", "sig_min", "sig_max", "sig_first_ts", "sig_last_ts"]
# Conditions a rule looks for in single samples (the stuck-lease run is computed in :func:`with_deltas`).
SIMPLE_SIGNAL = (f"coalesce(CASE WHEN metric = '{m.WATERMARK_DRIFT}' THEN value < 0 "
                 f"WHEN metric = '{m.STRANDED}' THEN value > 0 "
                 f"WHEN metric IN ('{m.LOCK_WAITERS}', '{m.LOCK_BLOCKERS}') THEN value >= 1 END, false)")


def sql_list(names: Sequence[str]) -> str:
    """Metric names (constants of :mod:`pipeline.metrics`) as a SQL list of string literals."""
    for n in names:
        if not n.replace("_", "").replace(":", "").isalnum():
            raise ValueError(f"unexpected metric name {n!r}")
    return ", ".join(f"'{n}'" for n in names)


def floor_sql(col: str, seconds: int) -> str:
    """Start of the fixed ``seconds`` window holding a timestamp (UTC, epoch-aligned)."""
    return f"timestamp_micros(unix_micros({col}) - pmod(unix_micros({col}), {seconds * 1_000_000}L))"


def read_lake(spark, files: Sequence[str]) -> DataFrame:  # noqa: ANN001 - SparkSession
    """The lake's rows from these data files, with the contract's schema (no inference)."""
    return spark.read.schema(LAKE_SCHEMA).parquet(*files)


def prepare(raw: DataFrame, scope: Sequence[datetime] | None = None) -> DataFrame:
    """Clean rows and mark which are in scope (their hour is being computed) versus margin rows.

    Rows without a time, target or metric cannot be placed and are dropped; a missing queue or
    database is the empty string (target-wide). ``scope=None`` puts every row in scope.
    """
    if scope is None:
        in_scope = "true"
    else:
        # Literals as epoch micros: a naive datetime would be read in the driver's local time zone.
        micros = sorted({int(h.replace(tzinfo=h.tzinfo or UTC).timestamp()) * 1_000_000 for h in scope})
        in_scope = (f"unix_micros(hour_start) IN ({', '.join(f'{u}L' for u in micros)})" if micros else "false")
    return (raw.where("ts IS NOT NULL AND target IS NOT NULL AND metric IS NOT NULL")
            .selectExpr("ts", "target", "coalesce(database, '') AS database", "coalesce(queue, '') AS queue",
                        "metric", "value", "note", f"{floor_sql('ts', 3600)} AS hour_start")
            .selectExpr("*", f"{in_scope} AS in_scope"))


def with_deltas(df: DataFrame, params: Params) -> DataFrame:
    """Per-interval ``delta`` / ``covered_s`` / ``reset`` for counters (null for gauges).

    Only counter rows (and the target's epoch rows) are sorted; gauges pass through without a
    shuffle. Each counter sample takes the target's latest epoch (``sqlserver_start_time``,
    ``stats_reset``) within ``max_gap_s``: an epoch that changed between two samples is a
    restart even when the total did not drop. A counter whose note says an instant
    ``cntr_type`` is a level, not a total: no delta. Margin rows must be present so that the
    first interval of a recomputed hour finds its previous sample; the rollups keep only
    ``in_scope`` rows afterwards.

    The look-backs run per target and hour (one shuffle, two sorts, as with one partition per
    target), each hour given copies of the rows it needs from the hours before: a window partition
    is one hour of one target whatever the lake's size. With one partition per target it was the
    target's whole history, which ran a 1 GB driver out of heap on large lakes.

    ``signal`` marks the samples a finding rule looks for (see :data:`SIMPLE_SIGNAL`; stuck leases
    held on ``stuck_cycles`` consecutive samples): the rollups count them per window, so the
    findings need no second pass over the lake.
    """
    counter = m.counter_sql()
    # Stuck leases need a look-back over the key's previous samples, like counters: they share the sort.
    looked = f"(metric = '{m.STUCK_LEASES}' AND value IS NOT NULL)"
    gauges = df.where(f"NOT {counter} AND NOT {looked}").selectExpr(
        "*", "CAST(NULL AS DOUBLE) AS delta", "CAST(NULL AS DOUBLE) AS covered_s", "CAST(NULL AS INT) AS reset",
        f"{SIMPLE_SIGNAL} AS signal")
    gap_us = int(params.max_gap_s * 1e6)
    n = int(params.stuck_cycles)
    instant = ", ".join(str(t) for t in m.INSTANT_CNTR_TYPES)
    cols = list(df.columns)
    epochs = sql_list(m.EPOCHS)
    # One scan for counters and epochs: each counter sample takes the latest epoch as of its time.
    both = df.where(f"value IS NOT NULL AND ({counter} OR {looked} OR (metric IN ({epochs}) AND queue = ''))"
                    ).selectExpr(*cols, f"metric IN ({epochs}) AS is_epoch")
    # Window partitions are one hour of one target (``part``, epoch micros of the hour), so none grows
    # with the lake. Each row is in its own hour's partition and, as a margin copy, in the next hours
    # whose start is at most ``reach`` after it: a counter's previous sample counts only within
    # max_gap_s; that sample's epoch is at most max_gap_s older still; a run of stuck_cycles samples
    # spans at most an hour. An older row cannot change any delta, epoch or run, so the results equal
    # those of one partition per target. max_gap_s <= 3600 (Params): two hours of margin suffice.
    reach = (f"CASE WHEN is_epoch THEN {2 * gap_us}L WHEN metric = '{m.STUCK_LEASES}' "
             f"THEN {3_600_000_000 if n > 1 else 0}L ELSE {gap_us}L END")
    spread = both.selectExpr(
        "*", f"explode(slice(array(0, 1, 2), 1, 1 + CAST(unix_micros(hour_start) + 3600000000L - unix_micros(ts) "
             f"<= {reach} AS INT) + CAST(unix_micros(hour_start) + 7200000000L - unix_micros(ts) <= {reach} AS INT))) "
             "AS k").selectExpr(
        "*", "unix_micros(hour_start) + k * 3600000000L AS part")
    # Running frames (linear), not a sliding RANGE frame (which re-reads the frame for every row):
    # the latest epoch so far and its time; it counts only if no older than max_gap_s.
    run = "OVER (PARTITION BY target, database, part ORDER BY ts, is_epoch DESC ROWS UNBOUNDED PRECEDING)"
    asof = (f"CASE WHEN unix_micros(ts) - unix_micros(last(CASE WHEN is_epoch THEN ts END, true) {run}) "
            f"<= {gap_us}L THEN last(CASE WHEN is_epoch THEN value END, true) {run} END")
    # The same partitioning (plus the key): no second shuffle, only a second sort.
    key = "PARTITION BY target, database, queue, metric, part ORDER BY ts, value"
    w = f"OVER ({key})"
    frame = f"OVER ({key} ROWS BETWEEN {n - 1} PRECEDING AND CURRENT ROW)"
    lagged = (spread.selectExpr(*cols, "is_epoch", "k", "part", f"{asof} AS epoch")
              .where("NOT is_epoch")
              .selectExpr(*cols, "k", "epoch", f"lag(ts) {w} AS prev_ts", f"lag(value) {w} AS prev_v",
                          f"lag(epoch) {w} AS prev_epoch", f"count(value) {frame} AS fn",
                          f"min(value) {frame} AS fmin", f"min(ts) {frame} AS fstart")
              .where("k = 0"))  # margin copies only served the rows of the next hours
    # Stuck leases > 0 on stuck_cycles consecutive samples, the first of them at most an hour back.
    held = (f"(metric = '{m.STUCK_LEASES}' AND fn = {n} AND fmin > 0 "
            "AND unix_micros(ts) - unix_micros(fstart) <= 3600000000L)")
    valid = (f"({counter} AND prev_ts IS NOT NULL AND unix_micros(ts) > unix_micros(prev_ts) "
             f"AND unix_micros(ts) - unix_micros(prev_ts) <= {gap_us}L "
             f"AND NOT coalesce(startswith(note, '{{') AND CAST(get_json_object(note, '$.cntr_type') AS BIGINT) "
             f"IN ({instant}), false))")
    # queueops.judge.counter_increase in Spark SQL: after a drop or a new epoch, counted from zero.
    restart = "(value < prev_v OR (epoch IS NOT NULL AND prev_epoch IS NOT NULL AND epoch <> prev_epoch))"
    counters_df = lagged.selectExpr(
        *df.columns,
        f"CASE WHEN {valid} THEN (CASE WHEN {restart} THEN value ELSE value - prev_v END) END AS delta",
        f"CASE WHEN {valid} THEN (unix_micros(ts) - unix_micros(prev_ts)) / 1e6 END AS covered_s",
        f"CASE WHEN {valid} THEN CAST({restart} AS INT) END AS reset", f"{held} AS signal")
    return gauges.unionByName(counters_df)


def sketch_points(params: Params) -> list[float]:
    """The percentages an hour keeps (``quantiles``), for the day's p95: every ``sketch_step_pct``, and 95."""
    step = params.sketch_step_pct / 100.0
    pts = {round(i * step, 6) for i in range(1, int(round(1 / step)) + 1) if i * step < 1}
    pts.add(0.95)
    return sorted(pts)


def nearest_rank(sorted_values: str, q: str) -> str:
    """SQL: the nearest-rank ``q`` quantile of a sorted array: its ``ceil(q * n)``-th element (null
    when empty). What ``percentile_approx`` answers while its summary is exact (fewer than 500
    samples at accuracy 1000); exact at any size."""
    return (f"CASE WHEN size({sorted_values}) > 0 THEN "
            f"element_at({sorted_values}, CAST(ceil({q} * size({sorted_values})) AS INT)) END")


def _murmur3_int(value: int, seed: int = 42) -> int:
    """Spark's ``hash()`` of an INT (Murmur3 x86 32-bit, seed 42), as a signed 32-bit int: what its
    hash partitioning takes ``pmod`` of. Computed here so that no Spark job is needed to find a key
    per partition."""
    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF

    k = (value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF
    k = rotl(k, 15) * 0x1B873593 & 0xFFFFFFFF
    h = rotl(seed ^ k, 13)
    h = (h * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= 4
    h ^= h >> 16
    h = h * 0x85EBCA6B & 0xFFFFFFFF
    h ^= h >> 13
    h = h * 0xC2B2AE35 & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


# An hour's span of hour numbers past which :func:`hour_tasks` gives up its lookup array (a scope
# of hours years apart): the rows are then hashed by hour, several hours to a task.
MAX_HOUR_SPAN = 100_000
HOURS_PER_TASK = 2


def hour_tasks(hours: Sequence[datetime] | None, per_task: int = 1) -> tuple[str, int] | None:
    """SQL of an INT key that puts these hours, ``per_task`` consecutive ones together, each group
    in a shuffle partition of its own, and the number of partitions (``ceil(hours / per_task)``);
    None when the hours are unknown or too far apart.

    Spark's hash partitioning sends a key to ``pmod(hash(key), n)``: hashed by hour, 42 hours in
    42 partitions would leave about a third of the partitions empty and others with two or three
    hours (in 4 partitions, 9 to 12 hours each). The key here is, for the place of the hour's group
    among the scope's hours, the smallest INT that hashes to that place, so every task holds exactly
    ``per_task`` whole hours (the last one may hold fewer): the number of groups the 5-minute
    aggregation holds at once is that many hours', whatever the lake's length.
    """
    if not hours:
        return None
    starts = sorted({int(h.replace(tzinfo=h.tzinfo or UTC).timestamp()) // 3600 for h in hours})
    n, first = -(-len(starts) // per_task), starts[0]
    if starts[-1] - first >= MAX_HOUR_SPAN:
        return None
    keys: dict[int, int] = {}
    candidate = 0
    while len(keys) < n:
        keys.setdefault(_murmur3_int(candidate) % n, candidate)
        candidate += 1
    table = [0] * (starts[-1] - first + 1)
    for place, h in enumerate(starts):
        table[h - first] = keys[place // per_task]
    lookup = f"array({', '.join(map(str, table))})"
    return f"element_at({lookup}, CAST(unix_micros(hour_start) DIV 3600000000L - {first}L AS INT) + 1)", n


def by_hour_task(samples: DataFrame, params: Params, hours: Sequence[datetime] | None = None) -> DataFrame:
    """The in-scope rows with their counter deltas and signals (:func:`with_deltas`), each sent to
    its hour's shuffle task (``task``, :func:`hour_tasks`): what the 5-minute aggregation reads.

    One shuffle for the rest of the rollups: the hour's task serves the 5-minute aggregation (its
    keys include the hour), the hour's merge (a window over the key's hour) and the gold write (one
    file per window, date and hour) without another exchange. Only the columns the aggregation
    reads cross it (a note only where a peak keeps it).
    """
    notes = sql_list(m.NOTE_METRICS)
    d = (with_deltas(samples, params).where("in_scope")
         .selectExpr(*KEYS, "hour_start", "ts", "value", f"CASE WHEN metric IN ({notes}) THEN note END AS note",
                     "delta", "covered_s", "reset", "signal"))
    return to_hour_tasks(d, hours)


def to_hour_tasks(rows: DataFrame, hours: Sequence[datetime] | None = None) -> DataFrame:
    """``rows`` (with ``hour_start``) sent to their hours' shuffle tasks, two hours a task
    (:func:`hour_tasks`), with the shuffle key ``task``: one value per hour (functionally the hour,
    so grouping and windows by it change nothing); hashed by the hour itself when the hours are not
    known."""
    tasks = hour_tasks(hours, HOURS_PER_TASK)
    return (rows.selectExpr("*", f"{tasks[0]} AS task").repartition(tasks[1], "task") if tasks
            else rows.selectExpr("*", "hour_start AS task").repartition("task"))


def five_minute_rollups(samples: DataFrame, params: Params,
                        hours: Sequence[datetime] | None = None) -> DataFrame:
    """The 5-minute rows of the in-scope rows of ``samples`` (from :func:`prepare`; counter deltas
    and signals from :func:`with_deltas`), not yet in gold column order.

    One aggregation of the lake's rows, each row once. Besides the gold columns it keeps what the
    hour is merged from (:func:`with_hours`): ``vals``, the window's values sorted
    (the 5-minute p95 is one element of it; the hour merges them), and ``hx`` / ``hxx`` / ``hxy``,
    sums of x, x² and x·value with x in seconds since the hour's start (the hour's slope).
    """
    d = by_hour_task(samples, params, hours)
    out = d.groupBy(*KEYS, "task", "hour_start", F.expr(floor_sql("ts", 300)).alias("window_start")).agg(
        *[F.expr(a) for a in five_minute_aggregates()])
    return out.selectExpr("*", f"{nearest_rank('vals', '0.95D')} AS p95",
                          "CAST(NULL AS ARRAY<DOUBLE>) AS quantiles")


# The 5-minute aggregates whose buffer is not fixed-width (a string, a list): with them the whole
# aggregation is Spark's object-based one, which evaluates every aggregate without generated code.
OBJECT_AGGREGATES = ("peak_note", "vals")


def five_minute_aggregates() -> list[str]:
    """SQL of the 5-minute aggregates, each ``... AS name`` (read by :func:`five_minute_rollups`;
    benchmarks/rollups_breakdown.py times the fixed-width ones apart from :data:`OBJECT_AGGREGATES`)."""
    notes = sql_list(m.NOTE_METRICS)
    sample_ts = "CASE WHEN value IS NOT NULL THEN ts END"  # times of samples, not of null rows
    x5 = f"(unix_micros(ts) - unix_micros({floor_sql('ts', 300)})) / 1e6"
    xh = f"CASE WHEN value IS NOT NULL THEN (unix_micros(ts) - unix_micros({floor_sql('ts', 3600)})) / 1e6 END"
    return [
        "count(value) AS samples", "min(value) AS min", "avg(value) AS mean", "max(value) AS max",
        "sum(value) AS sum", f"min_by(value, {sample_ts}) AS first", f"max_by(value, {sample_ts}) AS last",
        f"min({sample_ts}) AS first_ts", f"max({sample_ts}) AS last_ts", f"regr_slope(value, {x5}) AS slope_per_s",
        f"max_by(CASE WHEN metric IN ({notes}) THEN note END, CASE WHEN metric IN ({notes}) THEN value END) "
        "AS peak_note",
        "sum(delta) AS delta", "sum(covered_s) AS covered_s", "CAST(sum(reset) AS INT) AS resets",
        "count_if(signal) AS sig_samples", "min(CASE WHEN signal THEN value END) AS sig_min",
        "max(CASE WHEN signal THEN value END) AS sig_max", "min(CASE WHEN signal THEN ts END) AS sig_first_ts",
        "max(CASE WHEN signal THEN ts END) AS sig_last_ts",
        "sort_array(collect_list(value)) AS vals",
        f"sum({xh}) AS hx", f"sum({xh} * {xh}) AS hxx", f"sum({xh} * value) AS hxy"]


# How an hour's columns merge from its 5-minute rows (window aggregates over the hour's rows).
_HOUR_MERGE = {
    "samples": "sum(samples)", "min": "min(min)", "max": "max(max)", "sum": "sum(sum)",
    "first": "min_by(first, first_ts)", "last": "max_by(last, last_ts)", "first_ts": "min(first_ts)",
    "last_ts": "max(last_ts)", "peak_note": "max_by(peak_note, max)", "delta": "sum(delta)",
    "covered_s": "sum(covered_s)", "resets": "sum(resets)", "sig_samples": "sum(sig_samples)",
    "sig_min": "min(sig_min)", "sig_max": "max(sig_max)", "sig_first_ts": "min(sig_first_ts)",
    "sig_last_ts": "max(sig_last_ts)", "hx": "sum(hx)", "hxx": "sum(hxx)", "hxy": "sum(hxy)",
    "first_window": "min(window_start)", "lists": "collect_list(vals)",
}


def with_hours(five: DataFrame, params: Params) -> DataFrame:
    """The 5-minute rows (:func:`five_minute_rollups`) and, merged from them, the hourly rows, in
    gold column order with :data:`SIGNAL_COLUMNS`.

    One pass: a window over each key's hour (ordered by time, so sums add up in the same order
    whatever the partitioning) gives every 5-minute row its hour's merged columns, and the hour's
    first 5-minute row emits the hour's row too. Every hourly column is what the hour's samples
    would give directly: counts, sums, extremes, first / last by time, the signal and counter
    columns merge; the quantiles are nearest ranks of the hour's values (the 5-minute ``vals``
    merged and sorted); the slope is the least-squares fit from the sums of x, x² and x·value (x
    from the hour's start, so no large offset cancels), ``(Σxy - Σx·Σy/n) / (Σx² - (Σx)²/n)``,
    null when all samples share one time, as with ``regr_slope``.

    Why this shape, measured on 10M rows (docs/benchmarks.md): an aggregate whose buffer is not
    fixed-width (the peak's note, a quantile sketch, a list) makes the whole aggregation
    object-based, and past ``spark.sql.objectHashAggregate.sortBased.fallbackThreshold`` groups
    (Spark's default 128; the pipeline's :data:`pipeline.spark.OBJECT_AGG_GROUPS`) a task sorts its
    rows, so the cost grows with the rows it sees. The job before counted each lake row in its
    5-minute and in its hourly window (an ``explode``: twice the rows through that sort) with a
    ``percentile_approx`` sketch per window.
    Merging the hours in a second aggregation would read the 5-minute rows twice (once for
    themselves): aggregated twice, or persisted with their value lists, which ran a 1 GB driver out
    of heap at 100M rows.
    """
    pts = sketch_points(params)
    arr = f"array({', '.join(f'{p!r}D' for p in pts)})"
    w = ("OVER (PARTITION BY target, database, queue, metric, task, hour_start ORDER BY window_start "
         "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)")
    x = five.selectExpr("*", *[f"{e} {w} AS h_{c}" for c, e in _HOUR_MERGE.items()])
    x = x.selectExpr("*", "CASE WHEN window_start = h_first_window THEN sort_array(flatten(h_lists)) END AS h_vals")
    slope = ("CASE WHEN h_samples >= 2 AND h_first_ts < h_last_ts THEN "
             "(h_hxy - h_hx * h_sum / h_samples) / (h_hxx - h_hx * h_hx / h_samples) END")
    hour = {c: f"h_{c}" for c in _HOUR_MERGE if c in ROLLUP_COLUMNS or c in SIGNAL_COLUMNS}
    hour.update({**{k: k for k in KEYS}, "resets": "CAST(h_resets AS INT)", "window_start": "hour_start",
                 "mean": "CASE WHEN h_samples > 0 THEN h_sum / h_samples END", "slope_per_s": slope,
                 "p95": nearest_rank("h_vals", "0.95D"),
                 "quantiles": f"CASE WHEN size(h_vals) > 0 THEN transform({arr}, q -> {nearest_rank('h_vals', 'q')}) END",
                 **_window_columns("1h", "hour_start", 3600, delta="h_delta", covered="h_covered_s")})
    cols = [*ROLLUP_COLUMNS, *SIGNAL_COLUMNS]
    minute = {**{c: c for c in cols}, **_window_columns("5m", "window_start", 300)}

    def struct(exprs: dict[str, str]) -> str:
        return "named_struct(" + ", ".join(f"'{c}', {exprs[c]}" for c in cols) + ")"

    rows = (f"inline(CASE WHEN window_start = h_first_window THEN array({struct(minute)}, {struct(hour)}) "
            f"ELSE array({struct(minute)}) END)")
    return x.selectExpr(rows)


def rollup(samples: DataFrame, window: str, params: Params) -> DataFrame:
    """The ``window`` (``5m`` or ``1h``) rollup rows of the in-scope rows of ``samples`` (from
    :func:`prepare`), in gold column order (the hours keep their ``quantiles``)."""
    both = with_hours(five_minute_rollups(samples, params), params)
    return both.where(f"window = '{window}'").select(*ROLLUP_COLUMNS)


def _window_columns(window: str, start: str, secs: int, *, delta: str = "delta",
                    covered: str = "covered_s") -> dict[str, str]:
    """SQL of the columns a rollup row derives from its window (5m, 1h, 1d alike): its name, end,
    counter rate and gold partition (``date``, ``hour`` of its start)."""
    return {"window": f"'{window}'", "window_end": f"timestamp_micros(unix_micros({start}) + {secs * 1_000_000}L)",
            "rate_per_s": f"CASE WHEN {covered} > 0 THEN {delta} / {covered} END",
            "date": f"date_format({start}, 'yyyy-MM-dd')", "hour": f"date_format({start}, 'HH')"}


def _finish(df: DataFrame, window: str, secs: int) -> DataFrame:
    """Gold columns of ``window`` rows: :func:`_window_columns` added to the aggregates."""
    derived = _window_columns(window, "window_start", secs)
    return df.selectExpr("*", *[f"{e} AS {c}" for c, e in derived.items()]).select(*ROLLUP_COLUMNS)


def _ordered_sum(col: str) -> str:
    """Sum of a per-hour double in hour order: bit-identical whatever the partitioning."""
    return (f"aggregate(sort_array(collect_list(named_struct('k', window_start, 'v', {col}))), "
            f"CAST(NULL AS DOUBLE), (a, x) -> CASE WHEN x.v IS NULL THEN a ELSE coalesce(a, 0D) + x.v END)")


def day_from_hours(hours: DataFrame) -> DataFrame:
    """Day rows from the hourly rollup rows of those days (all of each day's hours)."""
    h = hours.selectExpr(
        *KEYS, "window_start", "samples", "min", "max", "sum", "first", "last", "first_ts", "last_ts", "peak_note",
        "delta", "covered_s", "resets", f"{floor_sql('window_start', 86400)} AS day_start",
        "quantiles", "transform(quantiles, q -> named_struct('v', q, 'w', CAST(samples AS DOUBLE))) AS hpts")
    agg = (h.groupBy(*KEYS, "day_start")
           .agg(*[F.expr(a) for a in (
               "sum(samples) AS samples", "min(min) AS min", "max(max) AS max", f"{_ordered_sum('sum')} AS sum",
               "sort_array(flatten(collect_list(hpts))) AS pts",
               "sum(CASE WHEN quantiles IS NOT NULL THEN CAST(size(quantiles) * samples AS DOUBLE) END) AS pts_weight",
               "min_by(first, first_ts) AS first",
               "max_by(last, last_ts) AS last", "min(first_ts) AS first_ts", "max(last_ts) AS last_ts",
               "max_by(peak_note, max) AS peak_note", f"{_ordered_sum('delta')} AS delta",
               f"{_ordered_sum('covered_s')} AS covered_s", "CAST(sum(resets) AS INT) AS resets")]))
    # The day's p95: the first sketch point where the cumulative weight reaches 95 % of the total.
    # The total weight is summed once per day by the aggregation (``pts_weight``), not once per point:
    # inside the lambda it made the day's p95 quadratic in its points (24 hours x 99 = 2,376), which was
    # most of a 10M-row run's time. Weights are whole numbers, so the sum is exact in any order.
    p95 = ("aggregate(pts, named_struct('c', 0D, 'r', CAST(NULL AS DOUBLE)), "
           "(acc, x) -> named_struct('c', acc.c + x.w, 'r', CASE WHEN acc.r IS NULL AND acc.c + x.w >= "
           "0.95 * pts_weight THEN x.v ELSE acc.r END), acc -> acc.r)")
    out = agg.selectExpr(
        *KEYS, "day_start AS window_start", "samples", "min", "CASE WHEN samples > 0 THEN sum / samples END AS mean",
        "max", f"{p95} AS p95", "sum", "first", "last", "first_ts", "last_ts", "CAST(NULL AS DOUBLE) AS slope_per_s",
        "peak_note", "delta", "covered_s", "resets", "CAST(NULL AS ARRAY<DOUBLE>) AS quantiles")
    return _finish(out, "1d", 86400)


def rollups(samples: DataFrame, params: Params) -> DataFrame:
    """5-minute and hourly rollups of the in-scope rows of ``samples`` (the gold columns only)."""
    return rollups_and_signals(samples, params).select(*ROLLUP_COLUMNS)


def rollups_and_signals(samples: DataFrame, params: Params,
                        hours: Sequence[datetime] | None = None) -> DataFrame:
    """5-minute and hourly rollups of the in-scope rows of ``samples`` (from :func:`prepare`), with
    :data:`SIGNAL_COLUMNS` for the findings: :func:`five_minute_rollups`, then :func:`with_hours`.
    ``hours``: the hours in scope, when known (one shuffle partition each, :func:`hour_tasks`)."""
    return with_hours(five_minute_rollups(samples, params, hours), params)
