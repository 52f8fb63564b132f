"""Findings: rules over each queue's hour, with severity, evidence and the recommended action.

The rules read one *profile* row per (target, database, queue, hour): the hourly rollup's
numbers for the metrics they need, pivoted into columns, plus three kinds of signal that hourly
numbers cannot carry (counted per hour in the rollups' one pass over the lake,
``pipeline.rollups.SIGNAL_COLUMNS``, and made profile rows by :func:`signals`):

* ``stuck_leases:held`` -- samples where stuck leases were > 0 on ``stuck_cycles`` consecutive
  samples (a look-back of at most one hour, so one hour of margin suffices);
* ``watermark_drift:neg`` / ``stranded_items:pos`` / ``lock_waiters:any`` -- the samples where
  the condition held, so a finding says exactly when;
* ``lock_timeouts:burst`` -- 5-minute windows whose counter delta reached ``lock_timeout_burst``.

Target-wide root causes (the oldest snapshot / xmin holder, queue ``''``) are spread to every queue
of the target for the same hour. Each rule is then a plain function ``(profile, params) ->
findings`` -- a filter and a projection, no shuffle -- so the whole rule set costs one aggregation
and a window, and each rule can be tested alone on a crafted profile. A finding names when the
condition held in that hour (``first_ts`` .. ``last_ts``), its main number (``value`` against
``threshold``), evidence as JSON, a one-line summary and the action from the seeds.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline import metrics as m
from pipeline.params import Params
from pipeline.rollups import floor_sql, sql_list
from pipeline.thresholds import Thresholds
from queueops import judge

FINDING_SCHEMA = (
    "rule string, severity string, target string, database string, queue string, metric string, "
    "hour_start timestamp, first_ts timestamp, last_ts timestamp, value double, threshold double, "
    "evidence string, summary string, action string, date string, hour string")
FINDING_COLUMNS = [c.split()[0] for c in FINDING_SCHEMA.split(", ")]
QKEYS = ["target", "database", "queue"]

HELD, NEG, POS, ANY, BURST = ":held", ":neg", ":pos", ":any", ":burst"


# What the profile keeps of each metric (or signal): metric -> hourly statistics.
_TREND = ("samples", "first", "last", "slope_per_s", "first_ts", "last_ts")
_WHEN = ("samples", "max", "first_ts", "last_ts")
PROFILE: dict[str, tuple[str, ...]] = {
    m.DEPTH: ("min", "max", "mean"),
    m.OLDEST_AGE: _TREND,
    **{g: _TREND for g in m.GHOSTS},
    **{s: ("max", "peak_note") for s in m.SNAPSHOT_AGE},
    m.FRAGMENTATION: ("max", "peak_note", "first_ts", "last_ts"),
    m.PAGE_COUNT: ("max",),
    m.ROWS_TOTAL: ("max",),
    m.STUCK_LEASES + HELD: _WHEN,
    m.OLDEST_LEASE_AGE: ("max",),
    m.WATERMARK_DRIFT + NEG: ("samples", "min", "first_ts", "last_ts"),
    m.STRANDED + POS: _WHEN,
    m.LOCK_WAITERS + ANY: _WHEN,
    m.LOCK_BLOCKERS + ANY: _WHEN,
    m.LOCK_WAIT_S: ("max",),
    **{lt: ("delta",) for lt in m.LOCK_TIMEOUTS},
    **{ev: ("sum",) for ev in m.LOCK_TIMEOUT_EVENTS},
    **{lt + BURST: (*_WHEN, "rate_per_s", "delta") for lt in (*m.LOCK_TIMEOUTS, *m.LOCK_TIMEOUT_EVENTS)},
}
PROFILE_INPUT = ["target", "database", "queue", "hour_start", "metric", "samples", "min", "max", "mean", "sum",
                 "first", "last", "first_ts", "last_ts", "slope_per_s", "peak_note", "delta", "rate_per_s"]
_AGG = {"samples": "sum", "min": "min", "max": "max", "mean": "max", "sum": "sum", "first_ts": "min",
        "last_ts": "max", "slope_per_s": "max", "delta": "sum", "rate_per_s": "max"}
THRESHOLD_METRICS = (m.OLDEST_AGE, "ghost_records", m.FRAGMENTATION, m.STUCK_LEASES, m.LOCK_WAITERS)
# The queue's old-snapshot (warn, crit) ages, resolved on the driver by the judge
# (pipeline.thresholds.Thresholds.attach_snapshot_levels), not its raw threshold columns.
SNAPSHOT_WARN, SNAPSHOT_CRIT = "snapshot_warn_s", "snapshot_crit_s"


def col(metric: str, stat: str) -> str:
    """The profile's column for a metric's statistic, e.g. ``stuck_leases_held__samples``."""
    return f"{metric.replace(':', '_')}__{stat}"


def signals(rolled: DataFrame, p: Params) -> DataFrame:
    """Signal rows (profile input) from the rollups: the hourly counts of samples where a rule's
    condition held (:data:`pipeline.rollups.SIGNAL_COLUMNS`, computed in the rollups' single pass over
    the lake) and the 5-minute windows whose lock-timeout count reached ``lock_timeout_burst``."""
    suffix = (f"CASE metric WHEN '{m.STUCK_LEASES}' THEN '{HELD}' WHEN '{m.WATERMARK_DRIFT}' THEN '{NEG}' "
              f"WHEN '{m.STRANDED}' THEN '{POS}' ELSE '{ANY}' END")
    names = sql_list((m.STUCK_LEASES, m.WATERMARK_DRIFT, m.STRANDED, m.LOCK_WAITERS, m.LOCK_BLOCKERS))
    raw = (rolled.where(f"window = '1h' AND metric IN ({names}) AND sig_samples > 0")
           .selectExpr(*QKEYS, "window_start AS hour_start", f"concat(metric, {suffix}) AS metric",
                       "sig_samples AS samples", "sig_min AS min", "sig_max AS max", "CAST(NULL AS DOUBLE) AS mean",
                       "CAST(NULL AS DOUBLE) AS sum", "CAST(NULL AS DOUBLE) AS first", "CAST(NULL AS DOUBLE) AS last",
                       "sig_first_ts AS first_ts", "sig_last_ts AS last_ts", "CAST(NULL AS DOUBLE) AS slope_per_s",
                       "CAST(NULL AS STRING) AS peak_note", "CAST(NULL AS DOUBLE) AS delta",
                       "CAST(NULL AS DOUBLE) AS rate_per_s"))
    # Counters burst by their delta; PostgreSQL's per-cycle timeout counts by their sum.
    events = sql_list(m.LOCK_TIMEOUT_EVENTS)
    n5 = f"CASE WHEN metric IN ({events}) THEN sum ELSE delta END"
    bursts = (rolled.where(f"window = '5m' AND metric IN ({sql_list((*m.LOCK_TIMEOUTS, *m.LOCK_TIMEOUT_EVENTS))})")
              .selectExpr("*", f"{n5} AS n5").where(f"n5 >= {float(p.lock_timeout_burst)!r}D")
              .selectExpr(*QKEYS, f"{floor_sql('window_start', 3600)} AS hour_start",
                          f"concat(metric, '{BURST}') AS metric", "1L AS samples", "n5 AS min", "n5 AS max",
                          "n5 AS mean", "n5 AS sum", "n5 AS first", "n5 AS last", "window_start AS first_ts",
                          "window_end AS last_ts", "CAST(NULL AS DOUBLE) AS slope_per_s",
                          "CAST(NULL AS STRING) AS peak_note", "n5 AS delta",
                          f"CASE WHEN metric IN ({events}) THEN n5 / 300D ELSE rate_per_s END AS rate_per_s"))
    return raw.unionByName(bursts)


def profile(hourly: DataFrame, sigs: DataFrame, th: Thresholds, p: Params) -> DataFrame:
    """One row per (target, database, queue, hour) with the columns of :data:`PROFILE`, the
    target's snapshot spread to its queues, each queue's levels (``<metric>_warn`` / ``_crit``)
    and its old-snapshot levels (:data:`SNAPSHOT_WARN` / :data:`SNAPSHOT_CRIT`, from ``p``'s
    ``snapshot_age_s`` / ``snapshot_age_crit_s`` where the queue sets none)."""
    base = sorted({k for k in PROFILE if ":" not in k})
    h = (hourly.where(f"window = '1h' AND metric IN ({sql_list(base)})")
         .selectExpr("*", "window_start AS hour_start").select(*PROFILE_INPUT))
    rows = h.unionByName(sigs.select(*PROFILE_INPUT))
    aggs = []
    for metric, stats in PROFILE.items():
        hit = f"metric = '{metric}'"
        for stat in stats:
            if stat == "first":
                e = f"min_by(CASE WHEN {hit} THEN first END, CASE WHEN {hit} THEN first_ts END)"
            elif stat == "last":
                e = f"max_by(CASE WHEN {hit} THEN last END, CASE WHEN {hit} THEN last_ts END)"
            elif stat == "peak_note":
                e = f"max_by(CASE WHEN {hit} THEN peak_note END, CASE WHEN {hit} THEN max END)"
            else:
                e = f"{_AGG[stat]}(CASE WHEN {hit} THEN {stat} END)"
            aggs.append(F.expr(f"{e} AS {col(metric, stat)}"))
    prof = rows.groupBy(*QKEYS, "hour_start").agg(*aggs)
    # The target's oldest snapshot / xmin holder, spread to each of its queues for the hour.
    ages = [col(s, "max") for s in m.SNAPSHOT_AGE]
    notes = [col(s, "peak_note") for s in m.SNAPSHOT_AGE]
    age = f"greatest({', '.join(ages)})" if len(ages) > 1 else ages[0]
    note = (f"coalesce({', '.join(f'CASE WHEN {a} = {age} THEN {n} END' for a, n in zip(ages, notes, strict=True))})"
            if len(ages) > 1 else notes[0])
    w = "OVER (PARTITION BY target, hour_start)"
    prof = prof.selectExpr("*", f"max({age}) {w} AS snapshot_age", f"max_by({note}, {age}) {w} AS snapshot_holder")
    prof = th.attach_wide(prof, THRESHOLD_METRICS)
    return th.attach_snapshot_levels(prof, (p.snapshot_age_s, p.snapshot_age_crit_s), SNAPSHOT_WARN, SNAPSHOT_CRIT)


def _emit(df: DataFrame, rule: str, *, severity: str, metric: str, value: str, threshold: str, first_ts: str,
          last_ts: str, evidence: dict[str, str], summary: str) -> DataFrame:
    ev = ", ".join(f"'{k}', {v}" for k, v in evidence.items())
    out = df.select(
        F.lit(rule).alias("rule"), F.expr(severity).alias("severity"), *QKEYS, F.expr(metric).alias("metric"),
        "hour_start", F.expr(first_ts).alias("first_ts"), F.expr(last_ts).alias("last_ts"),
        F.expr(f"CAST({value} AS DOUBLE)").alias("value"), F.expr(f"CAST({threshold} AS DOUBLE)").alias("threshold"),
        F.expr(f"to_json(named_struct({ev}))").alias("evidence"), F.expr(summary).alias("summary"),
        F.replace(F.lit(judge.advice(rule)), F.lit("{q}"), F.col("queue")).alias("action"),
        F.expr("date_format(hour_start, 'yyyy-MM-dd')").alias("date"), F.expr("date_format(hour_start, 'HH')").alias("hour"))
    return out


def _d(x: float) -> str:
    return f"{float(x)!r}D"


def ghosts_held_by_snapshot(prof: DataFrame, p: Params) -> DataFrame:
    """Ghosts / dead tuples rose in the hour while a snapshot past the queue's old-snapshot level
    was open. The levels are the profile's :data:`SNAPSHOT_WARN` / :data:`SNAPSHOT_CRIT`, which
    :func:`queueops.judge.snapshot_levels` resolved per queue (:func:`profile`): the rule is
    compared here, never restated, so it cannot drift from the console's, alerts' and report's."""
    out = None
    warn, crit = SNAPSHOT_WARN, SNAPSHOT_CRIT
    for g in m.GHOSTS:
        c = lambda s, g=g: col(g, s)  # noqa: E731
        hit = prof.where(f"{c('samples')} >= 2 AND {c('last')} - {c('first')} >= {_d(p.ghost_min_rise)} "
                         f"AND {c('slope_per_s')} > 0 AND snapshot_age >= {warn}")
        f = _emit(
            hit, "ghosts_held_by_snapshot",
            severity=f"CASE WHEN snapshot_age >= {crit} OR {c('last')} >= ghost_records_crit "
                     "THEN 'crit' ELSE 'warn' END",
            metric=f"'{g}'", value=c("last"), threshold=warn, first_ts=c("first_ts"),
            last_ts=c("last_ts"),
            evidence={"first": c("first"), "last": c("last"), "rise": f"{c('last')} - {c('first')}",
                      "per_min": f"{c('slope_per_s')} * 60", "samples": c("samples"),
                      "snapshot_age_s": "snapshot_age", "holder": "snapshot_holder"},
            summary=f"format_string('{g} rose from %.0f to %.0f (%+.1f/min) while a snapshot was open for %.0f s', "
                    f"{c('first')}, {c('last')}, {c('slope_per_s')} * 60, snapshot_age)")
        out = f if out is None else out.unionByName(f)
    assert out is not None
    return out


def stuck_leases(prof: DataFrame, p: Params) -> DataFrame:
    """Stuck leases > 0 on ``stuck_cycles`` consecutive samples."""
    h = lambda s: col(m.STUCK_LEASES + HELD, s)  # noqa: E731
    age = col(m.OLDEST_LEASE_AGE, "max")
    return _emit(
        prof.where(f"{h('samples')} >= 1"), "stuck_leases",
        severity=f"CASE WHEN stuck_leases_crit IS NOT NULL AND {h('max')} >= stuck_leases_crit THEN 'crit' "
                 "ELSE 'warn' END",
        metric=f"'{m.STUCK_LEASES}'", value=h("max"), threshold=str(p.stuck_cycles), first_ts=h("first_ts"),
        last_ts=h("last_ts"),
        evidence={"peak": h("max"), "samples_held": h("samples"), "cycles": str(p.stuck_cycles),
                  "oldest_lease_age_s": age},
        summary=f"format_string('%.0f stuck lease(s) on %d+ consecutive samples (%d in the hour; oldest lease %s s)', "
                f"{h('max')}, {p.stuck_cycles}, {h('samples')}, coalesce(format_number({age}, 0), '?'))")


def stranded_items(prof: DataFrame, p: Params) -> DataFrame:
    """A negative watermark drift (or stranded items > 0): items below the watermark never leave."""
    d = lambda s: col(m.WATERMARK_DRIFT + NEG, s)  # noqa: E731
    s_ = lambda s: col(m.STRANDED + POS, s)  # noqa: E731
    return _emit(
        prof.where(f"coalesce({d('samples')}, 0) > 0 OR coalesce({s_('samples')}, 0) > 0"), "stranded_items",
        severity="'crit'", metric=f"'{m.WATERMARK_DRIFT}'", value=f"coalesce({d('min')}, -{s_('max')})",
        threshold="0", first_ts=f"least({d('first_ts')}, {s_('first_ts')})",
        last_ts=f"greatest({d('last_ts')}, {s_('last_ts')})",
        evidence={"min_drift": d("min"), "max_stranded": s_("max"), "samples": f"greatest({d('samples')}, "
                                                                                f"{s_('samples')})"},
        summary=f"format_string('watermark drift down to %s, %s item(s) stranded below the watermark', "
                f"coalesce(format_number({d('min')}, 0), '?'), coalesce(format_number({s_('max')}, 0), '?'))")


def guards_sql(metric: str) -> str:
    """The judge's guards of ``metric`` (:func:`queueops.judge.guards`) over the hour's profile: each
    guard metric's hourly max must hold, and one not sampled in the hour does not suppress, as in
    :func:`queueops.judge.guards_hold`. The levels are the judge's alone (the catalog's
    ``min_pages`` / ``min_rows``), so the console, the alerts and the pipeline share one floor."""
    parts = []
    for other, op, level in judge.guards(metric):
        c = col(other, "max")
        parts.append(f"({c} IS NULL OR {c} {op} {_d(level)})")
    return " AND ".join(parts) or "true"


def fragmentation(prof: DataFrame, p: Params) -> DataFrame:
    """Fragmentation at or above the warn level on an index and table past the judge's guards."""
    f = lambda s: col(m.FRAGMENTATION, s)  # noqa: E731
    pages = col(m.PAGE_COUNT, "max")
    return _emit(
        prof.where(f"fragmentation_pct_warn IS NOT NULL AND {f('max')} >= fragmentation_pct_warn "
                   f"AND {guards_sql(m.FRAGMENTATION)}"), "fragmentation",
        severity=f"CASE WHEN fragmentation_pct_crit IS NOT NULL AND {f('max')} >= fragmentation_pct_crit "
                 "THEN 'crit' ELSE 'warn' END",
        metric=f"'{m.FRAGMENTATION}'", value=f("max"), threshold="fragmentation_pct_warn", first_ts=f("first_ts"),
        last_ts=f("last_ts"),
        evidence={"fragmentation_pct": f("max"), "page_count": pages, "page_floor": _d(judge.MIN_PAGES),
                  "warn": "fragmentation_pct_warn", "crit": "fragmentation_pct_crit", "note": f("peak_note")},
        summary=f"format_string('fragmentation %.1f%% on %.0f pages (warn at %.0f%%)', {f('max')}, {pages}, "
                "fragmentation_pct_warn)")


def lock_timeout_burst(prof: DataFrame, p: Params) -> DataFrame:
    """A 5-minute window with at least ``lock_timeout_burst`` lock timeouts (counter deltas, or the
    sum of PostgreSQL's per-cycle probe timeouts)."""
    out = None
    for lt in (*m.LOCK_TIMEOUTS, *m.LOCK_TIMEOUT_EVENTS):
        b = lambda s, lt=lt: col(lt + BURST, s)  # noqa: E731
        total = col(lt, "sum") if lt in m.LOCK_TIMEOUT_EVENTS else col(lt, "delta")
        f = _emit(
            prof.where(f"{b('samples')} >= 1"), "lock_timeout_burst",
            severity=f"CASE WHEN {b('rate_per_s')} >= {_d(p.lock_timeout_rate_crit)} THEN 'crit' ELSE 'warn' END",
            metric=f"'{lt}'", value=b("max"), threshold=_d(p.lock_timeout_burst), first_ts=b("first_ts"),
            last_ts=b("last_ts"),
            evidence={"peak_5m": b("max"), "peak_rate_per_s": b("rate_per_s"), "windows": b("samples"),
                      "in_bursts": b("delta"), "hour_total": total},
            summary=f"format_string('%.0f lock timeouts in 5 minutes (%.2f/s), %.0f in the hour', {b('max')}, "
                    f"{b('rate_per_s')}, {total})")
        out = f if out is None else out.unionByName(f)
    assert out is not None
    return out


def lock_waits(prof: DataFrame, p: Params) -> DataFrame:
    """Sessions waiting on a lock on the queue table, or a session holding a table lock that blocks
    every change to it, on ``lock_wait_cycles`` or more samples. The holder counts on its own:
    dequeuers with a short lock timeout wait only briefly and retry, so samples can miss them."""
    a = lambda s: col(m.LOCK_WAITERS + ANY, s)  # noqa: E731
    b = lambda s: col(m.LOCK_BLOCKERS + ANY, s)  # noqa: E731
    longest = col(m.LOCK_WAIT_S, "max")
    waiting = (f"coalesce({a('samples')}, 0) >= {p.lock_wait_cycles} AND lock_waiters_warn IS NOT NULL "
               f"AND {a('max')} >= lock_waiters_warn")
    held = f"coalesce({b('samples')}, 0) >= {p.lock_wait_cycles}"
    return _emit(
        prof.where(f"({waiting}) OR ({held})"), "lock_waits",
        severity=f"CASE WHEN lock_waiters_crit IS NOT NULL AND coalesce({a('max')}, 0) >= lock_waiters_crit "
                 "THEN 'crit' ELSE 'warn' END",
        metric=f"'{m.LOCK_WAITERS}'", value=f"coalesce({a('max')}, 0)", threshold="lock_waiters_warn",
        first_ts=f"least({a('first_ts')}, {b('first_ts')})", last_ts=f"greatest({a('last_ts')}, {b('last_ts')})",
        evidence={"peak_waiters": a("max"), "samples": a("samples"), "longest_wait_s": longest,
                  "blocking_holders": b("max"), "holder_samples": b("samples")},
        summary=f"format_string('up to %.0f session(s) waiting on a lock on the queue table on %d samples; a "
                f"session held a lock blocking every change on %d samples', coalesce({a('max')}, 0), "
                f"coalesce({a('samples')}, 0), coalesce({b('samples')}, 0))")


def consumers_stalled(prof: DataFrame, p: Params) -> DataFrame:
    """The oldest item's age grows (about one second per second) while depth stays flat."""
    a = lambda s: col(m.OLDEST_AGE, s)  # noqa: E731
    d = lambda s: col(m.DEPTH, s)  # noqa: E731
    cond = (f"{a('samples')} >= 3 AND {a('slope_per_s')} >= {_d(p.stall_min_slope)} "
            f"AND {a('last')} - {a('first')} >= {_d(p.stall_min_age_rise_s)} AND {d('max')} > 0 "
            f"AND {d('max')} - {d('min')} <= greatest({_d(p.flat_depth_abs)}, {d('mean')} * {_d(p.flat_depth_rel)})")
    return _emit(
        prof.where(cond), "consumers_stalled",
        severity=f"CASE WHEN oldest_age_s_crit IS NOT NULL AND {a('last')} >= oldest_age_s_crit THEN 'crit' "
                 "ELSE 'warn' END",
        metric=f"'{m.OLDEST_AGE}'", value=a("last"), threshold=_d(p.stall_min_age_rise_s), first_ts=a("first_ts"),
        last_ts=a("last_ts"),
        evidence={"first_age_s": a("first"), "last_age_s": a("last"), "age_per_s": a("slope_per_s"),
                  "depth_min": d("min"), "depth_max": d("max"), "age_crit": "oldest_age_s_crit"},
        summary=f"format_string('oldest item aged from %.0f s to %.0f s (%.2f s/s) while depth stayed %.0f..%.0f', "
                f"{a('first')}, {a('last')}, {a('slope_per_s')}, {d('min')}, {d('max')})")


Rule = Callable[[DataFrame, Params], DataFrame]
RULES: dict[str, Rule] = {
    "ghosts_held_by_snapshot": ghosts_held_by_snapshot,
    "stuck_leases": stuck_leases,
    "stranded_items": stranded_items,
    "fragmentation": fragmentation,
    "lock_timeout_burst": lock_timeout_burst,
    "lock_waits": lock_waits,
    "consumers_stalled": consumers_stalled,
}


def evaluate(prof: DataFrame, p: Params, rules: dict[str, Rule] | None = None) -> DataFrame:
    out = None
    for rule in (rules or RULES).values():
        f = rule(prof, p)
        out = f if out is None else out.unionByName(f)
    assert out is not None
    return out.select(*FINDING_COLUMNS)


def all_findings(rolled: DataFrame, th: Thresholds, p: Params) -> DataFrame:
    """Every rule over the hours in scope: ``rolled`` from :func:`pipeline.rollups.rollups_and_signals`."""
    return evaluate(profile(rolled, signals(rolled, p), th, p), p)
