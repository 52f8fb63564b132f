"""Warn / critical levels per (target, queue, metric) for the rules and forecasts.

Built from the queueops config (each queue's ``thresholds`` over ``DEFAULT_THRESHOLDS``) when one
is given; the defaults alone otherwise (queues found in the lake but absent from the config get
the defaults too). As in the config model, a queue's threshold for a metric replaces the default
for that metric as a whole. Spark sees the defaults as literals; a tiny broadcast table is joined
only when some queue overrides a default.

A queue's old-snapshot levels are not raw columns for SQL to combine: they are resolved here, on
the driver, by :func:`queueops.judge.snapshot_levels` itself (:meth:`Thresholds.attach_snapshot_levels`),
so the pipeline's rule is the console's, alerts' and report's, not a copy of it in SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline import metrics as m
from queueops import judge

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Level = tuple[float | None, float | None, str]  # warn, crit, direction ("above" | "below")

# Metrics that share another metric's thresholds (dead tuples are PostgreSQL's ghosts).
ALIASES = {name: "ghost_records" for name in (*m.GHOSTS, "dead_tuples")}


def _defaults() -> dict[str, Level]:
    from queueops.config import DEFAULT_THRESHOLDS

    return {k: (t.warn, t.crit, t.direction) for k, t in DEFAULT_THRESHOLDS.items()}


def _lit(v: float | None) -> str:
    return "CAST(NULL AS DOUBLE)" if v is None else f"{float(v)!r}D"


@dataclass
class _Levels:
    """A :data:`Level` as the judge reads a threshold (:class:`queueops.judge.Levels`)."""

    warn: float | None
    crit: float | None
    direction: str


def _snapshot(lv: Level | None, defaults: tuple[float, float]) -> tuple[float, float]:
    return judge.snapshot_levels(_Levels(*lv) if lv is not None else None, defaults)


@dataclass(frozen=True)
class Thresholds:
    defaults: dict[str, Level] = field(default_factory=_defaults)
    overrides: dict[tuple[str, str, str], Level] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Any | None) -> Thresholds:
        base = _defaults()
        if cfg is None:
            return cls(base)
        overrides: dict[tuple[str, str, str], Level] = {}
        for q in cfg.queues:
            for metric, t in q.thresholds.items():
                overrides[(q.target, q.name, metric)] = (t.warn, t.crit, t.direction)
        return cls(base, overrides)

    def canonical(self, metric: str) -> str:
        known = metric in self.defaults or any(k[2] == metric for k in self.overrides)
        return metric if known else ALIASES.get(metric, metric)

    def level(self, target: str, queue: str, metric: str) -> Level | None:
        name = self.canonical(metric)
        return self.overrides.get((target, queue, name)) or self.defaults.get(name)

    def snapshot_levels(self, target: str, queue: str, defaults: tuple[float, float]) -> tuple[float, float]:
        """The queue's old-snapshot (warn, crit) ages: :func:`queueops.judge.snapshot_levels` of its
        threshold on :data:`queueops.judge.OLD_SNAPSHOT`, with ``defaults`` (the pipeline's
        ``snapshot_age_s`` / ``snapshot_age_crit_s``) where it sets none, as for a queue found in
        the lake but absent from the config."""
        return _snapshot(self.level(target, queue, judge.OLD_SNAPSHOT), defaults)

    def attach_snapshot_levels(self, df: DataFrame, defaults: tuple[float, float],
                               warn: str = "snapshot_warn_s", crit: str = "snapshot_crit_s") -> DataFrame:
        """Add each row's old-snapshot levels (:meth:`snapshot_levels`), resolved on the driver, as
        the columns ``warn`` / ``crit`` to rows keyed by target and queue: literals for every queue
        that sets none, a tiny broadcast table for those that do. SQL then only compares an age
        with them; the rule that combines a queue's levels with the defaults stays the judge's."""
        name = self.canonical(judge.OLD_SNAPSHOT)
        dw, dc = _snapshot(self.defaults.get(name), defaults)  # every queue without levels of its own
        own = sorted({(t, q) for (t, q, mm) in self.overrides if mm == name})
        if not own:
            return df.selectExpr("*", f"{_lit(dw)} AS `{warn}`", f"{_lit(dc)} AS `{crit}`")
        from pyspark.sql import functions as F

        data = [(t, q, *self.snapshot_levels(t, q, defaults)) for t, q in own]
        o = df.sparkSession.createDataFrame(data, "o_target string, o_queue string, o_snap_warn double, "
                                                  "o_snap_crit double")
        joined = df.join(F.broadcast(o), (df["target"] == o["o_target"]) & (df["queue"] == o["o_queue"]), "left")
        return joined.selectExpr(*[f"`{c}`" for c in df.columns],
                                 f"coalesce(o_snap_warn, {_lit(dw)}) AS `{warn}`",
                                 f"coalesce(o_snap_crit, {_lit(dc)}) AS `{crit}`")

    def as_json(self) -> dict[str, Any]:
        return {"defaults": self.defaults,
                "overrides": {"/".join(k): v for k, v in sorted(self.overrides.items())}}

    def attach_wide(self, df: DataFrame, metrics: Sequence[str]) -> DataFrame:
        """Add ``<metric>_warn`` / ``<metric>_crit`` columns to rows keyed by target and queue."""
        names = [self.canonical(x) for x in metrics]
        rows = sorted({(t, q) for (t, q, mm) in self.overrides if mm in names})
        exprs = []
        for metric, name in zip(metrics, names, strict=True):
            dw, dc, _ = self.defaults.get(name, (None, None, "above"))
            for lvl, dv in (("warn", dw), ("crit", dc)):
                if rows:
                    exprs.append(f"CASE WHEN coalesce(`o_{name}_has`, false) THEN `o_{name}_{lvl}` "
                                 f"ELSE {_lit(dv)} END AS `{metric}_{lvl}`")
                else:
                    exprs.append(f"{_lit(dv)} AS `{metric}_{lvl}`")
        if not rows:
            return df.selectExpr("*", *exprs)
        from pyspark.sql import functions as F

        cols = ["o_target string", "o_queue string"]
        data = []
        uniq = sorted(set(names))
        for n in uniq:
            cols += [f"o_{n}_has boolean", f"o_{n}_warn double", f"o_{n}_crit double"]
        for t, q in rows:
            vals: list[Any] = [t, q]
            for n in uniq:
                lv = self.overrides.get((t, q, n))
                vals += [lv is not None, lv[0] if lv else None, lv[1] if lv else None]
            data.append(tuple(vals))
        o = df.sparkSession.createDataFrame(data, ", ".join(cols))
        joined = df.join(F.broadcast(o), (df["target"] == o["o_target"]) & (df["queue"] == o["o_queue"]), "left")
        return joined.selectExpr(*[f"`{c}`" for c in df.columns], *exprs)

    def attach_long(self, df: DataFrame) -> DataFrame:
        """Add ``warn`` / ``crit`` columns to rows that carry their own ``metric``."""
        known = sorted(set(self.defaults) | {k[2] for k in self.overrides})
        canon = "CASE " + " ".join(f"WHEN metric = '{a}' THEN '{b}'" for a, b in sorted(ALIASES.items())
                                   if a not in known) + " ELSE metric END" if ALIASES else "metric"
        dflt = {lvl: "CASE " + " ".join(f"WHEN m_canon = '{k}' THEN {_lit(v[i])}" for k, v in sorted(self.defaults.items()))
                + " END" for i, lvl in enumerate(("warn", "crit"))}
        out = df.selectExpr("*", f"{canon} AS m_canon")
        if not self.overrides:
            return out.selectExpr(*[f"`{c}`" for c in df.columns], f"{dflt['warn']} AS warn", f"{dflt['crit']} AS crit")
        from pyspark.sql import functions as F

        data = [(t, q, mm, w, c) for (t, q, mm), (w, c, _) in sorted(self.overrides.items())]
        o = df.sparkSession.createDataFrame(data, "o_target string, o_queue string, o_metric string, "
                                                  "o_warn double, o_crit double")
        j = out.join(F.broadcast(o), (out["target"] == o["o_target"]) & (out["queue"] == o["o_queue"])
                     & (out["m_canon"] == o["o_metric"]), "left")
        return j.selectExpr(*[f"`{c}`" for c in df.columns],
                            f"CASE WHEN o_target IS NOT NULL THEN o_warn ELSE {dflt['warn']} END AS warn",
                            f"CASE WHEN o_target IS NOT NULL THEN o_crit ELSE {dflt['crit']} END AS crit")
