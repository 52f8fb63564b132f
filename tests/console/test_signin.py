"""The console's sign-in without a browser: the throttle, the sign-in log and the sessions in a real
store (SQLite and PostgreSQL), the gate's session check, and the role read at the moment of acting.

The sign-in procedure is :func:`console.signin.attempt`, exactly what the sign-in endpoint runs;
times are passed in, so a 15-minute lock is checked without waiting for it.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from psycopg import sql
from sqlalchemy import Engine, select
from streamlit.testing.v1 import AppTest

from console import auth, signin
from queueops import roles, users
from queueops.config import parse
from queueops.store import open_engine, sessions
from queueops.store.schema import audit_log, console_sessions, signin_log, signin_throttle
from tests.conftest import Lab
from tests.console.conftest import TIMEOUT, ConsoleEnv, count_stuck, stuck_leases, texts

CHEAP = 2 ** 10  # scrypt cost for the throwaway users of these tests (the real cost is tested in test_users)
T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def pg_url(lab: Lab) -> Iterator[str]:
    name = f"signin_{uuid.uuid4().hex[:8]}"
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield f"postgresql+psycopg://queueops:{lab.password}@127.0.0.1:{lab.info.port}/{name}"
    with lab.connect() as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'store.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    yield url
    engine = open_engine(url)
    with engine.begin() as conn:
        for table in (console_sessions, signin_throttle, signin_log):
            conn.execute(table.delete())
    engine.dispose()


def _users(tmp_path: Path, *names: str, role: str = "operator") -> Path:
    path = tmp_path / "users.toml"
    users.save(path, {**users.load_or_empty(path),
                      **{n: users.make_user(n, f"{n}-password", role, n=CHEAP) for n in names}})
    return path


def _log(store: Engine) -> list[tuple[str, str, str]]:
    return [(r["user_name"], r["address"], r["outcome"]) for r in reversed(sessions.read_log(store))]


def test_failures_lock_the_user_for_doubling_times_and_the_lock_outlives_the_process(store_url: str,
                                                                                     tmp_path: Path) -> None:
    path = _users(tmp_path, "alice")
    store = open_engine(store_url)
    addr = "198.51.100.1"
    for i in range(3):  # three free failures
        got = signin.attempt(store, path, "alice", "guess", addr, now=T0 + timedelta(seconds=i))
        assert got.outcome == "failed" and got.retry_after_s == 0
    now = T0 + timedelta(seconds=10)
    waits = []
    for _ in range(6):  # each failure after the lock ends locks for twice as long
        got = signin.attempt(store, path, "alice", "guess", addr, now=now)
        assert got.outcome == "failed"
        waits.append(got.retry_after_s)
        # During the lock even the right password is refused, without being checked or counted.
        locked = signin.attempt(store, path, "alice", "alice-password", addr, now=now + timedelta(seconds=0.5))
        assert locked.outcome == "locked" and locked.session_id is None and "try again in" in locked.message
        now += timedelta(seconds=got.retry_after_s + 0.01)
    assert waits == [1, 2, 4, 8, 16, 32]
    assert sessions.failures(store, "user:alice", now) == 9
    # Another process (a reload, a new browser, a restarted console) sees the same lock.
    again = open_engine(store_url)
    got = signin.attempt(again, path, "alice", "guess", addr, now=now)
    assert got.outcome == "failed" and got.retry_after_s == 64
    assert signin.attempt(again, path, "alice", "alice-password", "203.0.113.9",  # from anywhere
                          now=now + timedelta(seconds=63)).outcome == "locked"
    # The lock never exceeds 15 min; after it a right password signs in and clears the user's count.
    assert sessions.lock_s("user", 40) == sessions.MAX_LOCK_S == 900
    ok = signin.attempt(again, path, "alice", "alice-password", addr, now=now + timedelta(seconds=65))
    assert ok.outcome == "ok" and ok.session_id
    assert sessions.failures(again, "user:alice", now + timedelta(seconds=65)) == 0
    assert sessions.failures(again, f"addr:{addr}", now + timedelta(seconds=65)) == 10  # the address keeps its count
    outcomes = [o for _, _, o in _log(again)]
    assert outcomes.count("failed") == 10 and outcomes.count("locked") == 7 and outcomes[-1] == "ok"


def test_one_address_guessing_many_names_is_locked_whatever_the_name(store_url: str, tmp_path: Path) -> None:
    names = [f"user{i}" for i in range(12)]
    path = _users(tmp_path, *names)
    store = open_engine(store_url)
    addr = "192.0.2.66"
    for i, name in enumerate(names[:10]):  # ten free failures per address, each on a fresh name
        assert signin.attempt(store, path, name, "guess", addr, now=T0 + timedelta(seconds=i)).retry_after_s == 0
    got = signin.attempt(store, path, names[10], "guess", addr, now=T0 + timedelta(seconds=20))
    assert got.outcome == "failed" and got.retry_after_s == 1
    # A name never tried from there, with its right password: locked (the address is).
    assert signin.attempt(store, path, names[11], "user11-password", addr,
                          now=T0 + timedelta(seconds=20.5)).outcome == "locked"
    # The same user from another address is not.
    assert signin.attempt(store, path, names[11], "user11-password", "192.0.2.67",
                          now=T0 + timedelta(seconds=20.5)).outcome == "ok"
    # An unknown name is throttled like a known one (no enumeration through the throttle either).
    for i in range(4):
        got = signin.attempt(store, path, "nobody", "guess", "192.0.2.68", now=T0 + timedelta(seconds=30 + i * 0.1))
    assert got.outcome == "failed" and got.retry_after_s == 1 and got.message.startswith("Unknown user or wrong password")
    # Failures are forgotten after an hour without one.
    assert sessions.failures(store, f"addr:{addr}", T0 + timedelta(seconds=20) + timedelta(hours=1, seconds=1)) == 0


def test_every_attempt_is_logged_without_the_password_and_hostile_names_are_not_kept(store_url: str,
                                                                                     tmp_path: Path) -> None:
    path = _users(tmp_path, "erin")
    store = open_engine(store_url)
    hostile = "erin'; DROP TABLE signin_log; --"
    signin.attempt(store, path, "erin", "secret-guess-1", "10.0.0.1", now=T0)
    signin.attempt(store, path, hostile, "secret-guess-2", "10.0.0.1", now=T0 + timedelta(seconds=1))
    signin.attempt(store, path, "erin", "erin-password", "10.0.0.2", now=T0 + timedelta(seconds=2))
    assert _log(store) == [("erin", "10.0.0.1", "failed"), ("(not a valid user name)", "10.0.0.1", "failed"),
                           ("erin", "10.0.0.2", "ok")]
    with store.connect() as conn:
        everything = repr([tuple(r) for t in (signin_log, console_sessions, signin_throttle)
                           for r in conn.execute(select(t))])
    for secret in ("secret-guess-1", "secret-guess-2", "erin-password", "DROP TABLE"):
        assert secret not in everything


def test_a_session_lives_30_min_idle_and_12_h_at_most_and_its_id_is_not_in_the_store(store_url: str) -> None:
    store = open_engine(store_url)
    sid = sessions.create(store, "frank", "fp", T0, address="10.1.1.1")
    assert len(sid) >= 43  # 256 random bits
    with store.connect() as conn:
        rows = [tuple(r) for r in conn.execute(select(console_sessions))]
    assert sid not in repr(rows) and rows[0][0] == sessions.hash_id(sid)
    s = sessions.get(store, sid)
    assert s is not None and s.problem(T0 + timedelta(minutes=29)) is None
    assert s.problem(T0 + timedelta(minutes=31)) == "idle"
    # Seen every 20 min, it still ends at 12 h.
    now = T0
    while now + timedelta(minutes=20) < T0 + timedelta(hours=12):
        now += timedelta(minutes=20)
        sessions.touch(store, sessions.get(store, sid), now)  # type: ignore[arg-type]
        assert sessions.get(store, sid).problem(now) is None  # type: ignore[union-attr]
    assert sessions.get(store, sid).problem(T0 + timedelta(hours=12)) == "expired"  # type: ignore[union-attr]
    # Signed out: ended for good; a made-up id is no session at all.
    assert sessions.end(store, sid, "out", now) is not None
    assert sessions.get(store, sid).problem(now).startswith("ended")  # type: ignore[union-attr]
    assert sessions.end(store, sid, "out", now) is None
    assert sessions.get(store, "made-up") is None and sessions.get(store, "x" * 10_000) is None


def _cfg(tmp_path: Path, users_path: Path) -> object:
    return parse({"targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h/d"}],
                  "store": {"url": f"sqlite:///{tmp_path / 'store.db'}"},
                  "console": {"users_file": str(users_path)}}, file=str(tmp_path / "q.toml"))


def test_the_gate_ends_a_session_on_a_new_password_or_removal_and_on_a_new_role_at_the_next_load(
        tmp_path: Path) -> None:
    path = _users(tmp_path, "gina", "hank")
    cfg = _cfg(tmp_path, path)
    store = signin.engine(cfg)  # type: ignore[arg-type]
    now = datetime.now(UTC)
    sid = signin.attempt(store, path, "gina", "gina-password", "10.0.0.1", now=now).session_id
    first = auth._check(cfg, sid, None, now)  # type: ignore[arg-type]
    assert first.problem is None and first.user.role == "operator"  # type: ignore[union-attr]
    loaded = (first.session.id_hash, "operator")  # type: ignore[union-attr]
    # Demoted: the open tab's session holds (its next action is refused, see below); a load ends it.
    table = users.load(path)
    users.save(path, {**table, "gina": dataclasses.replace(table["gina"], role="viewer")})
    assert auth._check(cfg, sid, loaded, now).problem is None  # type: ignore[arg-type]
    assert auth._check(cfg, sid, None, now).problem == "changed"  # type: ignore[arg-type]
    # A new password ends it at once, open tab or not.
    sid2 = signin.attempt(store, path, "hank", "hank-password", "10.0.0.1", now=now).session_id
    loaded2 = (sessions.hash_id(sid2), "operator")  # type: ignore[arg-type]
    assert auth._check(cfg, sid2, loaded2, now).problem is None  # type: ignore[arg-type]
    users.add(path, "hank", "hank-password-2", "operator", replace=True, n=CHEAP)
    assert auth._check(cfg, sid2, loaded2, now).problem == "changed"  # type: ignore[arg-type]
    # Removed: ended at once too.
    sid3 = signin.attempt(store, path, "gina", "gina-password", "10.0.0.1", now=now).session_id
    assert auth._check(cfg, sid3, None, now).problem is None  # type: ignore[arg-type]
    users.remove(path, "gina")
    assert auth._check(cfg, sid3, (sessions.hash_id(sid3), "viewer"), now).problem == "changed"  # type: ignore[arg-type]
    # No cookie, or a cookie naming no session: nothing to end, just sign in.
    assert auth._check(cfg, None, None, now).problem == ""  # type: ignore[arg-type]
    assert auth._check(cfg, "forged", None, now).problem == ""  # type: ignore[arg-type]


def test_the_redirect_after_sign_in_stays_on_the_console_and_the_cookie_is_secure_over_tls() -> None:
    for bad in ("https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)",
                "/queueops/signin?next=/", "", None, "/x\r\nSet-Cookie: a=b", "evil"):
        assert signin.safe_next(bad) == "/", bad
    assert signin.safe_next("/queue?queue=lease") == "/queue?queue=lease"
    https = SimpleNamespace(url=SimpleNamespace(scheme="https"))
    http = SimpleNamespace(url=SimpleNamespace(scheme="http"))
    assert signin.cookie_secure(https) and not signin.cookie_secure(http)
    assert "users" not in signin.page(next_path="/").replace("queueops users", "")  # no file named on the page


# -- the role at the moment of acting (AppTest, real lab): issue 30 item 2 ------------------------


def _queue_page(name: str) -> AppTest:
    def _page() -> None:
        from console.views import queue_detail

        queue_detail.render()

    at = AppTest.from_function(_page, default_timeout=TIMEOUT)
    at.session_state["qo_identity"] = {"name": name, "role": "operator", "method": "local"}
    at.query_params["queue"] = "lease"
    return at.run()


@pytest.mark.parametrize("change", ["demoted", "removed"])
def test_an_operator_demoted_or_removed_after_the_preview_is_refused_and_audited_with_the_role_now(
        env: ConsoleEnv, change: str) -> None:
    name = f"op-{change}"
    users.add(env.users_path, name, f"{name}-password", "operator", n=CHEAP)
    try:
        stuck_leases(env, 3)
        at = _queue_page(name)
        at.button(key="FormSubmitter:act_form_lease_requeue-Preview").click().run()
        assert not at.exception and at.button(key="act_run") is not None
        if change == "demoted":
            table = users.load(env.users_path)
            users.save(env.users_path, {**table, name: dataclasses.replace(table[name], role="viewer")})
        else:
            users.remove(env.users_path, name)
        at.button(key="act_run").click().run()
        assert not at.exception
        assert count_stuck(env) == 3  # nothing ran
        assert any(f"by {name} (viewer): **refused**" in w.value for w in at.warning), texts(at)
        store = open_engine(env.config())
        with store.connect() as conn:
            rec = conn.execute(select(audit_log).order_by(audit_log.c.id.desc())).first()._mapping
        assert (rec["user_name"], rec["role"], rec["outcome"], rec["rows_affected"]) == (name, "viewer", "refused", 0)
        assert "the console users file" in rec["error"]
        # The page now shows the role in force: no action control any more.
        at.run()
        assert not [b for b in at.button if b.key in ("act_run",) or "Preview" in (b.label or "")]
    finally:
        users.remove(env.users_path, name)


def test_the_actor_is_resolved_when_acting_for_local_and_oidc_users(tmp_path: Path) -> None:
    path = _users(tmp_path, "ivy")
    cfg = parse({"targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h/d"}],
                 "console": {"users_file": str(path)}, "identity": {"roles": {"ops@example.com": "operator"}}},
                file=str(tmp_path / "q.toml"))
    ivy = auth.Identity("ivy", "operator", "local")
    assert auth.actor_now(cfg, ivy).role == "operator"
    users.add(path, "ivy", "ivy-password", "viewer", replace=True, n=CHEAP)
    assert auth.actor_now(cfg, ivy) == roles.Actor("ivy", "viewer", "console:local")
    users.remove(path, "ivy")
    assert auth.actor_now(cfg, ivy).role == "viewer"  # not listed: a viewer, as anyone unlisted is
    oidc = auth.Identity("ops@example.com", "viewer", "oidc")  # loaded as a viewer, listed since
    assert auth.actor_now(cfg, oidc).role == "operator"
    assert auth.actor_now(cfg, auth.Identity("x@example.com", "operator", "oidc")).role == "viewer"



def test_the_cli_lists_sign_ins_and_unlocks_a_user(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    path = _users(tmp_path, "judy")
    config = tmp_path / "q.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "store.db"}"\n\n[console]\nusers_file = "{path}"\n\n'
                      '[[targets]]\nname = "t"\ndialect = "postgresql"\nurl = "postgresql://u@h/d"\n')
    store = open_engine(f"sqlite:///{tmp_path / 'store.db'}")
    now = datetime.now(UTC)
    for _ in range(4):
        signin.attempt(store, path, "judy", "guess", "10.9.9.9", now=now)
    sid = signin.attempt(store, path, "judy", "judy-password", "10.9.9.8", now=now + timedelta(hours=2)).session_id

    def cli(command: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "queueops.cli", command, "--config", str(config), *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)

    out = cli("audit", "--sign-ins", "--user", "judy").stdout
    assert out.count(" failed ") == 4 and out.count(" ok ") == 1 and "10.9.9.9" in out and "guess" not in out
    for _ in range(4):
        signin.attempt(store, path, "judy", "guess", "10.9.9.9", now=now + timedelta(hours=2))
    r = cli("users", "unlock", "judy", "--sign-out")
    assert r.returncode == 0 and "failed sign-ins cleared" in r.stdout and "1 console session(s) ended" in r.stdout
    assert sessions.failures(store, "user:judy", now + timedelta(hours=2)) == 0
    assert sessions.get(store, sid).ended_at is not None  # type: ignore[union-attr]
