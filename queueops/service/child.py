"""``queueops`` commands the service runs as child processes: the pipeline after an export
(``[pipeline] after_export``) and the daily report (``[report] daily_at``).

A child rather than a call: the pipeline's Spark JVM never lands in the service's memory, and a
Spark failure or a JVM that will not start cannot take the collectors down with it. One run at a
time per command: a run asked for while one is in flight is skipped and left ``pending`` (the
pipeline is incremental, so the next run catches up). On shutdown the child is terminated, so
SIGTERM does not wait out an hour-long run; the pipeline writes its state only after a successful
run, so an interrupted run is simply redone by the next one.

The pipeline's hourly run goes to one resident child, ``pipeline.worker`` (:class:`ResidentCommand`),
that keeps its SparkSession between runs: the JVM starts once per service, not once per hour, and
still outside the service's process.
"""

from __future__ import annotations

import json
import logging
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
            started = time.monotonic()
            result = self._attempt()
            if result is None:
                return None
            code, out, err = result
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
            self._busy.release()

    def _attempt(self) -> tuple[int, str, str] | None:
        """One run in a fresh child process: exit code, stdout, stderr (None: the service is stopping)."""
        with self._guard:
            if self._stopping:
                return None
            # die_with_parent: a SIGKILLed service takes its Spark run with it.
            self._proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, **children.popen_kwargs())
        try:
            try:
                out, err = self._proc.communicate(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                out, err = self._proc.communicate()
                err = f"killed after {self.timeout_s:.0f} s. {err}"
            return self._proc.returncode, out, err
        finally:
            with self._guard:
                self._proc = None

    def stop(self) -> None:
        """Terminate a run in flight (the service is stopping) and refuse new ones."""
        with self._guard:
            self._stopping = True
            if self._proc is not None and self._proc.poll() is None:
                log.info("stopping the %s in flight", self.name)
                self._proc.terminate()


# pipeline.worker.MARKER (the service does not import the pipeline: no Spark in a collector-only
# install); tests/pipeline/test_worker.py checks that the two agree.
WORKER_MARKER = "@@queueops-pipeline-worker "


@dataclass
class ResidentCommand(ChildCommand):
    """The pipeline's hourly run in one long-lived worker process (``pipeline.worker``), whose
    SparkSession, hence JVM, is started by its first run and reused by the next ones.

    The worker is a child like any other (die_with_parent, terminated on stop); one that died or
    overran its timeout is replaced at the next run. A run the worker will not take (more lake
    hours than the hourly one, another master) is run in a fresh child process, as before.
    """

    worker_program: list[str] = field(default_factory=lambda: [sys.executable, "-m", "pipeline.worker"])
    worker_starts: int = 0
    _worker: subprocess.Popen[str] | None = None
    _replies: queue.Queue[str | None] = field(default_factory=queue.Queue)
    _err_tail: deque[str] = field(default_factory=lambda: deque(maxlen=40))

    def _attempt(self) -> tuple[int, str, str] | None:
        with self._guard:
            if self._stopping:
                return None
            try:
                worker = self._ensure_worker()
            except OSError as exc:
                return 1, "", f"cannot start the pipeline worker: {exc}"
        reply = self._ask(worker, [*self.args[2:], *(["--config", self.config_path] if self.config_path else [])])
        if "fresh" in reply:
            log.info("%s in a fresh process (%s)", self.name, reply["fresh"])
            return super()._attempt()
        return int(reply.get("code", 1)), str(reply.get("out", "")), str(reply.get("err", ""))

    def _ensure_worker(self) -> subprocess.Popen[str]:
        if self._worker is not None and self._worker.poll() is None:
            return self._worker
        self._replies, self._err_tail = queue.Queue(), deque(maxlen=40)
        self._worker = subprocess.Popen(self.worker_program, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, bufsize=1, **children.popen_kwargs())
        self.worker_starts += 1
        threading.Thread(target=_pump, args=(self._worker.stdout, self._replies.put), daemon=True).start()
        tail = self._err_tail
        threading.Thread(target=_pump, args=(self._worker.stderr, lambda x: x is not None and tail.append(x)),
                         daemon=True).start()
        return self._worker

    def _ask(self, worker: subprocess.Popen[str], argv: list[str]) -> dict:
        """Send one run to the worker and wait for its reply, its end or the timeout."""
        replies = self._replies
        try:
            assert worker.stdin is not None
            worker.stdin.write(json.dumps(argv) + "\n")
            worker.stdin.flush()
        except (OSError, ValueError):
            pass  # it died: its end is in the replies
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                line = replies.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                worker.kill()
                worker.wait()
                return {"code": -9, "out": "", "err": f"killed after {self.timeout_s:.0f} s. {self._tail()}"}
            if line is None:
                code = worker.wait()
                return {"code": code or 1, "out": "", "err": f"the pipeline worker exited {code}. {self._tail()}"}
            if line.startswith(WORKER_MARKER):
                try:
                    return json.loads(line[len(WORKER_MARKER):])
                except ValueError:
                    continue

    def _tail(self) -> str:
        return "\n".join(list(self._err_tail)[-20:])

    def stop(self) -> None:
        super().stop()
        with self._guard:
            if self._worker is not None and self._worker.poll() is None:
                self._worker.terminate()


def _pump(stream: Any, sink: Callable[[Any], None]) -> None:
    """Lines of a worker's stream into ``sink``, then None at its end."""
    for line in stream:
        sink(line.rstrip("\n"))
    sink(None)


def pipeline_command(config_path: str | None) -> ChildCommand:
    return ResidentCommand("pipeline run", ["pipeline", "run", "--quiet", "--json"], config_path,
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
