"""Where the suite's time goes: per folder and per file, from the JUnit report ``make test`` writes.

``make test`` prints the 25 slowest tests; this sums every test's setup, call and teardown (what
pytest's JUnit report records per test case) by folder and by file, so that the suite's minutes can be
traced to the files that spend them.

    .venv/bin/python scripts/test_times.py                       # artifacts/pytest-junit.xml
    .venv/bin/python scripts/test_times.py --top 30 path/to/junit.xml
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

DEFAULT = Path("artifacts/pytest-junit.xml")


def times(report: Path) -> Counter[str]:
    """Seconds per test file (``tests/x/test_y.py``), from a JUnit report's test cases."""
    out: Counter[str] = Counter()
    for case in ET.parse(report).getroot().iter("testcase"):
        # A module skipped whole has no classname; its name is the module's dotted path.
        module = (case.get("classname") or case.get("name", "")).split(".")
        # pytest's classname is the module path with dots (plus a class name when there is one).
        parts = [p for p in module if not p[:1].isupper()]
        out["/".join(parts) + ".py"] += float(case.get("time") or 0.0)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", nargs="?", type=Path, default=DEFAULT, help=f"JUnit XML (default {DEFAULT})")
    ap.add_argument("--top", type=int, default=20, help="files to list, slowest first (default 20)")
    a = ap.parse_args(argv)
    if not a.report.is_file():
        print(f"{a.report}: no such report; run 'make test' first (it writes {DEFAULT})", file=sys.stderr)
        return 2
    files = times(a.report)
    folders: Counter[str] = Counter()
    for f, s in files.items():
        folders[f.rsplit("/", 1)[0]] += s
    total = sum(files.values())
    share = 100 / total if total else 0.0  # an empty report has no shares
    print(f"{total:8.1f} s  all {len(files)} files")
    print("\nper folder")
    for folder, s in folders.most_common():
        print(f"{s:8.1f} s  {s * share:5.1f} %  {folder}")
    print(f"\nslowest {a.top} files")
    for f, s in files.most_common(a.top):
        print(f"{s:8.1f} s  {s * share:5.1f} %  {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
