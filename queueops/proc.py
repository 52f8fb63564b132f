"""Is a process that recorded itself (host, pid, start time) still running?

Used wherever a record outlives its writer: an action's audit record (``running`` until its
process completes it) and the collector service's run record (removed at a clean stop). A pid
alone is not enough: pids are reused, so the record also keeps the process's start time (boot id
and start tick from ``/proc/<pid>/stat``), and a pid now running a process started at another
time is another process. A process killed by SIGKILL but not yet reaped by its parent (a zombie)
no longer runs either: it is gone from the moment it died, not from the moment it was reaped.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3, the state, first)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return fields if len(fields) >= 20 else None


def process_start(pid: int) -> str | None:
    """An identity for the process ``pid`` that a reused pid does not share (Linux: boot id and
    start time in clock ticks from /proc/<pid>/stat); None where /proc is not available."""
    fields = _stat_fields(pid)
    return f"{_boot_id()}:{fields[19]}" if fields else None  # field 22 of stat: starttime


def this_process() -> dict[str, Any]:
    """What a record keeps to let others tell later whether its writer still runs."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "started": process_start(pid)}


def process_gone(runner: dict[str, Any]) -> bool:
    """True only when the process that wrote ``runner`` (:func:`this_process`) certainly no longer
    runs: same host, and the pid is free, belongs to a process started at another time, or is a
    dead process waiting to be reaped (state Z or X). Records of other hosts: False (unknowable)."""
    if not runner or runner.get("host") != socket.gethostname() or not isinstance(runner.get("pid"), int):
        return False
    pid = runner["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # exists, owned by someone else
    fields = _stat_fields(pid)
    if fields is None:
        return False  # no /proc: the pid exists, nothing more can be told
    started = runner.get("started")
    now = f"{_boot_id()}:{fields[19]}"
    if started and now != started:
        return True  # the pid was reused
    return fields[0] in ("Z", "X")  # died, not reaped yet
