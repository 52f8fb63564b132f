"""Where the lake lives (any filesystem pyarrow supports) and how a partition is replaced.

A re-exported hour must never be seen twice (old and new files side by side) nor half written.
Each hour is written into a hidden sibling folder (``.hour=HH.tmp-…``: pyarrow, pandas and Spark
skip names starting with a dot) and then swapped in. An hour's two kinds (snapshots, status) are
both written before either is swapped in, under a publish record in ``.publishing/`` that a
crash leaves behind and the next export finishes (:func:`repair_publishing`): both or neither. On a local Linux filesystem the swap is one
``renameat2(RENAME_EXCHANGE)`` call, atomic for readers; elsewhere (object stores, HDFS, or a
filesystem without exchange) the old folder is moved aside first, so a reader can find the hour
briefly absent, never duplicated.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pyarrow import fs as pafs

from queueops.private import private_dir

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@dataclass(frozen=True)
class Lake:
    fs: pafs.FileSystem
    root: str  # no trailing slash

    @property
    def local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def partition(self, kind: str, hour: datetime) -> tuple[str, str]:
        """(date folder, final hour folder) of ``kind`` (``snapshots`` or ``status``) for ``hour``."""
        date_dir = f"{self.root}/{kind}/date={hour:%Y-%m-%d}"
        return date_dir, f"{date_dir}/hour={hour:%H}"

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound


def resolve(path: str, base_dir: Path) -> Lake:
    """A lake path from config: a URI (``s3://…``, ``hdfs://…``, ``file://…``) or a local path
    (relative paths resolve against the config file's folder)."""
    if "://" in path:
        filesystem, root = pafs.FileSystem.from_uri(path)
        return Lake(filesystem, root.rstrip("/"))
    p = Path(path)
    p = p if p.is_absolute() else base_dir / p
    return Lake(pafs.LocalFileSystem(), str(p.resolve()).rstrip("/"))


def temp_sibling(final: str, tag: str = "tmp") -> str:
    parent, _, name = final.rpartition("/")
    return f"{parent}/.{name}.{tag}-{uuid.uuid4().hex[:12]}"


def _exchange(a: str, b: str) -> bool:
    """Atomically swap two local paths; False when the kernel or filesystem cannot."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return rc == 0


def publish(lake: Lake, temp: str, final: str) -> str:
    """Put the folder ``temp`` in place of ``final``; return how (``exchange``, ``move-aside``, ``new``)."""
    if not lake.exists(final):
        lake.fs.move(temp, final)
        return "new"
    if lake.local and _exchange(temp, final):
        lake.fs.delete_dir(temp)  # now holds the old partition
        return "exchange"
    old = temp_sibling(final, "old")
    lake.fs.move(final, old)
    lake.fs.move(temp, final)
    lake.fs.delete_dir(old)
    return "move-aside"


TOKEN_KEY = "queueops.export"  # Parquet metadata: which export wrote a file
PUBLISHING = ".publishing"     # under the lake root: publish records of hours being published


def _token(lake: Lake, folder: str) -> str | None:
    """The export token in ``folder``'s part file (None: no file, or not written by an export)."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(f"{folder}/part-0.parquet", filesystem=lake.fs).metadata or {}
    except (OSError, ValueError):
        return None
    raw = meta.get(TOKEN_KEY.encode())
    return raw.decode() if raw else None


def _write_record(lake: Lake, path: str, body: dict[str, object]) -> None:
    """Write a small JSON file whole or not at all (written aside, then moved in place)."""
    lake.fs.create_dir(path.rpartition("/")[0], recursive=True)
    temp = f"{path}.tmp-{uuid.uuid4().hex[:12]}"
    with lake.fs.open_output_stream(temp) as out:
        out.write(json.dumps(body).encode())
    lake.fs.move(temp, path)


def publish_together(lake: Lake, tag: str, token: str, parts: list[tuple[str, str]]) -> dict[str, str]:
    """Publish the complete temp folders ``parts`` ((temp, final) pairs, one per kind of an hour)
    as one: a publish record naming them is written first and removed after the last swap, so a
    crash in between is finished by :func:`repair_publishing`. Returns how each final was put in place.
    """
    if not parts:
        return {}
    record = f"{lake.root}/{PUBLISHING}/{tag}.json"
    _write_record(lake, record, {"hour": tag, "token": token, "parts": [list(p) for p in parts]})
    hows = {final: publish(lake, temp, final) for temp, final in parts}
    lake.fs.delete_file(record)
    return hows


def repair_publishing(lake: Lake) -> list[str]:
    """Finish every publishing a crash cut; return the hours (tags) completed.

    For each part of a publish record: its temp folder still holding this export's file (the
    token) is not published yet and is swapped in now; a temp folder holding another file is the
    previous copy an exchange left behind, deleted; no temp folder: published already.
    """
    base = f"{lake.root}/{PUBLISHING}"
    if not lake.exists(base):
        return []
    done = []
    for info in lake.fs.get_file_info(pafs.FileSelector(base)):
        if info.type != pafs.FileType.File:
            continue
        if not info.base_name.endswith(".json"):
            lake.fs.delete_file(info.path)  # a record cut while being written: nothing was published
            continue
        with lake.fs.open_input_stream(info.path) as fh:
            body = json.loads(fh.read().decode())
        touched = False
        for temp, final in body.get("parts", []):
            if not lake.exists(temp):
                continue
            if _token(lake, temp) == body.get("token"):
                publish(lake, temp, final)
                touched = True
            else:
                lake.fs.delete_dir(temp)
        lake.fs.delete_file(info.path)
        if touched:
            done.append(str(body.get("hour")))
    return done


def clean_leftovers(lake: Lake, kind: str) -> int:
    """Tidy what a crashed export left behind; return how many folders were touched.

    A ``.tmp-`` folder is an unfinished write: deleted (its hour is exported again because the
    export was not recorded). An ``.old-`` folder whose hour is missing is the previous copy of a
    hour whose swap was cut between its two moves: moved back, so no hour goes missing.
    """
    base = f"{lake.root}/{kind}"
    if not lake.exists(base):
        return 0
    touched = 0
    for info in lake.fs.get_file_info(pafs.FileSelector(base, recursive=True)):
        name = info.base_name
        if info.type != pafs.FileType.Directory or not name.startswith(".hour="):
            continue
        final = f"{info.path.rpartition('/')[0]}/{name[1:].split('.', 1)[0]}"
        with contextlib.suppress(OSError):
            if ".old-" in name and not lake.exists(final):
                lake.fs.move(info.path, final)
                touched += 1
            elif ".tmp-" in name or ".old-" in name:
                lake.fs.delete_dir(info.path)
                touched += 1
    return touched


@contextlib.contextmanager
def export_lock(lake: Lake) -> Iterator[None]:
    """Serialise exporters on one machine (the service's hourly job and a manual ``lake export``).

    Only for local lakes (an advisory ``flock``); remote lakes rely on the swap being per hour.
    """
    if not lake.local:
        yield
        return
    import fcntl

    private_dir(Path(lake.root))
    with open(Path(lake.root) / ".export.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
