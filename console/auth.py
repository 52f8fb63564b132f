"""Sign-in and roles for the console.

* When Streamlit's OIDC is configured (an ``[auth]`` section in ``.streamlit/secrets.toml``), users
  sign in with ``st.login()``; their role comes from ``[identity] roles`` of the config (keyed by
  e-mail, else name), and anyone not listed is a viewer.
* Otherwise, when ``[console] users_file`` is set, users sign in with a name and password checked
  against that file (scrypt hashes, :mod:`queueops.users`).
* With neither, the console is read-only for everyone (role ``viewer``): nobody can act without
  an identity the audit log can name.

Viewers see everything and get no action buttons at all; the action layer checks the role again.

A local sign-in survives a page reload through a signed cookie (HMAC-SHA256 over the name and an
expiry, with a key that lives only in the server process: restarting the console signs everyone
out). The cookie names the user only; the role is read from the users file every time, so a
removed user or a changed role takes effect on the next page load.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import time
from dataclasses import dataclass
from typing import Literal

import streamlit as st

from queueops import users
from queueops.config import Config

KEY = "qo_identity"
FAILS = "qo_signin_failures"
COOKIE = "queueops_session"
SESSION_S = 12 * 3600
_SET_COOKIE = "qo_set_cookie"
_SIGNED_OUT = "qo_signed_out"


@dataclass(frozen=True)
class Identity:
    name: str
    role: Literal["viewer", "operator"]
    method: Literal["oidc", "local", "anonymous"]

    @property
    def can_act(self) -> bool:
        return self.role == "operator"


def role_for(cfg: Config, *names: str | None) -> Literal["viewer", "operator"]:
    """The role [identity] roles gives the first of ``names`` listed there; viewer otherwise."""
    for name in names:
        if name and name in cfg.identity.roles:
            return cfg.identity.roles[name]
    return "viewer"


def oidc_configured() -> bool:
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file at all
        return False


def current() -> Identity | None:
    raw = st.session_state.get(KEY)
    if isinstance(raw, Identity):
        return raw
    if isinstance(raw, dict):  # set by tests / AppTest as a plain dict
        return Identity(raw["name"], raw["role"], raw.get("method", "local"))
    return None


def make_token(key: bytes, name: str, now: float, ttl_s: float = SESSION_S) -> str:
    """``base64(name|expiry).hmac`` -- the whole cookie value (URL-safe characters only)."""
    payload = base64.urlsafe_b64encode(f"{name}|{int(now + ttl_s)}".encode()).decode().rstrip("=")
    sig = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    return f"{payload}.{sig}"


def read_token(key: bytes, token: str | None, now: float) -> str | None:
    """The user a valid, unexpired token names; ``None`` for anything else."""
    if not token or token.count(".") != 1:
        return None
    payload, sig = token.split(".")
    want = hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, sig):
        return None
    try:
        name, _, expiry = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode().rpartition("|")
        if float(expiry) < now:
            return None
    except (ValueError, UnicodeDecodeError):
        return None
    return name or None


@st.cache_resource(show_spinner=False)
def _cookie_key() -> bytes:
    return os.urandom(32)


def _from_cookie(cfg: Config) -> Identity | None:
    if st.session_state.get(_SIGNED_OUT):
        return None
    try:
        token = st.context.cookies.get(COOKIE)
    except Exception:  # noqa: BLE001 - no browser request (AppTest)
        return None
    name = read_token(_cookie_key(), token, time.time())
    if name is None:
        return None
    try:
        user = users.load(cfg.path(cfg.console.users_file or "")).get(name)
    except users.UsersError:
        return None
    return Identity(user.name, user.role, "local") if user else None


def _cookie_script(value: str, max_age: int) -> None:
    # The value is our own token (URL-safe base64 and hex) or empty: nothing to escape.
    st.html(f"<script>document.cookie = '{COOKIE}={value}; path=/; max-age={max_age}; SameSite=Strict';</script>",
            unsafe_allow_javascript=True, width="content")


def gate(cfg: Config) -> Identity:
    """Return who is signed in, or render the sign-in screen and stop the script."""
    if oidc_configured():
        return _oidc(cfg)
    ident = current()
    if ident is None and cfg.console.users_file:
        ident = _from_cookie(cfg)
        if ident is not None:
            st.session_state[KEY] = ident
    if ident is not None:
        token = st.session_state.pop(_SET_COOKIE, None)
        if token:
            _cookie_script(token, SESSION_S)
        return ident
    if not cfg.console.users_file:
        ident = Identity("anonymous", "viewer", "anonymous")
        st.session_state[KEY] = ident
        return ident
    if st.session_state.get(_SIGNED_OUT):
        _cookie_script("", 0)
    _local_form(cfg)
    st.stop()
    raise AssertionError("unreachable")


def _oidc(cfg: Config) -> Identity:
    user = st.user
    if not user.is_logged_in:
        _brand()
        st.write("Sign in with your organisation's account to see the queues.")
        if st.button("Sign in", type="primary", icon=":material/login:"):
            st.login()
        st.stop()
    email = str(user.get("email") or "")
    name = email or str(user.get("name") or user.get("sub") or "unknown")
    ident = Identity(name, role_for(cfg, email, str(user.get("name") or "")), "oidc")
    st.session_state[KEY] = ident
    return ident


def _brand() -> None:
    st.markdown("## :material/monitor_heart: queueops")
    st.caption("Health and safe remediation for database tables used as queues")


def _local_form(cfg: Config) -> None:
    path = cfg.path(cfg.console.users_file or "")
    _, mid, _ = st.columns([1, 1.2, 1])
    with mid:
        _brand()
        with st.form("signin", border=True):
            name = st.text_input("User", key="qo_user", autocomplete="username")
            password = st.text_input("Password", type="password", key="qo_password",
                                     autocomplete="current-password")
            submitted = st.form_submit_button("Sign in", type="primary", use_container_width=True)
        if submitted:
            try:
                table = users.load(path)
            except users.UsersError as exc:
                st.error(str(exc))
                return
            fails = int(st.session_state.get(FAILS, 0))
            if fails >= 3:  # slow down guessing: 1 s more per failure after the third
                time.sleep(min(10, fails - 2))
            user = users.verify(table, name.strip(), password)
            if user is None:
                st.session_state[FAILS] = fails + 1
                st.error("Unknown user or wrong password.")
                return
            st.session_state.pop(FAILS, None)
            st.session_state[KEY] = Identity(user.name, user.role, "local")
            st.session_state[_SET_COOKIE] = make_token(_cookie_key(), user.name, time.time())
            st.session_state.pop(_SIGNED_OUT, None)
            st.rerun()
        st.caption(f"Accounts: `{path}` (manage with `queueops users`).")


def sign_out() -> None:
    ident = current()
    st.session_state.pop(KEY, None)
    st.session_state[_SIGNED_OUT] = True
    if ident is not None and ident.method == "oidc":
        st.logout()
