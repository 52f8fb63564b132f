"""Who is acting, and may they act: ``viewer`` sees everything, only ``operator`` changes anything.

The CLI acts as ``[identity] user`` from config, else the OS user it runs as; the console passes
its signed-in user. Either way the role comes from ``[identity] roles`` (user -> role), else
``[identity] default_role``. One function, so the CLI and the console can never disagree about
who may run an action.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from typing import Literal

from queueops.config import Config

Role = Literal["viewer", "operator"]
ROLES: tuple[Role, ...] = ("viewer", "operator")


@dataclass(frozen=True)
class Actor:
    """A user and their role; ``source`` says where the user name came from (config, os, given)."""

    user: str
    role: Role
    source: str

    @property
    def can_act(self) -> bool:
        return can_act(self.role)


def os_user() -> str:
    """The OS account this process runs as (``uid:N`` when it has no name, e.g. in a container)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no LOGNAME/USER
        return f"uid:{os.getuid()}"


def resolve(cfg: Config, user: str | None = None) -> Actor:
    """The actor for ``user`` (the console's signed-in user), else config's user, else the OS user."""
    if user is not None and user.strip():
        name, source = user.strip(), "given"
    elif cfg.identity.user:
        name, source = cfg.identity.user, "config"
    else:
        name, source = os_user(), "os"
    role: Role = cfg.identity.roles.get(name, cfg.identity.default_role)
    return Actor(name, role, source)


def can_act(role: str) -> bool:
    """Only operators run actions; viewers (and any unknown role) may only look."""
    return role == "operator"
