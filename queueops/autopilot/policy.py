"""Autopilot policies (config ``[[autopilot]]``) and the rule that decides, as pure functions.

A policy names one queue, one action and a condition on one metric that must hold for N
consecutive samples: ``when = "stuck_leases >= 1 for 3 samples"``. Nothing here touches a
database or the store, so :func:`step` and :func:`decide` are tested exhaustively.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Mode = Literal["off", "propose", "act"]
Verdict = Literal["off", "killed", "no_data", "waiting", "rate_limited", "propose", "act"]
# The actions a policy may name; it always names exactly one (there is no "recommended action"),
# so terminate and rebuild run only where a policy names them explicitly.
POLICY_ACTIONS = ("requeue", "rebuild", "watermark-reset", "archive", "terminate")
OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt}
_WHEN = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*(>=|<=|==|!=|>|<)\s*(-?\d+(?:\.\d+)?)"
                   r"(?:\s+for\s+(\d+)\s+samples?)?\s*$")


@dataclass(frozen=True)
class Condition:
    metric: str
    op: str
    value: float
    samples: int = 1

    def holds(self, value: float) -> bool:
        return OPS[self.op](value, self.value)

    def describe(self) -> str:
        return f"{self.metric} {self.op} {self.value:g} for {self.samples} sample(s)"


def parse_when(text: str) -> Condition:
    """``"METRIC OP NUMBER [for N samples]"``; raises ValueError with what is expected."""
    m = _WHEN.match(text or "")
    if not m:
        raise ValueError("expected 'METRIC OP NUMBER [for N samples]', e.g. 'stuck_leases >= 1 for 3 samples' "
                         "(OP: >= <= == != > <)")
    samples = int(m.group(4) or 1)
    if not 1 <= samples <= 1000:
        raise ValueError("the number of samples must be between 1 and 1000")
    return Condition(m.group(1), m.group(2), float(m.group(3)), samples)


class AutopilotPolicy(BaseModel):
    """One ``[[autopilot]]`` entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(default=None, min_length=1, max_length=100)
    queue: str
    action: Literal["requeue", "rebuild", "watermark-reset", "archive", "terminate"]
    when: str
    max_per_hour: int = Field(default=6, ge=1, le=3600)
    mode: Mode = "off"
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("when")
    @classmethod
    def _when(cls, v: str) -> str:
        parse_when(v)
        return v

    @model_validator(mode="after")
    def _default_name(self) -> AutopilotPolicy:
        if self.name is None:
            object.__setattr__(self, "name", f"{self.queue}-{self.action}")
        return self

    @property
    def condition(self) -> Condition:
        return parse_when(self.when)

    @property
    def key(self) -> str:
        return str(self.name)


def step(cond: Condition, streak: int, value: float | None) -> int:
    """The number of consecutive samples the condition held, after one more sample. A cycle
    without the metric (collector failed, not sampled this cycle) is no sample: unchanged."""
    if value is None:
        return streak
    return streak + 1 if cond.holds(value) else 0


def decide(cond: Condition, streak: int, *, mode: Mode, enabled: bool, runs_last_hour: int,
           max_per_hour: int, sampled: bool = True) -> Verdict:
    """What a policy does after this cycle. The kill switch wins over everything but ``off``;
    the rate limit counts the runs (or proposals) of the last hour."""
    if mode == "off":
        return "off"
    if not enabled:
        return "killed"
    if not sampled:
        return "no_data"
    if streak < cond.samples:
        return "waiting"
    if runs_last_hour >= max_per_hour:
        return "rate_limited"
    return mode
