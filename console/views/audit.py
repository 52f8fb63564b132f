"""Audit: every action anyone took through the console or the CLI, searchable and filterable; below
it, the console's sign-in log (every attempt, failures and throttled ones included, and sign-outs)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from console import chrome, context, style

PERIODS: dict[str, timedelta | None] = {"24 h": timedelta(hours=24), "7 d": timedelta(days=7),
                                        "30 d": timedelta(days=30), "all": None}
OUTCOME_COLOR = {"ok": style.STATE_COLOR["ok"], "failed": style.STATE_COLOR["crit"],
                 "interrupted": "#bc4c00", "refused": "#8250df", "running": style.PRIMARY}
SEARCHED = ("user_name", "action", "target", "queue", "command", "error", "outcome", "params", "preview")


def filter_audit(df: pd.DataFrame, text: str = "", actions: Sequence[str] = (), outcomes: Sequence[str] = (),
                 users: Sequence[str] = (), queues: Sequence[str] = (), since: datetime | None = None
                 ) -> pd.DataFrame:
    """Rows matching every filter; ``text`` is a case-insensitive substring of any searched column.

    The text is matched literally (``regex=False``): typed input is never a pattern.
    """
    out = df
    if since is not None and not out.empty:
        out = out[out["start_time"] >= pd.Timestamp(since)]
    for col, chosen in (("action", actions), ("outcome", outcomes), ("user_name", users), ("queue", queues)):
        if chosen:
            out = out[out[col].isin(list(chosen))]
    needle = text.strip().lower()
    if needle and not out.empty:
        hit = pd.Series(False, index=out.index)
        for col in SEARCHED:
            if col in out.columns:
                hit |= out[col].astype(str).str.lower().str.contains(needle, regex=False, na=False)
        out = out[hit]
    return out


# The filters kept in the URL (?period=24h&outcome=failed&q=lease): a link or a reload shows the same.
URL_LISTS = ("action", "outcome", "user", "queue")


def url_filters(choices: dict[str, list[str]]) -> None:
    """Set the filters from the URL once per session (a link), values the records do not have left out."""
    if st.session_state.get("audit_from_url"):
        return
    st.session_state["audit_from_url"] = True
    q = st.query_params
    slug = {k.replace(" ", ""): k for k in PERIODS}
    st.session_state["audit_period"] = slug.get(q.get("period", ""), "7 d")
    st.session_state["audit_text"] = q.get("q", "")
    for name in URL_LISTS:
        st.session_state[f"audit_{name}"] = [v for v in q.get_all(name) if v in choices[name]]


def keep_in_url() -> None:
    q = st.query_params
    q["period"] = str(st.session_state.get("audit_period", "7 d")).replace(" ", "")
    text = str(st.session_state.get("audit_text") or "")
    if text:
        q["q"] = text
    elif "q" in q:
        del q["q"]
    for name in URL_LISTS:
        values = [str(v) for v in st.session_state.get(f"audit_{name}") or []]
        if values:
            q[name] = values
        elif name in q:
            del q[name]


def render() -> None:
    ctx = context.get()
    chrome.title(ctx, "Audit")
    _actions(ctx)
    _signins(ctx)


def _signins(ctx: context.Ctx) -> None:
    """The last 7 days of the sign-in log (queueops.store.sessions), newest first."""
    from queueops.store import sessions

    if ctx.store.engine is None:
        return
    try:
        rows = sessions.read_log(ctx.store.engine, since=datetime.now(UTC) - timedelta(days=7), limit=1000)
    except Exception:  # noqa: BLE001 - no sign-in table yet (nobody signed in locally), or the store is away
        return
    if not rows:
        return
    df = pd.DataFrame(rows)
    day = df[df["ts"] >= pd.Timestamp(datetime.now(UTC) - timedelta(hours=24))]
    bad = int(day["outcome"].isin(["failed", "locked"]).sum())
    with st.expander(f":material/login: Sign-ins, last 7 days ({len(df)}; {bad} failed or throttled in 24 h)"):
        st.dataframe(pd.DataFrame({
            "Time (UTC)": df["ts"].dt.strftime("%Y-%m-%d %H:%M:%S"), "User": df["user_name"],
            "Address": df["address"], "Outcome": df["outcome"], "Detail": df["detail"],
        }), hide_index=True, key="audit_signins")


def _actions(ctx: context.Ctx) -> None:
    df = ctx.store.audit()
    if ctx.store.error:
        st.warning(f"The store cannot be read: {ctx.store.error}")
    if df.empty:
        st.info("No action has been recorded yet. Every action (preview confirmed, started, finished, "
                "refused) is written here by the action layer, from the console and from `queueops act`.")
        return
    choices = {"action": sorted(df["action"].dropna().unique()), "outcome": sorted(df["outcome"].dropna().unique()),
               "user": sorted(df["user_name"].dropna().unique()), "queue": sorted(df["queue"].dropna().unique())}
    url_filters(choices)
    c = st.columns([3, 2, 2, 2, 2, 1.4])
    text = c[0].text_input("Search", placeholder="user, queue, SQL, error…", key="audit_text")
    actions = c[1].multiselect("Action", choices["action"], key="audit_action")
    outcomes = c[2].multiselect("Outcome", choices["outcome"], key="audit_outcome")
    users = c[3].multiselect("User", choices["user"], key="audit_user")
    queues = c[4].multiselect("Queue", choices["queue"], key="audit_queue")
    period = c[5].selectbox("Period", list(PERIODS), key="audit_period")
    keep_in_url()
    delta = PERIODS[period]
    since = datetime.now(UTC) - delta if delta else None
    shown = filter_audit(df, text, actions, outcomes, users, queues, since)
    st.caption(f"{len(shown)} of {len(df)} records")
    if shown.empty:
        return
    _timeline(shown, ctx.tz, since)
    table = pd.DataFrame({
        "Start (UTC)": shown["start_time"].dt.strftime("%Y-%m-%d %H:%M:%S"),
        "Duration": (shown["end_time"] - shown["start_time"]).dt.total_seconds().map(
            lambda s: "" if pd.isna(s) else f"{s:.1f} s"),
        "User": shown["user_name"], "Role": shown["role"], "Action": shown["action"],
        "Target": shown["target"], "Queue": shown["queue"], "Outcome": shown["outcome"],
        "Rows": shown["rows_affected"], "Error": shown["error"],
    })
    event = st.dataframe(table, hide_index=True, on_select="rerun", selection_mode="single-row", key="audit_table",
                         column_config={"Rows": st.column_config.NumberColumn(format="localized"),
                                        "Error": st.column_config.TextColumn(width="large")})
    rows = getattr(getattr(event, "selection", None), "rows", None) if event is not None else None
    rec = shown.iloc[rows[0] if rows else 0]
    st.subheader(f"Record {rec['id']}: {rec['action']} on {rec['queue']} by {rec['user_name']}")
    st.caption(f"{style.utc_text(rec['start_time'])} · {style.local_text(rec['start_time'], ctx.tz)} · "
               f"outcome **{rec['outcome']}**")
    if rec.get("error"):
        st.error(rec["error"])
    st.markdown("**SQL as run**")
    st.code(rec["command"] or "(none)", language="sql")
    _commands(ctx.store.commands(int(rec["id"])))
    left, right = st.columns(2)
    with left:
        st.markdown("**Parameters**")
        st.json(_json(rec["params"]), expanded=True)
    with right:
        st.markdown("**Preview the operator confirmed**")
        st.json(_json(rec["preview"]), expanded=False)


def commands_table(df: pd.DataFrame) -> pd.DataFrame:
    """The command rows as shown: one line per statement, an open one (no end) said in words."""
    ended = df["end_time"]
    return pd.DataFrame({
        "#": df["seq"], "Step": df["step"].replace("", "(check)"), "Object": df["object"],
        "Start (UTC)": df["start_time"].dt.strftime("%H:%M:%S.%f").str[:-3],
        "Duration": [("open: no end (the process stopped during it)" if pd.isna(e)
                      else f"{(e - s).total_seconds():.3f} s") for s, e in zip(df["start_time"], ended, strict=True)],
        "Rows": df["rows"], "Error": df["error"], "Statement": df["statement"], "Parameters": df["params"],
    })


def _commands(df: pd.DataFrame) -> None:
    """Every statement the action executed, under its record (CommandExecute's CommandLog rows)."""
    st.markdown(f"**Statements executed** ({len(df)})")
    if df.empty:
        st.caption("No statement was executed (refused, nothing to do, or recorded before command rows existed).")
        return
    st.dataframe(commands_table(df), hide_index=True, key="audit_commands",
                 column_config={"Statement": st.column_config.TextColumn(width="large"),
                                "Error": st.column_config.TextColumn(width="medium")})


def _json(text: object) -> object:
    try:
        return json.loads(str(text or "null"))
    except ValueError:
        return str(text)


# Drawn in this order, so that a failure is never hidden under a success at the same instant.
OUTCOME_ORDER = ("ok", "running", "refused", "interrupted", "failed")
OUTCOME_SYMBOL = {"ok": "circle", "running": "circle-open", "refused": "diamond", "interrupted": "triangle-up",
                  "failed": "x"}


def timeline_start(times: pd.Series, since: datetime | None, now: datetime) -> datetime:
    """Where the timeline's axis starts: the period's start, or closer to the first record when the
    records are all recent (seven days of axis with every record of the last hour piled them up
    at the right edge)."""
    start = since or (times.min().to_pydatetime() - timedelta(hours=1))
    return style.window_start(times, now, now - start)


def _timeline(df: pd.DataFrame, tz: str | None, since: datetime | None) -> None:
    fig = go.Figure()
    groups = dict(tuple(df.groupby("outcome")))
    order = [o for o in OUTCOME_ORDER if o in groups] + sorted(str(o) for o in groups if o not in OUTCOME_ORDER)
    for outcome in order:
        d = groups[outcome]
        fig.add_trace(go.Scatter(
            x=list(d["start_time"]), y=list(d["action"]), mode="markers", name=f"{outcome} ({len(d)})",
            marker={"size": 13 if outcome == "failed" else 11, "symbol": OUTCOME_SYMBOL.get(str(outcome), "square"),
                    "color": OUTCOME_COLOR.get(str(outcome), style.MUTED), "line": {"width": 0}},
            customdata=list(zip(d["user_name"], d["queue"], style.hover_times(d["start_time"], tz), strict=True)),
            hovertemplate="%{y} on %{customdata[1]} by %{customdata[0]}<br>%{x|%Y-%m-%d %H:%M:%S} UTC · "
                          "%{customdata[2]}<extra>" + str(outcome) + "</extra>"))
    style.apply(fig, height=180 + 24 * df["action"].nunique(), title="Actions over time")
    now = datetime.now(UTC)
    fig.update_layout(hovermode="closest")
    fig.update_xaxes(range=[timeline_start(df["start_time"], since, now), now])
    fig.update_yaxes(rangemode="normal", type="category")
    st.plotly_chart(fig, key="audit_timeline", config=style.toolbar("queueops-audit"))
