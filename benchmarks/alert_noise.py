"""Alert noise on the lab (issue 32, item 5): firings per rule on the calm lab, and with each fault on.

    python benchmarks/alert_noise.py [--calm-minutes 30] [--fault-s 90] [--quiet-s 120]
                                     [--faults dead-consumer,lock-hold] [--no-hysteresis]
                                     [--oldest-age-warn 30]

One run on a private embedded PostgreSQL (a temporary folder, any free port): the lab workload at
its default rates and the real collector service (``queueops collect``) with the lab's thresholds
(``[alerts]`` defaults: threshold rules held for one collector interval before firing and resolved
with hysteresis, ``thresholds_clear_for_s`` and ``thresholds_clear_margin``; ``--no-hysteresis``
sets the hold and both to 0, the behaviour before issue 32).

Phases, one after the other:

* **calm**: ``--calm-minutes`` of the workload alone. Every firing here is noise: the issue's
  target is 0 over 30 minutes;
* each fault in turn: on for ``--fault-s``, off, the operator's remedy (``queueops act requeue``
  after ``dead-consumer``, ``watermark-reset`` after ``watermark-jump``, ``rebuild`` after
  ``churn``), then ``--quiet-s`` for its alerts to resolve. The target: each fault fires its own
  alerts once (one firing per rule and queue), and they resolve.

Counted from the store's ``alert_events`` (every transition the service announced), per phase:
firings per ``rule on queue``, resolutions, and alerts still firing at the phase's end. Prints one
JSON object; the machine's load average at the start and the end is in it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import re
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.labharness import Child, PrivateLab, console_config, loadavg, service  # noqa: E402

FAULTS = ("dead-consumer", "snapshot-hold", "watermark-jump", "lock-hold", "churn")
LEASE_TIMEOUT_S = 20  # the lab's lease queue timeout


def now_utc() -> datetime:
    return datetime.now(UTC)


def events(store: Path, since: datetime, until: datetime) -> list[dict[str, Any]]:
    with contextlib.suppress(sqlite3.Error), sqlite3.connect(store, timeout=60) as db:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT at, rule, queue, state, value FROM alert_events ORDER BY id").fetchall()
        out = []
        for r in rows:
            at = datetime.fromisoformat(str(r["at"])).replace(tzinfo=UTC)
            if since <= at < until:
                out.append({"at": at.isoformat(timespec="seconds"), "rule": r["rule"], "queue": r["queue"],
                            "state": r["state"], "value": r["value"]})
        return out
    return []


def firing_now(store: Path) -> list[str]:
    with contextlib.suppress(sqlite3.Error), sqlite3.connect(store, timeout=60) as db:
        return sorted(f"{r} on {q}" for r, q in db.execute(
            "SELECT rule, queue FROM alert_state WHERE state = 'firing'"))
    return []


def peaks(store: Path, since: datetime, until: datetime, metric: str = "oldest_age_s") -> dict[str, Any]:
    """Per queue, the highest ``metric`` of the phase and how many samples were at or above each
    level of interest: is the calm workload itself reaching the warn line?"""
    out: dict[str, Any] = {}
    with contextlib.suppress(sqlite3.Error), sqlite3.connect(store, timeout=60) as db:
        rows = db.execute("SELECT queue, ts, value FROM snapshots WHERE metric = ? AND queue <> '' "
                          "AND value IS NOT NULL", (metric,)).fetchall()
        by_queue: dict[str, list[float]] = {}
        for queue, ts, value in rows:
            at = datetime.fromisoformat(str(ts)).replace(tzinfo=UTC)
            if since <= at < until:
                by_queue.setdefault(queue, []).append(float(value))
        for queue, values in sorted(by_queue.items()):
            values.sort()
            out[queue] = {"samples": len(values), "max": round(values[-1], 1),
                          "p99": round(values[int(0.99 * (len(values) - 1))], 1),
                          "at_or_above_20": sum(v >= 20 for v in values), "at_or_above_30": sum(v >= 30 for v in values)}
    return out


def summary(evs: list[dict[str, Any]], minutes: float) -> dict[str, Any]:
    fired = Counter(f"{e['rule']} on {e['queue']}" for e in evs if e["state"] == "firing")
    resolved = Counter(f"{e['rule']} on {e['queue']}" for e in evs if e["state"] == "resolved")
    return {"minutes": round(minutes, 2), "firings": sum(fired.values()), "resolutions": sum(resolved.values()),
            "firings_per_rule": dict(sorted(fired.items())), "max_firings_of_one_rule": max(fired.values(), default=0)}


def act(config: Path, action: str, queue: str, *extra: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "queueops.cli", "act", action, "--queue", queue, *extra, "--yes",
                           "--json", "--config", str(config)], capture_output=True, text=True, cwd=ROOT, timeout=900)
    rec: dict[str, Any] = {"action": action, "queue": queue, "exit": proc.returncode}
    with contextlib.suppress(ValueError, IndexError):
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        rec.update(outcome=out.get("outcome"), rows=out.get("rows_affected"))
    return rec


def remedy(lab: PrivateLab, config: Path, fault: str) -> list[dict[str, Any]]:
    """What an operator runs once the fault's cause is gone (as benchmarks/soak.py does)."""
    if fault == "dead-consumer":
        time.sleep(LEASE_TIMEOUT_S + 1.5)  # the last claims are stuck once the lease timeout passed
        return [act(config, "requeue", "lease"), act(config, "requeue", "status")]
    if fault == "watermark-jump":
        time.sleep(1.5)
        return [act(config, "watermark-reset", "delete")]
    if fault == "churn":
        return [act(config, "rebuild", "status", "--min-pages", "0")]
    return []


def _lab_warn(config_text: str) -> float | None:
    m = re.search(r"oldest_age_s = \{ warn = ([0-9.]+)", config_text)
    return float(m.group(1)) if m else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_start = loadavg()
    print(f"alert_noise: starting a private lab (load average {load_start})", file=sys.stderr)
    lab = PrivateLab.start({}, prefix="queueops-noise-")
    work = lab.base / "noise"
    work.mkdir()
    store = work / "store.db"
    cfg = console_config(lab, work / "noise.toml", fast_s=args.fast_s, slow_s=args.slow_s,
                         lease_timeout_s=LEASE_TIMEOUT_S, store=store, lake=work / "lake")
    text = cfg.read_text()
    alerts = "[alerts]\nlog = true\n"
    if args.no_hysteresis:
        alerts += "thresholds_for_s = 0\nthresholds_clear_for_s = 0\nthresholds_clear_margin = 0\n"
    text = text.replace("[schedule]\n", alerts + "\n[schedule]\n", 1)
    text = re.sub(r"(?m)^export_every_s = .*$", "export_every_s = 86400", text, count=1)
    if args.oldest_age_warn is not None:  # another line than the lab's own (queueops/lab/config.py)
        text = re.sub(r"oldest_age_s = \{ warn = [0-9.]+", f"oldest_age_s = {{ warn = {args.oldest_age_warn:g}", text)
    cfg.write_text(text)
    result: dict[str, Any] = {"benchmark": "alert_noise", "hysteresis": not args.no_hysteresis,
                              "oldest_age_warn_s": args.oldest_age_warn if args.oldest_age_warn is not None else _lab_warn(text),
                              "settings": {"fast_s": args.fast_s, "slow_s": args.slow_s, "fault_s": args.fault_s,
                                           "quiet_s": args.quiet_s, "warm_up_s": args.warm_up_s}}
    svc: Child | None = None
    try:
        lab.start_workload()
        svc = service(cfg, work / "service.log", "--no-lake")
        time.sleep(args.warm_up_s)  # the first cycles; the rates' first samples
        t0 = now_utc()
        print(f"  calm for {args.calm_minutes:g} min", file=sys.stderr)
        time.sleep(args.calm_minutes * 60)
        t1 = now_utc()
        calm = summary(events(store, t0, t1), (t1 - t0).total_seconds() / 60)
        calm["firing_at_end"] = firing_now(store)
        calm["oldest_age_s_per_queue"] = peaks(store, t0, t1)
        calm["events"] = events(store, t0, t1)[:50]
        result["calm"] = calm
        phases = []
        for fault in [f for f in args.faults.split(",") if f]:
            a = now_utc()
            print(f"  fault {fault} on for {args.fault_s:g}s", file=sys.stderr)
            lab.set_fault(fault, True)
            time.sleep(args.fault_s)
            lab.set_fault(fault, False)
            done = remedy(lab, cfg, fault)
            time.sleep(args.quiet_s)
            b = now_utc()
            evs = events(store, a, b)
            s = summary(evs, (b - a).total_seconds() / 60)
            s.update(fault=fault, remedies=done, firing_at_end=firing_now(store),
                     fired_once_per_rule=bool(evs) and s["max_firings_of_one_rule"] == 1, events=evs)
            phases.append(s)
        result["faults"] = phases
        if svc is not None:
            result["service_exit"] = svc.stop(timeout=60)
            svc = None
    finally:
        if svc is not None:
            svc.stop(timeout=30)
        lab.destroy(keep=args.keep)
    result["verdict"] = {
        "calm_firings": result.get("calm", {}).get("firings"),
        "calm_target_0": result.get("calm", {}).get("firings") == 0,
        "faults_that_fired": sum(1 for p in result.get("faults", []) if p["firings"]),
        "faults_fired_once_per_rule": sum(1 for p in result.get("faults", []) if p["fired_once_per_rule"]),
        "faults": len(result.get("faults", [])),
    }
    result["machine"] = {"cpus": __import__("os").cpu_count(), "python": platform.python_version(),
                         "load_start": load_start, "load_end": loadavg()}
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calm-minutes", type=float, default=30.0, help="the calm phase (the issue's target: 30)")
    p.add_argument("--fault-s", type=float, default=90.0,
                   help="each fault on for this long (the snapshot rule needs 60 s of age and its hold)")
    p.add_argument("--quiet-s", type=float, default=120.0, help="after each fault and its remedy")
    p.add_argument("--warm-up-s", type=float, default=30.0, help="before the calm phase is counted")
    p.add_argument("--faults", default=",".join(FAULTS), help="comma-separated; empty: calm only")
    p.add_argument("--fast-s", type=float, default=5.0)
    p.add_argument("--slow-s", type=float, default=30.0)
    p.add_argument("--no-hysteresis", action="store_true", help="no hold, no hysteresis: the behaviour before issue 32 (control)")
    p.add_argument("--oldest-age-warn", type=float, help="the lab queues' oldest_age_s warn level "
                   "(default: the lab's own, queueops/lab/config.py)")
    p.add_argument("--keep", action="store_true", help="keep the lab folder (logs, store)")
    args = p.parse_args(argv)
    print(json.dumps(run(args), indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
