"""Adding a metric takes three files: one SQL file per dialect and the catalog entry.

docs/architecture.md ("How to add a metric") shows the worked example; this test does exactly
that in a throw-away copy of the product (its packages and sql/, nothing else changed): it writes
``sql/postgresql/queue_probe.sql``, ``sql/mssql/queue_probe.sql`` and appends the collector's and
its two metrics' entries to ``sql/metrics.toml``. The copy then collects from the real lab
database, writes the store, serves ``/metrics`` and draws the Overview; the rows it collected go
through the pipeline's rollups on the session's Spark. No Python file is touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT, Lab
from tests.pipeline.conftest import table
from tests.pipeline.lakes import write_lake

PG_SQL = """-- queue_probe: rows in the queue table (a worked example of adding a metric; exact count).
-- @block any
SELECT :queue AS queue, 'probe_rows' AS metric, (SELECT count(*) FROM {table})::float8 AS value, 'exact' AS note
UNION ALL
SELECT :queue, 'probe_rows_seen_total', (SELECT count(*) FROM {table})::float8, 'exact'
"""
MSSQL_SQL = """-- queue_probe: rows in the queue table (a worked example of adding a metric; exact count).
-- @block any
SELECT :queue AS queue, 'probe_rows' AS metric, CAST((SELECT COUNT_BIG(*) FROM {table}) AS float) AS value,
       'exact' AS note
UNION ALL
SELECT :queue, 'probe_rows_seen_total', CAST((SELECT COUNT_BIG(*) FROM {table}) AS float), 'exact'
"""
CATALOG = """
[collectors.queue_probe]
cadence = "fast"
description = "rows in the queue table (worked example)"

[metrics.probe_rows]
collector = "queue_probe"
kind = "gauge"
unit = "rows"
label = "Probe rows"
help = "Rows in the queue table, counted exactly"
warn = 2
crit = 1000000
overview = 8
chart = true

[metrics.probe_rows_seen_total]
collector = "queue_probe"
kind = "counter"
unit = "rows"
label = "Probe rows seen"
help = "Rows seen by the probe (running total)"
"""

# Runs inside the copy: collect, store, /metrics, Overview; prints what each of them shows.
SCRIPT = """
import json, sys
from datetime import timedelta
from prometheus_client import generate_latest
from collectors import registry, runner
from console.health import queue_health
from console.views import overview
from queueops import config as config_mod
from queueops.service.metrics import ServiceMetrics
from queueops.store import open_engine, reader
from queueops.store.writer import StoreWriter

cfg = config_mod.load(sys.argv[1])
target = cfg.targets[0]
res = runner.run_collectors(cfg, target, [registry.by_name("queue_probe")])
engine = open_engine(sys.argv[2])
assert StoreWriter(engine, bound=1000).write(res.rows, res.status).ok
stored = [r for r in reader.latest(engine, min(r.ts for r in res.rows) - timedelta(minutes=1))
          if r["metric"].startswith("probe_")]
sm = ServiceMetrics()
sm.snapshots.update(res.rows, ttl_s=60)
values = {}
for r in res.rows:
    values.setdefault(r.queue, {"depth": 0.0, "oldest_age_s": 0.0})[r.metric] = r.value
healths = [queue_health(q, values.get(q.name, {})) for q in cfg.queues if q.target == target.name]
df, states = overview.table(cfg, healths, {})
print(json.dumps({
    "status": [(s.collector, s.ok, s.error) for s in res.status],
    "rows": [(r.ts.isoformat(), r.target, r.database, r.queue, r.metric, r.value, r.note) for r in res.rows],
    "stored": sorted({(r["queue"], r["metric"]) for r in stored}),
    "metrics": generate_latest(sm.registry).decode(),
    "columns": list(df.columns),
    "overview": df[["Queue", "State", "Probe rows"]].to_dict("records"),
    "cells": list(states["Probe rows"]),
}))
"""


def _copy_product(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for pkg in ("queueops", "collectors", "console", "pipeline", "sql"):
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=ignore)


def test_a_metric_added_with_two_sql_files_and_a_catalog_entry_is_everywhere(
        lab: Lab, spark: Any, tmp_path: Path) -> None:
    copy = tmp_path / "product"
    _copy_product(copy)
    # The three files of the worked example, and nothing else.
    (copy / "sql" / "postgresql" / "queue_probe.sql").write_text(PG_SQL, encoding="utf-8")
    (copy / "sql" / "mssql" / "queue_probe.sql").write_text(MSSQL_SQL, encoding="utf-8")
    with (copy / "sql" / "metrics.toml").open("a", encoding="utf-8") as f:
        f.write(CATALOG)
    with lab.connect() as conn:
        conn.execute("TRUNCATE lab.q_delete RESTART IDENTITY CASCADE")
        conn.execute("INSERT INTO lab.q_delete (payload) SELECT 'x' FROM generate_series(1, 7)")
    (tmp_path / "probe.py").write_text(SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(copy)}
    proc = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(lab.config_path),
                           f"sqlite:///{tmp_path / 'store.db'}"], capture_output=True, text=True, cwd=copy,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] and all(ok for _c, ok, _e in out["status"]), out["status"]

    # The store holds both metrics of every lab queue, the delete queue's count exact.
    assert ("delete", "probe_rows") in [tuple(x) for x in out["stored"]]
    assert ("delete", "probe_rows_seen_total") in [tuple(x) for x in out["stored"]]
    mine = {(r[3], r[4]): r[5] for r in out["rows"]}
    assert mine[("delete", "probe_rows")] == 7.0

    # /metrics: the gauge as a gauge, the running total as a counter, both with the catalog's help.
    text = out["metrics"]
    assert "# TYPE queueops_probe_rows gauge" in text
    assert "# HELP queueops_probe_rows Rows in the queue table, counted exactly" in text
    assert any(line.startswith("# TYPE queueops_probe_rows_seen") and line.endswith(" counter")
               for line in text.splitlines()), text
    assert 'queueops_probe_rows{queue="delete",target="lab"} 7.0' in text

    # The Overview: a column of its own, judged with the catalog's default levels (warn at 2).
    assert "Probe rows" in out["columns"]
    row = next(r for r in out["overview"] if r["Queue"] == "delete")
    assert row["Probe rows"] == 7.0 and row["State"] == "WARNING"
    assert "warn" in out["cells"]

    # The pipeline's rollup of the collected rows (the session's Spark).
    from datetime import datetime

    from pipeline.run import run

    rows = [(datetime.fromisoformat(ts), t, db, q, m, v, note) for ts, t, db, q, m, v, note in out["rows"]]
    lake, gold = tmp_path / "lake", tmp_path / "gold"
    write_lake(lake, rows)
    run(spark, str(lake), str(gold), full=True)
    rolled = table(gold, "rollups")
    probe = rolled[(rolled.metric == "probe_rows") & (rolled.queue == "delete")]
    assert len(probe) and set(probe["max"]) == {7.0}, rolled[rolled.metric.str.startswith("probe")]
