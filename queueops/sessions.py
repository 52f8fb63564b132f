"""The settings of every session that only reads a target: the collectors' and the console's
drill-down alike (``sql/<dialect>/session_collect.sql``).

Why one place: a read that waits behind a queue's locks, or runs unbounded, holds up what queues
behind it (on PostgreSQL an ACCESS EXCLUSIVE request, and every dequeuer after it). The collectors
set short statement and lock timeouts and a read-only session; the console's drill-down read the
same tables on a connection without them. Both set up their session here now. (SQL Server's READ
UNCOMMITTED is the connection's, :func:`queueops.engine.reads_uncommitted`.)
"""

from __future__ import annotations

from queueops import sqlfiles
from queueops.config import Target


def reading(target: Target, kept_plans: bool = False) -> sqlfiles.Statement:
    """Short timeouts and a session that cannot write (PostgreSQL: generic plans on a connection
    that keeps its plans, see :func:`collectors.runner.keep_plans`; custom plans otherwise)."""
    values = {"lock_timeout": f"{int(target.lock_timeout_ms)}ms",
              "statement_timeout": f"{int(target.statement_timeout_ms)}ms"}
    if target.dialect == "postgresql":
        values["plan_cache_mode"] = "force_generic_plan" if kept_plans else "force_custom_plan"
    return sqlfiles.load(target.dialect, "session_collect").render(
        "main",
        {"lock_timeout_ms": str(int(target.lock_timeout_ms)),
         "statement_timeout_ms": str(int(target.statement_timeout_ms))},
        values,
    )
