"""One finding of ``config check --live``: what is wrong (or worth knowing) about a target or a
queue, where, and how to fix it.

One record for every check -- tables and columns (:mod:`queueops.livecheck`), a PostgreSQL login's
grants (:mod:`queueops.privileges`), a SQL Server's version, edition and permissions
(:mod:`queueops.mssqlcheck`) -- so each reports the same way and nothing converts between copies.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    severity: str  # error | warning
    queue: str | None
    field: str
    value: str
    reason: str
    fix: str = ""

    def line(self, source: str) -> str:
        where = f"queue {self.queue!r}: " if self.queue else ""
        fix = f"; fix: {self.fix}" if self.fix else ""
        return f"{source}: {self.severity}: {where}{self.field} = {self.value!r}: {self.reason}{fix}"
