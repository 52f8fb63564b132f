"""Child processes that never outlive the command that started them.

A command that starts a child (``demo``'s console and service, the service's pipeline and report
runs) must not leave it behind: adopted by init, an orphaned console keeps its port and serves a
stale config, an orphaned Spark run keeps a JVM and a gigabyte. Two mechanisms, because a parent
can die two ways:

* It is told to stop (SIGINT / SIGTERM / SIGHUP): it stops its children and waits for them; each
  command's own shutdown does that (see ``forward_stop_signals`` for the plain case).
* It is SIGKILLed (or crashes): nothing runs in it any more, so the kernel must do it.
  ``die_with_parent`` asks Linux (``prctl(PR_SET_PDEATHSIG)``) to send the child SIGTERM when the
  thread that started it ends. Elsewhere it does nothing, and only the first mechanism applies.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

_PR_SET_PDEATHSIG = 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    return libc.prctl


_PRCTL = _prctl()
_PARENT = os.getpid()


def die_with_parent() -> None:
    """``preexec_fn`` for ``subprocess.Popen``: the child gets SIGTERM when its parent dies.

    Runs in the forked child before exec. The parent may already have died between fork and the
    prctl call, so the child checks and stops itself then too.
    """
    if _PRCTL is None:
        return
    parent = os.getppid()
    _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def popen_kwargs() -> dict[str, Any]:
    """Keyword arguments for ``subprocess.Popen`` / ``run`` of a child that must die with us."""
    return {"preexec_fn": die_with_parent} if _PRCTL is not None else {}


def forward_stop_signals(on_signal: Callable[[int], None]) -> None:
    """Call ``on_signal(signum)`` on SIGINT, SIGTERM and SIGHUP (a closed terminal) alike.

    Installed explicitly: a command started from a script may inherit SIGINT as ignored.
    """
    def _handler(signum: int, _frame: object) -> None:
        on_signal(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, _handler)
