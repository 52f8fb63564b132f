"""``python -m queueops.lab.reaper STATE_DIR``: stop the lab when the ``demo`` that started it dies.

``demo`` starts the lab's database and workload as daemons (they must outlive ``queueops lab
start``, which uses the same code). A demo that is SIGKILLed cannot stop them itself, so it starts
this small process first, bound to it with ``PR_SET_PDEATHSIG``: when the demo dies, however it
dies, the kernel sends this process SIGTERM and it stops the lab (``control.stop`` is idempotent,
so after a clean Ctrl-C, which already stopped everything, it finds nothing left to do).
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

# Imported now, not when the demo dies: by then the code may be gone or changed on disk.
from queueops.lab import control


def main(argv: list[str]) -> int:
    state = Path(argv[0])
    stop_now = False

    def _term(_signum: int, _frame: object) -> None:
        nonlocal stop_now
        stop_now = True

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the demo's to handle, in order
    while not stop_now:
        signal.pause()
    control.stop(state)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
