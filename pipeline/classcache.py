"""A class-data-sharing archive for the small run's driver JVM: about 2 s less start-up per run.

Why: the hourly incremental run (``after_export``) is a fresh process whose JVM loads and verifies
the same few thousand classes from the pyspark wheel's jars every hour, about 2 s of its start
(docs/benchmarks.md). Java's dynamic class-data sharing writes those classes, parsed and verified,
to an archive when a JVM exits (``-XX:ArchiveClassesAtExit``) and maps it into later JVMs
(``-XX:SharedArchiveFile``). Nothing is downloaded: the archive is made from the jars already here.

Where and when:

* the archive (about 190 MB) lives beside the Python environment that holds pyspark
  (``<sys.prefix>/var/queueops``, or ``QUEUEOPS_JVM_ARCHIVE_DIR``; empty: never archive), named by
  a key of the Java binary, the jars folder (path and modification time) and the JVM options: a
  new Java, a reinstalled pyspark or other options start a new archive, and an older one is
  removed when the new one is published;
* the first run writes it under a temporary name; :func:`publish` (the CLI calls it after the
  run) stops the JVM, waits for the archive to be written, and renames it into place, so that a
  concurrent run never maps a half-written file; a run killed meanwhile leaves a temporary file
  that the next publish removes;
* a folder that cannot be written means no archive, never an error: it only saves time.

The JVM's own messages about the archive (classes it skips) are logging at warning level, which
Java prints on standard output by default: that would corrupt ``--json``. They are turned off;
other JVM warnings go to standard error.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_DIR = "QUEUEOPS_JVM_ARCHIVE_DIR"
SUFFIX = ".jsa"
LOGGING = "-Xlog:disable -Xlog:all=warning:stderr -Xlog:cds*=off:stderr"
# A temporary archive older than this was left by a run that died before publishing it.
STALE_TEMP_S = 6 * 3600
PUBLISH_WAIT_S = 120


@dataclass(frozen=True)
class Plan:
    """What the next JVM does with the archive: ``options`` to add, and the archive it will write
    (``writing``, a temporary path; None when it maps an existing one or there is none)."""

    options: str
    final: Path | None = None
    writing: Path | None = None


def archive_dir() -> Path | None:
    """The archive's folder, or None when archiving is switched off."""
    configured = os.environ.get(ENV_DIR)
    if configured is not None:
        return Path(configured).expanduser() if configured.strip() else None
    return Path(sys.prefix) / "var" / "queueops"


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _jars() -> Path | None:
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def archive_key(jvm_options: str) -> str | None:
    """A name for the archive of this Java, these jars and these options (None: one is missing)."""
    java, jars = _java(), _jars()
    if java is None or jars is None or not jars.is_dir():
        return None
    parts = [str(java), str(java.stat().st_mtime_ns), str(jars.resolve()), str(jars.stat().st_mtime_ns), jvm_options]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def plan(jvm_options: str) -> Plan:
    """The options that map this JVM's archive, or write it when there is none yet."""
    folder = archive_dir()
    key = archive_key(jvm_options)
    if folder is None or key is None:
        return Plan("")
    final = folder / f"spark-driver-{key}{SUFFIX}"
    if final.is_file() and final.stat().st_size > 0:
        return Plan(f"{LOGGING} -XX:SharedArchiveFile={final}", final)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Plan("")
    if not os.access(folder, os.W_OK):
        return Plan("")
    writing = folder / f".spark-driver-{key}.{os.getpid()}.tmp"
    return Plan(f"{LOGGING} -XX:ArchiveClassesAtExit={writing}", final, writing)


def publish(spark: Any, archive: Plan) -> bool:  # noqa: ANN401 - a SparkSession
    """After the run: if this JVM writes an archive, stop it, wait for the file, and move it into
    place (removing older archives and stale temporaries). True when an archive was published."""
    if archive.writing is None or archive.final is None:
        return False
    # A JVM still running after the wait may be mid-write: its file is not published.
    ok = _stop_jvm(spark) and archive.writing.is_file() and archive.writing.stat().st_size > 0
    try:
        if ok:
            os.replace(archive.writing, archive.final)
        _tidy(archive.final)
    except OSError:
        ok = False
    finally:
        with contextlib.suppress(OSError):
            archive.writing.unlink(missing_ok=True)
    return ok


def _stop_jvm(spark: Any) -> bool:  # noqa: ANN401 - a SparkSession
    """End the driver JVM and wait for it (it writes the archive as it exits); True once it exited
    cleanly. The JVM exits when its standard input closes (pyspark's gateway server), which is
    what happens at Python's exit too."""
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway  # noqa: SLF001 - pyspark keeps the launched JVM here
    proc = getattr(gateway, "proc", None)
    if gateway is not None:
        with contextlib.suppress(Exception):
            gateway.shutdown()
    SparkContext._gateway = None  # noqa: SLF001 - a later session must launch a new JVM
    SparkContext._jvm = None  # noqa: SLF001
    if proc is None:
        return False
    with contextlib.suppress(Exception):
        proc.stdin.close()
    deadline = time.monotonic() + PUBLISH_WAIT_S
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc.poll() == 0


def _tidy(final: Path) -> None:
    """Remove the folder's other archives (an older key) and temporaries of runs that died."""
    now = time.time()
    for p in final.parent.iterdir():
        if p == final:
            continue
        stale_temp = p.name.startswith(".spark-driver-") and now - p.stat().st_mtime > STALE_TEMP_S
        if (p.name.startswith("spark-driver-") and p.suffix == SUFFIX) or stale_temp:
            with contextlib.suppress(OSError):
                p.unlink()
