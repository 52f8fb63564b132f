"""``queueops report``: a self-contained HTML file from real gold tables and a real audit log."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import insert

from queueops.report import write_report
from queueops.store import open_engine
from queueops.store.schema import audit_log
from tests.pipeline.conftest import HOSTILE
from tests.pipeline.test_cli import cli

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]  # Spark on a busy 2-core machine


def _audit(tmp_path: Path):  # noqa: ANN202 - a SQLAlchemy Engine
    engine = open_engine(f"sqlite:///{tmp_path / 'store.db'}")
    with engine.begin() as conn:
        conn.execute(insert(audit_log), [
            {"start_time": datetime(2026, 11, 20, 3, 10, tzinfo=UTC), "end_time": datetime(2026, 11, 20, 3, 11, tzinfo=UTC),
             "user_name": "alice", "role": "operator", "action": "watermark-reset", "target": "t1", "queue": "q3",
             "command": "UPDATE ...", "rows_affected": 1, "outcome": "ok", "error": ""},
            {"start_time": datetime(2026, 11, 18, 9, 0, tzinfo=UTC), "end_time": None, "user_name": "bob",
             "role": "operator", "action": "rebuild", "target": "t1", "queue": "old", "command": "REINDEX",
             "rows_affected": None, "outcome": "ok", "error": ""},
        ])
    return engine


def test_report_from_gold_and_audit(story: dict, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    res = write_report(story["inc"], out, audit_engine=_audit(tmp_path))
    text = out.read_text()
    # The 24 hours before the last run's as_of (04:00): findings, forecasts, the one action inside.
    assert res["start"].startswith("2026-11-19T04:00") and res["end"].startswith("2026-11-20T04:00")
    assert res["findings"] > 0 and res["actions"] == 1 and res["problems"] == []
    assert "watermark-reset" in text and "alice" in text and ">bob<" not in text
    assert "stranded_items" in text and "stuck_leases" in text and "t1/q3" in text
    assert "queueops act watermark-reset --queue q3" in text
    # self-contained: plotly.js inline, no external script or stylesheet
    assert "plotly.js" in text.lower() or "Plotly" in text
    assert not re.search(r"<script[^>]+src=", text) and "<link" not in text
    assert text.count('class="plotly-graph-div"') >= 3
    # a hostile queue name is escaped everywhere
    assert HOSTILE not in text and "&lt;script&gt;alert(&#x27;q&#x27;)&lt;/script&gt;" in text
    meta = re.search(r'name="queueops-report" content="([^"]+)"', text).group(1)
    assert json.loads(meta.replace("&quot;", '"'))["actions"] == 1


def test_report_without_gold_says_how_to_make_it(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    res = write_report(tmp_path / "no-gold", out, day="2026-11-20")
    text = out.read_text()
    assert res["findings"] == 0 and "queueops pipeline run" in text and "No findings" in text


def test_report_command(story: dict, tmp_path: Path) -> None:
    conf = tmp_path / "q.toml"
    conf.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "store.db"}"\n[lake]\npath = "{tmp_path / "nolake"}"\n'
                    f'[pipeline]\nout = "{story["inc"]}"\n[report]\npath = "{tmp_path / "daily.html"}"\n'
                    '[[targets]]\nname = "t1"\ndialect = "postgresql"\nurl = "postgresql://u@127.0.0.1/db"\n')
    proc = cli("report", "--config", str(conf), "--date", "2026-11-20", "--json")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["path"] == str(tmp_path / "daily.html") and res["findings"] > 0
    assert (tmp_path / "daily.html").stat().st_size > 1_000_000  # plotly.js is inlined
    bad = cli("report", "--config", str(conf), "--date", "20-11-2026")
    assert bad.returncode == 2 and "YYYY-MM-DD" in bad.stderr
