"""A queue's actions, through the action layer only (:mod:`queueops.actions`).

Preview first (the exact SQL, its parameters, what it touches and how many rows), then an explicit
confirmation (typing the queue name for destructive actions), then the execution with a progress
bar, the result, and the metric the action was meant to fix sampled again, before → after.

Viewers never reach this module's buttons: :func:`render` returns before drawing any of them.
The action layer checks the role again and audits a refusal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd
import streamlit as st

from console import context, style
from console.findings import Recommendation
from console.health import format_value
from queueops import actions, secrets
from queueops.actions.core import MODULES
from queueops.actions.model import jsonable
from queueops.config import Queue
from queueops.engine import TargetError

# What each action is meant to fix (the first metric; the others give context): sampled before the
# preview and again after the execution.
FIXES: dict[str, tuple[str, ...]] = {
    "requeue": ("stuck_leases", "depth"),
    "watermark-reset": ("watermark_drift", "stranded_count"),
    "rebuild": ("fragmentation_pct", "ghost_records"),
    "archive": ("rows_total",),
}
LABELS = {"requeue": "Requeue stuck", "watermark-reset": "Reset watermark", "rebuild": "Rebuild / vacuum",
          "archive": "Archive finished"}
HIGHER_IS_BETTER = frozenset({"watermark_drift"})  # from < 0 (stranded) up to >= 0
# Ended from the root-cause card it concerns (console/views/terminate_card.py), not from this panel.
CARD_ONLY = frozenset({"terminate"})
PLAN_KEY = "qo_action_plan"
RESULT_KEY = "qo_action_result"


@dataclass
class Pending:
    queue: str
    plan: actions.Plan
    before: dict[str, float | None] = field(default_factory=dict)
    opts: dict[str, Any] = field(default_factory=dict)  # the form's options, to preview again


@dataclass
class Done:
    queue: str
    result: actions.Result
    before: dict[str, float | None]
    after: dict[str, float | None]
    sampled_at: datetime
    opts: dict[str, Any] = field(default_factory=dict)
    cutoff: Any = None  # the preview's cutoff (requeue): leftovers past it are explained


def leftovers(done: Done) -> str:
    """Why the metric the action fixes is not back to zero, when the action itself went well: for
    requeue, the leases that expired after the preview's cutoff (the action releases only what the
    preview saw, never more than it counted)."""
    r = done.result
    if not r.ok or r.action != "requeue":
        return ""
    left = done.after.get("stuck_leases")
    if not left:
        return ""
    when = f" ({style.utc_text(pd.Timestamp(done.cutoff))})" if done.cutoff is not None else ""
    return (f"{left:,.0f} lease(s) are stuck now. The requeue released the leases older than the preview's "
            f"cutoff{when}; these expired after it (or were held by another session, or beyond the limit), so the "
            "preview did not count them. Preview again to release them.")


def applicable(q: Queue) -> list[str]:
    """The actions the action layer accepts for this queue (its own check, before any connection)."""
    out = []
    for name in actions.ACTIONS:
        if name in CARD_ONLY:
            continue
        try:
            MODULES[name].check(q, actions.OPTIONS[name]())
        except actions.ActionError:
            continue
        out.append(name)
    return out


def options_from_form(action: str, raw: dict[str, Any]) -> dict[str, Any]:
    """Form values -> action options: empty / zero means "the default" and is left out.

    Validation stays in the action layer (pydantic, ``extra="forbid"``): whatever is typed goes
    through :func:`queueops.actions.plan`, which refuses a bad value with a message.
    """
    out = {}
    for key, value in raw.items():
        if value is None or value == "" or (key == "max_items" and value == 0):
            continue
        out[key] = value
    return out


def render(ctx: context.Ctx, q: Queue, recs: Sequence[Recommendation]) -> None:
    if not ctx.can_act:
        _result(ctx, q)  # an action refused because the role changed since the page loaded
        st.caption(":material/visibility: You are signed in as a viewer: you see every finding, and operators "
                   "run the actions.")
        return
    names = applicable(q)
    if not names:
        st.caption(f"No action applies to a {q.kind} queue with this configuration.")
        return
    recommended = [r.action for r in recs if r.action in names]
    default = recommended[0] if recommended else names[0]
    action = st.segmented_control(
        "Action", names, default=default, key=f"act_choice_{q.name}",
        format_func=lambda a: LABELS.get(a, a) + (" ★" if a in recommended else "")) or default
    if recommended:
        st.caption("★ recommended by the findings above")
    _result(ctx, q)
    opts = _form(q, action, ctx.cfg.target(q.target).dialect)
    if opts is not None:
        _preview(ctx, q, action, opts)
    pending = st.session_state.get(PLAN_KEY)
    if isinstance(pending, Pending) and pending.queue == q.name and pending.plan.action == action:
        _confirm(ctx, q, pending)


def _form(q: Queue, action: str, dialect: str) -> dict[str, Any] | None:
    """The options worth changing from the console; returns them when Preview is pressed."""
    with st.form(f"act_form_{q.name}_{action}", border=True):
        raw: dict[str, Any] = {}
        cols = st.columns(4)
        if action == "requeue":
            raw["max_items"] = cols[0].number_input("At most (0 = all)", min_value=0, value=0, step=100)
            raw["batch_size"] = cols[1].number_input("Batch size", min_value=1, max_value=1000, value=500)
            if q.attempts_column:
                raw["bump_attempts"] = cols[2].checkbox("Count an attempt", value=False)
        elif action == "watermark-reset":
            raw["buffer"] = cols[0].number_input("Buffer (keys)", min_value=0,
                                                 value=q.watermark.buffer if q.watermark else 0)
        elif action == "rebuild" and dialect == "postgresql":
            raw["vacuum"] = cols[0].checkbox(
                "VACUUM (ANALYZE) afterwards", value=True,
                help="After the indexes that need it are rebuilt. An index under the page floor (1,000 pages) is "
                     "never rebuilt: on a small table VACUUM (ANALYZE) is all that runs, and the preview says why.")
        elif action == "rebuild":
            raw["allow_offline"] = cols[0].checkbox("Allow an offline rebuild", value=False,
                                                    help="only where online is impossible; never chosen silently")
            raw["resumable"] = cols[1].checkbox("Resumable (progress)", value=False,
                                                help="REBUILD WITH (ONLINE = ON, RESUMABLE = ON)")
        elif action == "archive":
            raw["older_than_s"] = cols[0].number_input("Finished more than (s) ago", min_value=0, value=86_400)
            raw["batch_size"] = cols[1].number_input("Batch size", min_value=1, max_value=1000, value=200)
            raw["pause_s"] = cols[2].number_input("Pause between batches (s)", min_value=0.0, max_value=60.0,
                                                  value=0.5, step=0.5)
            raw["max_items"] = cols[3].number_input("At most (0 = all)", min_value=0, value=0, step=100)
        pressed = st.form_submit_button("Preview", icon=":material/visibility:", type="secondary")
    return options_from_form(action, raw) if pressed else None


def _current(ctx: context.Ctx, q: Queue, metrics: Sequence[str]) -> dict[str, float | None]:
    rows = ctx.sampler.resample(q.target, metrics)
    return {m: next((r.value for r in rows if r.queue == q.name and r.metric == m), None) for m in metrics}


def _preview(ctx: context.Ctx, q: Queue, action: str, opts: dict[str, Any]) -> None:
    st.session_state.pop(RESULT_KEY, None)
    try:
        with st.spinner("Reading what the action would touch…"):
            plan = actions.plan(ctx.cfg, action, q.name, opts)
            before = _current(ctx, q, FIXES.get(action, ()))
    except (actions.ActionError, TargetError) as exc:
        st.session_state.pop(PLAN_KEY, None)
        st.error(f"Cannot preview {action}: {exc}")
        return
    st.session_state[PLAN_KEY] = Pending(q.name, plan, before, opts)
    st.rerun()  # the whole page: it holds still while a preview is open


def _confirm(ctx: context.Ctx, q: Queue, pending: Pending) -> None:
    p = pending.plan.preview
    with st.container(border=True, key="act_preview"):
        st.markdown(f"**Preview** · {p.summary}")
        cols = st.columns(3)
        cols[0].metric("Rows / objects it touches", f"{p.row_count:,}")
        for col, (metric, value) in zip(cols[1:], pending.before.items(), strict=False):
            col.metric(f"{style.label(metric)} now", format_value(metric, value))
        for w in p.warnings:
            st.warning(w, icon=":material/warning:")
        why = index_work_note(pending.plan.action, p.rows)
        if why:
            st.info(why, icon=":material/info:")
        st.markdown("Exact SQL (each batch is its own transaction):")
        st.code(p.sql, language="sql")
        st.markdown("Parameters:")
        st.code(", ".join(repr(x) for x in p.params) or "(none)", language="text")
        if p.rows:
            with st.expander(f"What it touches ({len(p.rows)} of {p.row_count} shown)"):
                st.dataframe(pd.DataFrame(p.rows), hide_index=True)
        if pending.plan.nothing_to_do:
            st.info("Nothing to do: the preview found nothing this action would touch.")
            return
        typed_ok = True
        if p.destructive:
            typed = st.text_input(f"This action is destructive. Type the queue name **{q.name}** to confirm",
                                  key=f"act_typed_{q.name}")
            typed_ok = typed.strip() == q.name
        go = st.button(f"Confirm and run {pending.plan.action}", type="primary", disabled=not typed_ok,
                       icon=":material/play_arrow:", key="act_run")
    if go:
        _execute(ctx, q, pending)


def index_work_note(action: str, rows: Sequence[dict[str, Any]]) -> str:
    """Rebuild's preview: why an index is not rebuilt (``312 pages < 1,000: too small ...``), said
    beside the SQL rather than only in the CLI -- on a small table the plan is VACUUM (ANALYZE) alone
    although the form offered it only 'afterwards'."""
    if action != "rebuild":
        return ""
    skipped = [r for r in rows if r.get("operation") == "none" and r.get("index")]
    if not skipped:
        return ""
    acted = any(r.get("operation") not in (None, "none") for r in rows)
    head = ("Some indexes are left as they are" if acted
            else "No index is rebuilt, so only the table maintenance below runs")
    return head + ":\n" + "\n".join(f"- `{r['index']}`: {r.get('reason') or 'nothing to do'}" for r in skipped)


def _execute(ctx: context.Ctx, q: Queue, pending: Pending) -> None:
    bar = st.progress(0.0, text=f"{pending.plan.action}: starting…")

    def progress(p: actions.Progress) -> None:
        frac = p.fraction
        text = f"{p.action}: {p.phase}"
        if p.done is not None and p.total:
            text += f" {p.done:g}/{p.total:g}"
        if p.rows:
            text += f" · {p.rows:,} rows"
        if p.message:
            text += f" · {p.message}"
        bar.progress(frac if frac is not None else 0.0, text=text)

    try:
        result = ctx.execute(pending.plan, progress=progress)  # the role as it is now, not at page load
    except Exception as exc:  # noqa: BLE001 - e.g. the store is unreachable before the audit record exists
        bar.empty()
        st.error(f"{pending.plan.action} did not start: {secrets.mask(f'{type(exc).__name__}: {exc}')}")
        return
    bar.progress(1.0, text=f"{pending.plan.action}: {result.outcome}")
    metrics = FIXES.get(pending.plan.action, ())
    try:
        after = _current(ctx, q, metrics)
    except TargetError:
        after = {m: None for m in metrics}
    ctx.sampler.invalidate()
    st.session_state.pop(PLAN_KEY, None)
    st.session_state[RESULT_KEY] = Done(q.name, result, pending.before, after, datetime.now().astimezone(),
                                        pending.opts, pending.plan.observed.get("cutoff"))
    st.rerun()


def _result(ctx: context.Ctx, q: Queue) -> None:
    done = st.session_state.get(RESULT_KEY)
    if not isinstance(done, Done) or done.queue != q.name:
        return
    r = done.result
    with st.container(border=True, key="act_result"):
        text = (f"**{r.action}** on `{r.queue}` by {r.user} ({r.role}): **{r.outcome}**, "
                f"{r.rows_affected or 0:,} row(s) · "
                + (f"audit record {r.audit_id}" if r.audit_id is not None else "not run: no audit record"))
        if r.ok:
            st.success(text, icon=":material/check_circle:")
        elif r.outcome == "refused":
            st.warning(text + f"\n\n{r.error}", icon=":material/block:")
        else:
            st.error(text + f"\n\n{r.error}", icon=":material/error:")
        # What differed from the confirmed preview (fewer rows qualified, a skipped index, items left
        # for another run): said beside the outcome, as in the CLI and the audit record.
        for note in r.notes:
            st.info(note, icon=":material/info:")
        left = leftovers(done)
        if left:
            st.warning(left, icon=":material/schedule:")
            if ctx.can_act and st.button(f"Preview {r.action} again", key="act_again", icon=":material/replay:"):
                _preview(ctx, q, r.action, done.opts)
        if r.rows:
            with st.expander(f"What it did ({len(r.rows)} step(s) or batch(es) committed)", expanded=not r.ok):
                # Rows differ in their fields (a batch, the "left" line): text, so one column may mix them.
                st.dataframe(pd.DataFrame([{k: "" if v is None else str(jsonable(v)) for k, v in row.items()}
                                           for row in r.rows]),
                             hide_index=True, width="stretch")
        if done.before or done.after:
            st.markdown(f"Did it help? Sampled again at {style.utc_text(done.sampled_at)}:")
            cols = st.columns(max(1, len(done.after)))
            for col, (metric, after) in zip(cols, done.after.items(), strict=False):
                before = done.before.get(metric)
                delta = None if before is None or after is None else after - before
                col.metric(f"{style.label(metric)}: before → after", format_value(metric, after),
                           delta=None if delta is None else f"{delta:+,.4g} (was {format_value(metric, before)})",
                           delta_color="off" if metric not in FIXES.get(r.action, ())[:1]
                           else "normal" if metric in HIGHER_IS_BETTER else "inverse", border=True)
