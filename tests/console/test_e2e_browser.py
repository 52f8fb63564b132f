"""End to end in a real browser: the lab with its workload, the collector service, ``queueops serve``
as a subprocess, and Debian's Chromium headless driven by Playwright.

Screenshots of every page go to artifacts/console/; the overview and the queue detail are also
copied to docs/img/ for the README.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from queueops.lab import control
from tests.console.browser import (
    chromium,
    exceptions,
    grid_records,
    grid_rows,
    new_page,
    screenshot,
    settle,
    sign_in,
)
from tests.console.conftest import OPERATOR, VIEWER, ConsoleEnv, Stack, copy_for_readme, live_stack, open_page

pytestmark = pytest.mark.browser
PAGES = {"": "Overview", "queue": "Queue", "audit": "Audit", "trends": "Trends", "settings": "Settings"}
ACTION_BUTTON = re.compile(r"Preview|Confirm|Requeue|Rebuild|Reset watermark|Archive")


@pytest.fixture(scope="module")
def stack(console_env: ConsoleEnv, artifacts: Path) -> Iterator[Stack]:
    # dead-consumer on from the start: stuck leases need a lease timeout (20 s) to appear; the
    # first pages render meanwhile.
    with live_stack(console_env, artifacts, "e2e", faults=["dead-consumer"]) as s:
        yield s


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def operator(browser: Browser, stack: Stack) -> Page:
    page = new_page(browser)
    sign_in(page, stack.url, OPERATOR[0], OPERATOR[1])
    return page


def main_text(page: Page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def lease_row(page: Page) -> dict[str, str]:
    return next(r for r in grid_records(page) if r.get("Queue") == "lease")


def test_every_page_renders_without_an_exception(operator: Page, stack: Stack) -> None:
    for path, title in PAGES.items():
        open_page(operator, stack, path + ("?queue=lease" if path == "queue" else ""))
        assert operator.locator("h1").first.inner_text().startswith(title)
        assert exceptions(operator) == [], f"{path}: {exceptions(operator)}"
        screenshot(operator, stack.artifacts / f"{path or 'overview'}.png")


def test_dead_consumer_turns_the_lease_queue_critical(operator: Page, stack: Stack) -> None:
    assert control.faults(stack.env.lab.state_dir)["dead-consumer"]
    open_page(operator, stack, "")
    deadline = time.monotonic() + 120
    row: dict[str, str] = {}
    while time.monotonic() < deadline:  # the overview refreshes itself; nobody reloads the page
        row = lease_row(operator)
        if row["State"] == "CRITICAL" and row["Stuck leases"] not in ("", "0"):
            break
        time.sleep(2)
    assert row["State"] == "CRITICAL", row
    assert int(row["Stuck leases"].replace(",", "")) > 0
    assert "stuck leases" in row["Why"]
    assert grid_records(operator)[0]["State"] == "CRITICAL"  # worst first
    assert exceptions(operator) == []
    time.sleep(3)  # one more refresh so the sparkline and the problem chart have the latest point
    copy_for_readme(screenshot(operator, stack.artifacts / "overview-dead-consumer.png"), "overview.png")
    # Selecting the lease queue's row opens its detail page.
    index = [r["Queue"] for r in grid_records(operator)].index("lease")
    box = operator.locator("[data-testid='data-grid-canvas']").first.bounding_box()
    operator.mouse.click(box["x"] + 15, box["y"] + 36 + 35 * index + 17)
    operator.get_by_role("heading", name="Queue lease").wait_for()
    settle(operator)
    assert operator.get_by_text("stuck lease(s)").first.is_visible()
    copy_for_readme(screenshot(operator, stack.artifacts / "queue-detail-dead-consumer.png"), "queue-detail.png")


_BACKGROUND_JS = """() => {
  const c = getComputedStyle(document.querySelector("[data-testid='stApp']")).backgroundColor;
  const [r, g, b] = c.match(/\\d+/g).map(Number);
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}"""
# Every card whose label or value is cut (an element of it wider inside than the room it has).
_CLIPPED_JS = """() => Array.from(document.querySelectorAll("[data-testid='stMetric']")).filter(m =>
  Array.from(m.querySelectorAll('*')).some(e => e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0)
).map(m => m.innerText.replace(/\\n/g, ' | '))"""
# Per subplot of the queue page's chart: how many time labels are drawn under it.
_TICKS_JS = """() => Array.from(document.querySelectorAll("[data-testid='stPlotlyChart'] .xaxislayer-above"))
  .map(g => Array.from(g.querySelectorAll('text')).filter(t => t.textContent.trim()).length)"""


def test_readable_at_800_px_in_dark_mode_and_every_chart_has_its_times_and_toolbar(
        browser: Browser, operator: Page, stack: Stack) -> None:
    """Issue 32, item 5: cards whole at 800 px, a dark page when the browser asks for one, the
    sparklines' shared scale in their header, time labels under every chart, reset-zoom and PNG
    export, and 'lease timeout' only where the queue has leases."""
    open_page(operator, stack, "")
    assert operator.evaluate(_BACKGROUND_JS) > 0.8  # the light page in a light browser
    header = grid_rows(operator)[0]
    assert any(re.fullmatch(r"Depth, last hour \(0–[\d,]+\)", h) for h in header), header
    # The queue page: times under every chart, the toolbar, units in the caption's place.
    open_page(operator, stack, "queue?queue=lease")
    assert "lease timeout 20 s" in main_text(operator)
    ticks = operator.evaluate(_TICKS_JS)
    assert len(ticks) >= 3 and all(n >= 2 for n in ticks), ticks
    operator.locator("[data-testid='stPlotlyChart']").first.hover()
    with operator.expect_download() as download:
        operator.locator(".modebar-btn[data-title='Download plot as a PNG']").first.click()
    assert download.value.suggested_filename.startswith("queueops-lease-") and \
        download.value.suggested_filename.endswith(".png")
    assert operator.locator(".modebar-btn[data-title='Reset axes']").count() >= 1
    for queue in ("due", "ring"):
        open_page(operator, stack, f"queue?queue={queue}")
        assert "lease timeout" not in main_text(operator)[:600], queue
    # 800 px: every card keeps its label and value whole, on the Overview and the queue page.
    narrow = new_page(browser, width=800)
    sign_in(narrow, stack.url, OPERATOR[0], OPERATOR[1])
    assert narrow.evaluate(_CLIPPED_JS) == []
    copy_for_readme(screenshot(narrow, stack.artifacts / "overview-800.png"), "overview-800.png")
    open_page(narrow, stack, "queue?queue=lease")
    assert narrow.evaluate(_CLIPPED_JS) == []
    screenshot(narrow, stack.artifacts / "queue-800.png")
    narrow.context.close()
    # Dark: the browser's setting is followed, no toggle needed.
    dark = new_page(browser, color_scheme="dark")
    sign_in(dark, stack.url, OPERATOR[0], OPERATOR[1])
    assert dark.evaluate(_BACKGROUND_JS) < 0.2
    assert exceptions(dark) == []
    copy_for_readme(screenshot(dark, stack.artifacts / "overview-dark.png"), "overview-dark.png")
    open_page(dark, stack, "queue?queue=lease")
    screenshot(dark, stack.artifacts / "queue-dark.png")
    dark.context.close()


def test_an_operator_requeues_through_clicks_and_the_stuck_leases_are_gone(operator: Page, stack: Stack) -> None:
    lab = stack.env.lab
    stack.fault("dead-consumer", False)  # the items it took stay stuck
    assert stack.stuck() > 0
    open_page(operator, stack, "queue?queue=lease")
    operator.get_by_role("button", name="Preview").click()
    operator.get_by_role("button", name="Confirm and run requeue").wait_for()
    settle(operator)
    code = operator.locator("[data-testid='stCode']").all_inner_texts()
    assert "SKIP LOCKED" in code[0]
    # The preview's cutoff (its first parameter): every lease older than it is stuck now.
    cutoff = re.search(r"'(\d{4}-\d\d-\d\dT[\d:.]+\+00:00)'", code[1]).group(1)
    with lab.connect() as conn:
        shown = conn.execute("SELECT count(*) FROM lab.q_lease WHERE processing_started_at < %s::timestamptz",
                             (cutoff,)).fetchone()[0]
    assert shown > 0
    screenshot(operator, stack.artifacts / "requeue-preview.png")
    operator.get_by_role("button", name="Confirm and run requeue").click()
    operator.get_by_text(re.compile(r"requeue on lease by oncall \(operator\): ok")).wait_for(timeout=60_000)
    settle(operator)
    with lab.connect() as conn:
        left = conn.execute("SELECT count(*) FROM lab.q_lease WHERE processing_started_at < %s::timestamptz",
                            (cutoff,)).fetchone()[0]
    assert left == 0  # every lease that was stuck when the operator looked is released
    assert operator.get_by_text("Stuck leases: before → after").is_visible()
    screenshot(operator, stack.artifacts / "requeue-result.png")
    open_page(operator, stack, "audit")
    records = grid_records(operator)
    assert records[0]["Action"] == "requeue" and records[0]["Outcome"] == "ok" and records[0]["User"] == OPERATOR[0]
    assert int(records[0]["Rows"]) >= shown
    screenshot(operator, stack.artifacts / "audit-after-requeue.png")


def test_a_viewer_sees_no_action_button(browser: Browser, stack: Stack) -> None:
    page = new_page(browser)
    sign_in(page, stack.url, VIEWER[0], VIEWER[1])
    open_page(page, stack, "queue?queue=lease")
    assert page.get_by_text("signed in as a viewer").is_visible()
    assert page.get_by_role("button", name=ACTION_BUTTON).count() == 0
    assert page.locator("[data-testid='stForm']").count() == 0
    assert exceptions(page) == []
    screenshot(page, stack.artifacts / "queue-viewer.png")
    # A reload keeps the sign-in (the session cookie); signing out ends it, reload included.
    page.reload()
    page.get_by_role("heading", name="Queue lease").wait_for()
    page.get_by_role("button", name=re.compile(VIEWER[0])).click()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="Sign in").wait_for()
    page.reload()
    page.get_by_role("button", name="Sign in").wait_for()
    assert page.get_by_role("heading", name="Queue lease").count() == 0
    page.context.close()
