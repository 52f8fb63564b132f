"""The queue page's items drill-down in a real browser (issue 32, item 6): ``queueops serve`` as a
subprocess, Debian's Chromium headless; an operator opens the stuck items of the lab's lease queue,
selects one and requeues it: that item, and only it, is released."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.console.browser import _GRID_JS, chromium, exceptions, new_page, screenshot, settle, sign_in
from tests.console.conftest import OPERATOR, ConsoleEnv, reset_console, start_console, stop, stuck_leases

pytestmark = pytest.mark.browser


@pytest.fixture()
def served(console_env: ConsoleEnv, artifacts: Path) -> Iterator[tuple[ConsoleEnv, str]]:
    env = reset_console(console_env)
    stuck_leases(env, 5, ready=3)
    server = start_console(env.config_path, artifacts / "console-items.log")
    try:
        yield env, server.url
    finally:
        stop(server.proc)
        env.lab.reset()


def _records(canvas, timeout: float = 30) -> list[dict[str, str]]:  # noqa: ANN001 - a Playwright locator
    """The grid's accessible cells (see tests/console/browser.py), header first, as records."""
    deadline = time.monotonic() + timeout
    while True:
        rows = canvas.evaluate(_GRID_JS)
        if len(rows) > 1 or time.monotonic() > deadline:
            return [dict(zip(rows[0], r, strict=False)) for r in rows[1:]] if rows else []
        time.sleep(0.25)


def _stuck_ids(env: ConsoleEnv) -> list[int]:
    with env.lab.connect() as conn:
        return [r[0] for r in conn.execute("SELECT id FROM lab.q_lease WHERE processing_started_at < now() - "
                                           "interval '20 s' ORDER BY processing_started_at, id")]


def test_an_operator_opens_the_stuck_items_and_requeues_one(served: tuple[ConsoleEnv, str], artifacts: Path) -> None:
    env, url = served
    before = _stuck_ids(env)
    assert len(before) == 5
    with chromium() as browser:
        page: Page = new_page(browser, height=1400)
        sign_in(page, url, OPERATOR[0], OPERATOR[1])
        page.goto(f"{url}/queue?queue=lease")
        page.get_by_role("heading", name="Queue lease").wait_for()
        settle(page)
        page.get_by_role("heading", name="Items").scroll_into_view_if_needed()
        page.get_by_text(re.compile(r"^Stuck$")).first.click()
        settle(page)
        page.get_by_text(re.compile(r"5 stuck item\(s\), oldest lease first")).wait_for()
        canvas = page.locator("[class*='st-key-it_table_lease_stuck'] [data-testid='data-grid-canvas']").first
        shown = _records(canvas)
        assert [int(r["item"]) for r in shown] == before  # oldest lease first, as the database orders them
        # Select the second row by its row marker (the grid's first column), then requeue it.
        box = canvas.bounding_box()
        page.mouse.click(box["x"] + 15, box["y"] + 36 + 35 * 1 + 17)
        settle(page)
        page.get_by_role("button", name="Requeue 1 selected").click()
        settle(page)
        page.get_by_role("button", name="Confirm and requeue 1").wait_for()
        assert "only among the 1 selected key(s)" in page.locator(".st-key-it_preview_lease").inner_text()
        screenshot(page, artifacts / "items-requeue-preview.png")
        page.get_by_role("button", name="Confirm and requeue 1").click()
        page.get_by_text(re.compile(r"of the selected items by oncall \(operator\): ok, 1 released")).first.wait_for(
            timeout=60_000)
        settle(page)
        assert exceptions(page) == []
        screenshot(page, artifacts / "items-requeue-result.png")
    after = _stuck_ids(env)
    assert after == [k for k in before if k != before[1]]  # exactly the selected item left the stuck set
    with env.lab.connect() as conn:
        assert conn.execute("SELECT processing_started_at FROM lab.q_lease WHERE id = %s",
                            (before[1],)).fetchone()[0] is None
