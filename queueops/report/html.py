"""Render the daily health report: one self-contained HTML file (plotly.js inlined once).

Everything that comes from data (queue and target names, summaries, notes, audit errors) is
HTML-escaped: names come from config and databases and are treated as hostile. No network is
needed to open the file.
"""

from __future__ import annotations

import html
import json
from datetime import datetime
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from pipeline import metrics as m
from queueops import judge
from queueops.report.data import ReportData, queue_states

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1b1f24;max-width:1200px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.muted{color:#57606a;font-size:13px} table{border-collapse:collapse;width:100%;font-size:13px;margin:6px 0}
th,td{border-bottom:1px solid #eaeef2;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa} .sev{font-weight:600;border-radius:4px;padding:1px 6px;color:#fff}
.crit{background:#cf222e} .warn{background:#bf8700} .ok{background:#1a7f37}
.cards{display:flex;gap:12px;flex-wrap:wrap} .card{border:1px solid #d0d7de;border-radius:6px;padding:8px 14px}
.card b{font-size:20px;display:block} code{font-size:12px;background:#f6f8fa;padding:1px 3px}
.problem{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;border-radius:6px}
"""


def esc(v: Any) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)) or v is pd.NaT:
        return ""
    if isinstance(v, (pd.Timestamp, datetime)):
        return html.escape(pd.Timestamp(v).tz_convert("UTC").strftime("%Y-%m-%d %H:%M UTC")
                           if pd.Timestamp(v).tzinfo else str(v))
    if isinstance(v, float):
        return html.escape(f"{v:,.2f}".rstrip("0").rstrip(".") if abs(v) < 1e15 else f"{v:.3g}")
    return html.escape(str(v))


def prose(v: Any) -> str:
    """Escaped text with `backticked` spans as <code> (the actions name commands that way)."""
    parts = esc(v).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def qname(target: Any, queue: Any) -> str:
    return esc(f"{target}/{queue}" if queue else f"{target} (server-wide)")


def sev(s: str) -> str:
    return f'<span class="sev {esc(s)}">{esc(s)}</span>'


def table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _findings(d: ReportData) -> str:
    f = d.findings
    if f.empty:
        return "<p>No findings in this period.</p>"
    f = f.assign(rank=f["severity"].map({"crit": 0, "warn": 1}).fillna(2))
    rows = []
    for (rule, target, queue), g in f.sort_values(["rank", "hour_start"], ascending=[True, False]).groupby(
            ["rule", "target", "queue"], sort=False):
        last = g.sort_values("hour_start").iloc[-1]
        worst = judge.worst_state(g["severity"])
        rows.append((0 if worst == "crit" else 1, [
            sev(worst), esc(rule), qname(target, queue), esc(len(g)),
            esc(g["first_ts"].min()) + " &ndash; " + esc(g["last_ts"].max()), esc(last["summary"]),
            prose(last["action"]),
            f"<details><summary>evidence</summary><code>{esc(last['evidence'])}</code></details>"]))
    rows.sort(key=lambda r: r[0])
    return table(["severity", "rule", "queue", "hours", "when", "latest", "recommended action", ""],
                 [r for _, r in rows])


def _states(d: ReportData) -> str:
    """Each queue's one state (judge.queue_state of its findings, root causes included)."""
    s = queue_states(d.findings)
    if s.empty:
        return "<p>Every queue stayed within its thresholds and no root cause was seen.</p>"
    return table(["state", "queue", "from"], [[sev(r.state), qname(r.target, r.queue), esc(r.rules)]
                                              for r in s.itertuples()])


def _forecasts(d: ReportData) -> str:
    f = d.forecasts
    if f.empty:
        return "<p>No forecasts (the pipeline has not run, or no queue has enough data).</p>"
    f = f.assign(order=f["status"].map({"ok": 0, "above": 1}).fillna(2)).sort_values(["order", "hours_to_crit"])
    headers = ["status", "queue", "metric", "last", "slope / h", "R²", "points", "warn", "crit", "reaches warn",
               "reaches crit"]

    def rows(x: pd.DataFrame) -> list[list[str]]:
        return [[esc(r.status), qname(r.target, r.queue), esc(r.metric), esc(r.last_value), esc(r.slope_per_h),
                 esc(r.r2), esc(int(r.points)), esc(r.warn), esc(r.crit), esc(r.eta_warn), esc(r.eta_crit)]
                for r in x.itertuples()]

    shown, rest = f[f["order"] < 2], f[f["order"] >= 2]
    out = (f"<p class='muted'>Linear trend over the {esc(_hours(f))} before {esc(f['as_of'].max())}; "
           "a crossing time only where the fit supports one.</p>")
    out += table(headers, rows(shown)) if not shown.empty else "<p>No queue is projected to cross a threshold.</p>"
    if not rest.empty:
        why = ", ".join(f"{esc(k)}: {v}" for k, v in rest["status"].value_counts().items())
        out += (f"<details><summary>{len(rest)} series without a forecast ({why})</summary>"
                + table(headers, rows(rest)) + "</details>")
    return out


def _hours(f: pd.DataFrame) -> str:
    span = (f["as_of"].max() - f["window_start"].min()).total_seconds() / 3600
    return f"{span:g} h"


def _fleet(d: ReportData) -> str:
    f = d.fleet
    if f.empty:
        return "<p>No fleet view yet.</p>"
    parts = []
    for problem, g in f.sort_values(["problem", "rank"]).groupby("problem"):
        rows = [[esc(int(r.rank)), qname(r.target, r.queue), esc(r.value), esc(r.detail)] for r in g.itertuples()]
        parts.append(f"<h3>{esc(problem)}</h3>" + table(["#", "queue", "value", "what"], rows))
    return "".join(parts)


def _audit(d: ReportData) -> str:
    a = d.audit
    if a.empty:
        return "<p>No actions were taken in this period.</p>"
    rows = [[esc(r.start_time), esc(r.user_name), esc(r.role), esc(r.action), qname(r.target, r.queue),
             esc(r.outcome), esc(r.rows_affected), esc(r.error)] for r in a.itertuples()]
    return table(["started", "user", "role", "action", "queue", "outcome", "rows", "error"], rows)


CHARTS = [
    ("Depth (5-minute mean)", "5m", (m.DEPTH,), "mean"),
    ("Age of the oldest item, s (5-minute max)", "5m", (m.OLDEST_AGE,), "max"),
    ("Ghost records / dead tuples (hourly max)", "1h", m.GHOSTS, "max"),
    ("Stuck leases (5-minute max)", "5m", (m.STUCK_LEASES,), "max"),
    ("Fragmentation % (hourly max)", "1h", (m.FRAGMENTATION,), "max"),
    ("Lock timeouts per 5 minutes", "5m", (*m.LOCK_TIMEOUTS, *m.LOCK_TIMEOUT_EVENTS), "delta"),
]


def _charts(d: ReportData, top: int = 8) -> list[str]:
    r = d.rollups
    if r.empty:
        return []
    flagged = set(zip(d.findings.get("target", []), d.findings.get("queue", []), strict=False))
    out = []
    for title, window, metrics, col in CHARTS:
        s = r[(r["window"] == window) & (r["metric"].isin(metrics))]
        if s.empty:
            continue
        if col == "delta":
            s = s.assign(delta=s["delta"].where(s["metric"].isin(m.LOCK_TIMEOUTS), s["sum"]))
        # The queues with findings first, then the largest.
        peak = s.groupby(["target", "queue"])[col].max().sort_values(ascending=False)
        keys = sorted(peak.index, key=lambda k: (k not in flagged, -float(peak[k] or 0)))[:top]
        fig = go.Figure()
        for target, queue in keys:
            q = s[(s["target"] == target) & (s["queue"] == queue)].sort_values("window_start")
            for metric, mq in q.groupby("metric"):
                name = f"{target}/{queue}" if queue else f"{target}"
                if len(metrics) > 1:
                    name += f" {metric}"
                fig.add_trace(go.Scatter(x=mq["window_start"], y=mq[col], mode="lines+markers", name=name,
                                         marker={"size": 4}))
        fig.update_layout(title=title, height=300, margin={"l": 50, "r": 20, "t": 40, "b": 30},
                          legend={"font": {"size": 10}}, template="plotly_white")
        out.append(fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False}))
    return out


def render(d: ReportData, generated: datetime) -> str:
    f = d.findings
    crit = int((f["severity"] == "crit").sum()) if not f.empty else 0
    warn = int((f["severity"] == "warn").sum()) if not f.empty else 0
    queues = len(set(zip(f["target"], f["queue"], strict=True))) if not f.empty else 0
    states = queue_states(f)["state"].value_counts() if not f.empty else {}
    ok_fc = int((d.forecasts["status"] == "ok").sum()) if not d.forecasts.empty else 0
    cards = "".join(f'<div class="card"><b>{esc(v)}</b>{esc(k)}</div>' for k, v in [
        ("queues critical", int(states.get("crit", 0))), ("queues warning", int(states.get("warn", 0))),
        ("critical findings (queue-hours)", crit), ("warnings (queue-hours)", warn), ("queues with findings", queues),
        ("forecasts that cross a threshold", ok_fc), ("actions taken", len(d.audit))])
    problems = "".join(f'<p class="problem">{esc(p)}</p>' for p in d.problems)
    if not d.has_gold:
        problems += ('<p class="problem">No gold tables for this period in ' + esc(d.gold)
                     + ": run <code>queueops pipeline run</code> (after <code>queueops lake export</code>).</p>")
    charts = "".join(_charts(d)) or "<p>No rollups in this period.</p>"
    meta = json.dumps({"start": d.start.isoformat(), "end": d.end.isoformat(), "findings": len(f),
                       "critical": crit, "actions": len(d.audit)})
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>queueops daily health report</title>
<meta name="queueops-report" content="{esc(meta)}">
<style>{CSS}</style><script type="text/javascript">{get_plotlyjs()}</script></head>
<body>
<h1>queueops daily health report</h1>
<p class="muted">{esc(d.start)} &ndash; {esc(d.end)} &middot; generated {esc(generated)} &middot; gold tables: {esc(d.gold)}</p>
{problems}
<div class="cards">{cards}</div>
<h2>Queue states</h2>{_states(d)}
<h2>Findings</h2>{_findings(d)}
<h2>Forecasts</h2>{_forecasts(d)}
<h2>Charts</h2>{charts}
<h2>Fleet: top queues by problem</h2>{_fleet(d)}
<h2>Actions taken (audit log)</h2>{_audit(d)}
</body></html>
"""
