"""The autopilot in the console: the global kill switch (operators may toggle it) and each policy's
state and last actions, read from the store where the collector service keeps them."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from console import context
from queueops.autopilot import state

VERDICTS = {"off": "off", "killed": "stopped by the kill switch", "no_data": "no sample of its metric",
            "waiting": "condition not met long enough", "rate_limited": "at its max_per_hour",
            "propose": "proposed", "act": "ran its action"}


def render(ctx: context.Ctx, queue: str | None = None) -> None:
    """The switch and the policies (of ``queue``, or all of them)."""
    policies = [p for p in ctx.cfg.autopilot if queue is None or p.queue == queue]
    if not policies:
        st.caption("No autopilot policy" + (f" for queue {queue}" if queue else "") + " ([[autopilot]] in config).")
        return
    engine = ctx.store.engine
    if engine is None:
        st.warning(f"The store cannot be read, so the autopilot's state is unknown: {ctx.store.error}")
        return
    sw = state.switch(engine)
    if not sw["enabled"]:
        st.error(f"Autopilot is OFF (kill switch, set by {sw.get('by')} at {sw.get('at')}): no policy runs or "
                 "proposes anything.", icon=":material/front_hand:")
    if ctx.can_act:
        on = st.toggle("Autopilot on", value=bool(sw["enabled"]), key=f"autopilot_switch_{queue or 'all'}",
                       help="The global kill switch, kept in the store: the collector service obeys it at its "
                            "next cycle")
        if on != bool(sw["enabled"]):
            state.set_switch(engine, on, ctx.identity.name)
            st.rerun()
    for p in policies:
        ps = state.policy_state(engine, p.key)
        with st.container(border=True):
            verdict = ps.get("verdict")
            st.markdown(f"**{p.key}** · `{p.action}` on `{p.queue}` when `{p.when}` · mode **{p.mode}** · at most "
                        f"{p.max_per_hour}/h")
            st.caption(f"last evaluated {ps.get('evaluated_at', 'never')} · "
                       f"{VERDICTS.get(verdict, verdict or 'not evaluated yet')} · streak {ps.get('streak', 0)} "
                       f"sample(s) · {ps.get('runs_last_hour', 0)} run(s) in the last hour")
            last = ps.get("last") or []
            if last:
                st.dataframe(pd.DataFrame(last), hide_index=True)
