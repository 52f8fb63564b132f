"""Alerts: what fires now, and the history of every alert the service announced (issue 32).

Read from the store the collector service writes (``queueops collect``): ``alert_state`` holds each
alert's latest state (pending, firing -- with ``clearing_since`` while its condition has been clear
for less than the rule's ``clear_for_s`` -- or resolved), ``alert_events`` every transition. The
console evaluates nothing itself: an alert is what the service would notify, or nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import streamlit as st

from console import chrome, context, urlstate
from console.health import WORD
from queueops import judge
from queueops.alerts.rules import Rule, RuleError, effective_rules
from queueops.alerts.rules import queue_states as alert_queue_states
from queueops.config import Config

WINDOWS: dict[str, timedelta] = {"1 h": timedelta(hours=1), "24 h": timedelta(hours=24), "7 d": timedelta(days=7)}
HISTORY_ROWS = 2000


def rules_by_name(cfg: Config) -> dict[str, Rule]:
    try:
        return {r.name: r for r in effective_rules(cfg)}
    except RuleError:
        return {}


# The root causes' rules (queueops.causes: cause:<cause>:<severity>) in words.
CAUSE_WORDS = {"snapshot": "old snapshot", "table_lock": "table lock", "head_blocker": "head blocker"}


def cause_words(rule: str) -> str:
    """The root cause a ``cause:*`` rule pages for, in words ('' for any other rule)."""
    parts = rule.split(":")
    return CAUSE_WORDS.get(parts[1], parts[1].replace("_", " ")) if len(parts) > 1 and parts[0] == "cause" else ""


def alert_advice(rule: Rule | None, queue: str, dialect: str = "") -> str:
    """What the alert tells the person it wakes, as its notification does: a root cause's finding's
    advice, else the advice of its metric's rule."""
    if rule is None:
        return ""
    if rule.finding in judge.RULES:
        return judge.advice(rule.finding, queue, dialect)
    return judge.metric_advice(rule.metric, queue, dialect)


def queue_states(states: pd.DataFrame, rules: dict[str, Rule]) -> dict[tuple[str, str], str]:
    """Each queue's one state as its alerts see it, the ``queue_state`` every transition carries:
    :func:`queueops.alerts.rules.queue_states` (the service's own computation) of ``alert_state``."""
    if states.empty:
        return {}
    return alert_queue_states(zip(states["rule"], states["target"], states["queue"], states["state"], strict=True),
                              rules)


def firing_table(states: pd.DataFrame, rules: dict[str, Rule], queue: str | None = None,
                 dialects: dict[str, str] | None = None) -> pd.DataFrame:
    """The firing alerts, worst first: severity, rule, the root cause it pages for, where, the
    queue's state as its alerts see it, value, condition, since, clearing, and the advice
    (``dialects``: target -> dialect, for the advice's wording)."""
    cols = ["severity", "rule", "cause", "queue", "queue state", "target", "value", "condition", "firing since",
            "clearing since", "advice"]
    if states.empty:
        return pd.DataFrame(columns=cols)
    df = states[states["state"] == "firing"]
    if queue:
        df = df[df["queue"] == queue]
    if df.empty:
        return pd.DataFrame(columns=cols)
    whole = queue_states(states, rules)
    out = pd.DataFrame({
        "severity": [rules[r].severity if r in rules else "" for r in df["rule"]],
        "rule": df["rule"], "cause": [cause_words(r) for r in df["rule"]], "queue": df["queue"],
        "queue state": [WORD[whole[(t, q)]] if (t, q) in whole else "" for t, q in
                        zip(df["target"], df["queue"], strict=True)],
        "target": df["target"], "value": df["value"],
        "condition": [rules[r].describe() if r in rules else "" for r in df["rule"]],
        "firing since": df["since"], "clearing since": df["clearing_since"],
        "advice": [alert_advice(rules.get(r), q, (dialects or {}).get(t, "")) for r, q, t in
                   zip(df["rule"], df["queue"], df["target"], strict=True)],
    })
    return out.sort_values(["severity", "firing since"], key=lambda s: s.map({"crit": 0, "warn": 1})
                           if s.name == "severity" else s).reset_index(drop=True)


def firings_per_rule(events: pd.DataFrame) -> pd.DataFrame:
    """Firings and resolutions per rule and queue in the window, most firings first (flapping shows here)."""
    if events.empty:
        return pd.DataFrame(columns=["rule", "queue", "firings", "resolutions"])
    g = events.groupby(["rule", "queue", "state"]).size().unstack("state", fill_value=0)
    out = pd.DataFrame({"firings": g.get("firing", 0), "resolutions": g.get("resolved", 0)}).reset_index()
    return out.sort_values(["firings", "rule"], ascending=[False, True]).reset_index(drop=True)


def history_table(events: pd.DataFrame) -> pd.DataFrame:
    """Each transition: when, fired or resolved, the rule and the cause it pages for, where, the
    queue's state after its cycle as its notification said it ('not recorded' for a transition
    stored before ``alert_events`` kept it), the value and, for a resolution, how long it lasted."""
    if events.empty:
        return pd.DataFrame(columns=["at", "state", "severity", "rule", "cause", "queue", "queue state", "target",
                                     "value", "lasted", "condition"])
    lasted = [(_duration((at - since).total_seconds()) if st_ == "resolved" else "")
              for at, since, st_ in zip(events["at"], events["active_since"], events["state"], strict=True)]
    return pd.DataFrame({"at": events["at"], "state": events["state"], "severity": events["severity"],
                         "rule": events["rule"], "cause": [cause_words(r) for r in events["rule"]],
                         "queue": events["queue"],
                         "queue state": [WORD.get(s, s) if isinstance(s, str) and s else "not recorded"
                                         for s in events["queue_state"]],
                         "target": events["target"],
                         "value": events["value"], "lasted": lasted, "condition": events["condition"]})


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def render() -> None:
    ctx = context.get()
    cfg = ctx.cfg
    chrome.title(ctx, "Alerts")
    a = cfg.alerts
    st.caption(f"Evaluated by the collector service (`queueops collect`) on every cycle and kept in its store. "
               f"Threshold rules resolve after their condition has been clear for {a.thresholds_clear_for_s:g} s "
               f"and {a.thresholds_clear_margin:.0%} of the level back past it; explicit rules set `for_s`, "
               f"`clear_for_s` and `clear_value` (README, configuration).")
    if ctx.store.error:
        st.error(f"The store cannot be read: {ctx.store.error}", icon=":material/database:")
    rules = rules_by_name(cfg)
    queues = ["all queues", *[q.name for q in cfg.queues]]
    urlstate.seed("al_queue", "queue", queues, "all queues")
    with st.columns([3, 1.2])[1]:
        choice = st.selectbox("Queue", queues, key="al_queue", label_visibility="collapsed")
    queue = None if choice == "all queues" else choice
    if queue:
        st.query_params["queue"] = queue
    elif "queue" in st.query_params:
        del st.query_params["queue"]

    states = ctx.store.alert_states()
    st.subheader("Firing now")
    firing = firing_table(states, rules, queue, {t.name: t.dialect for t in cfg.targets})
    if firing.empty:
        st.success("No alert is firing" + (f" on queue {queue}." if queue else "."), icon=":material/check_circle:")
    else:
        st.dataframe(firing, hide_index=True, key="al_firing", column_config={
            **_time_columns(ctx, ("firing since", "clearing since")),
            "cause": st.column_config.TextColumn(help="the root cause a cause:* rule pages for: an old snapshot, "
                                                 "a session holding the queue's table, the head of its waiters"),
            "queue state": st.column_config.TextColumn(help="the queue's one state as its firing alerts give it "
                                                       "(the worst of their severities), as each alert carries it"),
            "advice": st.column_config.TextColumn(width="large", help="what to do: the finding's advice")})
        clearing = int(firing["clearing since"].notna().sum())
        if clearing:
            st.caption(f"{clearing} of them clearing: their condition is clear, they resolve once it has stayed "
                       "clear for the rule's clear_for_s.")
    pending = states[states["state"] == "pending"] if not states.empty else states
    if queue and not pending.empty:
        pending = pending[pending["queue"] == queue]
    if not pending.empty:
        st.caption("Pending (condition true, its `for_s` not elapsed yet): "
                   + ", ".join(f"{r} on {q}" for r, q in zip(pending["rule"], pending["queue"], strict=True)))

    st.subheader("History")
    urlstate.seed("al_window", "window", list(WINDOWS), "24 h")
    label = st.segmented_control("Window", list(WINDOWS), key="al_window", label_visibility="collapsed") or "24 h"
    urlstate.keep("window", label, "24 h")
    events = ctx.store.alert_events(datetime.now(UTC) - WINDOWS[label], limit=HISTORY_ROWS)
    if queue and not events.empty:
        events = events[events["queue"] == queue]
    if events.empty:
        st.info(f"No alert fired or resolved in the last {label}" + (f" on queue {queue}" if queue else "")
                + ". Alerts are recorded while `queueops collect` runs.", icon=":material/notifications_off:")
        return
    per_rule = firings_per_rule(events)
    fired = int(per_rule["firings"].sum())
    st.markdown(f"**{fired}** firing(s) and **{int(per_rule['resolutions'].sum())}** resolution(s) in the last "
                f"{label}" + (f" (the newest {HISTORY_ROWS} shown)" if len(events) >= HISTORY_ROWS else ""))
    cols = st.columns([1.3, 2])
    with cols[0]:
        st.dataframe(per_rule, hide_index=True, key="al_per_rule")
        flapping = per_rule[per_rule["firings"] >= 3]
        if not flapping.empty:
            st.warning("Fired 3 times or more: " + ", ".join(f"{r} on {q}" for r, q in
                                                          zip(flapping["rule"], flapping["queue"], strict=True))
                       + ". Raise its `clear_for_s` or set a `clear_value`.", icon=":material/warning:")
    with cols[1]:
        st.dataframe(history_table(events), hide_index=True, key="al_history", column_config={
            **_time_columns(ctx, ("at",)),
            "queue state": st.column_config.TextColumn(help="the queue's one state after the transition's cycle, "
                                                       "as its notification said it")})


def _time_columns(ctx: context.Ctx, names: tuple[str, ...]) -> dict[str, object]:
    return {n: st.column_config.DatetimeColumn(n, format="YYYY-MM-DD HH:mm:ss", timezone=ctx.tz or "UTC")
            for n in names}
