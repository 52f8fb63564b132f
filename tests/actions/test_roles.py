"""Who acts, with which role: config user, OS user, the console's signed-in user."""

from __future__ import annotations

from queueops import config as config_mod
from queueops import roles

BASE = {"targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h/db"}]}


def cfg(identity: dict) -> config_mod.Config:
    return config_mod.parse({**BASE, "identity": identity})


def test_config_user_and_roles_map() -> None:
    c = cfg({"user": "olga", "roles": {"olga": "operator"}, "default_role": "viewer"})
    a = roles.resolve(c)
    assert (a.user, a.role, a.source, a.can_act) == ("olga", "operator", "config", True)


def test_os_user_with_default_role() -> None:
    a = roles.resolve(cfg({}))
    assert a.user == roles.os_user() and a.source == "os"
    assert a.role == "viewer" and not a.can_act  # the default default is the safe one


def test_signed_in_user_wins_over_config_user() -> None:
    c = cfg({"user": "olga", "roles": {"olga": "operator", "vera": "viewer"}, "default_role": "operator"})
    assert roles.resolve(c, "vera").role == "viewer"
    assert roles.resolve(c, "  vera ").user == "vera"
    unknown = roles.resolve(c, "newcomer")
    assert unknown.role == "operator" and unknown.source == "given"  # default_role applies
    assert roles.resolve(c, "").user == "olga"  # blank is "not signed in"


def test_only_operators_act() -> None:
    assert roles.can_act("operator")
    assert not roles.can_act("viewer")
    assert not roles.can_act("admin")  # anything unknown may only look
