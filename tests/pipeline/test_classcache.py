"""The small run's class-data-sharing archive: written by the first run, mapped by the next, named
by what it depends on, and never a cause of failure or of noise on standard output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import classcache
from tests.conftest import ROOT
from tests.pipeline.lakes import T0, series, write_lake


def test_plan_writes_an_archive_then_maps_it_and_is_keyed_by_the_options(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(classcache.ENV_DIR, str(tmp_path / "cds"))
    first = classcache.plan("-XX:+UseSerialGC")
    assert first.writing is not None and first.final is not None
    assert first.writing.parent == tmp_path / "cds" and first.final.parent == tmp_path / "cds"
    assert f"-XX:ArchiveClassesAtExit={first.writing}" in first.options
    assert "-Xlog:disable" in first.options  # the JVM's archive warnings never reach standard output

    first.final.write_bytes(b"archive")
    again = classcache.plan("-XX:+UseSerialGC")
    assert again.writing is None and f"-XX:SharedArchiveFile={first.final}" in again.options
    other = classcache.plan("-XX:+UseParallelGC")
    assert other.final != first.final and other.writing is not None  # other options, another archive

    monkeypatch.setenv(classcache.ENV_DIR, "")
    assert classcache.plan("-XX:+UseSerialGC") == classcache.Plan("")  # switched off: no options at all


def run_cli(lake: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "queueops.cli", "pipeline", "run", "--lake", str(lake),
                           "--out", str(out), "--quiet", "--json"], capture_output=True, text=True, cwd=ROOT,
                          timeout=600, env={**os.environ, **env})


@pytest.mark.spark
@pytest.mark.timeout(1200)
def test_the_first_small_run_writes_the_archive_and_the_next_one_maps_it(tmp_path: Path) -> None:
    lake, cds = tmp_path / "lake", tmp_path / "cds"
    write_lake(lake, series(T0, 60, [0, 0, 3, 3, 3, 3], "q_stuck", "stuck_leases"))
    env = {classcache.ENV_DIR: str(cds)}

    first = run_cli(lake, tmp_path / "gold1", env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert len(first.stdout.strip().splitlines()) == 1  # the summary only: no JVM message on stdout
    assert json.loads(first.stdout)["recomputed_hours"] == ["2026-11-20T00"]
    archives = sorted(p.name for p in cds.iterdir())
    assert len(archives) == 1 and archives[0].startswith("spark-driver-") and archives[0].endswith(".jsa"), archives
    assert (cds / archives[0]).stat().st_size > 10 * 2**20  # classes, not an empty file

    # -Xshare:on makes the JVM refuse to start when it cannot map the archive it was given.
    second = run_cli(lake, tmp_path / "gold2", {**env, "JAVA_TOOL_OPTIONS": "-Xshare:on"})
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout)["recomputed_hours"] == ["2026-11-20T00"]
    assert sorted(p.name for p in cds.iterdir()) == archives  # mapped, not written again
