"""The local sign-in: an HTTP endpoint beside the console that checks the password and sets the
session cookie, server-side sessions in the store, and a throttle that survives reloads.

Why an endpoint of our own. A Streamlit script talks to the browser over a websocket: it cannot
set a response header, so a cookie it sets goes through JavaScript (``document.cookie``) and can
never be HttpOnly -- any script in the page could read it. Streamlit (1.67, pinned in
constraints.txt) serves the app with Starlette and offers ``st.App(script, routes=[...])``: the
console is started from :mod:`console.server`, which adds the routes below to Streamlit's own
server (same process, same port; ``queueops serve`` runs it). The sign-in page is a plain HTML
form posting to ``/queueops/signin``, which checks the throttle and the password and answers with
``Set-Cookie: queueops_session=<random id>; HttpOnly; SameSite=Strict[; Secure]`` and a redirect
back to the page asked for. Of the alternatives -- a Streamlit form that hands a one-time code to
a route which sets the cookie, or a cookie set by JavaScript -- this is the only one in which
the password check and the cookie are one HTTP exchange, that works without any script in the
page, that sees the client's real TCP address for the throttle (``st.context.ip_address`` is
``None`` for every local client), and that does not depend on Streamlit's HTML sanitiser.
Streamlit's websocket handshake still carries the HttpOnly cookie, so the console's gate
(:func:`console.auth.gate`) reads it with ``st.context.cookies`` on every script run.

The cookie holds only a random id; the session lives in the store (:mod:`queueops.store.sessions`,
idle timeout 30 min, absolute 12 h) with a fingerprint of the user's entry, so sign-out, a new
password, a new role or a removed user end it, and a cookie replayed after any of those is
refused. Sign-in failures are throttled per user name and per client address in the store and
each attempt is logged (``signin_log``).

At most :data:`MAX_HASHING` passwords are hashed at once (scrypt at N = 2^17 takes 128 MiB and
~0.4 s of a core): more attempts wait their turn rather than exhaust the machine. Attempts on the
same user or from the same address are serialised in this process, so parallel guesses cannot
all slip through before the first failure is counted (several console processes sharing one
store each serialise their own).
"""

from __future__ import annotations

import hashlib
import html
import logging
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from sqlalchemy import Engine

from console import configfile
from queueops import config as config_mod
from queueops import users
from queueops.store import sessions

COOKIE = "queueops_session"
SIGNIN_PATH = "queueops/signin"
MAX_HASHING = 2
_FIELD_MAX = 1024  # longer user names / passwords are refused before hashing

log = logging.getLogger("queueops.console.signin")

# Routes are added by console/server.py; the gate says so when the console runs without them.
ROUTES_INSTALLED = False


# ---------------------------------------------------------------------------------------------
# Config and store of the running console


_lock = threading.Lock()
_engines: dict[str, Engine] = {}


def engine(cfg: config_mod.Config) -> Engine:
    """The store's engine (tables created if missing), one per store for the process."""
    from queueops.store import open_engine
    from queueops.store.db import store_url

    url = store_url(cfg)
    with _lock:
        eng = _engines.get(url)
    if eng is None:
        eng = open_engine(cfg)
        with _lock:
            eng = _engines.setdefault(url, eng)
    return eng


def oidc_configured() -> bool:
    """Whether Streamlit's own OIDC sign-in is configured (an ``[auth]`` section in its secrets):
    then it signs users in and the local sign-in page is off. Here, below console.auth, because both
    the console's pages and these routes ask."""
    import streamlit as st  # the routes run inside Streamlit's server; this module loads without it

    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file at all
        return False


def users_path(cfg: config_mod.Config) -> Path | None:
    return cfg.path(cfg.console.users_file) if cfg.console.users_file else None


# ---------------------------------------------------------------------------------------------
# One sign-in attempt (no HTTP in here: tested directly)


@dataclass(frozen=True)
class Attempt:
    outcome: Literal["ok", "failed", "locked", "unavailable"]
    session_id: str | None = None
    retry_after_s: float = 0.0
    message: str = ""


_stripes = [threading.Lock() for _ in range(64)]
_hashing = threading.BoundedSemaphore(MAX_HASHING)


@contextmanager
def _serialised(keys: list[str]) -> Iterator[None]:
    picked = sorted({int(hashlib.sha256(k.encode("utf-8", "replace")).hexdigest()[:8], 16) % len(_stripes)
                     for k in keys})
    for i in picked:
        _stripes[i].acquire()
    try:
        yield
    finally:
        for i in reversed(picked):
            _stripes[i].release()


def logged_name(name: str) -> str:
    """The user name as the log keeps it: a well-formed name as typed, anything else not at all."""
    return name if users.NAME.fullmatch(name) else "(not a valid user name)"


def wait_text(seconds: float) -> str:
    s = max(1, math.ceil(seconds))
    return f"{s} s" if s < 120 else f"{math.ceil(s / 60)} min"


def attempt(store: Engine, path: Path, name: str, password: str, address: str,
            now: datetime | None = None) -> Attempt:
    """Check the throttle, then the password; on success create the session (rehashing an entry
    of a lower cost first). Every attempt is logged; a failure is counted against the user name
    and the address whether or not the user exists."""
    now = now or datetime.now(UTC)
    name = name.strip()[:_FIELD_MAX]
    keys = sessions.throttle_keys(name, address)
    with _serialised(keys):
        wait = sessions.locked_for(store, keys, now)
        if wait > 0:
            sessions.log(store, now, logged_name(name), address, "locked", f"refused for {wait_text(wait)} more")
            return Attempt("locked", retry_after_s=wait,
                           message=f"Too many failed sign-ins for this user or from this address: try again in "
                                   f"{wait_text(wait)}.")
        try:
            table = users.load(path)
        except users.UsersError as exc:
            log.error("sign-in unavailable: %s", exc)
            return Attempt("unavailable", message="Sign-in is unavailable: the console's users file cannot be "
                                                  "read. The console's log says why.")
        with _hashing:
            user = users.verify(table, name, password[:_FIELD_MAX])
        if user is None:
            lock = sessions.record_failure(store, keys, now)
            sessions.log(store, now, logged_name(name), address, "failed", "unknown user or wrong password"
                         + (f"; locked for {wait_text(lock)}" if lock else ""))
            return Attempt("failed", retry_after_s=lock, message="Unknown user or wrong password."
                           + (f" Further attempts wait {wait_text(lock)}." if lock else ""))
        sessions.clear(store, keys[0])
    if users.needs_rehash(user):
        try:
            with _hashing:
                new = users.rehash(path, user, password)
            if new is not user:
                sessions.refingerprint(store, user.name, users.fingerprint(user), users.fingerprint(new))
                log.info("rehashed %s's password at n=%d", user.name, new.n)
                user = new
        except (OSError, users.UsersError) as exc:  # the old hash still verifies; sign in anyway
            log.warning("could not rehash %s's password: %s", user.name, exc)
    session_id = sessions.create(store, user.name, users.fingerprint(user), now, address=address)
    sessions.log(store, now, user.name, address, "ok", f"role {user.role}")
    try:
        sessions.prune(store, now)
    except Exception as exc:  # noqa: BLE001 - housekeeping must not fail a sign-in
        log.warning("could not prune old sessions: %s", exc)
    return Attempt("ok", session_id=session_id)


# ---------------------------------------------------------------------------------------------
# HTTP


def base_path() -> str:
    """``/`` or ``/BASE/`` (Streamlit's ``server.baseUrlPath``)."""
    try:
        from streamlit import config as st_config

        base = str(st_config.get_option("server.baseUrlPath") or "").strip("/")
    except Exception:  # noqa: BLE001 - outside a Streamlit server
        base = ""
    return f"/{base}/" if base else "/"


def signin_url(next_path: str | None = None, **flags: str) -> str:
    url = base_path() + SIGNIN_PATH
    query = ([f"next={quote(next_path, safe='/')}"] if next_path else []) + [f"{k}={quote(v)}" for k, v in flags.items()]
    return url + ("?" + "&".join(query) if query else "")


def safe_next(value: str | None) -> str:
    """A local path to go back to after signing in; anything else (another site, a scheme, ``//``,
    back-slashes, control characters) is the console's home."""
    home = base_path()
    if not value or len(value) > 2000 or not value.startswith(home) or value.startswith("//") or "\\" in value:
        return home
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return home
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or parts.path.startswith(home + SIGNIN_PATH):
        return home
    return value


def cookie_secure(request: Any) -> bool:
    """Secure when the browser reached us over TLS (directly, or through a trusted proxy)."""
    try:
        from streamlit import config as st_config

        tls = bool(st_config.get_option("server.sslCertFile"))
    except Exception:  # noqa: BLE001
        tls = False
    return tls or request.url.scheme == "https"


def client_address(request: Any) -> str:
    return (request.client.host if request.client else "") or "unknown"


_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make the form post send Origin: null
    "X-Content-Type-Options": "nosniff",
}

_NOTES = {
    "out": "You are signed out.",
    "idle": ("Your session ended after 30 min without activity (a page refreshing itself is not activity): "
             "sign in again to go back to it."),
    "expired": "Your session reached its 12 h limit: sign in again.",
    "changed": "Your account changed (password, role or removal): sign in again.",
    "ended": "Your session was ended: sign in again.",
}


def page(*, next_path: str, user: str = "", error: str = "", note: str = "") -> str:
    """The sign-in page (no script; it names no file, host path or user)."""
    e = html.escape
    banner = (f'<p class="err" role="alert">{e(error)}</p>' if error else "") + \
             (f'<p class="note">{e(note)}</p>' if note else "")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · queueops</title>
<style>
body{{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;background:#f4f6f8;color:#1c2128;margin:0}}
main{{max-width:360px;margin:12vh auto;background:#fff;border:1px solid #d0d7de;border-radius:10px;padding:28px}}
h1{{font-size:1.5rem;margin:0 0 4px}} .sub{{color:#57606a;font-size:.9rem;margin:0 0 20px}}
label{{display:block;font-size:.9rem;margin:12px 0 4px}}
input{{width:100%;box-sizing:border-box;padding:8px 10px;border:1px solid #d0d7de;border-radius:6px;font-size:1rem}}
button{{margin-top:20px;width:100%;padding:9px;border:0;border-radius:6px;background:#1f6feb;color:#fff;
font-size:1rem;cursor:pointer}}
.err{{background:#ffebe9;border:1px solid #ff818266;border-radius:6px;padding:8px 10px;color:#82071e}}
.note{{background:#ddf4ff;border:1px solid #54aeff66;border-radius:6px;padding:8px 10px}}
.foot{{color:#57606a;font-size:.8rem;margin-top:18px}}
:root{{color-scheme:light dark}}
@media (prefers-color-scheme: dark){{
body{{background:#0e1117;color:#e6edf3}} main{{background:#161b22;border-color:#30363d}}
.sub,.foot{{color:#8b949e}} input{{background:#0d1117;color:#e6edf3;border-color:#30363d}}
.err{{background:#3d1117;color:#ffa198}} .note{{background:#0c2d6b;border-color:#1f6feb66}}
}}
</style></head>
<body><main>
<h1>queueops</h1><p class="sub">Health and safe remediation for database tables used as queues</p>
{banner}
<form method="post" action="{e(base_path() + SIGNIN_PATH)}">
<input type="hidden" name="next" value="{e(next_path)}">
<label for="user">User</label>
<input id="user" name="user" autocomplete="username" required maxlength="{_FIELD_MAX}" value="{e(user)}" autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required maxlength="{_FIELD_MAX}">
<button type="submit">Sign in</button>
</form>
<p class="foot">Accounts are managed with <code>queueops users</code> on the console's host.</p>
</main></body></html>"""


def _same_origin(request: Any) -> bool:
    """A form post from another site is refused (the browser names the page's origin)."""
    origin = request.headers.get("origin")
    if origin is None:  # not a browser, or one that does not send it: nothing to compare
        return True
    return urlsplit(origin).netloc == request.headers.get("host", "")


def routes() -> list[Any]:
    """The Starlette routes console/server.py adds to Streamlit's server."""
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
    from starlette.routing import Route

    def html_page(body: str, status: int = 200, extra: dict[str, str] | None = None) -> HTMLResponse:
        return HTMLResponse(body, status_code=status, headers={**_HEADERS, **(extra or {})})

    def local_signin() -> tuple[config_mod.Config, Path] | None:
        cfg = configfile.load()
        path = users_path(cfg)
        return None if path is None or oidc_configured() else (cfg, path)

    def forget_cookie(response: Response, request: Request) -> None:
        response.delete_cookie(COOKIE, path=base_path(), secure=cookie_secure(request), httponly=True,
                               samesite="strict")

    async def show(request: Request) -> Response:
        local = await run_in_threadpool(local_signin)
        if local is None:
            return PlainTextResponse("Local sign-in is not configured on this console.", status_code=404)
        cfg, path = local
        next_path = safe_next(request.query_params.get("next"))
        cookie = request.cookies.get(COOKIE)
        note = _NOTES.get(request.query_params.get("why") or "", "")
        if cookie:
            store = await run_in_threadpool(engine, cfg)
            session = await run_in_threadpool(sessions.get, store, cookie)
            if session is not None and session.problem(datetime.now(UTC)) is None:
                return RedirectResponse(next_path, status_code=303, headers=_HEADERS)
        response = html_page(page(next_path=next_path, note=note))
        if cookie:
            forget_cookie(response, request)  # a dead session's cookie: gone from the browser too
        return response

    async def submit(request: Request) -> Response:
        if not _same_origin(request):
            return PlainTextResponse("Cross-site sign-in refused.", status_code=403, headers=_HEADERS)
        local = await run_in_threadpool(local_signin)
        if local is None:
            return PlainTextResponse("Local sign-in is not configured on this console.", status_code=404)
        cfg, path = local
        try:
            form = await request.form(max_files=0, max_fields=8)
        except Exception:  # noqa: BLE001 - malformed body
            return PlainTextResponse("Bad sign-in request.", status_code=400, headers=_HEADERS)
        name, password = str(form.get("user") or ""), str(form.get("password") or "")
        next_path = safe_next(str(form.get("next") or ""))
        store = await run_in_threadpool(engine, cfg)
        result = await run_in_threadpool(attempt, store, path, name, password, client_address(request))
        if result.outcome == "ok" and result.session_id:
            response = RedirectResponse(next_path, status_code=303, headers=_HEADERS)
            response.set_cookie(COOKIE, result.session_id, max_age=sessions.ABSOLUTE_S, path=base_path(),
                                secure=cookie_secure(request), httponly=True, samesite="strict")
            return response
        status = {"locked": 429, "unavailable": 503}.get(result.outcome, 401)
        extra = {"Retry-After": str(math.ceil(result.retry_after_s))} if result.retry_after_s else {}
        shown = name.strip()[:64] if users.NAME.fullmatch(name.strip()[:64]) else ""
        return html_page(page(next_path=next_path, user=shown, error=result.message), status, extra)

    url = base_path() + SIGNIN_PATH
    return [Route(url, show, methods=["GET"]), Route(url, submit, methods=["POST"])]
