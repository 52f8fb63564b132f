"""The console's config file, read once per version of the file.

One plain cache keyed by the file's path and modification time, shared by the Streamlit pages
(:mod:`console.context`) and the sign-in endpoint (:mod:`console.signin`, which runs outside any
Streamlit script and so cannot use ``st.cache_resource``): both see the same ``Config`` object,
and editing the file reloads it for both at their next read.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from queueops import config as config_mod

Key = tuple[str, float]  # (resolved path, modification time; 0.0 when the file cannot be read)

_lock = threading.Lock()
_cache: dict[Key, config_mod.Config] = {}


def config_path() -> Path:
    return Path(os.environ.get("QUEUEOPS_CONFIG") or config_mod.DEFAULT_CONFIG).resolve()


def key(path: Path | None = None) -> Key:
    path = path or config_path()
    try:
        return str(path), path.stat().st_mtime
    except OSError:
        return str(path), 0.0


def current() -> tuple[Key, config_mod.Config]:
    """The config as the file is now, with its key; a ``ConfigError`` is raised (never cached)."""
    k = key()
    with _lock:
        cfg = _cache.get(k)
    if cfg is None:
        cfg = config_mod.load(Path(k[0]))
        with _lock:
            for old in [o for o in _cache if o[0] == k[0]]:  # an older version of the same file
                del _cache[old]
            cfg = _cache.setdefault(k, cfg)
    return k, cfg


def load() -> config_mod.Config:
    return current()[1]
