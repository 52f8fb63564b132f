"""The repository stands alone: no file of it reaches outside the checkout at run time.

A clone on another machine has only the repository. A path of the machine the code was written on
(the checkout's own absolute path or its parent folder, a home folder) or a reference to the
sibling folder that held the project's source material would pass here and fail there.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT_SUFFIXES = {".py", ".sql", ".toml", ".md", ".sh", ".cfg", ".ini", ".txt", ".yml", ".yaml", ".json", ".js",
                 ".html", ".css", ""}


def _tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    return [ROOT / name for name in out.split("\0") if name and (ROOT / name).is_file()]


def _forbidden() -> re.Pattern[str]:
    sibling = "shared"
    homes = ["/" + "root/", "/" + "home/[a-z]"]
    parts = [re.escape("../" + sibling), re.escape(str(ROOT)), *homes]
    parent = str(ROOT.parent)
    if parent not in ("/", "/tmp"):
        parts.append(re.escape(parent.rstrip("/") + "/"))
    return re.compile("|".join(parts))


def _offences(files: list[Path], pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in files:
        if path.suffix not in TEXT_SUFFIXES and path.name != "Makefile":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                found.append(f"{name}:{n}: {line.strip()[:120]}")
    return found


def test_no_file_of_the_repository_names_a_path_outside_it() -> None:
    files = _tracked_files()
    assert len(files) > 100, "git listed too few files: the walk is broken"
    offences = _offences(files, _forbidden())
    assert not offences, "files that reach outside the repository:\n" + "\n".join(offences)


def test_the_walk_catches_an_outside_path(tmp_path: Path) -> None:
    # The check itself could silently match nothing; show it flags each kind of offence.
    bad = tmp_path / "bad.py"
    # The checkout's own path is always forbidden; its parent only when that is not / or /tmp (a clone
    # made in /tmp, as CI may, must still pass), so the parent gets its own line only then.
    lines = [f'REF = "{ROOT}/x"', 'OTHER = "../' + 'shared/reference/x.md"', "ok = 1"]
    expected = ["1", "2"]
    if str(ROOT.parent) not in ("/", "/tmp"):
        lines.append(f'UP = "{ROOT.parent}/" + "x"')
        expected.append("4")
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert [o.split(":")[1] for o in _offences([bad], _forbidden())] == expected
