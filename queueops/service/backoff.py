"""Back-off for a target that cannot be reached, without missing its return.

Full connection attempts (TLS, login, session setup; up to ``connect_timeout_s`` against a dead
host) back off exponentially: one interval, two, four ... up to ``schedule.backoff_max_s``.
Meanwhile every cycle makes a cheap TCP probe of the server's port (bounded by one second);
when the port opens again after being closed, the back-off is cut short and the next cycle
connects at once. So a restarted server is collected from within one interval of its return,
and a server refusing logins (port open) is not hammered. Targets whose address cannot be
probed (a socket path, a named SQL Server instance without a port) rely on the back-off alone.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from queueops import secrets
from queueops.config import Target


@dataclass
class Backoff:
    interval_s: float
    max_s: float
    failures: int = 0
    next_attempt: float = 0.0
    port_closed: bool | None = None  # what the last probe saw (None: not probed / not probeable)

    def delay(self) -> float:
        return min(self.interval_s * 2 ** max(self.failures - 1, 0), max(self.max_s, self.interval_s))

    def should_attempt(self, now: float, probe: Callable[[], bool | None]) -> tuple[bool, str]:
        """Whether to try a full connection now; when not, a short reason for the status row.

        ``next_attempt`` counts from the start of the failed cycle, so it falls on a later cycle's
        start; a cycle that starts a little early (scheduling jitter) still attempts. The wait in
        the reason is rounded up to the cycle that will attempt -- never "in 0s" for a cycle that
        does not.
        """
        slack = min(1.0, self.interval_s / 4)
        if self.failures == 0 or now >= self.next_attempt - slack:
            return True, ""
        reachable = probe()
        if reachable and self.port_closed:
            self.failures = 0  # the server is back: a fresh start, short delays if it is still booting
            self.port_closed = False
            return True, ""
        if reachable is not None:
            self.port_closed = not reachable
        port = {True: "port closed", False: "port open", None: "not probed"}[self.port_closed]
        wait = math.ceil((self.next_attempt - slack - now) / self.interval_s) * self.interval_s
        return False, (f"backing off after {self.failures} failed connection attempt(s) ({port}); "
                       f"next attempt in {wait:.0f}s (sooner if the port opens)")

    def failed(self, now: float, reachable: bool | None) -> None:
        self.failures += 1
        self.next_attempt = now + self.delay()
        if reachable is not None:
            self.port_closed = not reachable

    def succeeded(self) -> None:
        self.failures = 0
        self.next_attempt = 0.0
        self.port_closed = False


def probe_address(target: Target, base_dir: Path | None = None) -> tuple[str, int] | None:
    """(host, port) to probe, or None when the URL names no TCP endpoint we can check."""
    from sqlalchemy.engine import make_url

    try:
        url = make_url(secrets.resolve(target.url, base_dir))
    except Exception:  # noqa: BLE001 - unresolvable: the connect attempt reports it properly
        return None
    host = url.host or ("localhost" if target.dialect == "postgresql" else None)
    if not host or host.startswith("/") or "\\" in host:
        return None
    port = url.port or (5432 if target.dialect == "postgresql" else 1433)
    return host, port


def tcp_probe(address: tuple[str, int] | None, timeout: float = 1.0) -> bool | None:
    """True if something accepts TCP connections there, False if not, None if not probeable."""
    if address is None:
        return None
    try:
        with socket.create_connection(address, timeout=timeout):
            return True
    except OSError:
        return False
