"""``queueops report`` without Spark: gold tables written here with pyarrow in the pipeline's layout.

One severity (issue 32): a snapshot held for minutes and a session holding a queue's table are
root-cause findings in the report, judged by the judge's rules, and each queue's state is
judge.queue_state of its findings, as on the Overview. Gold on a URI (issue 32): read through
pyarrow's filesystem (``file://`` here; ``s3://`` goes the same way), and a URI pyarrow cannot
open is an error naming the setting and its value, not an empty report.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from queueops import config as config_mod
from queueops import judge
from queueops.report import write_report
from queueops.report.data import GoldError, gold_location

ROOT = Path(__file__).resolve().parents[1]
HOUR = datetime(2026, 11, 20, 3, tzinfo=UTC)


def _write(folder: Path, rows: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False), folder / "part-0.parquet")


def rollup(queue: str, metric: str, peak: float, note: str = "") -> dict:
    ts = pd.Timestamp(HOUR)
    return {"window_start": ts, "window_end": ts + pd.Timedelta(hours=1), "target": "lab", "database": "lab",
            "queue": queue, "metric": metric, "samples": 12, "min": 0.0, "mean": peak / 2, "max": peak, "p95": peak,
            "sum": peak, "first": 0.0, "last": peak, "first_ts": ts, "last_ts": ts + pd.Timedelta(minutes=55),
            "peak_note": note, "delta": None, "rate_per_s": None}


def make_gold(gold: Path, snapshot_s: float, lock_held_s: float | None) -> None:
    """One hour of rollups: the target's oldest snapshot, two queues' depth, and 'jobs' with a
    table-lock holder for ``lock_held_s``; one pipeline finding (stuck leases, warn) on 'mail'."""
    rows = [rollup("", "oldest_snapshot_age_s", snapshot_s, '{"pid": 42, "application_name": "report"}'),
            rollup("jobs", "depth", 10), rollup("mail", "depth", 3)]
    if lock_held_s is not None:
        rows += [rollup("jobs", "lock_blockers", 1), rollup("jobs", "lock_wait_max_s", lock_held_s)]
    _write(gold / "rollups" / "window=1h" / "date=2026-11-20" / "hour=03", rows)
    ts = pd.Timestamp(HOUR)
    _write(gold / "findings" / "date=2026-11-20" / "hour=03", [{
        "rule": "stuck_leases", "severity": "warn", "target": "lab", "database": "lab", "queue": "mail",
        "metric": "stuck_leases", "hour_start": ts, "first_ts": ts, "last_ts": ts, "value": 2.0, "threshold": 1.0,
        "evidence": "{}", "summary": "2 stuck leases", "action": "requeue"}])
    _write(gold / "forecasts", [{"as_of": pd.Timestamp(datetime(2026, 11, 20, 4, tzinfo=UTC)), "target": "lab",
                                 "database": "lab", "queue": "mail", "metric": "depth", "window_start": ts,
                                 "points": 12, "slope_per_h": 0.0, "intercept": 3.0, "r2": 0.0, "last_value": 3.0,
                                 "fitted_now": 3.0, "warn": 2000.0, "crit": 20000.0, "eta_warn": None,
                                 "eta_crit": None, "hours_to_crit": None, "status": "flat"}])


def test_root_causes_and_queue_states_follow_the_judge(tmp_path: Path) -> None:
    gold = tmp_path / "gold"
    make_gold(gold, snapshot_s=90, lock_held_s=75)
    res = write_report(gold, tmp_path / "r.html", day="2026-11-20")
    # 90 s of snapshot: the judge's warning on every queue of the target; 75 s of table lock: critical.
    assert judge.snapshot_state(90) == "warn" and judge.blocker_state(75, holds_table=True) == "crit"
    assert res["queue_states"] == {"lab/jobs": "crit", "lab/mail": "warn"}
    text = (tmp_path / "r.html").read_text()
    assert "Queue states" in text and "ghosts_held_by_snapshot" in text and "blocker" in text
    assert "a transaction held the oldest snapshot of lab for up to 90 s" in text


def test_a_young_snapshot_and_no_lock_leave_only_the_pipelines_findings(tmp_path: Path) -> None:
    gold = tmp_path / "gold"
    make_gold(gold, snapshot_s=30, lock_held_s=None)
    res = write_report(gold, tmp_path / "r.html", day="2026-11-20")
    assert res["queue_states"] == {"lab/mail": "warn"} and res["findings"] == 1


def test_a_queues_own_old_snapshot_levels_judge_it_in_the_report(tmp_path: Path) -> None:
    # 30 s of snapshot: under the judge's 60 s, past 'jobs' own 20 s (critical from 25 s there);
    # the command passes each queue's threshold as the console and the alerts read it.
    gold = tmp_path / "gold"
    make_gold(gold, snapshot_s=30, lock_held_s=None)
    own = config_mod.Threshold(warn=20, crit=25)
    res = write_report(gold, tmp_path / "r.html", day="2026-11-20",
                       snapshot_thresholds={("lab", "jobs"): own, ("lab", "mail"): None})
    assert res["queue_states"] == {"lab/jobs": "crit", "lab/mail": "warn"}  # mail: the pipeline's finding only
    assert "(old from 20 s, critical from 25 s)" in (tmp_path / "r.html").read_text()


def test_a_table_lock_is_a_warning_from_the_first_sample(tmp_path: Path) -> None:
    gold = tmp_path / "gold"
    make_gold(gold, snapshot_s=0, lock_held_s=5)
    assert write_report(gold, tmp_path / "r.html", day="2026-11-20")["queue_states"]["lab/jobs"] == "warn"


def test_gold_at_a_file_uri_is_read_through_pyarrow(tmp_path: Path) -> None:
    gold = tmp_path / "gold"
    make_gold(gold, snapshot_s=90, lock_held_s=None)
    res = write_report(gold.as_uri(), tmp_path / "r.html")  # no --date: the 24 h before the last as_of
    assert res["start"].startswith("2026-11-19T04:00") and res["problems"] == []
    assert res["queue_states"] == {"lab/jobs": "warn", "lab/mail": "warn"}
    assert gold.as_uri() in (tmp_path / "r.html").read_text()


def test_an_s3_gold_goes_to_pyarrows_s3_filesystem_not_to_a_local_folder() -> None:
    """Constructed only (no bucket is reachable here): the S3 filesystem and the key prefix, not
    a path 's3:/bucket/gold' under the config's folder that would read as no gold at all."""
    lake = gold_location("s3://bucket/queueops/gold?region=eu-west-1")
    assert type(lake.fs).__name__ == "S3FileSystem" and lake.root == "bucket/queueops/gold"


def test_a_uri_pyarrow_cannot_open_names_the_setting_and_value(tmp_path: Path) -> None:
    with pytest.raises(GoldError, match=r"\[pipeline\] out = 'nosuch://bucket/gold'"):
        write_report("nosuch://bucket/gold", tmp_path / "r.html")
    conf = tmp_path / "q.toml"
    conf.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "store.db"}"\n[lake]\npath = "{tmp_path / "lake"}"\n'
                    '[pipeline]\nout = "nosuch://bucket/gold"\n'
                    f'[report]\npath = "{tmp_path / "daily.html"}"\n'
                    '[[targets]]\nname = "t1"\ndialect = "postgresql"\nurl = "postgresql://u@127.0.0.1/db"\n')
    proc = subprocess.run([sys.executable, "-m", "queueops.cli", "report", "--config", str(conf), "--no-pipeline"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "[pipeline] out = 'nosuch://bucket/gold'" in proc.stderr
    assert not (tmp_path / "daily.html").exists()


def test_the_command_reads_a_file_uri_gold_from_the_config(tmp_path: Path) -> None:
    gold = tmp_path / "gold"
    make_gold(gold, snapshot_s=700, lock_held_s=None)
    conf = tmp_path / "q.toml"
    conf.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "store.db"}"\n[lake]\npath = "s3://bucket/lake"\n'
                    f'[pipeline]\nout = "{gold.as_uri()}"\n[report]\npath = "{tmp_path / "daily.html"}"\n'
                    '[[targets]]\nname = "t1"\ndialect = "postgresql"\nurl = "postgresql://u@127.0.0.1/db"\n')
    proc = subprocess.run([sys.executable, "-m", "queueops.cli", "report", "--config", str(conf), "--date",
                           "2026-11-20", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "is a URI: the pipeline is not run first" in proc.stderr  # the s3:// lake: said, not skipped silently
    res = json.loads(proc.stdout)
    assert res["queue_states"] == {"lab/jobs": "crit", "lab/mail": "crit"}  # 700 s: the judge's critical
    assert re.search(r"queues critical", (tmp_path / "daily.html").read_text())
