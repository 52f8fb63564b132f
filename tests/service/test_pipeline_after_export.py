"""``[pipeline] after_export``: the service runs the Spark pipeline once the lake has new hours.

One real run end to end (the service exports an hour of history, the child ``queueops pipeline
run`` writes gold tables on local Spark, SIGTERM reports the run), and the runner's own rules
(one run at a time, a failure is retried by the next export, shutdown stops the child) with
children that fail or wait.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd

from queueops.rows import SnapshotRow
from queueops.service.child import ChildCommand, pipeline_command
from queueops.store import open_engine
from queueops.store.db import ensure_schema
from queueops.store.writer import StoreWriter
from tests.service.conftest import write_config


def test_the_service_runs_the_pipeline_after_an_export(lab, tmp_path: Path, service_process) -> None:  # noqa: ANN001
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_engine(store_url)
    ensure_schema(store)
    # An hour of history, closed long ago: the first export writes it, then the pipeline runs.
    old_hour = (datetime.now(UTC) - timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    StoreWriter(store, 100).write([SnapshotRow(old_hour + timedelta(minutes=m), "lab", "queueops_lab", "delete",
                                               "depth", float(m)) for m in range(12)])
    store.dispose()
    gold = tmp_path / "gold"
    config = write_config(lab, tmp_path / "svc.toml", store_url=store_url, lake=tmp_path / "lake",
                          schedule="fast_s = 5\nslow_s = 30",
                          extra=f'\n[pipeline]\nout = "{gold}"\nafter_export = true\ndriver_memory = "768m"\n')
    svc = service_process(config)
    assert svc.wait_log(r"pipeline run (ok|exited|stopped)", 300), svc.text()
    assert re.search(r"pipeline run ok in \d+ s: incremental run recomputed 1 hour\(s\)", svc.text()), svc.text()

    rollups = pd.read_parquet(gold / "rollups")
    hourly = rollups[(rollups["window"] == "1h") & (rollups["queue"] == "delete") & (rollups["metric"] == "depth")]
    assert len(hourly) == 1
    assert hourly.iloc[0]["samples"] == 12 and hourly.iloc[0]["max"] == 11.0

    svc.proc.send_signal(signal.SIGTERM)
    assert svc.wait(60) == 0, svc.text()
    summary = json.loads(re.search(r"queueops collect stopped: (\{.*\})", svc.text()).group(1))
    assert summary["pipeline_runs"] == 1 and summary["pipeline_failures"] == 0
    assert summary["lake_hours"] >= 1  # the old hour, and the empty closed hours after it


def _child(script: str, timeout_s: float = 3600) -> ChildCommand:
    """A stand-in child (its process handling is what these tests exercise): ``python -c script``."""
    return ChildCommand("stand-in", ["-c", script], None, timeout_s=timeout_s, program=[sys.executable])


def test_a_failed_run_is_logged_and_left_pending(caplog) -> None:  # noqa: ANN001
    runner = pipeline_command("/nonexistent/queueops.toml")
    assert runner.run() is False
    assert runner.failures == 1 and runner.pending
    assert any("pipeline run exited 2" in r.getMessage() and "/nonexistent/queueops.toml" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_one_run_at_a_time_and_shutdown_stops_the_child() -> None:
    runner = _child("import time; time.sleep(120)")
    results: list[bool | None] = []
    first = threading.Thread(target=lambda: results.append(runner.run()))
    first.start()
    deadline = time.monotonic() + 30
    while runner._proc is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert runner._proc is not None
    assert runner.run() is None, "a second run must not start while one is in flight"
    assert runner.skipped == 1 and runner.pending

    started = time.monotonic()
    runner.stop()
    first.join(30)
    assert not first.is_alive() and time.monotonic() - started < 30
    assert results == [False] and runner.failures == 1
    assert runner.run() is None, "no run starts once the service is stopping"


def test_a_run_that_outlives_its_timeout_is_killed() -> None:
    runner = _child("import time; time.sleep(120)", timeout_s=1)
    started = time.monotonic()
    assert runner.run() is False
    assert time.monotonic() - started < 30
    assert runner.pending
    runner.args = ["-c", "print('{\"up_to_date\": true, \"lake_hours\": 3}')"]
    assert runner.run() is True and not runner.pending
