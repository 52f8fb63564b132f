"""Queue detail: the metrics over a chosen window, what causes them now, what to do, and the actions."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from console import auth, chrome, context, gaps, style
from console.data import LiveSample
from console.findings import Recommendation, RootCause, assess
from console.health import ICON, LABEL, QueueHealth, cell_state, format_value, streaks
from console.views import actions_panel, autopilot_panel, overview, terminate_card
from console.views import items as items_view
from console.views.overview import recent_rows
from queueops import catalog
from queueops.config import Config, Queue

WINDOWS: dict[str, timedelta] = {"15 min": timedelta(minutes=15), "1 h": timedelta(hours=1),
                                 "6 h": timedelta(hours=6), "24 h": timedelta(hours=24), "7 d": timedelta(days=7)}
# Charted when there is data for them, and the tiles: from the metric catalog (``chart`` / ``tile``).
CHARTED = catalog.charted()
TILES = catalog.tiles()
BADGE = {"crit": "red", "warn": "orange", "ok": "green", "unknown": "gray"}
SEV_ICON = {"crit": ":material/error:", "warn": ":material/warning:", "info": ":material/lightbulb:"}
MAX_POINTS = 600  # per series; longer windows are bucketed (max per bucket: peaks stay visible)


def pick_queue(cfg: Config, requested: str | None) -> Queue | None:
    names = [q.name for q in cfg.queues]
    if requested in names:
        return cfg.queue(requested)
    return cfg.queues[0] if cfg.queues else None


def downsample(df: pd.DataFrame, window: timedelta, points: int = MAX_POINTS) -> pd.DataFrame:
    """At most ``points`` per metric: the max of each time bucket (a spike is never averaged away)."""
    if df.empty or df.groupby("metric").size().max() <= points:
        return df
    bucket = pd.Timedelta(seconds=max(1, int(window.total_seconds() / points)))
    out = df.assign(ts=df["ts"].dt.floor(bucket)).groupby(["metric", "ts"], as_index=False)["value"].max()
    return out


def series(ctx: context.Ctx, q: Queue, window: timedelta, now: datetime) -> pd.DataFrame:
    """History from the store plus the console's own live samples, one frame, oldest first."""
    since = now - window
    stored = ctx.store.history(CHARTED, since, [(q.target, q.name)])
    live = [ctx.sampler.history(m) for m in CHARTED]
    live = [f[(f["target"] == q.target) & (f["queue"] == q.name) & (f["ts"] >= since)] for f in live if not f.empty]
    frames = [f[["ts", "metric", "value"]] for f in [stored, *live] if not f.empty]
    if not frames:
        return pd.DataFrame(columns=["ts", "metric", "value"])
    df = pd.concat(frames, ignore_index=True).dropna(subset=["value"]).sort_values("ts")
    return downsample(df, window)


def causes_for(sample: LiveSample, q: Queue) -> list[RootCause]:
    """The root causes that concern this queue now (the Overview's, :func:`overview.causes_for`)."""
    return overview.causes_for(sample, q)


def previewing(q: Queue) -> bool:
    """An action or End session preview is open for this queue: the page holds still meanwhile."""
    pending = st.session_state.get(actions_panel.PLAN_KEY)
    return terminate_card.pending_for(q) is not None or (
        isinstance(pending, actions_panel.Pending) and pending.queue == q.name)


def render() -> None:
    """The page refreshes itself like the Overview (a fragment re-run every ``[console] refresh_s``),
    except while a preview is open: it holds still then, and says so."""
    ctx = context.get()
    q = _chosen(ctx.cfg)
    if q is not None:
        terminate_card.open_from_link(ctx, q)  # ?end=PID from the Overview's root causes
    paused = q is not None and ctx.can_act and previewing(q)  # a viewer has no preview to hold still for

    @st.fragment(run_every=None if paused else ctx.cfg.console.refresh_s)
    def live() -> None:
        if not auth.still_signed_in(ctx.cfg):  # signed out elsewhere, idle, expired: the gate takes over
            st.rerun()
        _page(ctx, paused)

    live()


def _chosen(cfg: Config) -> Queue | None:
    """The queue to show. A ?queue= that differs from the one this page last wrote is a link (from
    the overview, a bookmark): it wins over the selectbox's remembered value."""
    linked = st.query_params.get("queue")
    if linked and linked != st.session_state.get("qd_synced") and linked in {x.name for x in cfg.queues}:
        st.session_state["qd_queue"] = linked
    return pick_queue(cfg, st.session_state.get("qd_queue") or linked)


def _page(ctx: context.Ctx, paused: bool) -> None:
    cfg = ctx.cfg
    q = _chosen(cfg)
    if q is None:
        chrome.title(ctx, "Queue detail")
        st.info("No queues are configured.")
        return
    st.query_params["queue"] = q.name
    st.session_state["qd_synced"] = q.name
    st.session_state["qd_queue"] = q.name
    names = [x.name for x in cfg.queues]
    target = cfg.target(q.target)
    sample = ctx.sampler.sample()
    values = sample.values().get((q.target, q.name), {})
    reachable = q.target not in sample.unreachable()
    causes = causes_for(sample, q) if reachable else []
    health, recs = assess(q, target.dialect, values, causes, reachable=reachable,
                          error=sample.queue_errors().get((q.target, q.name), ""),
                          recent=streaks(recent_rows(ctx.sampler), q))
    chrome.title(ctx, f"Queue {q.name}")
    row = st.columns([1.2, 4, 1.6], vertical_alignment="center")
    with row[0]:
        st.badge(LABEL[health.state], icon=ICON[health.state], color=BADGE[health.state])  # type: ignore[arg-type]
    with row[2]:
        st.selectbox("Queue", names, key="qd_queue", label_visibility="collapsed")
    table = ".".join(x for x in (q.schema_, q.table) if x)
    st.caption(f"{q.kind} queue · `{table}` on target `{target.name}` ({target.dialect}) · "
               + lease_text(q) + f"sampled {style.utc_text(sample.ts)} · "
               + ("**paused while previewing** (run or cancel the preview to resume)" if paused
                  else f"refreshing every {cfg.console.refresh_s:g} s"))
    if paused:
        st.button("Refresh now", key="qd_refresh", icon=":material/refresh:",
                  help="Sample again once; the open preview stays as it is")
    if q.target in sample.unreachable():
        st.error(f"Target `{q.target}` is unreachable: {sample.unreachable()[q.target]}", icon=":material/cloud_off:")
    elif health.error:
        st.error(f"This queue cannot be read: {health.error}", icon=":material/table:")
    if (health.reasons or health.causes) and q.target not in sample.unreachable():
        st.markdown(" · ".join(f"**{text}**" for text in [*health.causes, *(f.text() for f in health.reasons)]))

    _tiles(q, health)

    st.subheader("Over time")
    label = _window()
    _charts(ctx, q, WINDOWS[label], sample.ts)

    left, right = st.columns(2, gap="large")
    with left:
        st.subheader("Root causes now")
        _causes(ctx, q, causes)
    with right:
        st.subheader("Findings and recommendations")
        _recommendations(recs, health)

    items_view.render(ctx, q, values)  # counts by state and the items behind them (issue 32)

    st.subheader("Actions")
    actions_panel.render(ctx, q, recs)

    st.subheader("Autopilot")
    autopilot_panel.render(ctx, q.name)


# The kinds whose items are held by a lease that can expire (stuck_leases judges them against
# lease_timeout_s); a due, ring or delete queue has no lease to time out.
LEASED_KINDS = frozenset({"lease", "status"})


def lease_text(q: Queue) -> str:
    """``lease timeout 30 s · `` where the queue's kind has leases, nothing where it has none."""
    if q.kind not in LEASED_KINDS:
        return ""
    return f"lease timeout {format_value('lease_timeout_s', q.lease_timeout_s)} · "


def _window() -> str:
    """The chart window, kept in the URL (``?window=6h``) so a link or a reload shows the same."""
    slug = {k: k.replace(" ", "") for k in WINDOWS}
    wanted = next((k for k, v in slug.items() if v == st.query_params.get("window")), "1 h")
    if st.session_state.get("qd_window") not in WINDOWS:
        st.session_state["qd_window"] = wanted
    label = st.segmented_control("Window", list(WINDOWS), key="qd_window", label_visibility="collapsed") or wanted
    st.query_params["window"] = slug[label]
    return label


def _tiles(q: Queue, health: QueueHealth) -> None:
    _unavailable(q)
    values = health.values
    shown = [m for m in TILES if values.get(m) is not None]
    if not shown:
        return
    box = st.container(horizontal=True, wrap=True, key="qd_tiles")  # wraps at 800 px: labels stay whole
    for metric in shown:
        v = values[metric]
        state = cell_state(q, health, metric)  # the judge's verdict, as on the Overview
        text = style.METRICS[metric].help if metric in style.METRICS else None
        if metric in health.ignored:
            text = f"{text or ''} — {health.ignored[metric]}".strip(" —")
        box.metric(f"{ICON[state] if state != 'ok' else ''} {style.label(metric)}".strip(),
                   format_value(metric, v) + (" (not judged)" if metric in health.ignored else ""),
                   border=True, help=text, width=overview.TILE_WIDTH + 20)


def _unavailable(q: Queue) -> None:
    """A library preset's metrics that cannot be had for it, said instead of a blank tile."""
    if not q.preset:
        return
    from queueops import presets

    for metric, why in presets.unavailable(q.preset).items():
        name = style.label(metric) if metric in style.METRICS else metric
        st.caption(f"{name}: not available for this library ({presets.get(q.preset).library}): {why}")


def _charts(ctx: context.Ctx, q: Queue, window: timedelta, now: datetime) -> None:
    df = series(ctx, q, window, now)
    holes = gaps.read_gaps(ctx.store.engine, q.target, now - window, now)  # no data: not healthy silence
    # A metric without thresholds that stayed at zero all window says nothing: leave it out; so
    # does PostgreSQL's dead_tuples when ghost_records already charts the same figure.
    have = set(df["metric"])
    metrics = [m for m in CHARTED if m in have
               and not (m == "dead_tuples" and "ghost_records" in have)
               and (q.threshold(m) is not None or df.loc[df["metric"] == m, "value"].abs().max() > 0)]
    if not metrics:
        st.info("No samples in this window yet. The console adds a point every refresh; "
                "`queueops collect` keeps history.")
        return
    fig = chart_figure(q, df, metrics, holes, window, now, ctx.tz)
    st.plotly_chart(fig, key="qd_chart", config=style.toolbar(f"queueops-{q.name}-{int(window.total_seconds())}s"))
    start = style.window_start(df["ts"], now, window)
    note = "" if start <= now - window + timedelta(seconds=1) else " (history starts later: zoomed to it)"
    st.caption(f"UTC; hover shows your local time. {style.utc_text(start, seconds=False)} → "
               f"{style.utc_text(now, seconds=False)}{note} · the toolbar zooms, resets the zoom and saves a PNG")


def chart_figure(q: Queue, df: pd.DataFrame, metrics: list[str], holes: list[gaps.Gap], window: timedelta,
                 now: datetime, tz: str | None) -> go.Figure:
    """The queue's charts, one per metric, on one shared time axis whose times are labelled under
    every chart (not only the last: at 3 a.m. nobody scrolls to the eighth to read a time); hover
    values carry their unit."""
    n = len(metrics)
    fig = make_subplots(rows=n, cols=1, shared_xaxes=True, vertical_spacing=min(0.08, 0.35 / max(n, 1)),
                        subplot_titles=[_subplot_title(q, m) for m in metrics])
    for i, m in enumerate(metrics, start=1):
        d = gaps.break_lines(df[df["metric"] == m], holes)
        thr = q.threshold(m)
        unit = style.unit(m)
        fig.add_trace(style.time_trace(d["ts"], d["value"], style.label(m), tz,
                                       color=style.SERIES[(i - 1) % len(style.SERIES)],
                                       suffix=f" {unit}" if unit else ""), row=i, col=1)
        if thr is not None:
            # Draw a level only near the data: a line at 20,000 would flatten a depth of 40 to nothing.
            top = float(d["value"].max()) if not d.empty else 0.0
            near = [lv if lv is not None and (lv <= max(top, 1.0) * 2 or thr.direction == "below") else None
                    for lv in (thr.warn, thr.crit)]
            style.threshold_lines(fig, near[0], near[1], row=i, col=1)
    style.apply(fig, height=max(280, 155 * n + 40), legend=False)
    fig.update_layout(uirevision=f"{q.name}:{window}")  # a zoom survives the page's refreshes
    start = style.window_start(df["ts"], now, window)
    fig.update_xaxes(range=[start, now], showticklabels=True, tickfont={"size": 11})
    for ann in fig.layout.annotations:  # subplot titles: left-aligned like the rest of the page
        if ann.text and not ann.text.startswith(("warn", "crit")):
            ann.update(x=0, xanchor="left", font={"size": 13})
    gaps.shade(fig, holes, start)
    return fig


def _subplot_title(q: Queue, metric: str) -> str:
    text = style.label(metric) + (f" ({style.unit(metric)})" if style.unit(metric) else "")
    thr = q.threshold(metric)
    if thr is not None:
        op = "<" if thr.direction == "below" else "≥"
        levels = [f"{name} {op} {format_value(metric, lv)}" for name, lv in (("warn", thr.warn), ("crit", thr.crit))
                  if lv is not None and not (name == "warn" and lv == thr.crit)]
        if levels:
            text += f"  <span style='color:{style.MUTED};font-size:11px'>{' · '.join(levels)}</span>"
    return text


def _causes(ctx: context.Ctx, q: Queue, causes: list[RootCause]) -> None:
    relevant = [c for c in causes if c.kind in ("snapshot", "blocker")]
    terminate_card.render_result(ctx, q)
    terminate_card.render_pending(ctx, q, {c.pid for c in relevant if c.pid is not None})
    if not relevant:
        st.success("No transaction is holding cleanup back and no session blocks this target.",
                   icon=":material/check_circle:")
        return
    for i, c in enumerate(relevant):
        with st.container(border=True):
            icon = ":material/hourglass_top:" if c.kind == "snapshot" else ":material/block:"
            st.markdown(f"{icon} **{c.summary}**")
            d = c.details
            facts = [f"{k.replace('_', ' ')} **{d[k]}**" for k in ("state", "wait_event", "blocked", "kind")
                     if d.get(k) not in (None, "")]
            for key in ("xact_start", "state_change"):
                if d.get(key):
                    facts.append(f"{key.replace('_', ' ')} {style.utc_text(pd.Timestamp(d[key]))}")
            if facts:
                st.caption(" · ".join(facts))
            text = next((d[k] for k in ("query", "sql_text", "statement") if d.get(k)), None)
            if text:
                st.code(str(text)[:2000], language="sql", wrap_lines=True)
            with st.expander("Everything the collector saw"):
                st.json({k: v for k, v in d.items()}, expanded=True)
            terminate_card.render(ctx, q, c, i)


def _recommendations(recs: list[Recommendation], health: QueueHealth | None = None) -> None:
    ignored = dict(health.ignored) if health is not None else {}
    for metric, why in ignored.items():  # past a level, left out by the judge on purpose: say why
        st.info(f"**{style.label(metric)} {format_value(metric, health.values.get(metric)) if health else ''}** is "
                f"past its level but {why}.", icon=":material/info:")
    if not recs:
        st.success("Nothing to recommend: every judged metric is within its thresholds"
                   + (" (see the value not judged above)." if ignored else "."), icon=":material/check_circle:")
        return
    for r in recs:
        with st.container(border=True):
            st.markdown(f"{SEV_ICON[r.severity]} **{r.title}**  \n{r.evidence}")
            st.markdown(r.advice)
            extra = []
            if r.action:
                extra.append(f"action: `{r.action}`")
            if r.source:
                extra.append(f"source: {r.source}")
            if extra:
                st.caption(" · ".join(extra))
