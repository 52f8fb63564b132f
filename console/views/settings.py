"""Settings: the loaded configuration (secrets masked) and a connection test per target."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from console import chrome, context
from console.views import discovered
from queueops import configcheck, engine, livecheck, secrets
from queueops.config import Config, Problem


@dataclass(frozen=True)
class ConnectionCheck:
    ok: bool
    connect_ms: float | None
    problems: tuple[str, ...]


def masked_config(cfg: Config) -> dict:
    """The whole config as shown to anyone: every URL and secret masked, references kept."""
    raw = cfg.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.loads(secrets.mask(json.dumps(raw)))


def shown_secret(ref: str | None) -> str:
    """A secret as the page may show it: its reference (``env:NAME``, ``file:PATH``), never a value.

    The loader accepts a literal password; showing it would put it on every operator's screen.
    """
    if not ref:
        return "(none)"
    return ref if secrets.is_reference(ref) else "(a literal value, hidden: use env:NAME or file:PATH)"


def test_connection(cfg: Config, target_name: str) -> ConnectionCheck:
    """Connect once (timed), then check every queue table and column of that target exists."""
    target = cfg.target(target_name)
    started = time.perf_counter()
    try:
        conn = engine.connect(target, "check", cfg.base_dir, application="queueops-console-check")
    except engine.TargetError as exc:
        return ConnectionCheck(False, None, (str(exc),))
    connect_ms = (time.perf_counter() - started) * 1000
    conn.close()
    only = cfg.model_copy(update={"targets": [target], "queues": cfg.queues_of(target.name)})
    problems = tuple(secrets.mask(p) for p in livecheck.check_live(only))
    return ConnectionCheck(not problems, connect_ms, problems)


def _level(v: float | None) -> str:
    return "–" if v is None else f"{v:g}"


def config_notes(cfg: Config) -> tuple[str, list[Problem]]:
    """What ``config check`` tells of this config beyond its validation (:mod:`queueops.configcheck`):
    why the collector service would refuse it at start ('' if it would not), and its warnings
    (levels and policies that can never judge or act, preset timeouts), each naming its field."""
    return configcheck.service_problem(cfg), configcheck.warnings(cfg)


def _config_warnings(cfg: Config) -> None:
    refused, notes = config_notes(cfg)
    if refused:
        st.error(f"**The collector service would refuse this configuration at start:** {refused}",
                 icon=":material/block:")
    if notes:
        st.warning(f"**{len(notes)} setting(s) can never judge or act** (as `queueops config check` says):\n\n"
                   + "\n".join(f"- `{n.field}` = `{n.value!r}`: {n.message}" for n in notes),
                   icon=":material/report:")


def render() -> None:
    ctx = context.get()
    cfg = ctx.cfg
    chrome.title(ctx, "Settings")
    st.caption(f"Configuration file `{cfg.source or context.config_path()}` · signed in as "
               f"**{ctx.identity.name}** ({ctx.identity.role}, {ctx.identity.method})")

    st.subheader("Targets")
    for t in cfg.targets:
        with st.container(border=True):
            left, right = st.columns([4, 1])
            with left:
                st.markdown(f"**{t.name}** · {t.dialect} · `{secrets.mask(t.url)}`")
                st.caption(f"password {shown_secret(t.password)} · statement timeout {t.statement_timeout_ms} ms · "
                           f"lock timeout {t.lock_timeout_ms} ms · connect timeout {t.connect_timeout_s:g} s · "
                           f"{len(cfg.queues_of(t.name))} queue(s)"
                           + (f" · actions login `{secrets.mask(t.actions_url)}`" if t.actions_url else ""))
            with right:
                clicked = st.button("Test connection", key=f"test_{t.name}", icon=":material/lan:",
                                    width="stretch")
            if clicked:
                with st.spinner(f"Connecting to {t.name}…"):
                    res = test_connection(cfg, t.name)
                if res.ok:
                    st.success(f"Connected in {res.connect_ms:.0f} ms; every queue table and column of this "
                               "target exists.", icon=":material/check_circle:")
                else:
                    head = (f"Connected in {res.connect_ms:.0f} ms, but:" if res.connect_ms is not None
                            else "Cannot connect:")
                    st.error(head + "\n\n" + "\n\n".join(f"- {p}" for p in res.problems))

    _config_warnings(cfg)

    st.subheader("Queues")
    st.dataframe(pd.DataFrame([{
        "Queue": q.name, "Target": q.target, "Kind": q.kind, "Preset": q.preset or "",
        "Table": ".".join(x for x in (q.schema_, q.table) if x), "Key": q.key, "Order": q.order,
        "Lease timeout (s)": q.lease_timeout_s, "Watermark": f"{q.watermark.table}.{q.watermark.column}"
        if q.watermark else "", "Thresholds": ", ".join(
            f"{m} {_level(t.warn)}/{_level(t.crit)}" for m, t in q.thresholds.items()) or "defaults",
    } for q in cfg.queues]), hide_index=True)

    discovered.render(cfg)

    st.subheader("Everything else")
    raw = masked_config(cfg)
    cols = st.columns(2)
    for i, section in enumerate(s for s in raw if s not in ("targets", "queues")):
        with cols[i % 2], st.expander(f"[{section}]", expanded=section in ("console", "schedule")):
            st.json(raw[section])
