"""How long the console's overview takes to render in a real headless browser, for 100 queues
with 24 h of history in the store, how long a reload and an in-place refresh take, and how much of
it is data -- side by side with 10 queues.

    python benchmarks/ui_render.py [--queues 100] [--small 10] [--hours 24] [--interval 15] [--reloads 5]
                                   [--refreshes 2] [--no-service]

Builds its own embedded PostgreSQL with N real queue tables (the collect_cycle benchmark's
layout), seeds a SQLite store with ``--hours`` of snapshots every ``--interval`` seconds for every
queue (what ``queueops collect`` would have written), runs ``queueops collect`` on it (unless
``--no-service``: then every sample is the console's own collection) and ``queueops serve`` as
subprocesses, and drives Debian's Chromium headless (Playwright). Each time runs from navigation
until the overview's table, tiles and caption are drawn and the script finished, read every 20 ms:
``cold_render_ms`` in a fresh console process (cold imports), ``first_render_ms`` in a new session
of the warm process, ``reload_ms`` the median of ``--reloads`` page reloads, ``refresh_ms`` the
median of ``--refreshes`` in-place refreshes (the overview's own timer, ``[console] refresh_s``;
from when the page is seen running). The data part, timed in this process without the browser
(``data_ms``: the sample, the sparklines and the problem charts, nothing cached), and the rest of a
first render (``first_render_streamlit_browser_ms``) give the split. The **floor** (issue 17) is
the least Streamlit itself takes to draw a page of the overview's shape in the same browser: a
plain ``streamlit run`` script with no data work (title, five tiles, a table of as many rows with
a sparkline column, the caption), first render in a new browser context and reloads, measured in
the same run (``floor_*``; ``first_over_floor``, ``reload_over_floor``). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
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
from queueops.commands.serve import config_options  # noqa: E402
from queueops.lab.pgserver import EmbeddedPostgres  # noqa: E402
from tests.console.conftest import Server, free_port, start_service, stop, wait_http  # noqa: E402

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


def rendered(page: Any) -> float:
    """The overview is drawn: title, tiles, every queue in the table, the caption, script done.
    Returns when it was first seen drawn (``time.monotonic()``)."""
    from tests.console.browser import grid_rows, settle

    page.get_by_text("Sampled ").first.wait_for(timeout=120_000)
    drawn = settle(page, timeout=120, poll=POLL_S)
    rows = grid_rows(page)
    if len(rows) < 2:
        raise RuntimeError("the overview table is empty")
    header = rows[0]
    if "Queue" not in header:
        raise RuntimeError(f"unexpected table {header}")
    return drawn


def refreshed(page: Any, timeout: float) -> float:
    """Milliseconds of one in-place refresh (the overview's fragment rerunning on its own timer,
    no navigation): from the moment the page is seen running again until it is drawn."""
    from tests.console.browser import _STATE_JS

    deadline = time.monotonic() + timeout
    while page.evaluate(_STATE_JS)["state"] != "running":
        if time.monotonic() > deadline:
            raise TimeoutError("the overview did not refresh itself")
        time.sleep(POLL_S)
    t0 = time.monotonic()
    return (rendered(page) - t0) * 1000


# How often the page's state is read while waiting: the figures are this much late at most.
POLL_S = 0.02


def visits(browser: Any, url: str, reloads: int) -> tuple[float, float, list[float], Any]:
    """Milliseconds of a first visit in a fresh browser context (a fresh process's cold render),
    of a new session in a new context (empty HTTP cache) of the now warm process, and of
    ``reloads`` reloads of that session; and its page, left open."""
    from tests.console.browser import new_page

    page = new_page(browser)
    t0 = time.monotonic()
    page.goto(url)
    cold = (rendered(page) - t0) * 1000
    page.context.close()
    page = new_page(browser)
    t0 = time.monotonic()
    page.goto(url)
    first = (rendered(page) - t0) * 1000
    times = []
    for _ in range(reloads):
        t0 = time.monotonic()
        page.reload()
        times.append((rendered(page) - t0) * 1000)
    return cold, first, times, page


def measure(config_path: Path, reloads: int, refreshes: int, refresh_s: float, log: Path) -> dict[str, Any]:
    """Cold render (a fresh console process), then in a second session of the now warm process: the
    first render, ``reloads`` reloads and ``refreshes`` in-place refreshes."""
    from tests.console.browser import chromium
    from tests.console.conftest import start_console

    server = start_console(config_path, log)
    try:
        with chromium() as browser:
            cold, first, times, page = visits(browser, server.url, reloads)
            refresh = [refreshed(page, refresh_s * 2 + 30) for _ in range(refreshes)]
    finally:
        stop(server.proc)
    out = {"cold_render_ms": round(cold), "first_render_ms": round(first),
           "reload_ms": round(statistics.median(times)), "reload_min_ms": round(min(times)),
           "reload_max_ms": round(max(times))}
    if refresh:
        out |= {"refresh_ms": round(statistics.median(refresh)), "refresh_max_ms": round(max(refresh))}
    return out


# The floor: what Streamlit alone takes to draw a page of the overview's shape (no store, no
# database, no judgement): the same table size and column kinds, as a plain script.
FLOOR_APP = """
import pandas as pd
import streamlit as st

st.set_page_config(page_title="floor", layout="wide")
st.title("Overview")
for col, label in zip(st.columns(5), ("Critical", "Warning", "Unknown", "OK", "Targets up")):
    col.metric(label, "0")
n = {queues}
df = pd.DataFrame({{"State": ["ok"] * n, "Queue": [f"q{{i:05d}}" for i in range(n)], "Target": ["bench"] * n,
                   "Why": [""] * n, "Depth, last hour": [[float((i + j) % 7) for j in range(60)] for i in range(n)],
                   **{{f"metric {{k}}": [float(i * k) for i in range(n)] for k in range(8)}}, "Kind": ["delete"] * n}})
st.dataframe(df, hide_index=True, height=min(38 + 35 * n, 38 + 35 * 20),
             column_config={{"Depth, last hour": st.column_config.LineChartColumn(y_min=0)}})
st.caption("Sampled just now")
"""


def floor(queues: int, reloads: int, folder: Path) -> dict[str, Any]:
    """First render (new browser context) and reloads of the floor page, served like the console
    (the project's Streamlit options, headless, no file watcher)."""
    from tests.console.browser import chromium

    app = folder / "floor_app.py"
    app.write_text(FLOOR_APP.format(queues=queues))
    port = free_port()
    options = {**config_options(), "server.headless": "true", "server.port": str(port), "server.address": "127.0.0.1",
               "browser.gatherUsageStats": "false", "server.fileWatcherType": "none"}
    log = open(folder / "floor.log", "wb")  # noqa: SIM115 - closed by the process's exit
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(app),
                             *[part for k, v in options.items() for part in (f"--{k}", v)]],
                            cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = Server(f"http://127.0.0.1:{port}", proc, folder / "floor.log")
    try:
        wait_http(server.url + "/_stcore/health", proc=proc)
        with chromium() as browser:
            _warm, first, times, _page = visits(browser, server.url, reloads)  # the first warms the process
    finally:
        stop(proc)
    return {"floor_first_render_ms": round(first), "floor_reload_ms": round(statistics.median(times))}


def wait_for_cycle(cfg: config_mod.Config, timeout: float = 120) -> None:
    """Until the collector service has written a cycle of every fast collector to the store."""
    from sqlalchemy import func, select

    from queueops.store import open_engine
    from queueops.store.schema import collector_status as cs

    engine = open_engine(cfg)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                if conn.execute(select(func.count()).select_from(cs)).scalar():
                    time.sleep(2)  # the cycle's snapshots are written with its status rows
                    return
            time.sleep(0.5)
    finally:
        engine.dispose()
    raise TimeoutError("the collector service wrote no cycle")


def python_side(config_path: Path, service: bool) -> dict[str, float]:
    """The overview's data work per render, in this process without the browser: the live sample
    (the console's own collection, and reading the service's fresh cycle), the store-bucketed
    sparklines, the raw hour of depth the overview read before them, the problem charts."""
    from console.auth import Identity
    from console.context import Ctx
    from console.data import LiveSampler, Store, sparklines
    from console.views import overview

    cfg = config_mod.load(config_path)
    store = Store(cfg)
    pairs = [(q.target, q.name) for q in cfg.queues]
    collecting = LiveSampler(cfg)
    collecting.sample(force=True)

    def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, Any]:
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        return (time.perf_counter() - t0) * 1000, out

    runs: dict[str, list[float]] = {k: [] for k in ("live", "cycle", "spark", "hist", "charts")}
    for _ in range(5):
        runs["live"].append(timed(collecting.sample, force=True)[0])
        if service:  # a new sampler each time: nothing cached, the service's cycle read from the store
            runs["cycle"].append(timed(LiveSampler(cfg).sample)[0])
        sample = collecting.sample()
        since = sample.ts - timedelta(hours=1)
        runs["spark"].append(timed(sparklines, store, [collecting.history("depth")], "depth", since, pairs)[0])
        ms, df = timed(store.history, ["depth"], since, targets=["bench"])
        runs["hist"].append(ms)
        healths = overview.judge_all(cfg, sample, overview.recent_rows(collecting))
        bad = [h for h in healths if h.state in ("crit", "warn") and h.reasons][:6]
        ctx = Ctx(cfg, collecting, store, Identity("bench", "viewer", "anonymous"), "Europe/Berlin")
        runs["charts"].append(timed(overview.problem_charts, ctx, bad, sample.ts)[0])
    med = {k: round(statistics.median(v), 1) for k, v in runs.items() if v}
    out = {"live_sample_ms": med["live"], "sparklines_ms": med["spark"], "problem_charts_ms": med["charts"],
           "raw_history_hour_ms": med["hist"], "raw_history_hour_rows": len(df)}
    if service:
        out["service_cycle_read_ms"] = med["cycle"]
    # What a render of the overview reads and computes when nothing is cached: the sample (the
    # service's fresh cycle when one runs, else the console's own collection), the sparklines and
    # the problem charts. The rest of a render is Streamlit and the browser.
    out["data_ms"] = round((med["cycle"] if service else med["live"]) + med["spark"] + med["charts"], 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queues", type=int, default=100)
    ap.add_argument("--small", type=int, default=10, help="the smaller console, for the ratio (default 10)")
    ap.add_argument("--rows", type=int, default=1000, help="rows per queue table")
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--interval", type=float, default=15, help="seconds between seeded snapshots")
    ap.add_argument("--reloads", type=int, default=5)
    ap.add_argument("--refreshes", type=int, default=2, help="in-place refreshes timed (one per refresh_s, 30 s)")
    ap.add_argument("--no-service", dest="service", action="store_false",
                    help="no `queueops collect` beside the console: every sample is the console's own collection")
    args = ap.parse_args(argv)
    if min(args.queues, args.small, args.rows, args.reloads) < 1 or args.refreshes < 0 or args.hours <= 0 \
            or args.interval <= 0:
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
        runs: dict[str, dict[str, Any]] = {}
        py: dict[str, float] = {}
        for name, cfg_path in (("big", big_cfg), ("small", small_cfg)):
            service = start_service(cfg_path, base / f"service-{name}.log") if args.service else None
            try:
                if service is not None:
                    wait_for_cycle(config_mod.load(cfg_path))
                if name == "big":
                    py = python_side(cfg_path, args.service)
                refresh_s = config_mod.load(cfg_path).console.refresh_s
                runs[name] = measure(cfg_path, args.reloads, args.refreshes, refresh_s, base / f"console-{name}.log")
            finally:
                if service is not None:
                    stop(service)
        big, small = runs["big"], runs["small"]
        fl = floor(args.queues, args.reloads, base)
    finally:
        srv.destroy()
        shutil.rmtree(base, ignore_errors=True)
    out = {
        "benchmark": "ui_render",
        "queues": args.queues,
        "history_hours": args.hours,
        "store_rows": seeded,
        "seed_s": round(seed_s, 1),
        "service": args.service,
        **big,
        **py,
        # Everything a render spends beyond reading and computing its data (sample, sparklines,
        # problem charts; none of it cached): Streamlit's script run, the transport, the browser.
        "first_render_streamlit_browser_ms": round(big["first_render_ms"] - py["data_ms"]),
        **{f"small_{args.small}_{k}": v for k, v in small.items()},
        **fl,
        "first_over_floor": round(big["first_render_ms"] / fl["floor_first_render_ms"], 2),
        "reload_over_floor": round(big["reload_ms"] / fl["floor_reload_ms"], 2),
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
