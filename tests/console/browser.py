"""Driving Debian's Chromium headless through Playwright (never a downloaded browser).

Shared by the end-to-end tests and ``benchmarks/ui_render.py``. Streamlit renders tables in a
canvas (glide-data-grid) that also keeps an accessible grid of role=gridcell elements: that is
what :func:`grid_rows` reads.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
WIDTH = 1400


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser: Browser, height: int = 900, width: int = WIDTH,
             color_scheme: Literal["light", "dark"] = "light") -> Page:
    """A page in a new context: its own cookies, the viewport, and the browser's light or dark
    setting (``prefers-color-scheme``, which the console's theme follows)."""
    ctx = browser.new_context(viewport={"width": width, "height": height}, timezone_id="Europe/Berlin",
                              locale="en-GB", color_scheme=color_scheme)
    page = ctx.new_page()
    page.set_default_timeout(90_000)  # generous: the suite shares 2 cores with everything else
    return page


_STATE_JS = """() => {
  const app = document.querySelector("[data-testid='stApp']");
  const state = app ? app.getAttribute('data-test-script-state') : null;
  const skeletons = document.querySelectorAll("[data-testid='stSkeleton']").length;
  const stale = document.querySelectorAll("[data-stale='true']").length;
  // Charts below the fold are drawn when scrolled to: only those in the viewport must be drawn.
  const inView = c => { const r = c.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; };
  const charts = Array.from(document.querySelectorAll("[data-testid='stPlotlyChart'], [data-testid='stVegaLiteChart']"))
    .filter(inView);
  const drawn = charts.filter(c => c.querySelector('.main-svg, svg.marks, canvas.marks')).length;
  return {state, busy: skeletons + stale + (charts.length - drawn)};
}"""


def settle(page: Page, timeout: float = 90, poll: float = 0.1) -> float:
    """Wait until Streamlit finished the script run and drew everything (charts included); return
    when it was first seen so (``time.monotonic()`` of the first of the calm readings, which the
    benchmarks time against, polling more often: the confirming readings are waiting, not rendering)."""
    deadline = time.monotonic() + timeout
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout * 1000)
    calm, since = 0, 0.0
    while time.monotonic() < deadline:
        seen = time.monotonic()
        st = page.evaluate(_STATE_JS)
        calm = calm + 1 if st["state"] == "notRunning" and st["busy"] == 0 else 0
        if calm == 1:
            since = seen
        if calm >= 3 and seen - since >= 0.19:  # calm for 0.2 s: not between two reruns
            return since
        time.sleep(poll)
    raise TimeoutError("the page kept running")


def sign_in(page: Page, base: str, user: str, password: str) -> None:
    page.goto(base)
    page.get_by_role("textbox", name="User").fill(user)
    page.get_by_role("textbox", name="Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Overview").wait_for()
    settle(page)


def exceptions(page: Page) -> list[str]:
    return page.locator("[data-testid='stException']").all_inner_texts()


_GRID_JS = """(canvas) => Array.from(canvas.querySelectorAll('tr')).map(
    tr => Array.from(tr.querySelectorAll('th, td')).map(c => c.textContent.trim()))"""


def grid_rows(page: Page, index: int = 0, timeout: float = 30) -> list[list[str]]:
    """The cells of the ``index``-th data grid, row by row (header row first).

    glide-data-grid keeps an accessible copy of the visible cells as a table inside its canvas;
    it is rebuilt on every refresh, so read until a complete copy is there.
    """
    canvas = page.locator("[data-testid='stDataFrame']").nth(index).locator("[data-testid='data-grid-canvas']")
    deadline = time.monotonic() + timeout
    while True:
        rows = canvas.evaluate(_GRID_JS)
        if len(rows) > 1 or time.monotonic() > deadline:
            return rows
        time.sleep(0.25)


_SCROLL_JS = """(frame, x) => { const s = frame.querySelector('.dvn-scroller');
  if (!s) return false; s.scrollLeft = x; return s.scrollWidth > s.clientWidth; }"""


def _records(rows: list[list[str]]) -> list[dict[str, str]]:
    return [dict(zip(rows[0], r, strict=False)) for r in rows[1:]] if rows else []


def grid_records(page: Page, index: int = 0, whole: bool = False, key: str = "Queue") -> list[dict[str, str]]:
    """The grid's rows as records. Only the cells in view are in the accessible copy: ``whole``
    also scrolls the grid to its right end and merges those columns in, row by ``key`` (a pinned
    column, in view at either end)."""
    records = _records(grid_rows(page, index))
    if not whole or not records:
        return records
    frame = page.locator("[data-testid='stDataFrame']").nth(index)
    if not frame.evaluate(_SCROLL_JS, 10**6):
        return records
    time.sleep(0.4)  # the grid redraws its accessible copy for the new columns
    right = {r.get(key): r for r in _records(grid_rows(page, index))}
    frame.evaluate(_SCROLL_JS, 0)
    return [{**r, **right.get(r.get(key), {})} for r in records]


def screenshot(page: Page, path: Path) -> Path:
    """The whole page: Streamlit scrolls inside its main block, so grow the viewport to fit it."""
    width = (page.viewport_size or {"width": WIDTH})["width"]
    height = page.evaluate("() => { const m = document.querySelector('[data-testid=\"stMain\"]');"
                           " return m ? m.scrollHeight : document.body.scrollHeight }")
    page.set_viewport_size({"width": width, "height": min(int(height) + 24, 6000)})
    time.sleep(1.0)  # plotly re-lays out for the new size
    settle(page)
    page.screenshot(path=str(path))
    page.set_viewport_size({"width": width, "height": 900})
    return path
