"""The pipeline's command lines: ``queueops pipeline run`` errors, ``spark-submit pipeline/run.py``
unchanged, and the progress display."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.progress import Progress
from tests.conftest import ROOT
from tests.pipeline.lakes import T0, series, write_lake

SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"


def cli(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "queueops.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, env={**os.environ, **(env or {})})


def test_run_without_paths_is_a_clear_error(tmp_path: Path) -> None:
    proc = cli("pipeline", "run", env={"QUEUEOPS_CONFIG": str(tmp_path / "absent.toml")})
    assert proc.returncode == 2
    assert "give --lake and --out" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_lake_and_bad_since_are_clear_errors(tmp_path: Path) -> None:
    proc = cli("pipeline", "run", "--lake", str(tmp_path / "nope"), "--out", str(tmp_path / "gold"))
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    proc = cli("pipeline", "run", "--lake", str(tmp_path), "--out", str(tmp_path / "gold"), "--since", "soon")
    assert proc.returncode == 2 and "--since 'soon'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.spark
@pytest.mark.timeout(1800)
def test_spark_submit_runs_the_job_unchanged(tmp_path: Path) -> None:
    lake, out = tmp_path / "lake", tmp_path / "gold"
    rows = series(T0, 60, [0, 0, 3, 3, 3, 3], "q_stuck", "stuck_leases")
    rows += series(T0, 60, [float(i) for i in range(6)], "q_stuck", "depth")
    write_lake(lake, rows)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run(
        [str(SPARK_SUBMIT), "--master", "local[2]", "--driver-memory", "512m",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
         "--driver-java-options", f"-Dlog4j2.configurationFile=file:{ROOT / 'pipeline' / 'log4j2.properties'}",
         str(ROOT / "pipeline" / "run.py"), "--lake", str(lake), "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["recomputed_hours"] == ["2026-11-20T00"]
    assert [(f["rule"], f["queue"]) for f in summary["findings"]] == [("stuck_leases", "q_stuck")]
    assert (out / "rollups" / "window=1h" / "date=2026-11-20" / "hour=00").is_dir()
    # spark-submit merges the Python driver's stderr into its stdout
    assert " INFO " not in proc.stderr + proc.stdout  # quiet logs: the shipped log4j2 file is at level error
    assert "does not yet fully support pandas" not in proc.stderr + proc.stdout  # constraints.txt's pandas
    assert "[pipeline] rollups: done" in proc.stdout + proc.stderr  # the progress display


@pytest.mark.spark
@pytest.mark.timeout(1800)
def test_progress_shows_running_stages(spark: Any) -> None:
    stream = io.StringIO()
    progress = Progress(spark, stream, interval_s=0.05).start()
    try:
        with progress.step("sleepy"):
            spark.range(0, 2, 1, 2).selectExpr("java_method('java.lang.Thread', 'sleep', 1500L)").collect()
    finally:
        progress.stop()
    text = stream.getvalue()
    assert "[pipeline] sleepy [" in text and "stage " in text and "/2" in text
    assert "[pipeline] sleepy: done in" in text


@pytest.mark.spark
@pytest.mark.timeout(1800)
def test_a_lake_on_s3_without_hadoop_aws_is_a_clear_error(spark: Any) -> None:
    """The pyspark wheel has no S3A connector (hadoop-aws): the pipeline says so and where the
    docs tell what to add, instead of a Java stack trace (the CLI prints it and exits 2)."""
    from pipeline.storage import HadoopStorage, MissingFileSystem

    with pytest.raises(MissingFileSystem, match="S3AFileSystem not found.*hadoop-aws.*object storage"):
        HadoopStorage(spark).list_partitions("s3a://bucket/queueops/lake/snapshots")
