"""What the autopilot keeps in the store (``service_state``), so the CLI, the console and the
service (separate processes) agree: the global kill switch, and each policy's last evaluation."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from queueops.rows import utcnow
from queueops.store import state

SWITCH = "autopilot.switch"
POLICY = "autopilot.policy."
AUTOPILOT_USER = "autopilot"


def switch(engine: Engine) -> dict[str, Any]:
    """``{"enabled": bool, "by": user, "at": ISO time}``; enabled unless someone switched it off."""
    try:
        value = state.get(engine, SWITCH)
    except Exception:  # noqa: BLE001 - a missing table (fresh store) reads as the default
        value = None
    return value if isinstance(value, dict) and "enabled" in value else {"enabled": True, "by": None, "at": None}


def set_switch(engine: Engine, enabled: bool, user: str) -> dict[str, Any]:
    value = {"enabled": bool(enabled), "by": user, "at": utcnow().isoformat()}
    state.put(engine, SWITCH, value)
    return value


def policy_state(engine: Engine, name: str) -> dict[str, Any]:
    try:
        value = state.get(engine, POLICY + name)
    except Exception:  # noqa: BLE001
        value = None
    return value if isinstance(value, dict) else {}


def put_policy_state(engine: Engine, name: str, value: dict[str, Any]) -> None:
    state.put(engine, POLICY + name, value)


def recent(times: list[str], now: datetime | None = None, window: timedelta = timedelta(hours=1)) -> list[str]:
    """The ISO times within the last ``window``."""
    now = now or utcnow()
    out = []
    for t in times:
        try:
            if now - datetime.fromisoformat(t) < window:
                out.append(t)
        except (TypeError, ValueError):
            continue
    return out
