"""One style for every chart of the console, and how times and metrics are labelled.

Every plotly chart goes through :func:`apply`, and the Overview's small charts are
Vega-Lite specs from :func:`level_chart` with the same colours and fonts, so a colour or a font
changes in one place. (The Overview draws no plotly chart: plotly.js is a 4.7 MB chunk that a new
browser context must load and parse before the first chart appears; Vega ships with Streamlit's
smaller chart bundle.) Times are plotted in UTC; hover labels add the viewer's local time and offset (taken from
the browser through ``st.context.timezone`` by the caller) so that "14:03 UTC" and "16:03 here"
are never confused at 3 a.m.

Light and dark: no chart sets a text or background colour of its own (Streamlit's chart theme,
which follows the page's, draws them), so a chart reads the same in both; reset-zoom and PNG
export are in every plotly chart's toolbar (:func:`toolbar`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pandas as pd
import plotly.graph_objects as go

from queueops import catalog

FONT = "Source Sans Pro, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"
# Text and background colours are left to Streamlit's theme (light or dark, following the browser):
# only data colours are set here, and the two neutrals below read on a white and a black page alike.
MUTED = "#8b949e"
GRID = "rgba(128,128,128,0.22)"
PRIMARY = "#1f6feb"
STATE_COLOR = {"ok": "#2da44e", "warn": "#d4a72c", "crit": "#cf222e", "unknown": "#8c959f"}
SERIES = ["#1f6feb", "#8250df", "#bf3989", "#1b7c83", "#953800", "#4d2d00", "#57606a"]


@dataclass(frozen=True)
class MetricInfo:
    label: str
    unit: str = ""
    help: str = ""


# Label, unit and help of every catalogued metric (sql/metrics.toml), plus the rates the
# collectors derive from its counters (``lock_timeouts_per_s``).
METRICS: dict[str, MetricInfo] = {
    name: MetricInfo(m.label, m.unit, m.help)
    for name in (*catalog.names(), *(catalog.rate_name(c) for c in catalog.names("counter")))
    if (m := catalog.get(name)) is not None
}


def label(metric: str) -> str:
    info = METRICS.get(metric)
    return info.label if info else metric.replace("_", " ")


def unit(metric: str) -> str:
    info = METRICS.get(metric)
    return info.unit if info else ""


def tzinfo(name: str | None) -> timezone | ZoneInfo:
    """The viewer's time zone (an IANA name from the browser), UTC when unknown or invalid."""
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def offset_text(dt: datetime) -> str:
    off = dt.utcoffset() or timedelta(0)
    minutes = int(off.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "−"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def utc_text(ts: datetime | pd.Timestamp | None, tz: str | None = None, seconds: bool = True) -> str:
    """``2026-11-21 14:03:22 UTC`` (the local time is added by :func:`local_text` where room allows)."""
    if ts is None or pd.isna(ts):
        return "never"
    t = pd.Timestamp(ts)
    t = t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")
    return t.strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC")


def local_text(ts: datetime | pd.Timestamp, tz: str | None) -> str:
    t = pd.Timestamp(ts)
    t = t.tz_localize("UTC") if t.tzinfo is None else t
    local = t.to_pydatetime().astimezone(tzinfo(tz))
    return f"{local:%Y-%m-%d %H:%M:%S} local ({offset_text(local)})"


def hover_times(ts: Sequence[datetime] | pd.Series, tz: str | None) -> list[str]:
    """Per point: the local time and its offset, for ``customdata`` in hover templates."""
    zone = tzinfo(tz)
    out = []
    for t in pd.to_datetime(pd.Series(ts), utc=True):
        local = t.to_pydatetime().astimezone(zone)
        out.append(f"{local:%H:%M:%S} local ({offset_text(local)})")
    return out


def apply(fig: go.Figure, *, height: int = 320, title: str | None = None, legend: bool = True) -> go.Figure:
    """The shared look: the page's background, a light grid, compact margins, UTC axis, unified hover."""
    fig.update_layout(
        height=height,
        margin={"l": 8, "r": 8, "t": 40 if title else 12, "b": 8},
        font={"family": FONT, "size": 13},
        title={"text": title, "x": 0, "xanchor": "left", "font": {"size": 15}} if title else None,
        hovermode="x unified",
        hoverlabel={"font": {"family": FONT, "size": 12}},
        showlegend=legend,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1,
                "font": {"size": 12}},
        colorway=SERIES,
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
    )
    fig.update_xaxes(showgrid=True, gridcolor=GRID, linecolor=GRID, zeroline=False)
    fig.update_yaxes(showgrid=True, gridcolor=GRID, linecolor=GRID, title_font={"size": 12}, zeroline=False,
                     rangemode="tozero")
    return fig


def toolbar(filename: str) -> dict[str, object]:
    """``st.plotly_chart``'s config: a toolbar with only zoom, reset zoom and PNG export, shown
    always (a 3 a.m. reader should not have to discover it by hovering)."""
    return {"displayModeBar": True, "displaylogo": False,
            "modeBarButtons": [["zoom2d", "resetScale2d", "toImage"]],
            "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2}}


def time_trace(ts: Sequence[datetime] | pd.Series, values: Sequence[float | None] | pd.Series, name: str,
               tz: str | None, color: str | None = None, fmt: str = ",.4~g", suffix: str = "") -> go.Scatter:
    """A line over UTC time whose hover shows the value, the UTC time and the local time."""
    n = len(values)
    return go.Scatter(
        x=list(pd.to_datetime(pd.Series(ts), utc=True)), y=list(values), name=name,
        mode="lines+markers" if n < 40 else "lines",  # a few samples must still be visible
        marker={"size": 5, "color": color} if color else {"size": 5},
        line={"width": 2, "color": color} if color else {"width": 2},
        customdata=hover_times(ts, tz),
        hovertemplate=f"%{{y:{fmt}}}{suffix}<br>%{{x|%H:%M:%S}} UTC · %{{customdata}}<extra>{name}</extra>",
    )


def window_start(ts: pd.Series, now: datetime, window: timedelta) -> datetime:
    """Where a chart's time axis starts: the window, or the first sample when history is shorter.

    A console started five minutes ago must not squeeze its five minutes into the last pixels of
    an hour-wide axis.
    """
    start = now - window
    if ts.empty:
        return start
    first = pd.to_datetime(ts, utc=True).min().to_pydatetime()
    if first > start:
        pad = max(timedelta(seconds=10), (now - first) * 0.05)
        return max(start, first - pad)
    return start


def threshold_lines(fig: go.Figure, warn: float | None, crit: float | None, row: int | None = None,
                    col: int | None = None) -> None:
    """Dashed warn / crit levels, labelled on the right edge."""
    kwargs = {"row": row, "col": col} if row else {}
    for level, state, text, where in ((warn, "warn", "warn", "bottom right"), (crit, "crit", "crit", "top right")):
        if level is None or (state == "warn" and level == crit):
            continue  # one line when both levels coincide (e.g. one stuck lease is critical)
        fig.add_hline(y=level, line={"color": STATE_COLOR[state], "dash": "dash", "width": 1},
                      annotation_text=text, annotation_position=where,
                      annotation_font={"color": STATE_COLOR[state], "size": 11}, **kwargs)


def time_axis_format(span: timedelta) -> tuple[str, int]:
    """A time axis's label format and its smallest step between ticks (ms): seconds on a window of
    ten minutes or less, minutes above it, and never two ticks closer than what the format shows
    (``17:43 17:43 17:44`` was three ticks 20 s apart labelled in minutes)."""
    if span <= timedelta(minutes=10):
        return "%H:%M:%S", 1_000
    return "%H:%M", 60_000


def value_text(value: float | None, unit: str) -> str:
    """A value with its unit for a tooltip: ``97 items``, ``12.5 %``, ``3.2 s``."""
    if value is None or pd.isna(value):
        return ""
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return f"{text} {unit}".strip() if unit != "%" else f"{text} %"


def level_chart(ts: pd.Series, values: pd.Series, name: str, tz: str | None, *, color: str,
                warn: float | None, crit: float | None, x_range: tuple[datetime, datetime],
                title: str, height: int = 220, unit: str = "") -> tuple[pd.DataFrame, dict[str, object]]:
    """A small line over UTC time with its dashed warn / crit levels, as data and a Vega-Lite spec.

    The same reading as :func:`time_trace` plus :func:`threshold_lines`: UTC axis, the value with
    its ``unit``, UTC and local time in the tooltip, markers when there are few samples, one line
    when both levels coincide.
    """
    utc = pd.to_datetime(pd.Series(ts), utc=True).reset_index(drop=True)
    # Times go to the browser as milliseconds since the epoch: Vega reads those as instants, where
    # Arrow's timezone-aware timestamps arrive in another unit.
    data = pd.DataFrame({"ts": (utc.astype("int64") // 10**6).astype("float64") if len(utc) else pd.Series(dtype=float),
                         "value": pd.Series(values).reset_index(drop=True).astype(float),
                         "utc": utc.dt.strftime("%H:%M:%S UTC"), "local": hover_times(utc, tz)})
    data["shown"] = [value_text(v, unit) for v in data["value"]]
    levels = [{"level": float(level), "state": state} for level, state in ((warn, "warn"), (crit, "crit"))
              if level is not None and not (state == "warn" and level == crit)]
    # The axis range as ISO strings: Vega-Lite drops a temporal axis whose domain is given in numbers.
    lo, hi = (pd.Timestamp(t).tz_convert("UTC").strftime("%Y-%m-%dT%H:%M:%S.%fZ") for t in x_range)
    fmt, step = time_axis_format(pd.Timestamp(x_range[1]) - pd.Timestamp(x_range[0]))
    x = {"field": "ts", "type": "temporal", "title": None, "scale": {"type": "utc", "domain": [lo, hi]},
         "axis": {"format": fmt, "tickMinStep": step, "labelOverlap": True,
                  "gridColor": GRID, "domainColor": GRID}}
    y_axis = {"gridColor": GRID, "domainColor": GRID}
    layers: list[dict[str, object]] = [{
        "mark": {"type": "line", "color": color, "strokeWidth": 2, "clip": True,
                 "point": {"color": color, "size": 25} if len(data) < 40 else False},
        "encoding": {"x": x, "y": {"field": "value", "type": "quantitative", "title": None, "axis": y_axis,
                                   "scale": {"zero": True}},
                     "tooltip": [{"field": "shown", "title": name},
                                 {"field": "utc", "title": "time"}, {"field": "local", "title": "here"}]},
    }]
    if levels:
        level_colors = {"scale": {"domain": ["warn", "crit"], "range": [STATE_COLOR["warn"], STATE_COLOR["crit"]]},
                        "legend": None}
        layers += [
            {"data": {"values": levels}, "mark": {"type": "rule", "strokeDash": [5, 4], "strokeWidth": 1},
             "encoding": {"y": {"field": "level", "type": "quantitative"}, "color": {"field": "state", **level_colors}}},
            {"data": {"values": levels},
             "mark": {"type": "text", "align": "right", "baseline": "bottom", "dy": -2, "fontSize": 11, "x": "width"},
             "encoding": {"y": {"field": "level", "type": "quantitative"}, "text": {"field": "state"},
                          "color": {"field": "state", **level_colors}}},
        ]
    spec: dict[str, object] = {
        "height": height - 40, "title": {"text": title, "anchor": "start", "fontSize": 15, "font": FONT},
        "config": {"font": FONT, "view": {"stroke": None}}, "layer": layers,
    }
    return data, spec

