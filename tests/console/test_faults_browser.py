"""Issue 32, items 1 to 4, in headless Chromium against ``queueops serve``: one lab with its
workload and the collector service, the five lab faults switched on in turn.

* item 1: the Overview shows each fault as critical or warning with its root cause, by itself
  (nobody reloads), within two refresh cycles and a collection cycle of the fault being visible at
  all (a snapshot is a root cause from the queues' old-snapshot level, 20 s in this module's config
  -- the judge's 60 s is the same rule, tests/console/test_causes_agree.py --, a lease is stuck
  after the lab's 20 s lease timeout, churn's dead tuples are read by the 30 s slow collectors;
  measured: 5-15 s);
* item 2: under ``watermark-jump`` the operator resets the watermark from the queue page while the
  consumers move it on between the preview and the confirmation, and nothing stays stranded;
* item 3: under ``lock-hold`` the operator ends the session holding the table from the Overview's
  root cause, through the queue page's preview, and the session is gone from the database;
* item 4: the queue page's sampled time advances by itself, holds still (and says so) while a
  preview is open, keeps its window in the URL; a requeue's leftovers are explained.

Screenshots of the Overview under each fault go to artifacts/console/ and, with
``QUEUEOPS_UPDATE_DOCS_IMG=1``, to docs/img/overview-FAULT.png (docs/console.md shows them).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.console.browser import chromium, exceptions, grid_records, new_page, screenshot, settle, sign_in
from tests.console.conftest import OPERATOR, ConsoleEnv, Stack, copy_for_readme, live_stack, open_page

pytestmark = pytest.mark.browser
REFRESH_S = 5.0  # [console] refresh_s (default) and the lab's [schedule] fast_s
SAMPLED = re.compile(r"[Ss]ampled (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC")
BAD = ("CRITICAL", "WARNING")


SNAPSHOT_LEVEL_S = 20  # each lab queue's thresholds.oldest_snapshot_age_s here (the judge's default: 60)


def with_snapshot_level(env: ConsoleEnv) -> ConsoleEnv:
    """The console's config with every lab queue's old-snapshot level at :data:`SNAPSHOT_LEVEL_S`
    (the lab's workers hold no transaction that long: their lock_timeout is 200 ms)."""
    text = env.config_path.read_text()
    text, n = re.subn(r"(?m)^thresholds = \{ ", f"thresholds = {{ oldest_snapshot_age_s = {{ warn = {SNAPSHOT_LEVEL_S} }}, ",
                      text)
    assert n == len(env.config().queues), "every lab queue has a thresholds line"
    path = env.dir / "console-faults.toml"
    path.write_text(text)
    return replace(env, config_path=path)


@pytest.fixture(scope="module")
def stack(console_env: ConsoleEnv, artifacts: Path) -> Iterator[Stack]:
    with live_stack(with_snapshot_level(console_env), artifacts, "faults") as s:
        yield s


@pytest.fixture(scope="module")
def operator(stack: Stack) -> Iterator[Page]:
    with chromium() as browser:
        page = new_page(browser)
        sign_in(page, stack.url, OPERATOR[0], OPERATOR[1])
        yield page


def row_of(page: Page, queue: str, whole: bool = False) -> dict[str, str]:
    """The queue's row on the Overview (``whole``: with the columns scrolled out of view too)."""
    return next((r for r in grid_records(page, whole=whole) if r.get("Queue") == queue), {})


def main_text(page: Page) -> str:
    return page.locator("[data-testid='stMain']").inner_text()


def sampled(page: Page) -> str:
    m = SAMPLED.search(main_text(page))
    assert m, main_text(page)[:2000]
    return m.group(1)


def until(probe: Callable[[], object], timeout: float, what: str, every: float = 1.0) -> object:
    """Poll the page as it refreshes itself (never a reload)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except (StopIteration, KeyError, IndexError):
            last = None
        if last:
            return last
        time.sleep(every)
    pytest.fail(f"{what}: not within {timeout:.0f} s (last: {last!r})")


def shows(page: Page, queue: str, why: str, banner: str) -> dict[str, str] | None:
    """The queue's row is critical or warning with ``why`` in its Why, and a root cause banner says
    ``banner`` (a regex), both in the same refresh."""
    row = row_of(page, queue)
    text = main_text(page)
    if row.get("State") in BAD and why in row.get("Why", "") and re.search(banner, text):
        return row
    return None


def snap(page: Page, stack: Stack, fault: str) -> None:
    time.sleep(1)
    copy_for_readme(screenshot(page, stack.artifacts / f"overview-{fault}.png"), f"overview-{fault}.png")


def test_lock_hold_names_the_session_holding_the_table_and_it_is_ended_from_the_overview(
        operator: Page, stack: Stack) -> None:
    open_page(operator, stack, "")
    visible = stack.fault("lock-hold", True)
    holder = until(lambda: stack.one("SELECT pid FROM pg_locks WHERE relation = 'lab.q_lease'::regclass "
                                     "AND mode = 'ExclusiveLock' AND granted"), 20, "the lab's lock holder")
    row = until(lambda: shows(operator, "lease", "A session blocks others: session",
                              rf"Root cause · session {holder} .*holds ExclusiveLock on queue lease's table"),
                2 * REFRESH_S + 15, "lock-hold on the Overview")
    seen = time.monotonic() - visible
    assert f"session {holder}" in row["Why"]
    snap(operator, stack, "lock-hold")
    # One click from the Overview: the queue page, its preview open, the page holding still.
    operator.get_by_role("button", name=f"End session {holder}…").first.click()
    operator.get_by_role("heading", name="Queue lease").wait_for()
    operator.get_by_text("pg_terminate_backend").first.wait_for()
    settle(operator)
    text = main_text(operator)
    assert "paused while previewing" in text and "-0 s" not in text and "holds the oldest snapshot" not in text
    first = sampled(operator)
    time.sleep(2 * REFRESH_S + 1)
    assert sampled(operator) == first  # held still while previewing
    screenshot(operator, stack.artifacts / "end-session-preview.png")
    operator.get_by_label(re.compile("Type the session id")).fill(str(holder))
    operator.keyboard.press("Tab")
    settle(operator)
    operator.locator(".st-key-term_run button").click()
    operator.get_by_text(re.compile(r"terminate by oncall \(operator\): ok")).wait_for(timeout=60_000)
    settle(operator)
    assert stack.one("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", holder) == 0
    assert exceptions(operator) == []
    screenshot(operator, stack.artifacts / "end-session-result.png")
    stack.fault("lock-hold", False)
    print(f"lock-hold shown after {seen:.1f} s")


def test_churn_is_shown_and_the_fragmentation_it_leaves_says_why_it_is_not_judged(
        operator: Page, stack: Stack) -> None:
    open_page(operator, stack, "")
    # A clean start: the status queue is ok, so what turns it amber is the churn itself.
    until(lambda: row_of(operator, "status").get("State") == "ok", 60, "the status queue to be ok before churn")
    # What the finding names, made certain: autovacuum not keeping up. With it on (naptime 10 s) the
    # dead tuples rise and fall between vacuums, and the 30 s ghost_records samples of a 75 s wait
    # missed every crest past the 50,000 warn line twice in CI (at 2,000 and at 4,000 rows a round).
    # Off for this table, they only rise (1,800 a second): past the line in about 28 s.
    autovacuum(stack, False)
    visible = stack.fault("churn", True)
    try:
        until(lambda: shows(operator, "status", "Cleanup is falling behind", r"status"),
                    2 * REFRESH_S + 65, "churn on the Overview")
        print(f"churn shown after {time.monotonic() - visible:.1f} s")
        until(lambda: "not judged" in row_of(operator, "status", whole=True).get("Fragmentation %", ""), 60,
              "the fragmentation cell saying why it is not judged")
        snap(operator, stack, "churn")
        open_page(operator, stack, "queue?queue=status")
        assert "is past its level but not judged" in main_text(operator)
    finally:
        stack.fault("churn", False)
        autovacuum(stack, True)


def autovacuum(stack: Stack, on: bool) -> None:
    """Autovacuum of the status queue's table, which the churn fault fills with dead tuples: off,
    or back to the server's setting."""
    with stack.env.lab.connect() as conn:
        conn.execute("ALTER TABLE lab.q_status_meta RESET (autovacuum_enabled)" if on
                     else "ALTER TABLE lab.q_status_meta SET (autovacuum_enabled = false)")


def test_snapshot_hold_turns_every_queue_amber_with_the_session(operator: Page, stack: Stack) -> None:
    open_page(operator, stack, "")
    visible = stack.fault("snapshot-hold", True) + SNAPSHOT_LEVEL_S  # a root cause from the queues' level
    try:
        row = until(lambda: shows(operator, "delete", "A long transaction holds cleanup back: session",
                                  r"Root cause · session \d+ .*holds the oldest snapshot"),
                    SNAPSHOT_LEVEL_S + 2 * REFRESH_S + 20, "snapshot-hold on the Overview")
        print(f"snapshot-hold shown {time.monotonic() - visible:.1f} s after the snapshot reached {SNAPSHOT_LEVEL_S} s")
        assert row["State"] in BAD
        assert all(r["State"] in BAD for r in grid_records(operator)), grid_records(operator)
        snap(operator, stack, "snapshot-hold")
        # The queue page's pill agrees with the Overview (no green "ok" beside the finding).
        open_page(operator, stack, "queue?queue=delete")
        head = main_text(operator)[:300]
        assert ("warning" in head or "critical" in head) and "\nok\n" not in head, head
    finally:
        stack.fault("snapshot-hold", False)


WATERMARK = "SELECT low_key FROM lab.q_delete_watermark"
STRANDED = "SELECT count(*) FROM lab.q_delete WHERE id < (SELECT low_key FROM lab.q_delete_watermark)"


def test_watermark_jump_is_critical_and_the_reset_from_the_ui_succeeds_while_consumers_move_the_watermark(
        operator: Page, stack: Stack) -> None:
    open_page(operator, stack, "")
    visible = stack.fault("watermark-jump", True)
    try:
        until(lambda: shows(operator, "delete", "watermark drift", r"."), 2 * REFRESH_S + 20,
              "watermark-jump on the Overview")
        print(f"watermark-jump shown after {time.monotonic() - visible:.1f} s")
        assert row_of(operator, "delete")["State"] == "CRITICAL"
        snap(operator, stack, "watermark-jump")
    finally:
        stack.fault("watermark-jump", False)  # no more jumps: the stranded items stay until a reset
    until(lambda: stack.one(STRANDED), 20, "items stranded below the watermark")
    # Issue 32, item 2: preview, then confirm after the consumers moved the watermark on (the
    # reset failed 2 of 2 times with "the watermark no longer is ..." on the live lab).
    open_page(operator, stack, "queue?queue=delete")
    operator.get_by_text(re.compile(r"^Reset watermark")).first.click()
    settle(operator)
    operator.locator("[data-testid='stFormSubmitButton'] button").first.click()
    operator.get_by_role("button", name="Confirm and run watermark-reset").wait_for()
    settle(operator)
    previewed = stack.one(WATERMARK)
    until(lambda: stack.one(WATERMARK) != previewed, 60, "the consumers to move the watermark after the preview")
    operator.get_by_role("button", name="Confirm and run watermark-reset").click()
    operator.get_by_text(re.compile(r"watermark-reset on delete by oncall \(operator\): ok")).wait_for(
        timeout=60_000)
    settle(operator)
    assert exceptions(operator) == []
    text = main_text(operator)
    assert "conflict" not in text and "preview again" not in text, text[-3000:]
    assert re.search(r"the watermark had moved from \d+ to \d+ since the preview", text), text[-3000:]
    screenshot(operator, stack.artifacts / "watermark-reset-result.png")
    until(lambda: stack.one(STRANDED) == 0, 30, "no item left below the watermark")


def test_dead_consumer_is_critical_and_a_requeue_explains_what_expired_after_its_cutoff(
        operator: Page, stack: Stack) -> None:
    open_page(operator, stack, "")
    visible = stack.fault("dead-consumer", True) + 20  # stuck once older than the lease timeout
    try:
        until(lambda: shows(operator, "lease", "stuck leases", r"."), 2 * REFRESH_S + 30,
              "dead-consumer on the Overview")
        print(f"dead-consumer shown {time.monotonic() - visible:.1f} s after the first lease could be stuck")
        assert row_of(operator, "lease")["State"] == "CRITICAL"
        snap(operator, stack, "dead-consumer")
        # The dead consumer keeps taking items: leases expire after the preview's cutoff.
        open_page(operator, stack, "queue?queue=lease")
        operator.locator("[data-testid='stFormSubmitButton'] button").first.click()
        operator.get_by_role("button", name="Confirm and run requeue").wait_for()
        settle(operator)
        assert "paused while previewing" in main_text(operator)
        time.sleep(8)
        operator.get_by_role("button", name="Confirm and run requeue").click()
        operator.get_by_text(re.compile(r"requeue on lease by oncall \(operator\): ok")).wait_for(timeout=60_000)
        settle(operator)
        text = main_text(operator)
        assert re.search(r"lease\(s\) are stuck now\. The requeue released the leases older than the preview's "
                         r"cutoff .* these expired after it", text), text[-3000:]
        assert operator.get_by_role("button", name="Preview requeue again").is_visible()
        screenshot(operator, stack.artifacts / "requeue-leftovers.png")
    finally:
        stack.fault("dead-consumer", False)


def test_the_queue_page_refreshes_itself_and_keeps_its_window_in_the_url(operator: Page, stack: Stack) -> None:
    open_page(operator, stack, "queue?queue=delete&window=6h")
    assert "refreshing every" in main_text(operator)
    first = sampled(operator)
    until(lambda: sampled(operator) != first, 3 * REFRESH_S + 10, "the queue page's sampled time to advance")
    assert "window=6h" in operator.url
    operator.get_by_text("15 min", exact=True).first.click()
    settle(operator)
    until(lambda: "window=15min" in operator.url, 10, "the window in the URL")
    operator.reload()
    operator.get_by_role("heading", name="Queue delete").wait_for()
    settle(operator)
    assert "window=15min" in operator.url
    # The Overview keeps refreshing while a preview is open on a queue page of the same session.
    operator.locator("[data-testid='stFormSubmitButton'] button").first.click()
    operator.get_by_text("paused while previewing").wait_for()
    open_page(operator, stack, "")
    first = sampled(operator)
    until(lambda: sampled(operator) != first, 3 * REFRESH_S + 10, "the Overview's sampled time to advance")
    assert exceptions(operator) == []
