"""queueops console: every configured queue with its kind, depth and oldest age, refreshing itself."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from collectors import registry, runner
from queueops import config as config_mod
from queueops import secrets

st.set_page_config(page_title="queueops", page_icon=":material/monitor_heart:", layout="wide")


@st.cache_resource(show_spinner=False)
def _config() -> config_mod.Config:
    return config_mod.load()


@st.cache_data(ttl=3, show_spinner=False)
def _sample(_cfg: config_mod.Config, key: str) -> tuple[pd.DataFrame, list[dict]]:
    result = runner.run_once(_cfg, [registry.by_name("depth"), registry.by_name("oldest_age_s")])
    rows = pd.DataFrame([r.to_json() for r in result.rows])
    return rows, [s.to_json() for s in result.status]


st.title("queueops")
try:
    cfg = _config()
except config_mod.ConfigError as exc:
    st.error(secrets.mask(str(exc)))
    st.stop()


@st.fragment(run_every=cfg.console.refresh_s)
def overview() -> None:
    rows, status = _sample(cfg, "overview")
    for s in status:
        if not s["ok"]:
            st.error(f"target {s['target']}: collector {s['collector']} failed: {s['error']}")
    table = pd.DataFrame({"queue": [q.name for q in cfg.queues], "target": [q.target for q in cfg.queues],
                          "kind": [q.kind for q in cfg.queues]})
    if not rows.empty:
        wide = rows.pivot_table(index="queue", columns="metric", values="value", aggfunc="last")
        table = table.join(wide, on="queue")
    st.dataframe(table, hide_index=True, use_container_width=True)
    st.caption(f"sampled {pd.Timestamp.utcnow():%Y-%m-%d %H:%M:%S} UTC, refreshing every {cfg.console.refresh_s:g} s")


overview()
