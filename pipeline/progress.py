"""Stage progress while Spark works: a bar on stderr fed by Spark's status tracker.

Spark's own console bar needs log output at WARN and draws over our messages; this one names the
pipeline step (``rollups``, ``findings`` ...) and shows the running stages' completed / total
tasks. On a terminal it redraws one line; otherwise (CI logs) it prints a line only when the
step or stage changes, at most every few seconds.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any


class Progress:
    def __init__(self, spark: Any, stream: IO[str] | None = None, *, enabled: bool = True,
                 interval_s: float = 0.3) -> None:
        self._sc = spark.sparkContext
        self._stream = stream or sys.stderr
        self._enabled = enabled
        self._interval = interval_s
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._step = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_line = ""
        self._last_print = 0.0
        self.lines: list[str] = []  # what was shown (non-terminal mode), for tests and logs

    def start(self) -> Progress:
        if self._enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
        if self._enabled and self._tty and self._last_line:
            self._stream.write("\r" + " " * len(self._last_line) + "\r")
            self._stream.flush()

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self._step = name
        started = time.monotonic()
        try:
            yield
        finally:
            self._emit(f"[pipeline] {name}: done in {time.monotonic() - started:.1f} s", force=True, final=True)
            self._step = ""

    def snapshot(self) -> str | None:
        """One line describing the running stages, or None when Spark is idle."""
        tracker = self._sc.statusTracker()
        parts, done, total = [], 0, 0
        for sid in sorted(tracker.getActiveStageIds()):
            info = tracker.getStageInfo(sid)
            if info is None:
                continue
            done += info.numCompletedTasks
            total += info.numTasks
            parts.append(f"stage {sid} {info.numCompletedTasks}/{info.numTasks}")
        if not parts:
            return None
        width = 24
        filled = int(width * done / total) if total else 0
        return f"[pipeline] {self._step or 'spark'} [{'#' * filled}{'.' * (width - filled)}] {', '.join(parts)}"

    def _emit(self, line: str, *, force: bool = False, final: bool = False) -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        if self._tty:
            pad = max(0, len(self._last_line) - len(line))
            self._stream.write("\r" + line + " " * pad + ("\n" if final else ""))
            self._stream.flush()
            self._last_line = "" if final else line
            return
        if line == self._last_line or (not force and now - self._last_print < 5.0):
            return
        self._stream.write(line + "\n")
        self._stream.flush()
        self.lines.append(line)
        self._last_line, self._last_print = line, now

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                line = self.snapshot()
            except Exception:  # noqa: BLE001 - the JVM going away at exit must not crash the bar
                return
            if line:
                self._emit(line)
