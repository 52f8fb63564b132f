"""Files and folders only their owner can read: the store (it holds the audit log, with every
statement an action ran) and the lake (every queue's figures) are created 0600 / 0700.

Only what queueops creates is given these modes; a folder or file that already exists keeps the
one its owner chose (an administrator's shared ``/var/lib`` folder is not ours to close).
"""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """Create ``path`` and any missing parents with mode 0700; an existing folder is left as it is."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=DIR_MODE)
        except FileExistsError:  # made meanwhile by another process: theirs to set
            continue
        folder.chmod(DIR_MODE)  # mkdir's mode is masked by the umask
    return path


def private_file(path: Path) -> Path:
    """Create an empty ``path`` with mode 0600 unless it exists (SQLite then opens it as a new,
    empty database, and gives its -wal and -shm files the same mode)."""
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
    except FileExistsError:
        return path
    os.fchmod(fd, FILE_MODE)
    os.close(fd)
    return path
