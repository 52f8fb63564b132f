"""scripts/test_times.py: the suite's time per folder and file, read from pytest's JUnit report (the
one ``make test`` writes), with a clear error when there is no report yet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "test_times.py"
REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.pipeline.test_cluster" name="test_a" time="80.5" />
<testcase classname="tests.pipeline.test_gold" name="test_b" time="10.0" />
<testcase classname="tests.pipeline.test_gold.TestHours" name="test_c" time="5.5" />
<testcase classname="tests.test_judge" name="test_d" time="4.0" />
<testcase classname="" name="tests.mssql.test_lab" time="0.000"><skipped /></testcase>
</testsuite></testsuites>
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_sums_per_folder_and_file_slowest_first(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(REPORT)
    out = run(str(report), "--top", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["100.0", "s", "all", "4", "files"]  # a module skipped whole counts too
    assert "96.0 s   96.0 %  tests/pipeline" in out.stdout  # the class's test counts to its file
    files = lines[lines.index("slowest 2 files") + 1:]
    assert [f.split()[-1] for f in files] == ["tests/pipeline/test_cluster.py", "tests/pipeline/test_gold.py"]
    assert "15.5 s" in files[1]


def test_no_report_says_how_to_get_one(tmp_path: Path) -> None:
    out = run(str(tmp_path / "missing.xml"))
    assert out.returncode == 2 and "run 'make test' first" in out.stderr
