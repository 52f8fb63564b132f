"""``queueops`` commands the service runs as child processes: the pipeline after an export
(``[pipeline] after_export``) and the daily report (``[report] daily_at``).

A child rather than a call: the pipeline's Spark JVM never lands in the service's memory, and a
Spark failure or a JVM that will not start cannot take the collectors down with it. One run at a
time per command: a run asked for while one is in flight is skipped and left ``pending`` (the
pipeline is incremental, so the next run catches up). On shutdown the child is terminated, so
SIGTERM does not wait out an hour-long run; the pipeline writes its state only after a successful
run, so an interrupted run is simply redone by the next one.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from queueops import children, secrets

log = logging.getLogger("queueops.service")

TIMEOUT_S = 3600.0  # a run that takes longer than the hour it was started for is stuck


@dataclass
class ChildCommand:
    """Runs ``queueops <args> [--config FILE]`` in a child process, one run at a time."""

    name: str  # for the log: "pipeline run", "daily report"
    args: list[str]
    config_path: str | None
    summarize: Callable[[str], str] = lambda out: out.strip()[-200:]
    program: list[str] = field(default_factory=lambda: [sys.executable, "-m", "queueops.cli"])
    timeout_s: float = TIMEOUT_S
    runs: int = 0
    failures: int = 0
    skipped: int = 0
    # A run that failed or was skipped is owed: the service runs it again at its next chance (the
    # pipeline after the next export, even one that wrote no new hour).
    pending: bool = False
    _busy: threading.Lock = field(default_factory=threading.Lock)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _proc: subprocess.Popen[str] | None = None
    _stopping: bool = False

    def command(self) -> list[str]:
        cmd = [*self.program, *self.args]
        if self.config_path:
            cmd += ["--config", self.config_path]
        return cmd

    def run(self) -> bool | None:
        """One run; True if it succeeded, False if it failed, None if it did not start."""
        if not self._busy.acquire(blocking=False):
            self.skipped += 1
            self.pending = True
            log.info("%s still in flight; skipped, the next run catches up", self.name)
            return None
        try:
            with self._guard:
                if self._stopping:
                    return None
                started = time.monotonic()
                # die_with_parent: a SIGKILLed service takes its Spark run with it.
                self._proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              text=True, **children.popen_kwargs())
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
                log.info("%s ok in %.0f s: %s", self.name, wall, self.summarize(out))
                return True
            self.failures += 1
            reason = "stopped with the service" if self._stopping else f"exited {code}"
            log.error("%s %s after %.0f s: %s", self.name, reason, wall,
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
                log.info("stopping the %s in flight", self.name)
                self._proc.terminate()


def pipeline_command(config_path: str | None) -> ChildCommand:
    return ChildCommand("pipeline run", ["pipeline", "run", "--quiet", "--json"], config_path,
                        summarize=pipeline_summary)


def report_command(config_path: str | None) -> ChildCommand:
    return ChildCommand("daily report", ["report"], config_path)


def pipeline_summary(stdout: str) -> str:
    """One line from the run's JSON summary: what it recomputed and how many findings it has."""
    try:
        s = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return stdout.strip()[-200:]
    if s.get("up_to_date"):
        return f"gold tables up to date with {s.get('lake_hours')} lake hour(s)"
    return (f"{s.get('mode')} run recomputed {len(s.get('recomputed_hours') or [])} hour(s); "
            f"{len(s.get('findings') or [])} finding(s); gold tables in {s.get('out')}")
