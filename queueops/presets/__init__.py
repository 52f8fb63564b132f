"""Presets: the queue libraries people run, as data (one TOML file per library in this folder).

A preset says how to recognise a library's table from the catalog (``[signature]``: table name or
``LIKE`` pattern and column types), the complete queue mapping (``[queue]``: every field of a
``[[queues]]`` section but ``name`` and ``target``), its status values, where its times live when
they are not on the job row, its own rescue rules (so ``lease_timeout_s`` is set safely above
them), which queueops actions are safe on it, and which metrics cannot be had for it and why.

``[[queues]] preset = "NAME"`` plus ``target`` (and optional overrides such as ``schema``,
``table`` or ``thresholds``) is a complete queue definition: :func:`expand` turns it into the
plain mapping before the config is validated, so everything downstream sees an ordinary queue.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from queueops import catalog

FOLDER = Path(__file__).resolve().parent


class Signature(BaseModel):
    """How the catalog shows the library's table: its name (or a LIKE pattern) and column types."""

    model_config = ConfigDict(extra="forbid")
    schema_: str | None = Field(default=None, alias="schema")
    table: str | None = None
    table_like: str | None = None
    columns: dict[str, str]
    companions: list[str] = Field(default_factory=list)


class Rescue(BaseModel):
    """The library's own way of taking back work of a dead worker."""

    model_config = ConfigDict(extra="forbid")
    by_itself: bool
    heartbeat_s: float = 0
    stale_after_s: float = 0
    how: str


class Actions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    requeue: Literal["allow", "warn", "refuse"]
    requeue_reason: str = ""
    rebuild: Literal["allow", "warn", "refuse"] = "allow"
    archive: Literal["allow", "warn", "refuse"] = "refuse"
    archive_reason: str = ""


class Preset(BaseModel):
    """One library's preset (one TOML file)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    library: str
    engine: Literal["postgresql", "mssql"]
    versions: str
    tested: Literal["real", "schema"]
    summary: str
    signature: Signature
    queue: dict[str, Any]
    values: dict[str, Any] = Field(default_factory=dict)
    times: dict[str, str] = Field(default_factory=dict)
    rescue: Rescue
    actions: Actions
    unavailable: dict[str, str] = Field(default_factory=dict)
    # Fields a [[queues]] section naming this preset must set itself, and why (issue 33: a table
    # that holds many queues needs the queue's partition; a table per queue needs its name).
    requires: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _safe_timeout(self) -> Preset:
        timeout = float(self.queue.get("lease_timeout_s", 300))
        if timeout <= max(self.rescue.stale_after_s, self.rescue.heartbeat_s):
            raise ValueError(f"preset {self.name}: lease_timeout_s {timeout} is not above the library's own "
                             f"stale-job limit {self.rescue.stale_after_s} and heartbeat {self.rescue.heartbeat_s}")
        if self.actions.requeue != "allow" and not self.actions.requeue_reason:
            raise ValueError(f"preset {self.name}: requeue = {self.actions.requeue!r} needs requeue_reason")
        unknown = [m for m in self.unavailable if catalog.get(m) is None]
        if unknown:
            raise ValueError(f"preset {self.name}: [unavailable] names {', '.join(map(repr, unknown))}, not a metric "
                             "of sql/metrics.toml: the collector's row of a metric is what it replaces")
        return self

    @property
    def dialect(self) -> str:
        return self.engine

    def action_rule(self, action: str) -> tuple[str, str]:
        """(allow | warn | refuse, reason) for a queueops action on this library's table."""
        if action == "requeue":
            return self.actions.requeue, self.actions.requeue_reason
        if action == "archive":
            return self.actions.archive, self.actions.archive_reason
        if action == "rebuild":
            return self.actions.rebuild, ""
        return "allow", ""


@cache
def all_presets() -> dict[str, Preset]:
    """Every preset in this folder, by name (the file's stem)."""
    out: dict[str, Preset] = {}
    for path in sorted(FOLDER.glob("*.toml")):
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        out[path.stem] = Preset.model_validate({"name": path.stem, **raw})
    return out


def get(name: str) -> Preset:
    """The preset called ``name``; ``KeyError`` names the known ones."""
    presets = all_presets()
    if name not in presets:
        raise KeyError(f"no preset {name!r} (known: {', '.join(presets)})")
    return presets[name]


def unavailable(preset: str | None) -> dict[str, str]:
    """The metrics ``preset``'s mapping cannot produce, with why (its ``[unavailable]``): the
    collectors' rows of these are replaced by "not available" rather than shown as figures (a
    count the mapping cannot see read 0 'at least' for 200,020 of graphile's failed jobs)."""
    if preset is None or preset not in all_presets():
        return {}
    return get(preset).unavailable


def timeout_warning(preset: str | None, lease_timeout_s: float) -> str | None:
    """Why a queue's ``lease_timeout_s`` is unsafe for its preset's library, or None.

    The preset's own value is checked above the library's rescue when the preset loads; a user's
    override is not refused (the user may know better) but told: at or below the library's own
    stale-job limit, queueops calls stuck (and requeue would release) work the library still
    considers alive or is rescuing itself; at or below its heartbeat, every live job looks stuck."""
    if preset is None or preset not in all_presets():
        return None
    if "stuck_leases" in get(preset).unavailable:
        return None  # the mapping has no lease for the timeout to judge (advisory locks, visibility times)
    rescue = get(preset).rescue
    if rescue.stale_after_s >= rescue.heartbeat_s:
        limit, what = rescue.stale_after_s, "the library's own stale-job limit"
    else:
        limit, what = rescue.heartbeat_s, "the library's heartbeat interval"
    if limit and lease_timeout_s <= limit:
        return (f"is not above {limit:g} s, {what} (preset {preset!r}): stuck_leases counts jobs the library "
                "still considers alive or rescues itself")
    return None


def expand(queue: dict[str, Any]) -> dict[str, Any]:
    """A ``[[queues]]`` table with ``preset = NAME``: the preset's mapping under the section's own
    fields (its overrides win). Returns the section unchanged when it names no preset; raises
    ``KeyError`` for an unknown preset. ``preset`` is kept so actions can apply the library's rules."""
    name = queue.get("preset")
    if not isinstance(name, str):
        return queue
    preset = get(name)
    return {**preset.queue, **queue}
