"""How long the console's overview takes to render in a real headless browser, for 100 queues
with 24 h of history in the store, and how long a refresh takes -- side by side with 10 queues.

    python benchmarks/ui_render.py [--queues 100] [--small 10] [--hours 24] [--interval 15] [--reloads 5]

Builds its own embedded PostgreSQL with N real queue tables (the collect_cycle benchmark's
layout), seeds a SQLite store with ``--hours`` of snapshots every ``--interval`` seconds for every
queue (what ``queueops collect`` would have written), runs ``queueops serve`` as a subprocess and
drives Debian's Chromium headless (Playwright): the time from navigation until the overview's
table, tiles and caption are drawn and the script finished (``first_render_ms``: a fresh console
whose live sample is cold), then ``--reloads`` page reloads (``reload_ms``: the median; the live
sample may come from the console's few-second cache, history is read again). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from collect_cycle import build, queue_config  # noqa: E402

from queueops import config as config_mod  # noqa: E402
from queueops.lab.pgserver import EmbeddedPostgres  # noqa: E402

FAST = {"delete": ("depth", "oldest_age_s", "watermark_drift", "lock_waiters"),
        "status": ("depth", "oldest_age_s", "stuck_leases", "lock_waiters"),
        "lease": ("depth", "oldest_age_s", "stuck_leases", "lock_waiters"),
        "due": ("depth", "oldest_age_s", "lock_waiters")}
SLOW = ("ghost_records", "fragmentation_pct")
SLOW_EVERY = 300


def write_config(folder: Path, url: str, secret: Path, queues: int, store: Path) -> Path:
    lines = [f'[store]\nurl = "sqlite:///{store}"\n', "[schedule]\nfast_s = 15\nslow_s = 300\n",
             "[console]\nrefresh_s = 30\ncache_s = 5\n",
             f'[[targets]]\nname = "bench"\ndialect = "postgresql"\nurl = "{url}"\npassword = "file:{secret}"\n'
             "statement_timeout_ms = 60000\n"]
    for i in range(queues):
        q = queue_config(i)
        body = []
        for k, v in q.items():
            if isinstance(v, dict):
                inner = ", ".join(f'{ik} = "{iv}"' for ik, iv in v.items())
                body.append(f"{k} = {{ {inner} }}")
            elif isinstance(v, str):
                body.append(f'{k} = "{v}"')
            else:
                body.append(f"{k} = {v}")
        lines.append("[[queues]]\n" + "\n".join(body) + "\n")
    path = folder / f"console-{queues}.toml"
    path.write_text("\n".join(lines))
    config_mod.load(path)  # fail early on a mistake here
    return path


def seed_store(cfg: config_mod.Config, hours: float, interval: float) -> int:
    """``hours`` of snapshots for every queue, in the store's own bulk path."""
    from queueops.store import open_engine
    from queueops.store.schema import snapshots
    from queueops.store.writer import bulk_insert

    engine = open_engine(cfg)
    now = datetime.now(UTC)
    start = now - timedelta(hours=hours)
    steps = int(hours * 3600 / interval)
    total = 0
    batch: list[dict[str, Any]] = []
    with engine.begin() as conn:
        for i, q in enumerate(cfg.queues):
            for step in range(steps):
                ts = start + timedelta(seconds=step * interval)
                wave = (step % 240) / 240
                for metric in FAST[q.kind]:
                    value = {"depth": 100 + 900 * wave + i, "oldest_age_s": 5 + 50 * wave}.get(metric, 0.0)
                    batch.append({"ts": ts, "target": "bench", "database": "bench", "queue": q.name,
                                  "metric": metric, "value": value, "note": "exact"})
                if step % int(SLOW_EVERY / interval) == 0:
                    for metric in SLOW:
                        batch.append({"ts": ts, "target": "bench", "database": "bench", "queue": q.name,
                                      "metric": metric, "value": 10.0 * wave, "note": "estimate"})
                if len(batch) >= 50_000:
                    bulk_insert(conn, snapshots, batch)
                    total += len(batch)
                    batch = []
        if batch:
            bulk_insert(conn, snapshots, batch)
            total += len(batch)
    engine.dispose()
    return total


def rendered(page: Any, queues: int) -> None:
    """The overview is drawn: title, tiles, every queue in the table, the caption, script done."""
    from tests.console.browser import grid_rows, settle

    page.get_by_text("Sampled ").first.wait_for(timeout=120_000)
    settle(page, timeout=120)
    rows = grid_rows(page)
    if len(rows) < 2:
        raise RuntimeError("the overview table is empty")
    header = rows[0]
    if "Queue" not in header:
        raise RuntimeError(f"unexpected table {header}")


def measure(config_path: Path, queues: int, reloads: int, log: Path) -> dict[str, Any]:
    from tests.console.browser import chromium, new_page
    from tests.console.conftest import start_console, stop

    server = start_console(config_path, log)
    try:
        with chromium() as browser:
            page = new_page(browser)
            t0 = time.perf_counter()
            page.goto(server.url)
            rendered(page, queues)
            first = (time.perf_counter() - t0) * 1000
            times = []
            for _ in range(reloads):
                t0 = time.perf_counter()
                page.reload()
                rendered(page, queues)
                times.append((time.perf_counter() - t0) * 1000)
    finally:
        stop(server.proc)
    return {"queues": queues, "first_render_ms": round(first), "reload_ms": round(statistics.median(times)),
            "reload_min_ms": round(min(times)), "reload_max_ms": round(max(times))}


def python_side(config_path: Path) -> dict[str, float]:
    """The console's own work per render, without the browser: a live sample and the history read."""
    from console.data import LiveSampler, Store

    cfg = config_mod.load(config_path)
    sampler, store = LiveSampler(cfg), Store(cfg)
    sampler.sample(force=True)
    live, hist = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        sampler.sample(force=True)
        live.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        df = store.history(["depth"], datetime.now(UTC) - timedelta(hours=1), targets=["bench"])
        hist.append((time.perf_counter() - t0) * 1000)
    return {"live_sample_ms": round(statistics.median(live), 1), "history_hour_ms": round(statistics.median(hist), 1),
            "history_hour_rows": len(df)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--small", type=int, default=10, help="the smaller console, for the ratio (default 10)")
    ap.add_argument("--rows", type=int, default=1000, help="rows per queue table")
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--interval", type=float, default=15, help="seconds between seeded snapshots")
    ap.add_argument("--reloads", type=int, default=5)
    args = ap.parse_args(argv)
    if min(args.queues, args.small, args.rows, args.reloads) < 1 or args.hours <= 0 or args.interval <= 0:
        ap.error("every size must be positive")
    base = Path(tempfile.mkdtemp(prefix="queueops-ui-bench-"))
    base.chmod(0o755)
    srv = EmbeddedPostgres(base / "state", fast=True, database="bench")
    try:
        info = srv.start()
        import psycopg

        with psycopg.connect(info.url(), password=srv.password(), autocommit=True) as conn:
            build(conn, args.queues, args.rows)
        secret = base / "secret"
        secret.write_text(srv.password())
        os.chmod(secret, 0o600)
        big_cfg = write_config(base, info.url(), secret, args.queues, base / "store-big.db")
        small_cfg = write_config(base, info.url(), secret, args.small, base / "store-small.db")
        t0 = time.perf_counter()
        seeded = seed_store(config_mod.load(big_cfg), args.hours, args.interval)
        seed_s = time.perf_counter() - t0
        seed_store(config_mod.load(small_cfg), args.hours, args.interval)
        py = python_side(big_cfg)
        big = measure(big_cfg, args.queues, args.reloads, base / "console-big.log")
        small = measure(small_cfg, args.small, args.reloads, base / "console-small.log")
    finally:
        srv.destroy()
        shutil.rmtree(base, ignore_errors=True)
    out = {
        "benchmark": "ui_render",
        "queues": args.queues,
        "history_hours": args.hours,
        "store_rows": seeded,
        "seed_s": round(seed_s, 1),
        **{k: v for k, v in big.items() if k != "queues"},
        **py,
        f"small_{args.small}_first_render_ms": small["first_render_ms"],
        f"small_{args.small}_reload_ms": small["reload_ms"],
        "reload_ratio_big_over_small": round(big["reload_ms"] / small["reload_ms"], 2),
        "first_ratio_big_over_small": round(big["first_render_ms"] / small["first_render_ms"], 2),
        "browser": "Debian chromium headless (Playwright, executable_path=/usr/bin/chromium)",
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 1),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
