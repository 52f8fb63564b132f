"""The "End session" button of a root-cause card: terminate through the action layer only.

Preview first (the session, its transaction, what it blocks or pins, the exact statement), then a
typed confirmation (the session id), then the execution with the root-cause metrics sampled
again, before -> after, and VACUUM offered where dead tuples were pinned. The action layer
re-checks every guard at execution and audits the attempt whatever happens. Viewers never see the
button; the action layer would refuse them anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from console import context
from console.findings import RootCause
from console.views import actions_panel
from queueops import actions, secrets
from queueops.config import Queue
from queueops.engine import TargetError

PLAN_KEY = "qo_terminate_plan"
RESULT_KEY = "qo_terminate_result"


LINK_ERROR_KEY = "qo_terminate_link_error"


@dataclass
class TermPending:
    """An open "End session" preview. It stays open across refreshes whatever the next samples
    show (a blocker is not caught waiting in every sample); the action layer checks again at
    confirm that it is the same session (pid and backend start) in the same transaction and still
    a root cause, and refuses otherwise."""

    queue: str
    session_id: int
    plan: actions.Plan

    @property
    def session_start(self) -> object:
        return (self.plan.observed.get("session") or {}).get("session_start")

    def matches(self, q: Queue, cause: RootCause) -> bool:
        if self.queue != q.name or session_id(cause) != self.session_id:
            return False
        start = cause.details.get("backend_start")
        if start is None or self.session_start is None:
            return True
        try:
            return pd.Timestamp(start) == pd.Timestamp(self.session_start)  # type: ignore[arg-type]
        except (ValueError, TypeError):
            return True


def pending_for(q: Queue) -> TermPending | None:
    p = st.session_state.get(PLAN_KEY)
    return p if isinstance(p, TermPending) and p.queue == q.name else None


def _open(ctx: context.Ctx, q: Queue, sid: int) -> str | None:
    """Preview ending session ``sid`` for ``q`` and keep it open; the error text when refused."""
    st.session_state.pop(RESULT_KEY, None)
    try:
        with st.spinner("Reading the session and what it holds…"):
            plan = actions.plan(ctx.cfg, "terminate", q.name, {"session": sid})
    except (actions.ActionError, TargetError) as exc:
        return f"Cannot end session {sid}: {exc}"
    st.session_state[PLAN_KEY] = TermPending(q.name, sid, plan)
    return None


def open_from_link(ctx: context.Ctx, q: Queue) -> None:
    """``?end=PID`` (the Overview's "End session" button): open that session's preview once."""
    raw = st.query_params.get("end")
    if raw is None:
        return
    del st.query_params["end"]
    if not ctx.can_act or not str(raw).isdigit():
        return
    error = _open(ctx, q, int(raw))
    if error:
        st.session_state[LINK_ERROR_KEY] = error


def render_pending(ctx: context.Ctx, q: Queue, shown: set[int]) -> None:
    """The open preview of a session that the latest sample no longer names (it was not caught
    blocking at that instant, or it ended): kept, with the re-check at confirm."""
    error = st.session_state.pop(LINK_ERROR_KEY, None)
    if error:
        st.error(error, icon=":material/block:")
    pending = pending_for(q)
    if pending is None or pending.session_id in shown or not ctx.can_act:
        return
    with st.container(border=True):
        st.markdown(f":material/block: **session {pending.session_id}**: not named by the latest sample")
        st.caption("It may have stopped blocking, or was not caught at the sampling instant. The preview stays "
                   "open; confirming checks again that it is the same session in the same transaction and still a "
                   "root cause, and refuses otherwise.")
        _confirm(ctx, q, pending)


def session_id(cause: RootCause) -> int | None:
    """The session a root cause names (PostgreSQL pid, SQL Server session_id), if any."""
    for key in ("pid", "session_id"):
        value = cause.details.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


def render(ctx: context.Ctx, q: Queue, cause: RootCause, index: int) -> None:
    sid = session_id(cause)
    if not ctx.can_act or sid is None:
        return
    pending = pending_for(q)
    if pending is not None and pending.matches(q, cause):
        _confirm(ctx, q, pending)
        return
    if st.button(f"End session {sid}…", key=f"term_preview_{index}_{sid}", icon=":material/power_settings_new:",
                 help="Preview ending this session (terminate): what it holds, what rolls back"):
        error = _open(ctx, q, sid)
        if error:
            st.error(error)
            return
        st.rerun()  # the whole page: it holds still while the preview is open


def _confirm(ctx: context.Ctx, q: Queue, pending: TermPending) -> None:
    p = pending.plan.preview
    with st.container(border=True, key=f"term_preview_box_{pending.session_id}"):
        st.markdown(f"**Preview** · {p.summary}")
        for w in p.warnings:
            st.warning(w, icon=":material/warning:")
        if p.rows:
            st.dataframe(pd.DataFrame([{k: v for k, v in p.rows[0].items() if k != "pins"}]), hide_index=True)
            st.caption("Holds back / blocks: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in
                                                          (p.rows[0].get("pins") or {}).items()))
        st.code(p.sql or "(nothing to run)", language="sql")
        if pending.plan.nothing_to_do:
            st.info("Nothing to end.")
            return
        typed = st.text_input(f"This ends the session and rolls back its transaction. Type the session id "
                              f"**{pending.session_id}** to confirm", key=f"term_typed_{pending.session_id}")
        cols = st.columns(2)
        go = cols[0].button(f"End session {pending.session_id}", type="primary", key="term_run",
                            disabled=typed.strip() != str(pending.session_id), icon=":material/power_settings_new:")
        if cols[1].button("Cancel", key="term_cancel"):
            st.session_state.pop(PLAN_KEY, None)
            st.rerun()
    if go:
        try:
            with st.spinner(f"Ending session {pending.session_id} and sampling again…"):
                result = ctx.execute(pending.plan)  # the role as it is now, not at page load
        except Exception as exc:  # noqa: BLE001 - e.g. the store is unreachable before the audit record exists
            st.error(f"terminate did not start: {secrets.mask(f'{type(exc).__name__}: {exc}')}")
            return
        ctx.sampler.invalidate()
        st.session_state.pop(PLAN_KEY, None)
        st.session_state[RESULT_KEY] = result
        st.rerun()


def render_result(ctx: context.Ctx, q: Queue) -> None:
    """The last terminate's outcome on this queue, above the cards (its own card is gone once the
    session has ended)."""
    r = st.session_state.get(RESULT_KEY)
    if not isinstance(r, actions.Result) or r.queue != q.name:
        return
    text = (f"**terminate** by {r.user} ({r.role}): **{r.outcome}** · "
            + (f"audit record {r.audit_id}" if r.audit_id is not None else "not run: no audit record"))
    if r.ok:
        st.success(text, icon=":material/check_circle:")
    elif r.outcome == "refused":
        st.warning(f"{text}\n\n{r.error}\n\nThe session changed since the preview, or no longer holds anything "
                   "back: its card below (if any) is the current one; preview again from there.",
                   icon=":material/block:")
    else:
        st.error(f"{text}\n\n{r.error}", icon=":material/error:")
    metrics = [row for row in r.rows if "metric" in row]
    if metrics:
        st.markdown("Sampled again, before → after:")
        st.dataframe(pd.DataFrame(metrics), hide_index=True)
    offer = next((row for row in r.rows if row.get("offer") == "VACUUM"), None)
    if offer:
        st.caption(offer["why"])
        if st.button("Preview VACUUM of this queue's table", key="term_vacuum", icon=":material/cleaning_services:"):
            _offer_vacuum(ctx, q)


def _offer_vacuum(ctx: context.Ctx, q: Queue) -> None:
    """Hand a VACUUM-only rebuild preview to the actions panel, which confirms and runs it."""
    opts: dict[str, Any] = {"vacuum_only": True}
    try:
        plan = actions.plan(ctx.cfg, "rebuild", q.name, opts)
    except (actions.ActionError, TargetError) as exc:
        st.error(f"Cannot preview VACUUM: {exc}")
        return
    st.session_state[actions_panel.PLAN_KEY] = actions_panel.Pending(q.name, plan, {})
    st.session_state[f"act_choice_{q.name}"] = "rebuild"
    st.session_state.pop(RESULT_KEY, None)
    st.rerun()
