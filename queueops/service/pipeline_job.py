"""``[pipeline] after_export``: the service brings the gold tables up to date once new lake hours exist.

The pipeline runs as a child process (``queueops pipeline run``, its own Spark JVM) rather than in
the service: the service's memory stays flat, and a Spark failure or a JVM that will not start
cannot take the collectors down with it. One run at a time: an export that lands while a run is
in flight does not start a second one, since the pipeline is incremental and the next export's
run picks those hours up. On shutdown the child is terminated; the pipeline writes its state only
after a successful run, so an interrupted run is simply redone by the next one.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from queueops import secrets

log = logging.getLogger("queueops.service")

TIMEOUT_S = 3600.0  # a run that takes longer than the hour it was started for is stuck


@dataclass
class PipelineRunner:
    """Runs ``queueops pipeline run --quiet --json`` for one config file, one run at a time."""

    config_path: str | None
    timeout_s: float = TIMEOUT_S
    runs: int = 0
    failures: int = 0
    skipped: int = 0
    # A run that failed or was skipped leaves the gold tables behind the lake: the next export runs
    # the pipeline even if it wrote no new hour.
    pending: bool = False
    _busy: threading.Lock = field(default_factory=threading.Lock)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _proc: subprocess.Popen[str] | None = None
    _stopping: bool = False

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "queueops.cli", "pipeline", "run", "--quiet", "--json"]
        if self.config_path:
            cmd += ["--config", self.config_path]
        return cmd

    def run(self) -> bool | None:
        """One pipeline run; True if it succeeded, False if it failed, None if it did not start."""
        if not self._busy.acquire(blocking=False):
            self.skipped += 1
            self.pending = True
            log.info("pipeline run still in flight; the next export's run catches up on these hours")
            return None
        try:
            with self._guard:
                if self._stopping:
                    return None
                started = time.monotonic()
                self._proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True)
            try:
                out, err = self._proc.communicate(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                out, err = self._proc.communicate()
                err = f"killed after {self.timeout_s:.0f} s. {err}"
            code = self._proc.returncode
            self.runs += 1
            wall = time.monotonic() - started
            self.pending = code != 0
            if code == 0:
                log.info("pipeline run ok in %.0f s: %s", wall, _summary(out))
                return True
            self.failures += 1
            reason = "stopped with the service" if self._stopping else f"exited {code}"
            log.error("pipeline run %s after %.0f s: %s", reason, wall,
                      secrets.mask((err or out).strip()[-500:]) or "(no output)")
            return False
        finally:
            with self._guard:
                self._proc = None
            self._busy.release()

    def stop(self) -> None:
        """Terminate a run in flight (the service is stopping) and refuse new ones."""
        with self._guard:
            self._stopping = True
            if self._proc is not None and self._proc.poll() is None:
                log.info("stopping the pipeline run in flight")
                self._proc.terminate()


def _summary(stdout: str) -> str:
    """One line from the run's JSON summary: what it recomputed and how many findings it has."""
    try:
        s = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return stdout.strip()[-200:]
    if s.get("up_to_date"):
        return f"gold tables up to date with {s.get('lake_hours')} lake hour(s)"
    return (f"{s.get('mode')} run recomputed {len(s.get('recomputed_hours') or [])} hour(s); "
            f"{len(s.get('findings') or [])} finding(s); gold tables in {s.get('out')}")
