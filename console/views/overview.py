"""Overview: every queue of every target on one screen, the worst first, refreshing itself.

Health comes from :mod:`console.health` (thresholds of the config); values from the shared live
sampler (the console works without the collector service); the last hour's sparklines from the
store, bucketed by the store itself (a point per queue and minute, not every sample), merged with
what the console sampled itself since it started.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd
import streamlit as st

from console import auth, chrome, context, nav, style
from console.data import LiveSample, LiveSampler, parse_note, sparklines
from console.findings import RootCause, assess, causes_of
from console.health import (
    WORD,
    QueueHealth,
    cell_state,
    count_states,
    format_age,
    format_value,
    is_stale,
    multi_sample_metrics,
    streaks,
    worst_first,
)
from queueops import catalog, judge
from queueops.config import Config, Queue

# Overview columns after state / queue / target / kind: (metric, header), from the metric catalog
# (``overview = N`` in sql/metrics.toml; a percentage's header says so).
COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (m, catalog.label(m) + (" %" if catalog.unit(m) == "%" else "")) for m in catalog.overview_columns())
CELL_BG = {"crit": "background-color: #ffebe9; color: #a40e26", "warn": "background-color: #fff8c5; color: #7d4e00",
           "ok": "", "unknown": "background-color: #eaeef2; color: #57606a",
           "ignored": "color: #57606a; font-style: italic"}
# Columns of metrics the judge judges only past a guard (fragmentation: the index's page floor).
GUARDED = frozenset(m for m, _ in COLUMNS if judge.guards(m))


def short_ignored(values: Mapping[str, float | None], metric: str) -> str:
    """A cell's few words on why its value is not judged: ``not judged: 312 pages < 1,000``."""
    for other, _op, level in judge.guards(metric):
        v = values.get(other)
        if v is not None and v < level:
            unit = {"page_count": "pages", "rows_total": "rows"}.get(other, other)
            return f"not judged: {v:,.0f} {unit} < {level:,.0f}"
    return "not judged"
STATE_BG = {**CELL_BG, "ok": "color: #1a7f37"}
SPARK_METRIC = "depth"


def causes_for(sample: LiveSample, q: Queue) -> list[RootCause]:
    """The root causes that concern one queue now: its target's (the snapshot holder, heads of
    blocking chains whose waiters include the queue's) and its own rows' (the sessions holding its
    table), see :func:`console.findings.causes_of`."""
    target = [(r.metric, r.value, parse_note(r.note)) for r in sample.target_rows(q.target)]
    own = [(r.metric, r.value, parse_note(r.note)) for r in sample.rows if r.target == q.target and r.queue == q.name]
    return causes_of(target, q.name, own, judge.snapshot_levels(q.threshold(judge.OLD_SNAPSHOT))[0])


def judge_all(cfg: Config, sample: LiveSample,
              history: Sequence[tuple[str, str, str, float | None]] = ()) -> list[QueueHealth]:
    """Every configured queue judged from the sample, worst first, as its own page judges it
    (:func:`console.findings.assess`: the worst of its metrics and its findings, root causes
    included); ``history`` (time-ordered ``(target, queue, metric, value)`` rows of recent samples)
    gives the metrics the judge needs several consecutive samples of (stuck leases) their streaks."""
    values = sample.values()
    down = sample.unreachable()
    errors = sample.queue_errors()
    return worst_first(assess(q, cfg.target(q.target).dialect, values.get((q.target, q.name), {}),
                              causes_for(sample, q) if q.target not in down else [],
                              reachable=q.target not in down, error=errors.get((q.target, q.name), ""),
                              recent=streaks(history, q))[0]
                       for q in cfg.queues)


def recent_rows(sampler: LiveSampler) -> list[tuple[str, str, str, float | None]]:
    """The console's recent samples of the metrics the judge needs a streak of, oldest first."""
    frames = [sampler.history(m) for m in multi_sample_metrics()]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return []
    df = pd.concat(frames).sort_values("ts", kind="stable")
    return list(zip(df["target"], df["queue"], df["metric"], df["value"], strict=True))


# A metric that does not apply to a queue's kind (or has no sample) is an empty cell: Streamlit
# would draw the word "None" for a missing value, and pandas' Styler "nan".
NOT_APPLICABLE = ""


def cell_note(note: str) -> str:
    """A cell's few words on why its value is missing or cannot be trusted, from its row's note:
    "not counted: why" (issue 29: a stuck_leases no index can serve) or "not visible: why" (issue
    32: a collector login without pg_read_all_stats sees no other login's sessions, so a snapshot
    or blocker reads as none), whether the note is that text, begins with it, or is JSON carrying
    it under ``not_visible``; '' for any other note."""
    text = note.strip()
    if text.startswith("{"):
        details = parse_note(text) or {}
        text = details.get("not_visible") if isinstance(details.get("not_visible"), str) else ""
    for word in ("not counted", "not visible"):
        if text.startswith(word):
            why = text.removeprefix(word).lstrip(": ").split(":")[0].split(" (")[0].split(";")[0].strip()
            return f"{word}: {why}" if why else word
    return ""


# Columns whose healthy value depends on seeing other sessions, and the rows that say when the
# collector login cannot: ghosts are held by a snapshot it may not see; waiters' blockers too.
UNSEEN_FROM: Mapping[str, tuple[str, ...]] = {
    "ghost_records": ("oldest_snapshot_age_s",),
    "lock_waiters": ("head_blockers", "lock_blockers", "lock_wait_max_s"),
}


def unseen(notes: Mapping[tuple[str, str, str], str], target: str, queue: str, metric: str) -> str:
    """Why a column's root cause is not visible for this queue ('' when it is): the first
    "not visible" note among its target's and its own rows of :data:`UNSEEN_FROM`."""
    for source in UNSEEN_FROM.get(metric, ()):
        for key in ((target, queue, source), (target, "", source)):
            why = cell_note(notes.get(key, ""))
            if why.startswith("not visible"):
                return why
    return ""


def table(cfg: Config, healths: list[QueueHealth], spark: Mapping[tuple[str, str], list[float]],
          down: Collection[str] = (),
          notes: Mapping[tuple[str, str, str], str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The overview table (one row per queue, worst first) and, cell by cell, each value's state;
    ``notes`` (the sample's, by target, queue and metric): a metric left uncounted says why."""
    rows, states = [], []
    for h in healths:
        q = cfg.queue(h.queue)
        row: dict[str, object] = {
            "State": WORD[h.state], "Queue": h.queue, "Target": h.target, "Kind": q.kind,
            "Why": h.reason or (("no sample: target unreachable" if h.target in down else "no sample yet")
                                if h.state == "unknown" else ""),
            "Depth, last hour": spark.get((h.target, h.queue), []),
        }
        cell: dict[str, str] = {"State": h.state}
        for metric, header in COLUMNS:
            v = h.values.get(metric)
            if metric == "oldest_age_s":
                row[header] = format_age(v) if v is not None else "—"
            elif metric in GUARDED:  # text: a value the judge leaves out says so in its cell
                row[header] = "" if v is None else f"{v:.1f}" + (f" · {short_ignored(h.values, metric)}"
                                                                 if metric in h.ignored else "")
            else:
                row[header] = v if v is not None else (cell_note((notes or {}).get((h.target, h.queue, metric), ""))
                                                       or None)
            cell[header] = "ignored" if metric in h.ignored else cell_state(q, h, metric)
            hidden = unseen(notes or {}, h.target, h.queue, metric)
            if hidden and v is not None:  # a 0 the collector cannot vouch for never reads healthy
                row[header] = f"{format_value(metric, v)} · {hidden}"
                cell[header] = "unknown" if cell[header] == "ok" else cell[header]
        rows.append(row)
        states.append(cell)
    df = pd.DataFrame(rows)
    for metric, header in COLUMNS:  # a column with a note in words is text: its numbers read as numbers
        if metric not in GUARDED and metric != "oldest_age_s" and header in df \
                and df[header].map(lambda x: isinstance(x, str)).any():
            df[header] = df[header].map(lambda x, m=metric: format_value(m, x) if isinstance(x, (int, float))
                                        and x == x else x)
    return df, pd.DataFrame(states, index=df.index)


def last_seen(sampler_ok: Mapping[str, datetime], store_status: pd.DataFrame, target: str) -> datetime | None:
    """When a target last answered: the console's own samples or the service's status rows."""
    seen = [sampler_ok.get(target)]
    if not store_status.empty:
        hit = store_status.loc[store_status["target"] == target, "last_ok"]
        if len(hit) and pd.notna(hit.iloc[0]):
            seen.append(hit.iloc[0].to_pydatetime())
    seen = [s for s in seen if s is not None]
    return max(seen) if seen else None


def render() -> None:
    ctx = context.get()
    chrome.title(ctx, "Overview")

    @st.fragment(run_every=ctx.cfg.console.refresh_s)
    def live() -> None:
        if not auth.still_signed_in(ctx.cfg):  # signed out elsewhere, idle, expired: the gate takes over
            st.rerun()
        _body(ctx)

    live()


def _banners(ctx: context.Ctx, sample: LiveSample, now: datetime, newest: datetime | None) -> None:
    status = ctx.store.last_status()
    for target, error in sorted(sample.unreachable().items()):
        seen = last_seen(ctx.sampler.last_ok, status, target)
        when = (f"last seen {style.utc_text(seen)} ({format_age((now - seen).total_seconds())} ago)"
                if seen else "never seen since the console started")
        st.error(f"**Target `{target}` is unreachable** — {when}.\n\n{error}", icon=":material/cloud_off:")
    failed = [s for s in sample.status if not s.ok and s.target not in sample.unreachable()]
    if failed:
        with st.expander(f":material/warning: {len(failed)} collector(s) failed in the last sample", expanded=False):
            for s in failed:
                st.markdown(f"- `{s.target}` · `{s.collector}`{' (timeout)' if s.timeout else ''}: {s.error}")
    if ctx.store.error:
        st.warning(f"The store cannot be read, history is missing: {ctx.store.error}", icon=":material/database:")
    elif newest is None:
        st.info("No history yet: no collector service has written to the store. Values are live samples "
                "taken by the console, and the sparklines fill in while it runs. Start "
                "`queueops collect` for history, trends and alerts.", icon=":material/info:")
    elif is_stale(newest, now, ctx.cfg.schedule.fast_s):
        st.warning(f"**History is stale**: the newest snapshot in the store is from {style.utc_text(newest)} "
                   f"({format_age((now - newest).total_seconds())} ago). Is `queueops collect` running? "
                   "Current values below are live.", icon=":material/schedule:")


CHART_WIDTH = 380  # px, the "What is wrong" charts
TILE_WIDTH = 170  # px: a card keeps its label and value whole and the row wraps (at 800 px too)


def _tiles(healths: list[QueueHealth], n_targets: int, n_down: int) -> None:
    counts = count_states(healths)
    with st.container(horizontal=True, wrap=True, key="ov_tiles"):
        for label, value in (("Critical", counts["crit"]), ("Warning", counts["warn"]),
                             ("Unknown", counts["unknown"]), ("OK", counts["ok"]),
                             ("Targets up", f"{n_targets - n_down} / {n_targets}")):
            st.metric(label, value, border=True, width=TILE_WIDTH)


def spark_scale(spark: Mapping[tuple[str, str], Sequence[float]]) -> float:
    """One y scale for every row's sparkline, 0 to the highest point of any (at least 1): a queue
    at 0 and one at 97 must not look alike, as they did with a scale per row."""
    top = max((v for points in spark.values() for v in points if v is not None and v == v), default=0.0)
    return max(float(top), 1.0)


WRAP_ROW_PX = 66  # Streamlit wraps a cell's text only in rows taller than 4 rem (64 px)
LINE_PX, MAX_LINES = 20, 5


def why_layout(reasons: Sequence[str]) -> tuple[int, int | None]:
    """The Why column's width (px) and the table's row height: the longest reason on one line when
    it fits in 420 px (~7 px a character at the grid's font), else 420 px with rows tall enough for
    it wrapped (up to five lines), so a reason is read whole and the metrics beside it stay in reach."""
    longest = max((len(r) for r in reasons if isinstance(r, str)), default=0)
    need = 7 * longest + 24
    if need <= 420:
        return max(200, need), None
    lines = min(MAX_LINES, -(-7 * longest // (420 - 24)))
    return 420, max(WRAP_ROW_PX, 12 + LINE_PX * lines)


@dataclass
class CauseRow:
    """One root cause on the Overview: the session, what it does, the queues it holds up."""

    target: str
    cause: RootCause
    state: str
    queues: list[str]
    waiting: float = 0.0


def cause_state(c: RootCause, q: Queue) -> str | None:
    """The state a snapshot or blocker cause gives queue ``q`` (the snapshot against the queue's own
    old-snapshot levels); None for a cause the banners do not judge (lock waits alone)."""
    if c.kind == "snapshot":
        return judge.snapshot_state(c.age_s, q.threshold(judge.OLD_SNAPSHOT))
    if c.kind == "blocker":
        return judge.blocker_state(c.age_s, c.holds_table)
    return None


def cause_rows(cfg: Config, sample: LiveSample, healths: Sequence[QueueHealth]) -> list[CauseRow]:
    """Every root cause of every reachable target now, one row per session (worst first): the
    oldest snapshot's holder (past each queue's old-snapshot level), the sessions holding a queue's
    table, the heads of chains holding up a queue's dequeuers, and lock waits on a queue's table
    that no session was named for (the waiters alone)."""
    rank = {h.queue: i for i, h in enumerate(healths)}  # worst first: a cause links to its worst queue
    down = sample.unreachable()
    values = sample.values()
    out: dict[tuple[str, object], CauseRow] = {}
    waits: list[CauseRow] = []
    for q in sorted(cfg.queues, key=lambda x: rank.get(x.name, 0)):
        if q.target in down:
            continue
        causes = causes_for(sample, q)
        for c in causes:
            state = cause_state(c, q)
            if state not in ("warn", "crit"):
                continue
            key = (q.target, c.pid if c.pid is not None else c.summary)
            row = out.setdefault(key, CauseRow(q.target, c, state, []))
            row.queues.append(q.name)
            if judge.worst_state([row.state, state]) != row.state:
                row.state = state
        n = values.get((q.target, q.name), {}).get("lock_waiters") or 0
        if n > 0 and not any(c.kind == "blocker" for c in causes):
            thr = q.threshold("lock_waiters")
            state = judge.judge(n, thr) if thr is not None else "warn"
            waits.append(CauseRow(q.target, RootCause("other", "lock_waiters", None, {}),
                                  state if state in ("warn", "crit") else "warn", [q.name], n))
    rows = list(out.values()) + waits
    return sorted(rows, key=lambda r: (r.state != "crit", -(r.cause.age_s or 0)))


def unseen_targets(sample: LiveSample) -> dict[str, str]:
    """Reachable targets whose root-cause rows (the oldest snapshot, blocking chains) say the
    collector login cannot see other sessions, with the words why: no banner there is not "none"."""
    down = sample.unreachable()
    out: dict[str, str] = {}
    for r in sample.rows:
        if not r.queue and r.target not in down and r.metric in ("oldest_snapshot_age_s", "head_blockers"):
            why = cell_note(r.note)
            if why.startswith("not visible"):
                out.setdefault(r.target, why)
    return out


def _root_causes(ctx: context.Ctx, sample: LiveSample, healths: Sequence[QueueHealth]) -> None:
    """Root causes as banners above the table: the session, its age, the queues it holds up, and
    the one-click way to its "End session" card on the queue page; a target whose sessions the
    collector cannot see says so, since its missing root causes may be there all the same."""
    for target, why in sorted(unseen_targets(sample).items()):
        st.warning(f"**Root causes on target `{target}` are {why}**: an old snapshot or a blocking "
                   "session there reads as none. Grant the collector login pg_monitor (or pg_read_all_stats).",
                   icon=":material/visibility_off:")
    for i, row in enumerate(cause_rows(ctx.cfg, sample, healths)):
        c = row.cause
        queues = ", ".join(f"`{name}`" for name in row.queues)
        if c.kind == "other":
            text = (f"**{row.waiting:.0f} session(s) wait on a lock on queue {queues}'s table** (target "
                    f"`{row.target}`); no session holding it was named in this sample")
        elif c.kind == "snapshot":
            text = (f"**{c.summary}** on target `{row.target}`"
                    + (f" ({c.details['state']})" if c.details.get("state") else "")
                    + f": VACUUM cannot remove dead tuples of any queue ({queues})")
        else:
            text = (f"**{c.summary}**" + (f" ({c.details['state']})" if c.details.get("state") else "")
                    + f": dequeues of {queues} wait" + (f" ({c.details['blocked']} session(s) behind it)"
                                                        if c.details.get("blocked") else ""))
        icon = ":material/hourglass_top:" if c.kind == "snapshot" else ":material/block:"
        box = st.error if row.state == "crit" else st.warning
        with st.container(key=f"ov_cause_{i}"):
            left, right = st.columns([6, 1.3], vertical_alignment="center")
            with left:
                box(f"{'Root cause' if c.kind != 'other' else 'Lock waits'} · {text}", icon=icon)
            with right:
                pid = c.pid
                if pid is not None and ctx.can_act:
                    if st.button(f"End session {pid}…", key=f"ov_end_{row.target}_{pid}",
                                 icon=":material/power_settings_new:",
                                 help="Open the queue page with this session's End session preview"):
                        nav.open_queue(row.queues[0], end=str(pid))
                elif st.button(f"Open {row.queues[0]}", key=f"ov_open_{i}", icon=":material/open_in_new:"):
                    nav.open_queue(row.queues[0])


def _body(ctx: context.Ctx) -> None:
    cfg = ctx.cfg
    if not cfg.queues:
        st.info("No queues are configured. Add `[[queues]]` to the config (see examples/queueops.toml).")
        return
    sample = ctx.sampler.sample()
    now = sample.ts
    newest = ctx.store.newest_snapshot()
    _banners(ctx, sample, now, newest)
    # What the history-derived parts read, beyond the sample: the store up to its newest row and the
    # console's own recent samples. With the same of each they draw the same, so they are made once
    # per sample and store write, for every session and reload (see LiveSampler.derived).
    inputs = (now, newest, ctx.sampler.generation)
    healths = judge_all(cfg, sample, recent_rows(ctx.sampler))
    _tiles(healths, len(cfg.targets), len(sample.unreachable()))
    _root_causes(ctx, sample, healths)

    since = now - timedelta(hours=1)
    spark = ctx.sampler.derived(("overview_spark", *inputs), lambda: sparklines(
        ctx.store, [ctx.sampler.history(SPARK_METRIC)], SPARK_METRIC, since, [(q.target, q.name) for q in cfg.queues]))
    df, states = table(cfg, healths, spark, sample.unreachable(), sample.notes())
    top = spark_scale(spark)
    why_px, row_px = why_layout(list(df["Why"]))
    shown = [h for m, h in COLUMNS if any(x.values.get(m) is not None for x in healths)]
    guard_help: dict[str, str] = {}
    columns = ["State", "Queue", "Target", "Why", "Depth, last hour", *shown, "Kind"]
    styled = df[columns].style.apply(
        lambda col: [(STATE_BG if col.name == "State" else CELL_BG)[s] for s in states[col.name]]
        if col.name in states.columns else [""] * len(col), axis=0).format(na_rep=NOT_APPLICABLE)
    for metric, header in COLUMNS:
        if metric in GUARDED and header in shown:
            floors = " and ".join(f"{other.replace('_', ' ')} {op} {level:,.0f}" for other, op, level in
                                  judge.guards(metric))
            guard_help[header] = (f"judged only while {floors} (the floor below which the rebuild action does "
                                  "nothing); a value under it reads 'not judged' and never colours the queue")
    config: dict[str, object] = {
        "State": st.column_config.TextColumn(width="small", pinned=True),
        "Queue": st.column_config.TextColumn(pinned=True),
        "Why": st.column_config.TextColumn(width=why_px,
                                           help="every metric past a threshold, worst first"),
        "Depth, last hour": st.column_config.LineChartColumn(
            f"Depth, last hour (0–{top:,.0f})", width="medium", y_min=0, y_max=top,
            help=f"depth over the last hour (max per minute), every row on one scale: 0 to {top:,.0f} items"),
        "Fragmentation %": st.column_config.NumberColumn(format="%.1f"),
        "Oldest age": st.column_config.TextColumn(help="how long the oldest ready item has waited"),
        "Kind": st.column_config.TextColumn(width="small"),
    }
    for header, text in guard_help.items():
        config[header] = st.column_config.TextColumn(width="medium", help=text)
    for header in shown:
        if header in df and df[header].map(lambda x: isinstance(x, str)).any():  # "not counted: why" (issue 29)
            config.setdefault(header, st.column_config.TextColumn(width="medium"))
        config.setdefault(header, st.column_config.NumberColumn(format="localized"))
    event = st.dataframe(styled, hide_index=True, column_config=config, on_select="rerun",
                         selection_mode="single-row", key="overview_table", placeholder=NOT_APPLICABLE,
                         row_height=row_px, height=min(38 + (row_px or 35) * len(df), 38 + (row_px or 35) * 20))
    st.caption(f"Sampled {style.utc_text(now)} · {style.local_text(now, ctx.tz)} · refreshing every "
               f"{cfg.console.refresh_s:g} s · select a row to open the queue")
    rows = getattr(getattr(event, "selection", None), "rows", None) if event is not None else None
    if rows:
        nav.open_queue(str(df.iloc[rows[0]]["Queue"]))
    _problem_charts(ctx, healths, now, inputs)


def _problem_charts(ctx: context.Ctx, healths: list[QueueHealth], now: datetime, inputs: tuple[object, ...]) -> None:
    """The last hour of what is wrong, for each queue that is not ok (the worst six)."""
    bad = [h for h in healths if h.state in ("crit", "warn") and h.reasons][:6]
    if not bad:
        return
    st.subheader("What is wrong, last hour")
    shown = tuple((h.target, h.queue, h.state, h.reasons[0].metric, h.reasons[0].state) for h in bad)
    charts = ctx.sampler.derived(("overview_problems", *inputs, ctx.tz, shown),
                                 lambda: problem_charts(ctx, bad, now))
    # Fixed-width charts in a row that wraps: three across a wide screen, one under the other at
    # 800 px, each wide enough for its title and time labels.
    with st.container(horizontal=True, wrap=True, key="ov_problems"):
        for h, (data, spec) in zip(bad, charts, strict=True):
            st.vega_lite_chart(data, spec, width=CHART_WIDTH, key=f"problem_{h.target}_{h.queue}")


def problem_charts(ctx: context.Ctx, bad: list[QueueHealth], now: datetime) -> list[tuple[pd.DataFrame, dict]]:
    """One chart per queue of ``bad`` (data and Vega-Lite spec): its first reason's metric over the
    last hour, with its levels."""
    since = now - timedelta(hours=1)
    metrics = sorted({h.reasons[0].metric for h in bad})
    hist = ctx.store.history(metrics, since, [(h.target, h.queue) for h in bad])
    live = [ctx.sampler.history(m) for m in metrics]
    frames = [f for f in [hist, *live] if not f.empty]
    data = pd.concat([f[["ts", "target", "queue", "metric", "value"]] for f in frames]) if frames else None
    empty = pd.DataFrame({"ts": pd.Series(dtype="datetime64[ns, UTC]"), "value": pd.Series(dtype=float)})
    charts = []
    for h in bad:
        f = h.reasons[0]
        q = ctx.cfg.queue(h.queue)
        d = empty
        if data is not None:
            d = data[(data["target"] == h.target) & (data["queue"] == h.queue) & (data["metric"] == f.metric)]
            d = d.sort_values("ts")
        thr = q.threshold(f.metric)
        shown = data["ts"] if data is not None else empty["ts"]
        charts.append(style.level_chart(
            d["ts"], d["value"], style.label(f.metric), ctx.tz, color=style.STATE_COLOR[f.state],
            warn=thr.warn if thr else None, crit=thr.crit if thr else None,
            x_range=(style.window_start(shown, now, now - since), now),
            title=f"{h.queue} · {style.label(f.metric)} ({WORD[h.state].lower()})", unit=style.unit(f.metric)))
    return charts
