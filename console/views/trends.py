"""Trends: the Spark pipeline's gold tables -- fleet view, forecasts, findings and hourly rollups.

Read with pyarrow from ``[pipeline] out`` (layout in pipeline/gold.py), cached until the pipeline
finishes its next run. When there is nothing yet, the page says how to produce it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from console import chrome, context, style, urlstate
from console.data import gold_dir, gold_version, read_gold
from console.health import format_value
from queueops import judge
from queueops.config import Config

SEVERITY_COLOR = {"crit": style.STATE_COLOR["crit"], "critical": style.STATE_COLOR["crit"],
                  "warn": style.STATE_COLOR["warn"], "warning": style.STATE_COLOR["warn"],
                  "info": style.PRIMARY}
DAYS = {"24 h": 1, "7 d": 7, "30 d": 30}


@st.cache_data(show_spinner=False, ttl=300, max_entries=16)
def _load(path: str, version: float, name: str, since_date: str | None = None) -> pd.DataFrame:
    filters = [("date", ">=", since_date)] if since_date else []
    if name == "rollups":
        filters.append(("window", "=", "1h"))
    return read_gold(Path(path), name, filters)


def soonest_crossings(forecasts: pd.DataFrame, limit: int = 15) -> pd.DataFrame:
    """Forecasts that cross their critical level, the soonest first (only fits the data supports)."""
    if forecasts.empty or "hours_to_crit" not in forecasts:
        return forecasts.head(0)
    ok = forecasts[(forecasts["status"] == "ok") & forecasts["hours_to_crit"].notna()]
    return ok.sort_values("hours_to_crit").head(limit)


def render() -> None:
    ctx = context.get()
    path = gold_dir(ctx.cfg)
    version = gold_version(path)
    chrome.title(ctx, "Trends", caption=f"Gold tables of the Spark pipeline under `{path}`"
                 + (f" · last run {style.utc_text(datetime.fromtimestamp(version, UTC))}" if version else ""))
    urlstate.seed("tr_period", "period", list(DAYS), "7 d")
    period = st.segmented_control("Period", list(DAYS), key="tr_period", label_visibility="collapsed") or "7 d"
    urlstate.keep("period", period, "7 d")
    since = (datetime.now(UTC) - timedelta(days=DAYS[period])).strftime("%Y-%m-%d")
    tables = {name: _load(str(path), version, name, since if name in ("rollups", "findings") else None)
              for name in ("fleet", "forecasts", "findings", "rollups")}
    if all(df.empty for df in tables.values()):
        config = ctx.cfg.source or "queueops.toml"
        steps = [f"`queueops lake export --config {config}` exports the closed hours now;",
                 f"`queueops pipeline run --config {config}` computes rollups, findings, forecasts and the "
                 "fleet view."]
        if ctx.cfg.pipeline.after_export:
            minutes = max(1, round(ctx.cfg.lake.export_every_s / 60))
            intro = ("No gold tables yet. The collector service runs the Spark pipeline after each lake export "
                     f"that wrote a closed hour (`[pipeline] after_export`, an export every {minutes} min): "
                     "they appear a few minutes after the first hour of snapshots closes. To have them now:")
        else:
            intro = "No gold tables yet. The Spark pipeline produces them from the snapshot lake:"
            steps.insert(0, f"`queueops collect --config {config}` keeps snapshots in the store (and exports "
                            "closed hours to the lake every hour);")
        st.info(intro + "\n\n" + "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1)),
                icon=":material/info:")
        return
    _fleet(tables["fleet"], ctx.cfg)
    _forecasts(tables["forecasts"])
    _findings(tables["findings"], ctx.tz, DAYS[period])
    _rollups(tables["rollups"], ctx.tz)


# The fleet's problems judged as a metric of the queue's thresholds (the others have no level).
JUDGED_AS = {"depth": "depth", "oldest_age_s": "oldest_age_s", "fragmentation_pct": "fragmentation_pct",
             "stuck_leases": "stuck_leases", "lock_waiters": "lock_waiters", "ghosts": "ghost_records"}


def bar_state(cfg: Config, problem: str, queue: str, value: float) -> str:
    """A fleet bar's colour state: the judge's verdict on the value against the queue's own
    thresholds (a depth of 120 is not red when warn is 2,000); a problem without levels, or a queue
    no longer configured, is "ok" (drawn in the neutral colour)."""
    metric = JUDGED_AS.get(problem)
    names = {q.name for q in cfg.queues}
    if metric is None or queue not in names:
        return "ok"
    return judge.judge(value, cfg.queue(queue).threshold(metric))


BAR_COLOR = {"ok": style.PRIMARY, "unknown": style.PRIMARY, "warn": style.STATE_COLOR["warn"],
             "crit": style.STATE_COLOR["crit"]}


def _fleet(fleet: pd.DataFrame, cfg: Config) -> None:
    if fleet.empty:
        return
    st.subheader("Fleet: the worst queues per problem")
    problems = list(dict.fromkeys(fleet["problem"]))
    cols = min(3, len(problems))
    rows = -(-len(problems) // cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[_problem_title(p) for p in problems],
                        horizontal_spacing=0.12, vertical_spacing=0.16)
    for i, problem in enumerate(problems):
        d = fleet[fleet["problem"] == problem].sort_values("rank").head(5).iloc[::-1]
        colors = [BAR_COLOR[bar_state(cfg, problem, q, v)] for q, v in zip(d["queue"], d["value"], strict=True)]
        fig.add_trace(go.Bar(x=d["value"], y=d["target"] + "/" + d["queue"], orientation="h", marker_color=colors,
                             customdata=d["detail"], hovertemplate="%{y}: %{x:,.4~g}<br>%{customdata}<extra></extra>"),
                      row=i // cols + 1, col=i % cols + 1)
    bars = fleet.groupby("problem").size().clip(upper=5).max()
    style.apply(fig, height=rows * (70 + 34 * int(bars)) + 40, legend=False)
    fig.update_layout(hovermode="closest", bargap=0.35, margin={"t": 36})
    fig.update_yaxes(rangemode="normal")
    st.plotly_chart(fig, key="tr_fleet", config=style.toolbar("queueops-fleet"))
    st.caption("A bar is amber or red only past its queue's own warn or critical level; blue is within them.")


# The fleet's problems that are not one metric of style.METRICS (pipeline/fleet.py PROBLEMS).
FLEET_TITLES = {"ghosts": "Ghosts / dead tuples", "stranded_items": "Stranded items (keys below the watermark)",
                "lock_timeouts": "Lock timeouts", "findings": "Findings"}


def _problem_title(problem: str) -> str:
    if problem in FLEET_TITLES:
        return FLEET_TITLES[problem]
    unit = style.unit(problem)
    return style.label(problem) + (f" ({unit})" if unit else "")


def hour_axis_range(starts: list[datetime], min_span: timedelta = timedelta(hours=6)) -> list[datetime]:
    """The x range of an hourly chart: each hour's point with half an hour either side, and at least
    ``min_span`` wide, so that the first hours of data do not get an axis of milliseconds."""
    lo, hi = min(starts) - timedelta(minutes=30), max(starts) + timedelta(minutes=30)
    return [min(lo, hi - min_span), hi]


def _forecasts(forecasts: pd.DataFrame) -> None:
    soon = soonest_crossings(forecasts)
    st.subheader("Forecasts: time to the critical level")
    if soon.empty:
        st.caption("No queue is on a trend towards its critical level (forecasts only where the fit "
                   "supports one).")
        return
    labels = soon["queue"] + " · " + soon["metric"].map(style.label)
    fig = go.Figure(go.Bar(
        x=soon["hours_to_crit"], y=labels, orientation="h", marker_color=style.STATE_COLOR["warn"],
        customdata=list(zip(soon["last_value"], soon["crit"], soon["r2"], strict=True)),
        hovertemplate="%{y}: critical in %{x:.1f} h<br>now %{customdata[0]:,.4~g}, critical at "
                      "%{customdata[1]:,.4~g}, fit r² %{customdata[2]:.2f}<extra></extra>"))
    style.apply(fig, height=120 + 28 * len(soon), legend=False)
    fig.update_layout(hovermode="closest")
    fig.update_xaxes(title_text="hours until critical")
    fig.update_yaxes(autorange="reversed", rangemode="normal")
    st.plotly_chart(fig, key="tr_forecasts", config=style.toolbar("queueops-forecasts"))


def _findings(findings: pd.DataFrame, tz: str | None, days: int) -> None:
    st.subheader("Findings")
    if findings.empty:
        st.caption("No findings in this period.")
        return
    f = findings.sort_values("hour_start", ascending=False)
    fig = go.Figure()
    for sev, d in f.groupby("severity"):
        fig.add_trace(go.Scatter(
            x=list(pd.to_datetime(d["hour_start"], utc=True)), y=list(d["queue"].replace("", "(target)")),
            mode="markers", name=str(sev), marker={"size": 12, "symbol": "square",
                                                   "color": SEVERITY_COLOR.get(str(sev), style.MUTED)},
            customdata=list(zip(d["rule"], d["summary"], style.hover_times(d["hour_start"], tz), strict=True)),
            hovertemplate="%{customdata[0]}: %{customdata[1]}<br>%{x|%Y-%m-%d %H:00} UTC · %{customdata[2]}"
                          "<extra></extra>"))
    style.apply(fig, height=160 + 26 * f["queue"].nunique(), title="Findings per hour")
    now = datetime.now(UTC)
    fig.update_layout(hovermode="closest")
    fig.update_xaxes(range=[now - timedelta(days=days), now])
    fig.update_yaxes(type="category", rangemode="normal")
    st.plotly_chart(fig, key="tr_findings", config=style.toolbar("queueops-findings"))
    st.dataframe(pd.DataFrame({
        "Hour (UTC)": pd.to_datetime(f["hour_start"], utc=True).dt.strftime("%Y-%m-%d %H:00"),
        "Severity": f["severity"], "Queue": f["target"] + "/" + f["queue"], "Rule": f["rule"],
        "Summary": f["summary"], "Recommended action": f["action"]}), hide_index=True,
        column_config={"Summary": st.column_config.TextColumn(width="large")})


def _rollups(rollups: pd.DataFrame, tz: str | None) -> None:
    if rollups.empty:
        return
    st.subheader("Hourly rollups")
    queues = sorted(set(zip(rollups["target"], rollups["queue"], strict=True)) - {(t, "") for t in rollups["target"]})
    if not queues:
        return
    c1, c2 = st.columns(2)
    tq = c1.selectbox("Queue", queues, format_func=lambda x: f"{x[0]}/{x[1]}", key="tr_queue")
    mine = rollups[(rollups["target"] == tq[0]) & (rollups["queue"] == tq[1])]
    metrics = sorted(mine["metric"].unique(), key=lambda m: (m not in style.METRICS, m))
    metric = c2.selectbox("Metric", metrics, format_func=style.label, key="tr_metric")
    d = mine[mine["metric"] == metric].sort_values("window_start")
    x = list(pd.to_datetime(d["window_start"], utc=True))
    fig = go.Figure([
        go.Scatter(x=x, y=list(d["max"]), name="max", mode="lines", line={"width": 0}, showlegend=False,
                   hoverinfo="skip"),
        go.Scatter(x=x, y=list(d["min"]), name="min–max", mode="lines", line={"width": 0}, fill="tonexty",
                   fillcolor="rgba(31,111,235,0.12)", hoverinfo="skip"),
        style.time_trace(d["window_start"], d["mean"], "mean", tz, color=style.PRIMARY),
        style.time_trace(d["window_start"], d["p95"], "p95", tz, color=style.SERIES[1]),
    ])
    style.apply(fig, height=320, title=f"{tq[1]} · {style.label(metric)} per hour")
    if x:
        fig.update_xaxes(range=hour_axis_range(x))
    st.plotly_chart(fig, key="tr_rollup", config=style.toolbar("queueops-rollup"))
    last = d.iloc[-1] if not d.empty else None
    if last is not None:
        st.caption(f"Last hour: mean {format_value(metric, last['mean'])}, p95 {format_value(metric, last['p95'])}, "
                   f"max {format_value(metric, last['max'])} over {int(last['samples'])} samples")
