"""A queue's items (issue 32, item 6): counts by state, and the items behind a number.

The counts are the collectors' own metrics of the latest sample (depth, count_scheduled,
count_leased / count_processing, stuck_leases, count_failed, count_exhausted, count_done), drawn as
one stacked bar. The drill-down reads at most 100 items (:mod:`queueops.items`: one bounded
statement through the collector's index, every value bound) when a list is picked or read again,
never on its own: the stuck items (exactly those the stuck count counts: both read the queue's
compiled stuck rule), the oldest waiting ones, or one item by its exact key. Operators
may requeue selected items: the requeue action with ``keys`` (preview first, then confirmation),
which releases only those of them that are stuck by the action's own rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pandas as pd
import streamlit as st

from console import context, style
from queueops import actions, engine, items, secrets
from queueops.config import Queue

# (label, color, how it is read from the sample's values)
STATES: tuple[tuple[str, str], ...] = (
    ("ready", "#2da44e"), ("scheduled", "#8c959f"), ("running", "#1f6feb"), ("stuck", "#cf222e"),
    ("failed", "#953800"), ("exhausted", "#bf3989"), ("done", "#57606a"),
)
# The legend beside the counts (Streamlit's named markdown colours, close to the bar's).
SWATCH = {"ready": "green", "scheduled": "gray", "running": "blue", "stuck": "red", "failed": "orange",
          "exhausted": "violet", "done": "gray"}
LISTS = {"stuck": "Stuck", "waiting": "Oldest waiting", "key": "By key"}


@dataclass
class Loaded:
    queue: str
    which: str
    key: str
    rows: list[dict[str, Any]]
    sql: str
    at: datetime
    error: str = ""
    selected: list[Any] = field(default_factory=list)


def state_counts(q: Queue, values: dict[str, float | None]) -> dict[str, float]:
    """Counts by state from one sample's metrics; a state the queue's collectors do not report is absent."""
    v = {k: x for k, x in values.items() if x is not None}
    out: dict[str, float] = {}
    if "depth" in v:
        out["ready"] = v["depth"]
    scheduled = v.get("count_scheduled", v.get("count_not_due"))
    if scheduled is not None:
        out["scheduled"] = scheduled
    held = v.get("count_leased") if q.kind == "lease" else v.get("count_processing")
    stuck = v.get("stuck_leases")
    failed = v.get("count_failed") if q.error_column or q.kind != "lease" else None
    if held is not None:
        # A lease queue's failed items keep their lease (count_leased holds them): not running.
        minus = (stuck or 0) + (failed or 0 if q.kind == "lease" else 0)
        out["running"] = max(held - minus, 0.0)
    if stuck is not None:
        out["stuck"] = stuck
    if failed is not None:
        out["failed"] = failed
    for label, metric in (("exhausted", "count_exhausted"), ("done", "count_done")):
        if metric in v:
            out[label] = v[metric]
    return out


def _bar_spec(counts: dict[str, float]) -> dict[str, Any]:
    """One horizontal bar stacked by state (Vega-Lite: light, no plotly.js for one bar)."""
    shown = [(i, label, color) for i, (label, color) in enumerate(STATES) if label in counts]
    return {
        "data": {"values": [{"state": label, "n": counts[label], "order": i} for i, label, _ in shown]},
        "mark": {"type": "bar", "height": 22},
        "height": 30,
        "encoding": {
            "x": {"field": "n", "type": "quantitative", "stack": "zero", "axis": None},
            "color": {"field": "state", "type": "nominal", "sort": [label for _, label, _ in shown],
                      "scale": {"domain": [label for _, label, _ in shown], "range": [c for _, _, c in shown]},
                      "legend": None},  # the counts below it name the states
            "order": {"field": "order", "type": "quantitative"},
            "tooltip": [{"field": "state", "type": "nominal"}, {"field": "n", "type": "quantitative", "format": ",.0f"}],
        },
        "config": {"view": {"stroke": None}},
    }


def render(ctx: context.Ctx, q: Queue, values: dict[str, float | None]) -> None:
    st.subheader("Items")
    counts = state_counts(q, values)
    if counts:
        st.vega_lite_chart(_bar_spec(counts), key=f"it_bar_{q.name}")
        st.markdown(" · ".join(f":{SWATCH[label]}[■] {label} **{counts[label]:,.0f}**"
                               for label, _ in STATES if label in counts))
        st.caption("Counts by state from the latest sample (ready: depth; scheduled: count_scheduled; running: "
                   "leased or processing, less stuck and failed; stuck: stuck_leases; failed: count_failed, an "
                   "estimate on lease queues; exhausted; done). Figures above the collectors' cap are estimates.")
    offered = [k for k in LISTS if _applies(q, k)]
    if not offered:
        return
    which = st.segmented_control("Items", offered, format_func=LISTS.get, key=f"it_list_{q.name}",
                                 label_visibility="collapsed")
    if not which:
        st.caption("Pick a list to read up to 100 items (one bounded read through the collector's index).")
        _result(q)
        return
    key_text = ""
    if which == "key":
        with st.form(f"it_key_form_{q.name}", border=False):
            cols = st.columns([3, 1], vertical_alignment="bottom")
            key_text = cols[0].text_input("Key (exact)", key=f"it_key_{q.name}", max_chars=450).strip()
            cols[1].form_submit_button("Find", icon=":material/search:")
        if not key_text:
            _result(q)
            return
    loaded: Loaded | None = st.session_state.get(f"it_loaded_{q.name}")
    again = st.button("Read again", key=f"it_again_{q.name}", icon=":material/refresh:", type="tertiary")
    if again or loaded is None or loaded.which != which or loaded.key != key_text:
        loaded = _load(ctx, q, which, key_text)
        st.session_state[f"it_loaded_{q.name}"] = loaded
        st.session_state.pop(f"it_plan_{q.name}", None)
    _result(q)
    if loaded.error:
        st.error(loaded.error, icon=":material/error:")
        return
    _table(ctx, q, loaded)


def _applies(q: Queue, which: str) -> bool:
    frags = items.item_fragments(q, "postgresql")
    try:
        if which == "stuck":
            items.stuck_block(q, frags)
        elif which == "waiting":
            items.waiting_block(q, frags)
        else:
            return q.kind != "ring"
    except items.NotApplicable:
        return False
    return True


def _load(ctx: context.Ctx, q: Queue, which: str, key_text: str) -> Loaded:
    target = ctx.cfg.target(q.target)
    try:
        # A typed key is bound as text; the engine compares it in the key column's type (exact match).
        with engine.connection(target, "collect", ctx.cfg.base_dir, application="queueops-console") as conn:
            # The collectors' session settings first (timeouts, read-only), then for the
            # oldest-waiting list the catalog types (it reads through the indexes the age reads).
            read, rows = items.load(conn, q, which, key=key_text if which == "key" else None)
        return Loaded(q.name, which, key_text, rows, read.statement.sql, datetime.now().astimezone())
    except (items.NotApplicable, engine.TargetError) as exc:
        return Loaded(q.name, which, key_text, [], "", datetime.now().astimezone(),
                      error=secrets.mask(f"Cannot read the items: {exc}"))


def _table(ctx: context.Ctx, q: Queue, loaded: Loaded) -> None:
    # The stuck list is what stuck_leases counts (one compiled rule): a lease queue's oldest lease,
    # a status queue's oldest status change, a claims queue's oldest claim first.
    what = {"stuck": "stuck item(s), oldest lease first" if q.kind == "lease" else "stuck item(s), oldest first",
            "waiting": "oldest waiting item(s)",
            "key": "item(s) with this key"}[loaded.which]
    st.caption(f"{len(loaded.rows)} {what} · read {style.utc_text(loaded.at)}"
               + (f" (the first {items.LIMIT})" if len(loaded.rows) >= items.LIMIT else ""))
    if not loaded.rows:
        st.info("No items." if loaded.which != "key" else "No item with this key (or it is finished).",
                icon=":material/inbox:")
        return
    df = pd.DataFrame(loaded.rows)
    df["item"] = df["item"].astype(str)  # any key type, shown as it is (a GUID, a number)
    df = df.dropna(axis=1, how="all")
    can_requeue = ctx.can_act and q.kind in ("lease", "status") and loaded.which in ("stuck", "key")
    # A new read is a new table: a selection never carries over to rows read again in another order.
    event = st.dataframe(df, hide_index=True, key=f"it_table_{q.name}_{loaded.which}_{int(loaded.at.timestamp() * 1e6)}",
                         on_select="rerun" if can_requeue else "ignore",
                         selection_mode="multi-row" if can_requeue else [])
    with st.expander("The read (bounded, bound values)"):
        st.code(loaded.sql, language="sql")
    if not can_requeue:
        return
    picked = list(event.selection.rows) if event is not None and hasattr(event, "selection") else []
    keys = [_bindable(loaded.rows[i]["item"]) for i in picked if i < len(loaded.rows)]
    label = f"Requeue {len(keys)} selected" if keys else "Requeue selected"
    if st.button(label, key=f"it_requeue_{q.name}", disabled=not keys, icon=":material/replay:"):
        try:
            plan = actions.plan(ctx.cfg, "requeue", q.name, {"keys": keys})
            st.session_state[f"it_plan_{q.name}"] = plan
        except (actions.ActionError, engine.TargetError) as exc:
            st.error(f"Cannot preview requeue: {exc}")
    plan = st.session_state.get(f"it_plan_{q.name}")
    if plan is not None and list(plan.options.keys or []) != keys:  # the selection changed: preview again
        st.session_state.pop(f"it_plan_{q.name}", None)
        plan = None
    if plan is not None:
        _confirm(ctx, q, plan)


def _bindable(value: Any) -> int | str:
    return value if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _confirm(ctx: context.Ctx, q: Queue, plan: actions.Plan) -> None:
    p = plan.preview
    with st.container(border=True, key=f"it_preview_{q.name}"):
        st.markdown(f"**Preview** · {p.summary}")
        for w in p.warnings:
            st.warning(w, icon=":material/warning:")
        if p.rows:
            st.dataframe(pd.DataFrame(p.rows).astype(str), hide_index=True, key=f"it_preview_rows_{q.name}")
        with st.expander("Exact SQL and parameters"):
            st.code(p.sql, language="sql")
            st.code(", ".join(repr(x) for x in p.params) or "(none)", language="text")
        if plan.nothing_to_do:
            st.info("Nothing to requeue: none of the selected items is stuck now.")
            return
        go_ = st.button(f"Confirm and requeue {p.row_count}", type="primary", key=f"it_run_{q.name}",
                        icon=":material/play_arrow:")
    if go_:
        try:
            result = ctx.execute(plan)
        except Exception as exc:  # noqa: BLE001 - e.g. the store is unreachable before the audit record exists
            st.error(f"requeue did not start: {secrets.mask(f'{type(exc).__name__}: {exc}')}")
            return
        st.session_state[f"it_result_{q.name}"] = result
        st.session_state.pop(f"it_plan_{q.name}", None)
        st.session_state.pop(f"it_loaded_{q.name}", None)  # read again: what is stuck now
        ctx.sampler.invalidate()
        st.rerun()


def _result(q: Queue) -> None:
    r = st.session_state.get(f"it_result_{q.name}")
    if r is None:
        return
    text = (f"**requeue** of the selected items by {r.user} ({r.role}): **{r.outcome}**, "
            f"{r.rows_affected or 0:,} released · "
            + (f"audit record {r.audit_id}" if r.audit_id is not None else "no audit record"))
    if r.ok:
        st.success(text, icon=":material/check_circle:")
    else:
        st.error(text + f"\n\n{r.error}", icon=":material/error:")
    for note in r.notes:
        st.info(note, icon=":material/info:")
