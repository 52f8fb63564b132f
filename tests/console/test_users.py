"""The local users file (scrypt hashes, their cost and the rehash at sign-in), the CLI that manages it,
and what a console session remembers of its user (the fingerprint)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from console import signin
from console.auth import role_for
from queueops import users
from queueops.commands.serve import config_options, streamlit_command
from queueops.config import parse
from queueops.store import open_engine, sessions
from tests.conftest import ROOT


def test_add_verify_and_the_file_holds_no_password(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    users.add(path, "alice", "correct horse", "operator")
    users.add(path, "bob", "battery staple", "viewer")
    text = path.read_text()
    assert "correct horse" not in text and "battery staple" not in text
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    table = users.load(path)
    assert users.verify(table, "alice", "correct horse").role == "operator"  # type: ignore[union-attr]
    assert users.verify(table, "alice", "wrong") is None
    assert users.verify(table, "nobody", "correct horse") is None
    assert table["alice"].salt != table["bob"].salt  # per-user salt


def test_same_password_different_hashes(tmp_path: Path) -> None:
    a = users.make_user("a", "same-password", "viewer")
    b = users.make_user("b", "same-password", "viewer")
    assert a.hash != b.hash


def test_bad_input_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    with pytest.raises(users.UsersError, match="user name"):
        users.add(path, 'x"; DROP', "long enough", "viewer")
    with pytest.raises(users.UsersError, match="role"):
        users.add(path, "carol", "long enough", "admin")
    with pytest.raises(users.UsersError, match="too short"):
        users.add(path, "carol", "short", "viewer")
    users.add(path, "carol", "long enough", "viewer")
    with pytest.raises(users.UsersError, match="already exists"):
        users.add(path, "carol", "long enough", "viewer")
    path.write_text('[users.dave]\nrole = "root"\nsalt = "00"\nhash = "00"\n')
    with pytest.raises(users.UsersError, match=r"users\.dave: role = 'root'"):
        users.load(path)
    with pytest.raises(users.UsersError, match="not found"):
        users.load(tmp_path / "missing.toml")


def test_demo_users_are_created_once_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    assert users.ensure_demo_users(path)
    table = users.load(path)
    for name, pw, role in users.DEMO_USERS:
        assert users.verify(table, name, pw).role == role  # type: ignore[union-attr]
    users.remove(path, "viewer")
    assert not users.ensure_demo_users(path)
    assert "viewer" not in users.load(path)


def test_users_cli(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"

    def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "queueops.cli", "users", "--file", str(path), *args],
                              input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60)

    r = cli("add", "erin", "--role", "operator", "--password-stdin", stdin="erin-password\n")
    assert r.returncode == 0, r.stderr
    assert cli("list").stdout.strip() == "erin\toperator"
    assert users.verify(users.load(path), "erin", "erin-password") is not None
    r = cli("passwd", "erin", "--password-stdin", stdin="new-password\n")
    assert r.returncode == 0, r.stderr
    assert users.verify(users.load(path), "erin", "new-password").role == "operator"  # type: ignore[union-attr]
    r = cli("add", "bad name", "--password-stdin", stdin="whatever-pass\n")
    assert r.returncode == 1 and "user name" in r.stderr
    assert cli("remove", "erin").returncode == 0
    assert cli("remove", "erin").returncode == 1


def test_new_hashes_cost_2_17_and_an_old_entry_is_rehashed_at_its_next_sign_in(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    t = time.perf_counter()
    new = users.add(path, "fresh", "fresh-password", "viewer")
    one_hash_s = time.perf_counter() - t
    assert (new.n, new.r, new.p) == (2 ** 17, 8, 1) and users.load(path)["fresh"].n == 2 ** 17
    assert not users.needs_rehash(new)
    print(f"one scrypt at N=2^17: {one_hash_s:.2f} s")
    # An entry written before (N = 2^14), with a session open on it.
    old = users.add(path, "alice", "alice-password", "operator", n=2 ** 14)
    assert users.needs_rehash(old)
    store = open_engine(f"sqlite:///{tmp_path / 'store.db'}")
    now = datetime.now(UTC)
    other = sessions.create(store, "alice", users.fingerprint(old), now)
    got = signin.attempt(store, path, "alice", "alice-password", "198.51.100.7", now=now)
    assert got.outcome == "ok" and got.session_id
    entry = users.load(path)["alice"]
    assert (entry.n, entry.role) == (2 ** 17, "operator") and entry.salt != old.salt and entry.hash != old.hash
    assert users.verify(users.load(path), "alice", "alice-password") == entry
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert not list(tmp_path.glob(".users-*"))  # written through a temp file, renamed
    # Same password, same role: the rehash ends no session (the one opened before is re-fingerprinted).
    assert sessions.get(store, other).fingerprint == users.fingerprint(entry)  # type: ignore[union-attr]
    assert sessions.get(store, got.session_id).fingerprint == users.fingerprint(entry)  # type: ignore[union-attr]
    # A cheap entry edited meanwhile is not overwritten by a rehash of the one verified before.
    stale = users.add(path, "bob", "bob-password", "viewer", n=2 ** 14)
    users.add(path, "bob", "bob-password", "operator", replace=True, n=2 ** 14)
    assert users.rehash(path, stale, "bob-password") is stale and users.load(path)["bob"].role == "operator"


def test_the_fingerprint_changes_with_the_password_the_role_and_the_cost() -> None:
    u = users.make_user("carol", "carol-password", "operator", n=2 ** 10)
    assert users.fingerprint(u) == users.fingerprint(dataclasses.replace(u))
    assert users.fingerprint(u) != users.fingerprint(dataclasses.replace(u, role="viewer"))
    assert users.fingerprint(u) != users.fingerprint(users.make_user("carol", "carol-password", "operator", n=2 ** 10))
    assert users.fingerprint(u) != users.fingerprint(dataclasses.replace(u, n=2 ** 11))


def test_oidc_users_are_viewers_unless_listed() -> None:
    cfg = parse({"targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h/d"}],
                 "identity": {"roles": {"ops@example.com": "operator"}, "default_role": "operator"}})
    assert role_for(cfg, "ops@example.com") == "operator"
    assert role_for(cfg, "someone@example.com", "Some One") == "viewer"


def test_serve_passes_the_project_theme_and_an_absolute_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = config_options()
    assert opts["theme.primaryColor"] == "#1f6feb"
    # No theme.base: the console follows the browser's light or dark setting, each with its colours.
    assert "theme.base" not in opts and opts["theme.dark.backgroundColor"] and opts["theme.light.backgroundColor"]
    monkeypatch.chdir(tmp_path)
    cmd, env = streamlit_command("cfg/queueops.toml", 8123)
    assert env["QUEUEOPS_CONFIG"] == str(tmp_path / "cfg" / "queueops.toml")
    joined = " ".join(cmd)
    assert "--theme.primaryColor #1f6feb" in joined and "--server.port 8123" in joined
    assert cmd.count("--server.headless") == 1
