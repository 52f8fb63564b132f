"""Spans with no data, told apart from healthy silence: the charts draw them as gaps.

Two kinds, both written by ``queueops collect`` as ``collector_status`` rows:

* the service was not running (an unclean stop; :mod:`queueops.service.runs`): target
  ``(service)``, collector ``service``, ``ok`` false, the span ``[ts, ts + duration_ms]``;
* a target was down (:mod:`queueops.service.outage`): collector ``(outage)``, a ``down`` row at
  its start and an ``up`` row (``duration_ms`` = the outage) at its end; a ``down`` row without
  its ``up`` row is an outage still going on.

Without this a line chart joins the last sample before the gap to the first after it, and an
outage reads like a quiet, healthy stretch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import Engine, and_, or_, select
from sqlalchemy.exc import SQLAlchemyError

from queueops.store.schema import collector_status as cs
from queueops.store.writer import OUTAGE, SERVICE_TARGET
from queueops.store.writer import SERVICE_RUN as RUN

LOOKBACK = timedelta(days=1)  # a gap that began this long before the window still shows in it


@dataclass(frozen=True)
class Gap:
    start: datetime
    end: datetime
    reason: str  # "service not running" | "target down"
    detail: str = ""


def _utc(ts: Any) -> datetime:
    t = pd.Timestamp(ts)
    return (t.tz_localize(UTC) if t.tzinfo is None else t.tz_convert(UTC)).to_pydatetime()


def read_gaps(engine: Engine | None, target: str, since: datetime, now: datetime) -> list[Gap]:
    """The gaps of ``target`` overlapping ``[since, now]``, oldest first ([] if the store cannot be read)."""
    if engine is None:
        return []
    stmt = (select(cs.c.ts, cs.c.target, cs.c.collector, cs.c.ok, cs.c.duration_ms, cs.c.error)
            .where(cs.c.ts >= since - LOOKBACK, cs.c.ts <= now,
                   or_(and_(cs.c.target == SERVICE_TARGET, cs.c.collector == RUN, cs.c.ok.is_(False)),
                       and_(cs.c.target == target, cs.c.collector == OUTAGE)))
            .order_by(cs.c.ts))
    try:
        with engine.connect() as conn:
            rows = conn.execute(stmt).all()
    except SQLAlchemyError:
        return []  # the page says the store cannot be read elsewhere
    out: list[Gap] = []
    down: tuple[datetime, str] | None = None
    for ts, tgt, _collector, ok, duration_ms, error in rows:
        ts = _utc(ts)
        if tgt == SERVICE_TARGET:
            out.append(Gap(ts, ts + timedelta(milliseconds=float(duration_ms or 0)), "service not running", error))
        elif not ok:
            down = down or (ts, error)
        else:
            out.append(Gap(ts - timedelta(milliseconds=float(duration_ms or 0)), ts, "target down", error))
            down = None
    if down is not None:
        out.append(Gap(down[0], now, "target down", f"{down[1]} (still down)"))
    return sorted((g for g in out if g.end > since and g.end > g.start), key=lambda g: g.start)


def break_lines(df: pd.DataFrame, gaps: list[Gap]) -> pd.DataFrame:
    """``df`` (ts, metric, value) with an empty point in the middle of each gap, per metric, so a
    line chart stops at the gap instead of joining across it."""
    if df.empty or not gaps:
        return df
    marks = [{"ts": pd.Timestamp(g.start + (g.end - g.start) / 2), "metric": m, "value": None}
             for g in gaps for m in df["metric"].unique()]
    out = pd.concat([df, pd.DataFrame(marks).astype({"value": "float64"})], ignore_index=True)
    return out.sort_values("ts", kind="stable").reset_index(drop=True)


def shade(fig: Any, gaps: list[Gap], since: datetime) -> None:  # noqa: ANN401 - a plotly Figure
    """A grey band over each gap, labelled with what it was (the hover of the band says more)."""
    for g in gaps:
        fig.add_vrect(x0=max(g.start, since), x1=g.end, fillcolor="#8c959f", opacity=0.18, line_width=0,
                      annotation_text=f"no data: {g.reason}", annotation_position="top left",
                      annotation={"font": {"size": 10, "color": "#57606a"}})
