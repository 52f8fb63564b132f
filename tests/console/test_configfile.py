"""console.configfile: the pages and the sign-in endpoint read the config through one cache keyed
by the file's path and modification time (it replaced two copies of the same reload-on-change)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from console import configfile
from queueops.config import ConfigError

TEXT = """
[[targets]]
name = "t"
dialect = "postgresql"
url = "postgresql://u@h/d"

[store]
url = "sqlite:///{store}"
"""


def test_one_config_per_version_of_the_file_and_a_broken_one_is_never_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "console.toml"
    text = TEXT.format(store=tmp_path / "store.db")
    path.write_text(text)
    monkeypatch.setenv("QUEUEOPS_CONFIG", str(path))
    first = configfile.load()
    assert configfile.load() is first  # the same version: read once
    path.write_text(text + "# edited\n")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    second = configfile.load()
    assert second is not first and configfile.load() is second
    assert sum(1 for k in configfile._cache if k[0] == str(path.resolve())) == 1  # the old version is dropped
    path.write_text("[[queues]]\nname = 1\n")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 2 * 10**9))
    with pytest.raises(ConfigError):
        configfile.load()
    with pytest.raises(ConfigError):  # not cached: still read (and refused) every time
        configfile.load()
