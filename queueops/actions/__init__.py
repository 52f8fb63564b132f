"""Safe one-click remediation: requeue, rebuild, watermark-reset, archive, terminate.

One layer for the CLI (``queueops act``) and the console::

    from queueops import actions

    plan = actions.plan(cfg, "requeue", "lease", {"max_items": 1000})
    plan.preview.to_json()      # exact SQL + params, rows it touches, count, warnings, destructive
    result = actions.execute(cfg, plan, user="alice", progress=callback)
    result.outcome              # ok | failed | interrupted | refused; result.to_json()

Every execution is audited in the store (``audit_log``) before it starts and completed after; see
docs/actions.md for what each action does per dialect and its guards. Names are loaded on first
use, so that importing the package (every ``queueops`` command does) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

ACTIONS = ("requeue", "rebuild", "watermark-reset", "archive", "terminate")

_LAZY = {
    "plan": "queueops.actions.core", "execute": "queueops.actions.core", "MAX_PLAN_AGE_S": "queueops.actions.core",
    "OPTIONS": "queueops.actions.model", "ActionError": "queueops.actions.model", "Conflict": "queueops.actions.model",
    "Interrupted": "queueops.actions.model", "Refused": "queueops.actions.model",
    "NotOffered": "queueops.actions.model",
    "Plan": "queueops.actions.model", "Preview": "queueops.actions.model",
    "Progress": "queueops.actions.model", "ProgressCallback": "queueops.actions.model",
    "Result": "queueops.actions.model",
    "audit_entries": ("queueops.actions.audit", "entries"), "audit_entry": ("queueops.actions.audit", "entry"),
    "reconcile_audit": ("queueops.actions.audit", "reconcile"),
}

__all__ = ["ACTIONS", *_LAZY]


def __getattr__(name: str) -> Any:
    spec = _LAZY.get(name)
    if spec is None:
        raise AttributeError(f"module 'queueops.actions' has no attribute {name!r}")
    module, attr = spec if isinstance(spec, tuple) else (spec, name)
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
