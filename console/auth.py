"""Sign-in and roles for the console.

* When Streamlit's OIDC is configured (an ``[auth]`` section in ``.streamlit/secrets.toml``), users
  sign in with ``st.login()``; their role comes from ``[identity] roles`` of the config (keyed by
  e-mail, else name), and anyone not listed is a viewer.
* Otherwise, when ``[console] users_file`` is set, users sign in on the console's sign-in page
  (:mod:`console.signin`: a name and password checked against that file's scrypt hashes, a
  throttle, and a server-side session whose random id is an HttpOnly cookie).
* With neither, the console is read-only for everyone (role ``viewer``): nobody can act without
  an identity the audit log can name.

Viewers see everything and get no action buttons at all; the action layer checks the role again.

A local session is checked on every script run (:func:`gate`): the cookie's session must exist in
the store, not be ended, idle (30 min) or past its 12 h limit, and its user must still be in the
users file with the same password. A page load (a new browser tab, a reload) also requires the
same role: a changed role ends the session there. A tab already open keeps showing the role it
loaded with, but every action re-reads the role at the moment it runs (:func:`actor_now`), so a
demoted or removed user is refused and audited with the role now in force.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from datetime import UTC, datetime
from typing import Literal, NoReturn

import streamlit as st

from console import configfile, signin
from queueops import roles, users
from queueops.config import Config
from queueops.store import sessions

KEY = "qo_identity"
COOKIE = signin.COOKIE
_LOADED = "qo_session_loaded"  # (the session's id hash, the role it loaded with)
_SIGNED_OUT = "qo_signed_out"

log = logging.getLogger("queueops.console.auth")


@dataclasses.dataclass(frozen=True)
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


def current() -> Identity | None:
    raw = st.session_state.get(KEY)
    if isinstance(raw, Identity):
        return raw
    if isinstance(raw, dict):  # set by tests / AppTest as a plain dict
        return Identity(raw["name"], raw["role"], raw.get("method", "local"))
    return None


def _cookie() -> str | None:
    try:
        value = st.context.cookies.get(COOKIE)
    except Exception:  # noqa: BLE001 - no browser request
        return None
    return value if isinstance(value, str) and value else None  # (AppTest has no real cookies)


def gate(cfg: Config) -> Identity:
    """Return who is signed in, or send the browser to the sign-in page and stop the script."""
    if signin.oidc_configured():
        return _oidc(cfg)
    if not cfg.console.users_file:
        ident = Identity("anonymous", "viewer", "anonymous")
        st.session_state[KEY] = ident
        return ident
    return _local(cfg)


# ---------------------------------------------------------------------------------------------
# Local sessions


@dataclasses.dataclass(frozen=True)
class _Check:
    session: sessions.Session | None
    user: users.User | None
    problem: str | None  # None: valid; else one of signin._NOTES' keys, or "" (no session at all)


def _check(cfg: Config, cookie: str | None, loaded: tuple[str, str] | None, now: datetime) -> _Check:
    """Whether the cookie's session may be used now (see the module docstring for the rules)."""
    if not cookie:
        return _Check(None, None, "")
    store = signin.engine(cfg)
    session = sessions.get(store, cookie)
    if session is None:
        return _Check(None, None, "")
    problem = session.problem(now)
    if problem is not None:
        return _Check(session, None, problem.split(" ")[0])
    path = signin.users_path(cfg)
    try:
        user = users.load(path).get(session.user_name) if path else None
    except users.UsersError as exc:
        log.error("users file unreadable: %s", exc)
        return _Check(session, None, "unavailable")
    if user is None:
        return _Check(session, None, "changed")
    if users.fingerprint(user) != session.fingerprint:
        first_load = loaded is None or loaded[0] != session.id_hash
        same_password = any(users.fingerprint(dataclasses.replace(user, role=r)) == session.fingerprint
                            for r in users.ROLES)
        if first_load or not same_password:
            return _Check(session, user, "changed")  # a new password; at a page load, a new role too
    return _Check(session, user, None)


def _local(cfg: Config) -> Identity:
    if not signin.ROUTES_INSTALLED:
        _brand()
        st.error("Local sign-in needs the console's sign-in page, which `queueops serve` adds to the server: "
                 "start the console with `queueops serve` (not `streamlit run console/app.py`).")
        st.stop()
    if st.session_state.pop(_SIGNED_OUT, False):
        _forget()
        _to_signin("out")
    now = datetime.now(UTC)
    cookie = _cookie()
    loaded = st.session_state.get(_LOADED)
    check = _check(cfg, cookie, loaded, now)
    if check.problem == "unavailable":
        _brand()
        st.error("Sign-in is unavailable: the console's users file cannot be read. The console's log says why.")
        st.stop()
    if check.problem is not None or check.session is None or check.user is None:
        if check.session is not None and check.session.ended_at is None:
            _end(cfg, cookie, check.session.user_name, check.problem or "ended", now)
        _forget()
        _to_signin(check.problem or None)
    sessions.touch(signin.engine(cfg), check.session, now)
    first_load = loaded is None or loaded[0] != check.session.id_hash
    role = check.user.role if first_load else loaded[1]
    ident = Identity(check.user.name, role, "local")  # type: ignore[arg-type]
    st.session_state[_LOADED] = (check.session.id_hash, role)
    st.session_state[KEY] = ident
    return ident


def still_signed_in(cfg: Config) -> bool:
    """For a fragment that refreshes itself (it does not pass through :func:`gate`): is the local
    session still usable? (It does not count as activity: an unattended page still goes idle.)"""
    ident = current()
    loaded = st.session_state.get(_LOADED)
    if ident is None or ident.method != "local" or loaded is None:
        return ident is not None  # no local session checked by the gate in this run (OIDC, tests)
    return _check(cfg, _cookie(), loaded, datetime.now(UTC)).problem is None


def _end(cfg: Config, cookie: str | None, user_name: str, why: str, now: datetime) -> None:
    try:
        store = signin.engine(cfg)
        if sessions.end(store, cookie, why, now) is not None:
            sessions.log(store, now, user_name, _address(), "signed-out",
                         "signed out" if why == "out" else f"session ended: {why}")
    except Exception as exc:  # noqa: BLE001 - the store is away: the session cannot be used either
        log.warning("could not end a session: %s", exc)


def _address() -> str:
    try:
        return st.context.ip_address or "local"
    except Exception:  # noqa: BLE001
        return ""


def _forget() -> None:
    for key in (KEY, _LOADED):
        st.session_state.pop(key, None)


def _to_signin(why: str | None) -> NoReturn:
    """Send the browser to the sign-in page (back to this page afterwards) and stop."""
    url = signin.signin_url(**({"why": why} if why else {}))
    _brand()
    st.write("Sign in to see the queues.")
    st.link_button("Sign in", url, type="primary", icon=":material/login:")
    # The page goes on its own; the button is there if a browser does not. `next` is this page.
    target = json.dumps(url).replace("<", "\\u003c")
    st.html("<script>(function(){const u=new URL(" + target + ",location.href);"
            "u.searchParams.set('next',location.pathname+location.search);location.replace(u.toString());})()"
            "</script>", unsafe_allow_javascript=True, width="content")
    st.stop()
    raise AssertionError("unreachable")


# ---------------------------------------------------------------------------------------------
# OIDC


def _oidc_names() -> tuple[str, str]:
    user = st.user
    email = str(user.get("email") or "")
    return email, str(user.get("name") or "")


def _oidc(cfg: Config) -> Identity:
    user = st.user
    if not user.is_logged_in:
        _brand()
        st.write("Sign in with your organisation's account to see the queues.")
        if st.button("Sign in", type="primary", icon=":material/login:"):
            st.login()
        st.stop()
    email, display = _oidc_names()
    name = email or display or str(user.get("sub") or "unknown")
    ident = Identity(name, role_for(cfg, email, display), "oidc")
    st.session_state[KEY] = ident
    return ident


def _brand() -> None:
    st.markdown("## :material/monitor_heart: queueops")
    st.caption("Health and safe remediation for database tables used as queues")


# ---------------------------------------------------------------------------------------------
# Acting and signing out


def actor_now(cfg: Config, ident: Identity) -> roles.Actor:
    """The actor for an action about to run, with the role in force *now*: the users file read
    again for a local user (one no longer in it is a viewer, as anyone unlisted is), the config's
    ``[identity] roles`` for an OIDC user; the role the page loaded with does not count."""
    source = f"console:{ident.method}"
    role: Literal["viewer", "operator"] = "viewer"
    if ident.method == "local":
        path = signin.users_path(cfg)
        try:
            user = users.load(path).get(ident.name) if path else None
        except users.UsersError as exc:
            log.error("users file unreadable at an action: %s", exc)
            user = None
        role = user.role if user is not None else "viewer"
    elif ident.method == "oidc":
        try:
            names: tuple[str, ...] = _oidc_names()
        except Exception:  # noqa: BLE001 - no OIDC user in this run (tests)
            names = ()
        role = role_for(cfg, *names, ident.name)
    return roles.Actor(ident.name, role, source)


def after_action(ident: Identity, actor: roles.Actor) -> None:
    """An action found the role changed: the page shows the new one from now on."""
    if actor.role != ident.role:
        st.session_state[KEY] = dataclasses.replace(ident, role=actor.role)
        loaded = st.session_state.get(_LOADED)
        if loaded:
            st.session_state[_LOADED] = (loaded[0], actor.role)


def sign_out() -> None:
    ident = current()
    _forget()
    if ident is not None and ident.method == "oidc":
        st.logout()
        return
    if ident is not None and ident.method == "local":
        _end(configfile.load(), _cookie(), ident.name, "out", datetime.now(UTC))
    st.session_state[_SIGNED_OUT] = True
