"""A bounded soak: the lab with faults cycling on and off, the service, the exporter, actions.

    python benchmarks/soak.py [--minutes 20] [--fast-s 5] [--slow-s 30]      (make soak)

One run on a private embedded PostgreSQL (a temporary folder, any free port):

* the lab workload at its default rates (``queueops/lab/settings.py``);
* the real collector service (``queueops collect``) with its store (SQLite), its lake exporter
  (every minute; an hour is exported once it has closed), its ``/metrics`` endpoint, and alert
  notifications to a webhook this script receives;
* the faults, one after the other and round again until the time is up: ``dead-consumer``,
  ``snapshot-hold``, ``watermark-jump``, ``lock-hold``, ``churn`` (switched in ``lab.faults``)
  and a database **outage** (the server stopped, then started on the same port); each is on for
  one slot, then off, then the operator's remedy runs through ``queueops act`` (requeue lease and
  status after a dead consumer, watermark-reset after a watermark jump, rebuild after churn),
  then one quiet slot; a plain ``act requeue --queue lease`` also runs every ``--action-every``;
* at the end, a quiet period for the alerts to resolve, then the workload stops and the ledger
  is audited (no item lost or processed twice).

Measured: the service's memory (RSS) every 5 s; gaps in each collector's successful cycles and
in each regularly emitted metric, outside the outages; whether each fault moved its metric;
every alert that fired and whether it resolved; every action's outcome; lake hours exported
against the store; the ledger audit. Prints one JSON summary.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.labharness import Child, PrivateLab, console_config, loadavg, service  # noqa: E402

FAULTS = ("dead-consumer", "snapshot-hold", "watermark-jump", "lock-hold", "churn", "outage")
LEASE_TIMEOUT_S = 10  # the soak config's lease timeout: a dead consumer's items are stuck after 10 s
SLOW_COLLECTORS = ("ghost_records", "fragmentation_pct")


def now_utc() -> datetime:
    return datetime.now(UTC)


# ---------------------------------------------------------------------------------------------
# Alert notifications (the service's real webhook)


class Webhook:
    """A local receiver for the service's alert webhook: every payload, with its arrival time."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []
        received = self.payloads

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with contextlib.suppress(ValueError):
                    received.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# ---------------------------------------------------------------------------------------------
# The timeline


@dataclass
class Injected:
    fault: str
    on: datetime
    off: datetime | None = None
    back: datetime | None = None  # outage: when the server accepted connections again


@dataclass
class Soak:
    args: argparse.Namespace
    lab: PrivateLab
    work: Path
    config: Path
    svc: Child
    injected: list[Injected] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)
    rss: list[tuple[float, int]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    errors: list[str] = field(default_factory=list)
    warm: float = 0.0  # end of the warm-up (memory is judged from here on)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def sleep(self, seconds: float) -> None:
        """Sleep, sampling the service's memory and running the periodic action when due."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            rss = self.svc.rss_kb()
            if rss is not None and (not self.rss or time.monotonic() - self.rss[-1][0] >= 5):
                self.rss.append((time.monotonic(), rss))
            if not self.svc.alive():
                raise RuntimeError(f"the service exited (code {self.svc.proc.returncode}); see {self.svc.log}")
            time.sleep(min(1.0, left))

    def act(self, action: str, queue: str, why: str, *extra: str) -> None:
        """``queueops act ACTION --queue Q --yes --json``, as an operator would."""
        began = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "queueops.cli", "act", action, "--queue", queue, *extra,
                               "--yes", "--json", "--config", str(self.config)], capture_output=True, text=True,
                              cwd=ROOT, timeout=900)
        rec: dict[str, Any] = {"at_s": round(self.elapsed(), 1), "action": " ".join((action, *extra)),
                               "queue": queue, "why": why,
                               "exit": proc.returncode, "seconds": round(time.monotonic() - began, 1)}
        try:
            out = json.loads(proc.stdout.strip().splitlines()[-1])
            rec.update(outcome=out.get("outcome"), rows=out.get("rows_affected"), error=out.get("error") or "")
        except (ValueError, IndexError):
            rec.update(outcome="no result", error=(proc.stderr or proc.stdout).strip()[-300:])
        self.actions.append(rec)
        print(f"  [{self.elapsed():6.0f}s] act {action} {queue}: {rec.get('outcome')} "
              f"{rec.get('rows', '')} {rec.get('error', '')[:120]}", file=sys.stderr)

    def inject(self, fault: str, slot: float) -> None:
        if fault == "churn":
            # Its marks (dead tuples, leaf density) are read by the slow collectors: on long enough
            # for at least one of their samples, or the remedy would erase it unseen.
            slot = max(slot, self.args.slow_s + 2 * self.args.fast_s)
        rec = Injected(fault, now_utc())
        self.injected.append(rec)
        print(f"  [{self.elapsed():6.0f}s] fault {fault} on for {slot:.0f}s", file=sys.stderr)
        if fault == "outage":
            self.lab.stop_database()
            self.sleep(slot)
            rec.off = now_utc()
            self.lab.start_database()
            rec.back = now_utc()
        else:
            self.lab.set_fault(fault, True)
            self.sleep(slot)
            self.lab.set_fault(fault, False)
            rec.off = now_utc()
        # The remedy an operator would run once the fault's cause is gone.
        if fault == "dead-consumer":
            # No new claims a second after "off"; the last ones are stuck once the lease timeout passed.
            self.sleep(LEASE_TIMEOUT_S + 1.5)
            self.act("requeue", "lease", "after dead-consumer")
            self.act("requeue", "status", "after dead-consumer")
        elif fault == "watermark-jump":
            self.sleep(1.5)
            self.act("watermark-reset", "delete", "after watermark-jump")
        elif fault == "churn":
            # The one-click rebuild skips indexes under 1,000 pages ("too small to matter"), yet
            # fragmentation_pct alerts on them; the operator then forces it.
            self.act("rebuild", "status", "after churn")
            self.act("rebuild", "status", "after churn, forced", "--min-pages", "0")
        elif fault == "outage":
            # Items claimed while the server went away (the claim committed, its answer was lost)
            # are stuck leases once the lease timeout has passed: the operator requeues them.
            self.sleep(LEASE_TIMEOUT_S + 2 * self.args.fast_s)
            self.act("requeue", "lease", "after outage")
            self.act("requeue", "status", "after outage")


def run_timeline(s: Soak) -> None:
    total = s.args.minutes * 60
    quiet_end = max(60.0, min(180.0, total * 0.15))  # the alerts' time to resolve at the end
    slot = s.args.slot or max(15.0, min(60.0, (total - quiet_end) / (2 * len(FAULTS) + 1)))
    next_action = s.args.action_every
    print(f"soak: {s.args.minutes:g} min, fault slot {slot:.0f}s, quiet end {quiet_end:.0f}s", file=sys.stderr)
    s.sleep(slot)  # warm-up: the first cycles, the lake exporter's first run
    s.warm = time.monotonic()
    i = 0
    while i < len(FAULTS) or s.elapsed() + 2 * slot + quiet_end <= total:  # every fault at least once
        s.inject(FAULTS[i % len(FAULTS)], slot)
        i += 1
        s.sleep(slot)
        if s.elapsed() >= next_action:
            next_action = s.elapsed() + s.args.action_every
            s.act("requeue", "lease", "periodic")
    print(f"  [{s.elapsed():6.0f}s] quiet until the end", file=sys.stderr)
    s.sleep(max(quiet_end, total - s.elapsed()))


# ---------------------------------------------------------------------------------------------
# Analysis


def _ts(value: object) -> datetime:
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


def outage_windows(s: Soak, allowance_s: float) -> list[tuple[datetime, datetime]]:
    """Injected outages, extended by the time the service may take to notice the server's return."""
    return [(i.on, (i.back or i.off or now_utc()) + timedelta(seconds=allowance_s))
            for i in s.injected if i.fault == "outage"]


def gaps(store: Path, s: Soak, fast_s: float, slow_s: float, t0: datetime, t1: datetime) -> dict[str, Any]:
    """Gaps longer than one interval in successful cycles (per collector) and in regular metrics."""
    outages = outage_windows(s, allowance_s=2 * fast_s + 10)

    def in_outage(a: datetime, b: datetime) -> bool:
        return any(a < o1 and b > o0 for o0, o1 in outages)

    def interval(collector: str) -> float:
        return slow_s if collector in SLOW_COLLECTORS else fast_s

    with sqlite3.connect(store, timeout=60) as db:
        # The collectors' own rows only: not the service's about itself or a target's outage.
        status = db.execute("SELECT collector, ts, ok FROM collector_status WHERE target <> '(service)' "
                            "AND collector <> '(outage)' ORDER BY ts").fetchall()
        snaps = db.execute("SELECT queue, metric, ts FROM snapshots ORDER BY ts").fetchall()
    ok_ts: dict[str, list[datetime]] = defaultdict(list)
    cycles_ts: dict[str, set[datetime]] = defaultdict(set)
    failed = defaultdict(int)
    for collector, ts, ok in status:
        t = _ts(ts)
        if not (t0 <= t <= t1):
            continue
        cycles_ts[collector].add(t)
        if ok:
            ok_ts[collector].append(t)
        elif not in_outage(t, t):
            failed[collector] += 1

    def series_gaps(times: list[datetime], every: float) -> tuple[int, float, int]:
        """(gaps longer than 1.5 intervals outside outages, longest such gap, those inside outages)."""
        n, longest, inside = 0, 0.0, 0
        for a, b in zip(times, times[1:], strict=False):
            g = (b - a).total_seconds()
            if g > 1.5 * every:
                if in_outage(a, b):
                    inside += 1
                else:
                    n += 1
                    longest = max(longest, g)
        return n, longest, inside

    collectors = {}
    for c, times in sorted(ok_ts.items()):
        n, longest, inside = series_gaps(sorted(times), interval(c))
        collectors[c] = {"interval_s": interval(c), "ok_cycles": len(times), "gaps_outside_outages": n,
                         "longest_gap_s": round(longest, 1), "gaps_inside_outages": inside,
                         "failed_cycles_outside_outages": failed[c]}
    # Metrics: a (queue, metric) counts as regular when present in >= 95% of its collector's cycles
    # (conditional ones, e.g. the head blocker's details, appear only when there is something).
    from collectors import registry

    owner = {m: c.name for c in registry.COLLECTORS for m in c.metrics}
    series: dict[tuple[str, str], list[datetime]] = defaultdict(list)
    for queue, metric, ts in snaps:
        t = _ts(ts)
        if t0 <= t <= t1:
            series[(queue, metric)].append(t)
    metric_gaps, worst, checked = 0, {}, 0
    for (queue, metric), times in series.items():
        c = owner.get(metric) or owner.get(metric.removesuffix("_per_s") + "_total")
        if c is None or not ok_ts.get(c) or len(set(times)) < 0.95 * len(ok_ts[c]):
            continue
        checked += 1
        n, longest, _ = series_gaps(sorted(set(times)), interval(c))
        metric_gaps += n
        if n:
            worst[f"{queue or '(target)'}:{metric}"] = round(longest, 1)
    return {"collectors": collectors, "regular_metrics_checked": checked,
            "metric_gaps_outside_outages": metric_gaps, "metrics_with_gaps": worst,
            "outages": [[a.isoformat(), b.isoformat()] for a, b in outages]}


def series_values(store: Path, queue: str, metric: str, a: datetime, b: datetime) -> list[float]:
    with sqlite3.connect(store, timeout=60) as db:
        rows = db.execute("SELECT ts, value FROM snapshots WHERE metric = ? AND queue = ?", (metric, queue)).fetchall()
    return [float(v) for ts, v in rows if v is not None and a <= _ts(ts) <= b]


# For each fault, the metrics that show it: (queue, or "" for target-wide, metric, test on the
# values before and during the fault, what "moved" means). The first is the fault's own metric
# (the one the console is built to show for it); the others are symptoms that also reveal it.
def _up(before: list[float], during: list[float], by: float) -> bool:
    return max(during, default=0) >= max(before, default=0) + by


DETECTORS: dict[str, list[tuple[str, str, Callable[[list[float], list[float]], bool], str]]] = {
    "dead-consumer": [("lease", "stuck_leases", lambda b, d: max(d, default=0) > 0, "stuck_leases > 0"),
                      ("status", "stuck_leases", lambda b, d: max(d, default=0) > 0, "stuck_leases > 0")],
    "snapshot-hold": [("", "oldest_snapshot_age_s", lambda b, d: _up(b, d, 10), "up by >= 10 s")],
    "watermark-jump": [("delete", "watermark_drift", lambda b, d: min(d, default=0) < 0, "< 0"),
                       ("delete", "stranded_count", lambda b, d: max(d, default=0) > 0, "> 0")],
    "lock-hold": [("lease", "lock_waiters", lambda b, d: max(d, default=0) > 0, "> 0"),
                  ("", "blocked_sessions", lambda b, d: max(d, default=0) > 0, "> 0"),
                  ("lease", "oldest_age_s", lambda b, d: _up(b, d, 10), "up by >= 10 s")],
    "churn": [("status", "dead_tuples", lambda b, d: max(d, default=0) > 2 * max(max(b, default=0), 100),
               "> 2x before"),
              ("status", "fragmentation_pct", lambda b, d: _up(b, d, 10), "up by >= 10 points"),
              ("status", "page_density_pct", lambda b, d: min(d, default=100) <= min(b, default=100) - 10,
               "down by >= 10 points")],
}


def detection(store: Path, s: Soak, slow_s: float, fast_s: float) -> list[dict[str, Any]]:
    out = []
    with sqlite3.connect(store, timeout=60) as db:
        status = [(_ts(ts), ok) for ts, ok in db.execute("SELECT ts, ok FROM collector_status WHERE collector = "
                                                          "'depth'")]
    for inj in s.injected:
        off = inj.off or now_utc()
        rec: dict[str, Any] = {"fault": inj.fault, "on": inj.on.isoformat(), "seconds": round((off - inj.on)
                                                                                             .total_seconds(), 1)}
        if inj.fault == "outage":
            failed = [t for t, ok in status if inj.on <= t <= off + timedelta(seconds=fast_s) and not ok]
            recovered = [t for t, ok in status if ok and t > (inj.back or off)]
            rec.update(detected=bool(failed), how="collector cycles failed during the outage",
                       recovered_after_s=round((min(recovered) - (inj.back or off)).total_seconds(), 1)
                       if recovered else None)
            out.append(rec)
            continue
        late = timedelta(seconds=2 * slow_s + 5)
        before = (inj.on - timedelta(seconds=max(2 * slow_s, 30)), inj.on)
        moved, primary = [], False
        for queue, metric, test, _ in DETECTORS[inj.fault]:
            b = series_values(store, queue, metric, *before)
            d = series_values(store, queue, metric, inj.on, off + late)
            if test(b, d):
                low = metric in ("watermark_drift", "page_density_pct")
                moved.append(f"{queue or '(target)'}:{metric} {(min(b) if low and b else max(b, default=0)):g} -> "
                             f"{(min(d) if low else max(d)):g}")
                primary = primary or metric == DETECTORS[inj.fault][0][1]
        rec.update(detected=bool(moved), own_metric_moved=primary, moved=moved,
                   how=" or ".join(f"{q or '(target)'}:{m} {w}" for q, m, _, w in DETECTORS[inj.fault]))
        out.append(rec)
    return out


def alerts_summary(payloads: list[dict[str, Any]], end_firing: list[dict[str, Any]]) -> dict[str, Any]:
    """Every alert that fired, and whether a 'resolved' for it followed.

    A webhook body is one notification per queue and cycle (queueops.alerts.notify.payload): its
    transitions are in ``alerts``, each with its own ``alert``, ``state``, ``target``, ``queue``.
    A body without that list is counted as unreadable and fails the verdict, never a quiet zero
    (reading a top-level ``alert`` / ``state`` after the grouping counted nothing and reported every
    alert resolved)."""
    last: dict[tuple[str, str, str], dict[str, Any]] = {}
    fired: dict[tuple[str, str, str], int] = defaultdict(int)
    transitions = 0
    unreadable = [str(p.get("id", "?")) for p in payloads if not isinstance(p.get("alerts"), list)]
    for p in payloads:
        for a in p.get("alerts") if isinstance(p.get("alerts"), list) else ():
            transitions += 1
            key = (a["alert"], a.get("target", ""), a.get("queue", ""))
            if a["state"] == "firing":
                fired[key] += 1
            last[key] = a
    unresolved = [f"{k[0]} on {k[1]}/{k[2]} (value {last[k].get('value')})" for k in fired
                  if last[k].get("state") != "resolved"]
    return {"notifications": len(payloads), "transitions": transitions, "unreadable_bodies": unreadable,
            "alerts_fired": sum(fired.values()), "distinct": len(fired), "unresolved_at_end": unresolved,
            "every_alert_resolved": not unresolved and not unreadable,
            "store_alert_state_firing_at_end": end_firing}


def lake_check(store: Path, lake: Path) -> dict[str, Any]:
    """Every hour the service exported: the lake's rows against the store's (none missing or twice)."""
    import pyarrow.parquet as pq

    with sqlite3.connect(store, timeout=60) as db:
        exported = db.execute("SELECT hour, rows, status_rows FROM lake_exports ORDER BY hour").fetchall()
        hours = []
        for hour, rows, status_rows in exported:
            h = _ts(hour)
            nxt = h + timedelta(hours=1)
            fmt = "%Y-%m-%d %H:%M:%S"
            counts = {}
            for kind, table in (("snapshots", "snapshots"), ("status", "collector_status")):
                in_store = db.execute(f"SELECT count(*) FROM {table} WHERE ts >= ? AND ts < ?",  # noqa: S608
                                      (h.strftime(fmt), nxt.strftime(fmt))).fetchone()[0]
                part = lake / kind / f"date={h:%Y-%m-%d}" / f"hour={h:%H}"
                files = sorted(part.glob("*.parquet")) if part.exists() else []
                counts[kind] = {"store": in_store, "lake": sum(pq.read_metadata(f).num_rows for f in files),
                                "files": len(files)}
            hours.append({"hour": h.strftime("%Y-%m-%dT%H"), "recorded_rows": rows, "recorded_status_rows":
                          status_rows, **counts,
                          "match": all(c["store"] == c["lake"] for c in counts.values())})
    return {"hours_exported": len(hours), "hours": hours, "all_match": all(h["match"] for h in hours),
            "note": "an hour is exported once closed: a soak that crosses no hour boundary exports nothing"}


def ledger_audit(lab: PrivateLab) -> dict[str, Any]:
    from queueops import sqlfiles

    with lab.connect() as conn:
        cur = conn.execute(sqlfiles.load("postgresql", "lab/ledger_check").text)
        cols = [d.name for d in cur.description]
        rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    bad = {k: sum(int(r[k]) for r in rows) for k in ("produced_twice", "processed_twice", "processed_unproduced",
                                                      "queued_unproduced", "queued_after_processed", "lost")}
    return {"per_queue": rows, "problems": bad, "ok": not any(bad.values())}


def memory(rss: list[tuple[float, int]], started: float) -> dict[str, Any]:
    """RSS of the service: overall growth, its largest single step, and the trend after it.

    A leak is a trend; a one-off step (the first lake export imports pyarrow, ~60 MB) is not.
    "flat": the growth outside the largest step is within 10 % and the last half's trend is under
    2 % per 10 minutes.
    """
    if len(rss) < 8:
        return {"samples": len(rss)}
    values = [v for _, v in rss]
    q = len(values) // 4
    first, last = statistics.fmean(values[q:2 * q]), statistics.fmean(values[-q:])
    steps = [(values[i + 1] - values[i], i) for i in range(len(values) - 1)]
    step, at = max(steps)
    # The trend of the last half with the largest step taken out (samples after it lowered by
    # it): a one-off load in the last half must not read as a leak, and a leak still shows.
    destepped = [(t, v - (step if i > at and step > 0 else 0)) for i, (t, v) in enumerate(rss)]
    half = destepped[len(destepped) // 2:]
    t0 = half[0][0]
    xs, ys = [(t - t0) / 60 for t, _ in half], [v for _, v in half]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs) or 1.0
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den
    growth_outside_step = (values[-1] - values[0] - max(step, 0)) / values[0]
    trend_pct_10min = 100 * slope * 10 / my
    return {"samples": len(values), "rss_kb_start": values[0], "rss_kb_max": max(values), "rss_kb_end": values[-1],
            "rss_kb_second_quarter_mean": round(first), "rss_kb_last_quarter_mean": round(last),
            "growth_pct": round(100 * (last - first) / first, 1),
            "largest_step_kb": step, "largest_step_at_s": round(rss[at + 1][0] - started),
            "growth_outside_largest_step_pct": round(100 * growth_outside_step, 1),
            "trend_pct_per_10min_last_half_without_step": round(trend_pct_10min, 2),
            "flat": growth_outside_step <= 0.10 and trend_pct_10min <= 2.0,
            "timeline_mb": [[round(t - started), round(v / 1024, 1)] for t, v in rss[::6]],
            "criterion": "growth outside the largest single step <= 10 % and the last half's trend, that step "
                         "taken out, <= 2 % per 10 min"}


# ---------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_start = loadavg()
    print(f"soak: starting a private lab (load average {load_start})", file=sys.stderr)
    lab = PrivateLab.start({}, fsync=True, prefix="queueops-soak-")
    work = lab.base / "console"
    work.mkdir()
    store, lake = work / "store.db", work / "lake"
    hook = Webhook()
    cfg = console_config(lab, work / "soak.toml", fast_s=args.fast_s, slow_s=args.slow_s,
                         lease_timeout_s=LEASE_TIMEOUT_S, store=store, lake=lake)
    text = cfg.read_text()
    # The lake exporter every minute (an hour is closed a minute after it ends), alerts to our webhook.
    text = re.sub(r"(?m)^export_every_s = .*$", "export_every_s = 60", text, count=1)
    text = text.replace("[schedule]\n", f'[alerts]\nwebhook_url = "{hook.url}"\n\n[schedule]\n', 1)
    cfg.write_text(text)
    svc: Child | None = None
    result: dict[str, Any] = {"benchmark": "soak"}
    try:
        lab.start_workload()
        svc = service(cfg, work / "service.log", "--metrics-port", "0")
        s = Soak(args, lab, work, cfg, svc)
        t0 = now_utc()
        try:
            run_timeline(s)
        except Exception as exc:  # noqa: BLE001 - report what happened up to here
            s.errors.append(f"{type(exc).__name__}: {exc}")
        t1 = now_utc()
        end_firing = []
        with contextlib.suppress(sqlite3.Error), sqlite3.connect(store, timeout=60) as db:
            end_firing = [dict(zip(("rule", "target", "queue", "value"), r, strict=True)) for r in db.execute(
                "SELECT rule, target, queue, value FROM alert_state WHERE state = 'firing'")]
        svc_rss = memory([(t, v) for t, v in s.rss if t >= s.warm], s.started)
        exit_code = svc.stop(timeout=60)
        lab.stop_workload()
        time.sleep(1)
        cli_export = subprocess.run([sys.executable, "-m", "queueops.cli", "lake", "export", "--json", "--config",
                                     str(cfg)], capture_output=True, text=True, cwd=ROOT, timeout=600)
        log_text = (work / "service.log").read_text(errors="replace")
        result.update({
            "minutes": round(s.elapsed() / 60, 1),
            "memory": svc_rss,
            "gaps": gaps(store, s, args.fast_s, args.slow_s, t0 + timedelta(seconds=2 * args.slow_s), t1),
            "faults": detection(store, s, args.slow_s, args.fast_s),
            "alerts": alerts_summary(hook.payloads, end_firing),
            "actions": {"runs": s.actions,
                        "outcomes": {o: sum(1 for a in s.actions if a.get("outcome") == o)
                                     for o in sorted({str(a.get("outcome")) for a in s.actions})}},
            "lake": {**lake_check(store, lake), "cli_export_exit": cli_export.returncode,
                     "service_export_log": [line[:160] for line in log_text.splitlines() if "lake: exported" in line]},
            "ledger": ledger_audit(lab),
            "service": {"exit_code_after_sigterm": exit_code,
                        "log_errors": sum(1 for line in log_text.splitlines() if " ERROR " in line),
                        "log_tracebacks": log_text.count("Traceback"),
                        "skipped_runs": log_text.count("maximum number of running instances")},
            "errors": s.errors,
        })
        faults = result["faults"]
        result["summary"] = {
            "memory_flat": svc_rss.get("flat"),
            "gaps_outside_outages": sum(c["gaps_outside_outages"] for c in result["gaps"]["collectors"].values())
            + result["gaps"]["metric_gaps_outside_outages"],
            "faults_injected": len(faults),
            "faults_detected": sum(1 for f in faults if f["detected"]),
            "every_fault_detected": all(f["detected"] for f in faults),
            "faults_whose_own_metric_moved": sum(1 for f in faults if f.get("own_metric_moved", f["detected"])),
            "every_alert_resolved": result["alerts"]["every_alert_resolved"],
            "ledger_ok": result["ledger"]["ok"],
            "lake_hours_match": result["lake"]["all_match"],
        }
    finally:
        if svc is not None:
            svc.stop(timeout=30)
        hook.close()
        result["settings"] = {"minutes": args.minutes, "fast_s": args.fast_s, "slow_s": args.slow_s,
                              "lease_timeout_s": LEASE_TIMEOUT_S, "action_every_s": args.action_every,
                              "workload": "lab defaults", "fsync": True}
        result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                             "loadavg_start": load_start, "loadavg_end": loadavg()}
        if args.keep:
            result["kept"] = str(lab.base)
        lab.destroy(keep=args.keep)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=20, help="length of the soak (default 20)")
    ap.add_argument("--fast-s", type=float, default=5, help="interval of the fast collectors (default 5)")
    ap.add_argument("--slow-s", type=float, default=30, help="interval of the slow collectors (default 30)")
    ap.add_argument("--slot", type=float, default=0, help="seconds each fault stays on (default: from --minutes)")
    ap.add_argument("--action-every", type=float, default=120, help="a plain requeue this often (default 120 s)")
    ap.add_argument("--keep", action="store_true", help="keep the lab folder (logs, store, lake)")
    args = ap.parse_args()
    print(json.dumps(run(args), indent=2, default=str))


if __name__ == "__main__":
    main()
