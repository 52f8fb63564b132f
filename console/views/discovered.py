"""Settings, "Queues found, not configured": ``queueops discover`` per target, from the console.

A button per target reads that server's catalog and statistics (never a queue table's rows), and
lists every queue table found that no configured queue maps yet, with the kind guessed, the preset
matched, the evidence, and the TOML to add to the config file.
"""

from __future__ import annotations

import streamlit as st

from queueops import discovery, engine, secrets
from queueops.config import Config


def find(cfg: Config, target_name: str) -> list[tuple[discovery.Proposal, str]] | str:
    """(proposal, its TOML) for every unconfigured queue table on the target; an error message if
    the target cannot be read."""
    target = cfg.target(target_name)
    try:
        with engine.connection(target, "check", cfg.base_dir, application="queueops-console-discover") as conn:
            tables = discovery.read_catalog(conn)
    except engine.TargetError as exc:
        return secrets.mask(str(exc))
    found = discovery.unconfigured(discovery.discover(tables, target.dialect), cfg.queues_of(target.name),
                                   target.dialect)
    taken = {q.name for q in cfg.queues}
    return [(p, discovery.render_toml([p], target.name, taken)) for p in found]


def render(cfg: Config) -> None:
    st.subheader("Queues found, not configured")
    st.caption("Reads each server's catalog and statistics only (never a queue table's rows) and lists the "
               "queue tables no configured queue maps yet, each with its evidence and the TOML to add.")
    for t in cfg.targets:
        if st.button(f"Find queues on {t.name}", key=f"discover_{t.name}", icon=":material/search:"):
            with st.spinner(f"Reading the catalog of {t.name}…"):
                st.session_state[f"qo_found_{t.name}"] = find(cfg, t.name)
        res = st.session_state.get(f"qo_found_{t.name}")
        if res is None:
            continue
        if isinstance(res, str):
            st.error(f"{t.name}: {res}")
            continue
        if not res:
            st.success(f"Every queue table found on {t.name} is configured.", icon=":material/check_circle:")
        for p, toml in res:
            with st.expander(f"{t.name}: {p.table.qualified} · {p.kind} · {p.label} · score {p.score:g}"):
                st.markdown("\n".join(f"- {e}" for e in p.evidence))
                st.code(toml, language="toml")
