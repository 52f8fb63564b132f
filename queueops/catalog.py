"""The metric catalog (``sql/metrics.toml``): every fact about a metric, read in one place.

Collectors, the counter rule, config defaults, Prometheus types and help, the console's columns,
charts and units, and the pipeline's metric lists all ask this module, so adding a metric is one
SQL file per dialect plus one catalog entry, and no two parts of the product can disagree about
what a metric is. Pure data: no I/O beyond reading the packaged TOML file once.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any, Literal

Kind = Literal["gauge", "counter", "epoch", "info"]
KINDS: tuple[str, ...] = ("gauge", "counter", "epoch", "info")
RATE_SUFFIX = "_per_s"
# sys.dm_os_performance_counters.cntr_type values that are instantaneous (a level, not a total):
# 65792 PERF_COUNTER_LARGE_RAWCOUNT, 537003264 PERF_LARGE_RAW_FRACTION, 1073939712 its base
# (reference §4): a counter row whose note carries one of them is not turned into a rate.
INSTANT_CNTR_TYPES = frozenset({65792, 537003264, 1073939712})


@dataclass(frozen=True)
class Metric:
    """One catalog entry (see the header of ``sql/metrics.toml`` for each field's meaning)."""

    name: str
    collectors: tuple[str, ...]
    kind: Kind = "gauge"
    unit: str = ""
    label: str = ""
    help: str = ""
    warn: float | None = None
    crit: float | None = None
    direction: Literal["above", "below"] = "above"
    min_pages: float | None = None
    min_rows: float | None = None
    samples: int = 1
    overview: int | None = None
    chart: bool = False
    tile: bool = False
    rollup: str = "gauge"
    finding: str = ""
    advice: str = ""
    action: str = ""
    source: Literal["sql", "runner"] = "sql"  # runner: written by collectors/runner.py, not by a SQL file

    @property
    def has_threshold(self) -> bool:
        return self.warn is not None or self.crit is not None


_FIELDS = set(Metric.__dataclass_fields__) - {"name", "collectors"}


def _entry(name: str, raw: dict[str, Any]) -> Metric:
    unknown = set(raw) - _FIELDS - {"collector"}
    if unknown:
        raise ValueError(f"metric catalog: {name}: unknown field(s) {', '.join(sorted(unknown))}")
    coll = raw.get("collector", ())
    if not coll and raw.get("source", "sql") == "sql":
        raise ValueError(f"metric catalog: {name}: no collector")
    collectors = (coll,) if isinstance(coll, str) else tuple(coll)
    kind = raw.get("kind", "gauge")
    if kind not in KINDS:
        raise ValueError(f"metric catalog: {name}: kind {kind!r} is not one of {', '.join(KINDS)}")
    fields = {k: v for k, v in raw.items() if k != "collector"}
    fields.setdefault("rollup", "counter" if kind == "counter" else "gauge")
    fields.setdefault("label", name.replace("_", " "))
    return Metric(name=name, collectors=collectors, **fields)


def parse(text: str) -> dict[str, Metric]:
    """The catalog from TOML text (``[metrics.<name>]`` tables), in file order."""
    data = tomllib.loads(text)
    return {name: _entry(name, raw) for name, raw in data.get("metrics", {}).items()}


@dataclass(frozen=True)
class CollectorEntry:
    """A ``[collectors.<name>]`` table: cadence, scope and what it measures; ``metrics`` are the
    entries that name it (filled by :func:`collectors`), so the registry needs no class of its own."""

    name: str
    cadence: Literal["fast", "slow"]
    scope: Literal["queue", "target"] = "queue"
    description: str = ""
    metrics: tuple[str, ...] = ()


def parse_collectors(text: str) -> dict[str, CollectorEntry]:
    """The collectors of a catalog's TOML text, in file order."""
    out: dict[str, CollectorEntry] = {}
    for name, raw in tomllib.loads(text).get("collectors", {}).items():
        if raw.get("cadence") not in ("fast", "slow") or raw.get("scope", "queue") not in ("queue", "target"):
            raise ValueError(f"metric catalog: collector {name}: cadence must be fast|slow, scope queue|target")
        out[name] = CollectorEntry(name, **raw)
    return out


@cache
def _text() -> str:
    return resources.files("sql").joinpath("metrics.toml").read_text(encoding="utf-8")


@cache
def load() -> dict[str, Metric]:
    """The packaged catalog's metrics, in file order."""
    return parse(_text())


@cache
def collectors() -> dict[str, CollectorEntry]:
    """The packaged catalog's collectors, in file order, each with the metrics it may emit."""
    return {name: replace(c, metrics=of_collector(name)) for name, c in parse_collectors(_text()).items()}


def metrics() -> dict[str, Metric]:
    return load()


def get(name: str) -> Metric | None:
    """The entry of ``name``; a derived ``<counter>_per_s`` rate is a gauge described by its counter."""
    cat = load()
    if name in cat:
        return cat[name]
    base = rate_source(name)
    if base is not None:
        src = cat[base]
        return Metric(name, src.collectors, "gauge", f"{src.unit}/s" if src.unit else "/s", src.label,
                      f"{src.help.removesuffix(' (running total)')} per second (rate of {base})",
                      finding=src.finding)
    return None


def accepted_names(*more: str) -> str:
    """What a metric name may be, for the error that refuses an unknown one (a threshold, an alert
    rule, an autopilot condition): one wording, wherever a name is checked against the catalog."""
    return ("any metric of sql/metrics.toml, or a counter's <name>" + RATE_SUFFIX + " rate"
            + (f", or {', '.join(more)}" if more else ""))


def target_wide(name: str) -> str | None:
    """The collector of ``name`` when only target-scope collectors emit it (a server-wide figure,
    in the target's row, queue ``''``), else None: no queue's row carries such a metric."""
    m = get(name)
    cols = collectors()
    scopes = {cols[c].scope for c in m.collectors if c in cols} if m is not None else set()
    return m.collectors[0] if m is not None and scopes == {"target"} else None


def rate_source(name: str) -> str | None:
    """``lock_timeouts_per_s`` -> ``lock_timeouts_total`` when that is a catalogued counter."""
    if not name.endswith(RATE_SUFFIX):
        return None
    base = name.removesuffix(RATE_SUFFIX) + "_total"
    m = load().get(base)
    return base if m is not None and m.kind == "counter" else None


def kind(name: str) -> str:
    """The kind of a stored metric; unknown names are gauges (never turned into rates)."""
    m = get(name)
    return m.kind if m is not None else "gauge"


def is_counter(name: str) -> bool:
    return kind(name) == "counter"


def rate_name(counter: str) -> str:
    """``lock_timeouts_total`` -> ``lock_timeouts_per_s``."""
    return counter.removesuffix("_total") + RATE_SUFFIX


def names(kind_: str | None = None) -> tuple[str, ...]:
    return tuple(n for n, m in load().items() if kind_ is None or m.kind == kind_)


def of_collector(collector: str) -> tuple[str, ...]:
    """The metrics a collector may emit, in catalog order."""
    return tuple(n for n, m in load().items() if collector in m.collectors)


def thresholds() -> dict[str, tuple[float | None, float | None, str]]:
    """Default ``(warn, crit, direction)`` of every metric that has a level."""
    return {n: (m.warn, m.crit, m.direction) for n, m in load().items() if m.has_threshold}


def overview_columns() -> tuple[str, ...]:
    """The Overview's metric columns, in their order."""
    cols = [(m.overview, n) for n, m in load().items() if m.overview is not None]
    return tuple(n for _, n in sorted(cols))


def charted() -> tuple[str, ...]:
    return tuple(n for n, m in load().items() if m.chart)


def tiles() -> tuple[str, ...]:
    return tuple(n for n, m in load().items() if m.tile)


def label(name: str) -> str:
    m = get(name)
    return m.label if m is not None else name.replace("_", " ")


def unit(name: str) -> str:
    m = get(name)
    return m.unit if m is not None else ""


def help_text(name: str) -> str:
    m = get(name)
    return m.help if m is not None and m.help else f"queueops snapshot metric {name}"
