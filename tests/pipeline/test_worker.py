"""The service's resident pipeline worker (issue 34): the hourly runs share one JVM.

Real runs through the service's own runner (:class:`queueops.service.child.ResidentCommand`) and a
real ``pipeline.worker`` process on local Spark: two hourly runs are served by the same worker
(one JVM start), a run that reads more lake hours goes to a fresh process, bad input is a clear
exit 2 without Spark, and a worker that died is replaced at the next run.
"""

from __future__ import annotations

import logging
import os
import signal
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest

from pipeline.worker import MARKER
from queueops.service.child import WORKER_MARKER, ResidentCommand, pipeline_summary
from tests.pipeline.lakes import T0, series, write_lake

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]  # Spark on a busy 2-core machine

H = timedelta(hours=1)


def test_the_service_and_the_worker_agree_on_the_reply_marker() -> None:
    assert WORKER_MARKER == MARKER


def _hour(h: int) -> list:
    return series(T0 + h * H, 60, [float(10 * h + i % 7) for i in range(60)], "q1", "depth")


def _runner(lake: Path, out: Path, *extra: str) -> ResidentCommand:
    return ResidentCommand("pipeline run", ["pipeline", "run", "--quiet", "--json", "--lake", str(lake),
                                            "--out", str(out), "--driver-memory", "768m", *extra], None,
                           summarize=pipeline_summary, timeout_s=900)


def _hours_in_gold(out: Path) -> list[str]:
    """The hours with hourly rollup rows in gold (their partition folders, each with rows)."""
    found = []
    for part in sorted((out / "rollups" / "window=1h").glob("date=*/hour=*")):
        assert len(pd.read_parquet(part)) > 0
        found.append(f"{part.parent.name.removeprefix('date=')}T{part.name.removeprefix('hour=')}")
    return found


def test_hourly_runs_reuse_one_worker_and_larger_runs_get_a_fresh_process(tmp_path: Path, caplog) -> None:  # noqa: ANN001
    lake, out = tmp_path / "lake", tmp_path / "gold"
    write_lake(lake, [r for h in range(3) for r in _hour(h)])
    runner = _runner(lake, out)
    caplog.set_level(logging.INFO, logger="queueops.service")
    try:
        bad = _runner(lake, out, "--since", "yesterday-ish")
        assert bad.run() is False and bad.failures == 1
        assert any("exited 2" in r.getMessage() and "--since 'yesterday-ish'" in r.getMessage()
                   for r in caplog.records), [r.getMessage() for r in caplog.records]
        bad.stop()

        assert runner.run() is True, [r.getMessage() for r in caplog.records]
        assert runner.worker_starts == 1 and runner._worker is not None
        pid = runner._worker.pid
        assert _hours_in_gold(out) == ["2026-11-20T00", "2026-11-20T01", "2026-11-20T02"]

        write_lake(lake, _hour(3))  # the next closed hour arrives: the hourly run
        assert runner.run() is True
        assert runner.worker_starts == 1 and runner._worker.pid == pid, "the second hour reused the worker's JVM"
        assert _hours_in_gold(out)[-1] == "2026-11-20T03"
        assert any("incremental run recomputed 1 hour(s)" in r.getMessage() for r in caplog.records)
        assert not any("fresh process" in r.getMessage() for r in caplog.records)

        # Five more hours at once read more than a small run: a fresh process runs them, the worker stays.
        write_lake(lake, [r for h in range(4, 9) for r in _hour(h)])
        assert runner.run() is True
        assert any("pipeline run in a fresh process (reads 6 lake hours)" in r.getMessage() for r in caplog.records)
        assert runner.worker_starts == 1 and runner._worker.poll() is None
        assert _hours_in_gold(out)[-1] == "2026-11-20T08"

        # A worker that died (say its JVM ran out of memory) is replaced by the next run.
        os.kill(pid, signal.SIGKILL)
        runner._worker.wait(60)
        write_lake(lake, _hour(9))
        assert runner.run() is True
        assert runner.worker_starts == 2 and runner._worker.pid != pid
        assert _hours_in_gold(out)[-1] == "2026-11-20T09"
        assert runner.runs == 4 and runner.failures == 0
    finally:
        runner.stop()
    assert runner._worker.wait(60) is not None
