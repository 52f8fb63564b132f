"""File-system access of the pipeline's driver: list lake partitions, keep state, drop partitions.

A local path (or ``file:`` URI) is handled with :mod:`os` (fast: no JVM round trip per file). Any
other scheme (``hdfs://``, ``s3a://``, ``abfss://`` ...) goes through Hadoop's FileSystem API in the
driver JVM, so the pipeline reads and writes wherever Spark can, unchanged on a cluster.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

_DATE = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")
_HOUR = re.compile(r"^hour=(\d{2})$")


@dataclass(frozen=True)
class Partition:
    """One closed hour of the lake: ``<lake>/snapshots/date=D/hour=HH`` and its data files."""

    hour: datetime          # UTC start of the hour
    path: str               # the partition folder
    files: tuple[str, ...]  # data files (full paths)
    bytes: int
    mtime_ms: int           # newest modification time among its files

    @property
    def key(self) -> str:
        return hour_key(self.hour)

    def signature(self) -> dict[str, Any]:
        return {"files": len(self.files), "bytes": self.bytes, "mtime_ms": self.mtime_ms,
                "names": sorted(f.rsplit("/", 1)[-1] for f in self.files)}


def hour_key(hour: datetime) -> str:
    return hour.strftime("%Y-%m-%dT%H")


def parse_hour_key(key: str) -> datetime:
    return datetime.strptime(key, "%Y-%m-%dT%H").replace(tzinfo=UTC)


def _is_data_file(name: str) -> bool:
    # Writers stage into hidden / underscore names and rename when done; those are not data yet.
    return name.endswith(".parquet") and not name.startswith((".", "_"))


class Storage(Protocol):
    def list_partitions(self, root: str) -> list[Partition]: ...
    def read_text(self, path: str) -> str | None: ...
    def write_text(self, path: str, text: str) -> None: ...
    def delete(self, path: str) -> bool: ...
    def exists(self, path: str) -> bool: ...
    def list_dirs(self, path: str) -> list[str]: ...


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])


def _hour_of(date_name: str, hour_name: str) -> datetime | None:
    d, h = _DATE.match(date_name), _HOUR.match(hour_name)
    if not d or not h or int(h.group(1)) > 23:
        return None
    try:
        return datetime.strptime(f"{d.group(1)} {h.group(1)}", "%Y-%m-%d %H").replace(tzinfo=UTC)
    except ValueError:
        return None


class LocalStorage:
    """The local file system (paths or ``file:`` URIs)."""

    @staticmethod
    def _p(path: str) -> Path:
        return Path(path.removeprefix("file://") if path.startswith("file://") else path.removeprefix("file:"))

    def list_partitions(self, root: str) -> list[Partition]:
        base = self._p(root)
        out: list[Partition] = []
        if not base.is_dir():
            return out
        for d in sorted(os.scandir(base), key=lambda e: e.name):
            if not d.is_dir() or not _DATE.match(d.name):
                continue
            for h in sorted(os.scandir(d.path), key=lambda e: e.name):
                hour = _hour_of(d.name, h.name) if h.is_dir() else None
                if hour is None:
                    continue
                files, size, mtime = [], 0, 0
                for f in sorted(os.scandir(h.path), key=lambda e: e.name):
                    if f.is_file() and _is_data_file(f.name):
                        st = f.stat()
                        files.append(str(Path(f.path).resolve()))
                        size += st.st_size
                        mtime = max(mtime, st.st_mtime_ns // 1_000_000)
                if files:
                    out.append(Partition(hour, str(Path(h.path).resolve()), tuple(files), size, mtime))
        return out

    def read_text(self, path: str) -> str | None:
        try:
            return self._p(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def write_text(self, path: str, text: str) -> None:
        """Atomic: write a temporary file, then rename over the old one."""
        p = self._p(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, p)

    def delete(self, path: str) -> bool:
        p = self._p(path)
        if p.is_dir():
            shutil.rmtree(p)
            return True
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
            return True
        return False

    def exists(self, path: str) -> bool:
        return self._p(path).exists()

    def list_dirs(self, path: str) -> list[str]:
        p = self._p(path)
        if not p.is_dir():
            return []
        return sorted(e.name for e in os.scandir(p) if e.is_dir())


class MissingFileSystem(ValueError):
    """Spark's Hadoop has no file system for a path's scheme (``s3a://`` without hadoop-aws)."""


_NO_FS = re.compile(r"Class \S+FileSystem not found|No FileSystem for scheme \S+")


class HadoopStorage:
    """Any file system the driver JVM's Hadoop configuration knows (HDFS, S3A, ABFS, GCS ...)."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()

    def _fs(self, path: str) -> tuple[Any, Any]:
        p = self._jvm.org.apache.hadoop.fs.Path(path)
        try:
            return p.getFileSystem(self._conf), p
        except Exception as exc:  # py4j's Py4JJavaError, whose text is the Java exception's
            missing = _NO_FS.search(str(exc))
            if missing is None:
                raise
            raise MissingFileSystem(
                f"{path}: Spark has no file system for it ({missing.group(0)}): the pyspark wheel carries "
                "Hadoop's client only, no hadoop-aws or other cloud connector; add its jars with --conf "
                "spark.jars=... (docs/pipeline.md, 'A lake on object storage')") from None

    def _ls(self, path: str) -> list[Any]:
        fs, p = self._fs(path)
        if not fs.exists(p):
            return []
        return list(fs.listStatus(p))

    def list_partitions(self, root: str) -> list[Partition]:
        out: list[Partition] = []
        for d in self._ls(root):
            dname = d.getPath().getName()
            if not d.isDirectory() or not _DATE.match(dname):
                continue
            for h in self._ls(d.getPath().toString()):
                hour = _hour_of(dname, h.getPath().getName()) if h.isDirectory() else None
                if hour is None:
                    continue
                files, size, mtime = [], 0, 0
                for f in self._ls(h.getPath().toString()):
                    name = f.getPath().getName()
                    if f.isFile() and _is_data_file(name):
                        files.append(f.getPath().toString())
                        size += int(f.getLen())
                        mtime = max(mtime, int(f.getModificationTime()))
                if files:
                    out.append(Partition(hour, h.getPath().toString(), tuple(sorted(files)), size, mtime))
        return sorted(out, key=lambda p: p.hour)

    def read_text(self, path: str) -> str | None:
        fs, p = self._fs(path)
        if not fs.exists(p):
            return None
        stream = fs.open(p)
        try:
            reader = self._jvm.java.io.BufferedReader(self._jvm.java.io.InputStreamReader(stream, "UTF-8"))
            lines = []
            while (line := reader.readLine()) is not None:
                lines.append(line)
            return "\n".join(lines)
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        fs, p = self._fs(path)
        tmp = self._jvm.org.apache.hadoop.fs.Path(f"{path}.{uuid.uuid4().hex}.tmp")
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(text.encode("utf-8")))
        finally:
            out.close()
        fs.delete(p, False)
        if not fs.rename(tmp, p):
            raise OSError(f"cannot rename {tmp} to {path}")

    def delete(self, path: str) -> bool:
        fs, p = self._fs(path)
        return bool(fs.delete(p, True))

    def exists(self, path: str) -> bool:
        fs, p = self._fs(path)
        return bool(fs.exists(p))

    def list_dirs(self, path: str) -> list[str]:
        return sorted(s.getPath().getName() for s in self._ls(path) if s.isDirectory())


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file:")


# pyarrow's URI schemes (the exporter's [lake] path, queueops/lake/fs.py) whose Hadoop file system
# has another name: S3 is the S3A connector (hadoop-aws), Google Cloud Storage the gs connector.
_HADOOP_SCHEMES = {"s3": "s3a", "gcs": "gs"}


def hadoop_uri(path: str) -> str:
    """A lake or gold path as Spark reads it: a local path unchanged; a pyarrow URI with its scheme
    renamed to Hadoop's (``s3://bucket/lake?region=eu-west-1`` -> ``s3a://bucket/lake``) and its
    query dropped (pyarrow's options; Spark takes them as ``spark.hadoop.fs.s3a.*`` settings)."""
    if is_local(path):
        return path
    scheme, rest = path.split("://", 1)
    return f"{_HADOOP_SCHEMES.get(scheme.lower(), scheme)}://{rest.split('?', 1)[0]}"


def storage_for(path: str, spark: Any | None = None) -> Storage:
    if is_local(path):
        return LocalStorage()
    if spark is None:
        raise ValueError(f"{path}: a non-local path needs the Spark session's Hadoop file system")
    return HadoopStorage(spark)
