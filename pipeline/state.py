"""Pipeline state beside the gold tables: which lake hours were processed, as they were then.

``<out>/_state/pipeline.json`` maps each processed lake hour to its signature (data files, their
names, total bytes, newest modification time). A run compares the lake with it to find new and
re-exported hours. It also records a fingerprint of the rule parameters and thresholds: gold
tables computed under other settings are recomputed rather than mixed. The file is replaced
atomically and only after every gold table of the run has been written, so an interrupted run is
simply redone.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pipeline.storage import Partition, Storage, hour_key, join, parse_hour_key

STATE_DIR = "_state"
STATE_FILE = "pipeline.json"
VERSION = 1


def fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class State:
    partitions: dict[str, dict[str, Any]] = field(default_factory=dict)
    settings: str = ""
    last_run: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"version": VERSION, "settings": self.settings, "partitions": self.partitions,
                           "last_run": self.last_run}, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> State:
        if not text:
            return cls()
        raw = json.loads(text)
        if raw.get("version") != VERSION:
            return cls()  # unknown layout: start over (the run becomes a full one)
        return cls(dict(raw.get("partitions", {})), str(raw.get("settings", "")), dict(raw.get("last_run", {})))


def state_path(out: str) -> str:
    return join(out, STATE_DIR, STATE_FILE)


def load(storage: Storage, out: str) -> State:
    try:
        return State.from_json(storage.read_text(state_path(out)))
    except (ValueError, TypeError):
        return State()  # unreadable state: recompute rather than trust it


def save(storage: Storage, out: str, state: State) -> None:
    storage.write_text(state_path(out), state.to_json())


@dataclass(frozen=True)
class Changes:
    new: list[datetime]
    changed: list[datetime]
    removed: list[datetime]

    @property
    def touched(self) -> list[datetime]:
        return sorted({*self.new, *self.changed})


def diff(state: State, lake: list[Partition]) -> Changes:
    """Lake hours that are new, or whose files differ from what the last run processed."""
    seen = {p.key: p for p in lake}
    new = [p.hour for p in lake if p.key not in state.partitions]
    changed = [p.hour for p in lake if p.key in state.partitions and state.partitions[p.key] != p.signature()]
    removed = [parse_hour_key(k) for k in state.partitions if k not in seen]
    return Changes(sorted(new), sorted(changed), sorted(removed))


def record(state: State, lake: list[Partition], hours: set[datetime]) -> None:
    for p in lake:
        if p.hour in hours:
            state.partitions[hour_key(p.hour)] = p.signature()
