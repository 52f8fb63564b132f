"""Issue 30's sign-in items in a real browser: ``queueops serve`` as a subprocess on the lab, Debian's
Chromium headless through Playwright, and the sign-in endpoint driven over plain HTTP too.

* A revoked operator's open tab is refused and audited with the role in force (item 2).
* The session cookie is HttpOnly and SameSite=Strict, and replaying it after sign-out or after a
  new password signs nobody in (item 3).
* The sign-in throttle survives a reload and a new browser context (item 4).
* The sign-in page names no file; hostile text and cross-site posts are refused.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Browser, Page
from sqlalchemy import delete, select, update

from queueops import users
from queueops.store import open_engine, sessions
from queueops.store.schema import audit_log, console_sessions, signin_throttle
from tests.console.browser import chromium, new_page, settle, sign_in
from tests.console.conftest import (
    VIEWER,
    ConsoleEnv,
    Server,
    count_stuck,
    reset_console,
    start_console,
    stop,
    stuck_leases,
)

pytestmark = pytest.mark.browser
COOKIE = "queueops_session"


@pytest.fixture(scope="module")
def server(console_env: ConsoleEnv, artifacts: Path) -> Iterator[Server]:
    reset_console(console_env)
    srv = start_console(console_env.config_path, artifacts / "console-signin.log")
    try:
        yield srv
    finally:
        stop(srv.proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


@pytest.fixture(autouse=True)
def no_throttle(console_env: ConsoleEnv) -> Iterator[None]:
    """Every test starts with no failed sign-in counted (they all come from 127.0.0.1)."""
    def clear() -> None:
        engine = open_engine(console_env.config())
        with engine.begin() as conn:
            conn.execute(delete(signin_throttle))
        engine.dispose()

    clear()
    yield
    clear()


@pytest.fixture()
def account(console_env: ConsoleEnv) -> Iterator[tuple[str, str]]:
    """An operator of this test's own, removed afterwards (the users file is shared)."""
    name = f"op{int(time.time() * 1000) % 10 ** 8}"
    password = f"{name}-password"
    users.add(console_env.users_path, name, password, "operator")
    yield name, password
    users.remove(console_env.users_path, name)


def _session_cookie(page: Page) -> dict | None:
    return next((c for c in page.context.cookies() if c["name"] == COOKIE), None)


def _on_signin_page(page: Page) -> None:
    page.get_by_role("textbox", name="Password").wait_for()
    assert "/queueops/signin" in page.url


def _audit_rows(env: ConsoleEnv, user: str) -> list[dict]:
    engine = open_engine(env.config())
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(select(audit_log).where(audit_log.c.user_name == user))]
    engine.dispose()
    return rows


def test_a_revoked_operator_in_an_open_tab_is_refused_and_audited_with_the_role_now(
        browser: Browser, server: Server, console_env: ConsoleEnv, account: tuple[str, str]) -> None:
    name, password = account
    stuck_leases(console_env, 3)
    page = new_page(browser)
    sign_in(page, server.url, name, password)
    page.goto(f"{server.url}/queue?queue=lease")
    page.get_by_role("heading", name="Queue lease").wait_for()
    settle(page)
    page.get_by_role("button", name="Preview").click()
    confirm = page.get_by_role("button", name="Confirm and run requeue")
    confirm.wait_for()
    settle(page)
    # The operator is made a viewer in the users file while the tab is open, preview confirmed.
    table = users.load(console_env.users_path)
    users.save(console_env.users_path, {**table, name: dataclasses.replace(table[name], role="viewer")})
    confirm.click()
    page.get_by_text(re.compile(rf"requeue on lease by {name} \(viewer\): refused")).wait_for(timeout=60_000)
    settle(page)
    assert count_stuck(console_env) == 3  # nothing ran
    [rec] = _audit_rows(console_env, name)
    assert (rec["role"], rec["outcome"], rec["rows_affected"]) == ("viewer", "refused", 0)
    # The tab shows the role now in force: no action control left.
    assert page.get_by_role("button", name=re.compile("Preview|Confirm")).count() == 0
    # A reload is a new load of the session, whose role no longer matches: sign in again.
    page.reload()
    _on_signin_page(page)
    assert page.get_by_text("Your account changed").is_visible()
    page.context.close()


def test_the_session_cookie_is_http_only_and_dies_with_sign_out_and_with_a_new_password(
        browser: Browser, server: Server, console_env: ConsoleEnv, account: tuple[str, str]) -> None:
    page = new_page(browser)
    sign_in(page, server.url, VIEWER[0], VIEWER[1])
    cookie = _session_cookie(page)
    assert cookie is not None
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]  # plain http here
    assert COOKIE not in page.evaluate("document.cookie")  # no script in the page can read it
    # While the session is open, the cookie works in another browser (it is the whole credential) ...
    other = new_page(browser)
    other.context.add_cookies([cookie])
    other.goto(f"{server.url}/audit")
    other.get_by_role("heading", name="Audit").wait_for()
    other.context.close()
    # ... and after sign-out it does not: the session is over in the store, not just in this tab.
    page.get_by_role("button", name=re.compile(VIEWER[0])).click()
    page.get_by_role("button", name="Sign out").click()
    _on_signin_page(page)
    assert page.get_by_text("You are signed out.").is_visible()
    assert _session_cookie(page) is None  # the endpoint deleted it as well
    replay = new_page(browser)
    replay.context.add_cookies([cookie])
    replay.goto(f"{server.url}/audit")
    _on_signin_page(replay)
    assert replay.get_by_role("heading", name="Audit").count() == 0
    replay.context.close()
    r = requests.get(f"{server.url}/queueops/signin", cookies={COOKIE: cookie["value"]}, allow_redirects=False,
                     timeout=30)
    assert r.status_code == 200 and "Password" in r.text  # the sign-in form, not a redirect into the console
    # A new password ends a session opened before it, in its own tab and anywhere it is replayed.
    name, password = account
    sign_in(page, server.url, name, password)
    cookie = _session_cookie(page)
    users.add(console_env.users_path, name, password + "-new", "operator", replace=True)
    page.reload()
    _on_signin_page(page)
    replay = new_page(browser)
    replay.context.add_cookies([cookie])  # type: ignore[list-item]
    replay.goto(server.url)
    _on_signin_page(replay)
    page.context.close()
    replay.context.close()


def _fail(page: Page, url: str, user: str, password: str) -> str:
    page.goto(f"{url}/queueops/signin")
    page.get_by_role("textbox", name="User").fill(user)
    page.get_by_role("textbox", name="Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    return page.get_by_role("alert").inner_text()


def test_the_sign_in_throttle_survives_a_reload_and_a_new_browser(
        browser: Browser, server: Server, console_env: ConsoleEnv, account: tuple[str, str]) -> None:
    name, password = account
    page = new_page(browser)
    messages, times = [], []
    for _ in range(7):  # waiting out each lock, so that every attempt is a counted failure
        t = time.monotonic()
        messages.append(_fail(page, server.url, name, "not-the-password"))
        times.append(time.monotonic() - t)
        wait = re.search(r"wait (\d+) s", messages[-1])
        if wait and len(messages) < 7:
            time.sleep(int(wait.group(1)) + 0.2)
    print("failed sign-ins, seconds each:", [round(x, 2) for x in times])
    assert messages[:3] == ["Unknown user or wrong password."] * 3
    assert [re.search(r"wait (\d+) s", m).group(1) for m in messages[3:]] == ["1", "2", "4", "8"]  # type: ignore[union-attr]
    # The right password after a reload of the sign-in page, then in a new browser context: locked.
    page.goto(f"{server.url}/queueops/signin")
    page.reload()
    assert _fail(page, server.url, name, password).startswith("Too many failed sign-ins")
    fresh = new_page(browser)
    t = time.monotonic()
    text = _fail(fresh, server.url, name, password)
    print(f"refused while locked in {time.monotonic() - t:.2f} s: {text}")
    assert text.startswith("Too many failed sign-ins") and _session_cookie(fresh) is None
    r = requests.post(f"{server.url}/queueops/signin", data={"user": name, "password": password, "next": "/"},
                      allow_redirects=False, timeout=30)
    assert r.status_code == 429 and 1 <= int(r.headers["Retry-After"]) <= 8 and COOKIE not in r.cookies
    # Every attempt is in the sign-in log, with its address.
    log = [r for r in sessions.read_log(open_engine(console_env.config()), user=name)]
    outcomes = [r["outcome"] for r in reversed(log)]
    assert outcomes[:7] == ["failed"] * 7 and set(outcomes[7:]) == {"locked"}
    assert {r["address"] for r in log} == {"127.0.0.1"}
    # Once the lock is over the right password signs in, in the fresh browser.
    time.sleep(8.5)
    sign_in(fresh, server.url, name, password)
    assert _session_cookie(fresh) is not None
    page.context.close()
    fresh.context.close()


def test_an_idle_overview_says_its_session_expired_and_signing_in_goes_back_to_it(
        browser: Browser, server: Server, console_env: ConsoleEnv, account: tuple[str, str]) -> None:
    """The Overview's own refresh is not activity (an unattended screen still times out after 30 min
    idle), but the page must not fail silently: its next refresh shows the sign-in page saying why,
    and signing in returns to the page that was open."""
    name, password = account
    page = new_page(browser)
    sign_in(page, server.url, name, password)
    page.goto(f"{server.url}/?tab=x")
    page.get_by_role("heading", name="Overview").wait_for()
    settle(page)
    engine = open_engine(console_env.config())
    with engine.begin() as conn:  # 31 min since the user last did anything
        conn.execute(update(console_sessions).where(console_sessions.c.user_name == name)
                     .values(last_seen=datetime.now(UTC) - timedelta(minutes=31)))
    _on_signin_page(page)  # by the Overview's own refresh: nobody reloads
    assert page.get_by_text("Your session ended after 30 min without activity").is_visible()
    assert "next=" in page.url
    [row] = [r for r in sessions.read_log(engine, user=name) if r["outcome"] == "signed-out"]
    assert "idle" in row["detail"]
    engine.dispose()
    page.get_by_role("textbox", name="Password").fill(password)
    page.get_by_role("textbox", name="User").fill(name)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="Overview").wait_for()
    assert page.url.endswith("/?tab=x")
    page.context.close()


def test_the_sign_in_page_names_no_file_and_takes_hostile_text_and_no_cross_site_post(
        server: Server, console_env: ConsoleEnv) -> None:
    r = requests.get(f"{server.url}/queueops/signin?next=https://evil.example/", timeout=30)
    assert r.status_code == 200 and 'name="next" value="/"' in r.text
    assert str(console_env.users_path) not in r.text and "users.toml" not in r.text and str(console_env.dir) not in r.text
    assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"] and r.headers["Cache-Control"] == "no-store"
    # Another site's form posting the right password: refused before anything is checked.
    r = requests.post(f"{server.url}/queueops/signin", data={"user": VIEWER[0], "password": VIEWER[1]},
                      headers={"Origin": "https://evil.example"}, allow_redirects=False, timeout=30)
    assert r.status_code == 403 and COOKIE not in r.cookies
    # The right password from the console's own page: a 303 to the page asked for, with the cookie.
    r = requests.post(f"{server.url}/queueops/signin",
                      data={"user": VIEWER[0], "password": VIEWER[1], "next": "/queue?queue=lease"},
                      headers={"Origin": server.url}, allow_redirects=False, timeout=30)
    assert r.status_code == 303 and r.headers["Location"] == "/queue?queue=lease"
    set_cookie = r.headers["Set-Cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie and "Max-Age=43200" in set_cookie
    engine = open_engine(console_env.config())
    for value in ("oncall'; DROP TABLE lab.q_lease; --", "<script>alert(1)</script>", "%s %(x)s {0}", "x" * 5000,
                  "watcher\u200b", "ｗａｔｃｈｅｒ"):
        with engine.begin() as conn:
            conn.execute(delete(signin_throttle))
        for user, password in ((value, VIEWER[1]), (VIEWER[0], value)):
            r = requests.post(f"{server.url}/queueops/signin", data={"user": user, "password": password},
                              allow_redirects=False, timeout=60)
            assert r.status_code == 401 and COOKIE not in r.cookies, (user[:40], password[:40])
            assert "Unknown user or wrong password." in r.text and "<script>alert" not in r.text
