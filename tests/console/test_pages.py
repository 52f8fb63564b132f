"""Every page's logic in Streamlit's AppTest, against the real lab database (no browser).

Each page runs as its own small script (``AppTest.from_function``) with a signed-in identity in the
session, the way app.py runs it after the sign-in gate; the gate itself runs through app.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import ROOT
from tests.console.conftest import (
    OPERATOR,
    TIMEOUT,
    VIEWER,
    ConsoleEnv,
    count_stuck,
    page,
    stuck_leases,
    texts,
)


def test_sign_in_gate_with_the_users_file(env: ConsoleEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a session the gate signs nobody in and sends the browser to the sign-in page
    (console/signin.py, tested over HTTP in test_signin_browser.py); the page names no file."""
    from console import signin

    at = AppTest.from_file(str(ROOT / "console" / "app.py"), default_timeout=TIMEOUT).run()
    assert not at.exception and "qo_identity" not in at.session_state
    assert "queueops serve" in at.error[0].value  # run without the server that adds the sign-in page
    monkeypatch.setattr(signin, "ROUTES_INSTALLED", True)
    at = AppTest.from_file(str(ROOT / "console" / "app.py"), default_timeout=TIMEOUT).run()
    assert not at.exception and "qo_identity" not in at.session_state
    assert [b.proto.url for b in at.get("link_button")] == ["/queueops/signin"]
    assert not at.title  # no page rendered
    assert str(env.users_path) not in texts(at) and "users.toml" not in texts(at)


def test_overview_shows_every_queue_worst_first_with_the_lease_queue_critical(env: ConsoleEnv) -> None:
    stuck_leases(env, 3)
    at = page("console.views.overview")
    assert not at.exception
    df = at.dataframe[0].value
    df = df.data if hasattr(df, "data") else df  # a Styler in, a frame out
    assert set(df["Queue"]) == {"delete", "status", "lease", "due", "ring"}
    assert df.iloc[0]["Queue"] == "lease" and df.iloc[0]["State"] == "CRITICAL"
    assert "stuck leases 3" in df.iloc[0]["Why"]
    assert (df.iloc[1:]["State"] != "CRITICAL").all()
    crit = next(m for m in at.metric if m.label == "Critical")
    assert crit.value == "1"
    # The problem chart (Vega-Lite, not plotly: the Overview loads no plotly.js) draws the lease
    # queue's stuck leases, in its state's colour, with its critical level.
    charts = at.get("vega_lite_chart")
    assert len(charts) == 1 and not at.get("plotly_chart")
    spec = json.loads(charts[0].proto.spec)
    assert spec["title"]["text"] == "lease · Stuck leases (critical)"
    line, rule, _label = spec["layer"]
    assert line["mark"]["color"] == "#cf222e"
    assert {lv["state"]: lv["level"] for lv in rule["data"]["values"]} == {"crit": 1.0}
    assert "No history yet" in texts(at)  # no service has written the store


def test_overview_says_when_a_target_is_unreachable(env: ConsoleEnv, tmp_path, monkeypatch) -> None:
    text = env.config_path.read_text().replace(f"127.0.0.1:{env.lab.info.port}", "127.0.0.1:9")
    bad = tmp_path / "down.toml"
    bad.write_text(text)
    monkeypatch.setenv("QUEUEOPS_CONFIG", str(bad))
    at = page("console.views.overview")
    assert not at.exception
    assert any("Target `lab` is unreachable" in e.value for e in at.error)
    df = at.dataframe[0].value
    df = df.data if hasattr(df, "data") else df
    assert set(df["State"]) == {"UNKNOWN"}


def test_queue_detail_shows_findings_and_an_operator_requeues(env: ConsoleEnv) -> None:
    stuck_leases(env, 4, ready=2)
    at = page("console.views.queue_detail", queue="lease")
    assert not at.exception
    assert at.title[0].value == "Queue lease"
    body = texts(at)
    assert "4 stuck lease(s)" in body and "action: `requeue`" in body
    assert len(at.get("plotly_chart")) == 1
    # Preview: the exact SQL, its parameters and the count, before anything runs.
    at.button(key="FormSubmitter:act_form_lease_requeue-Preview").click().run()
    assert not at.exception
    assert any("SKIP LOCKED" in c.value for c in at.code)
    assert next(m for m in at.metric if m.label == "Rows / objects it touches").value == "4"
    assert count_stuck(env) == 4  # a preview changes nothing
    at.button(key="act_run").click().run()
    assert not at.exception
    assert count_stuck(env) == 0
    assert any("requeue" in s.value and "ok" in s.value and "4 row(s)" in s.value for s in at.success)
    after = next(m for m in at.metric if m.label.startswith("Stuck leases: before"))
    assert after.value == "0" and "was 4" in after.delta


def test_the_result_says_when_fewer_rows_qualified_than_the_preview_showed(env: ConsoleEnv) -> None:
    """Issue 30: a shortfall against the confirmed preview is said beside the outcome (result.notes),
    and the committed batches are listed, as in the CLI and the audit record."""
    stuck_leases(env, 4)
    at = page("console.views.queue_detail", queue="lease")
    at.button(key="FormSubmitter:act_form_lease_requeue-Preview").click().run()
    assert next(m for m in at.metric if m.label == "Rows / objects it touches").value == "4"
    with env.lab.connect() as conn:  # a consumer renews one lease between preview and confirmation
        conn.execute("UPDATE lab.q_lease SET processing_started_at = now() WHERE id = (SELECT min(id) FROM lab.q_lease)")
    at.button(key="act_run").click().run()
    assert not at.exception
    assert any("3 row(s)" in s.value for s in at.success)
    assert any("the preview counted 4 item(s), 3 were released" in i.value for i in at.info), [i.value for i in at.info]
    assert at.expander and "batch(es) committed" in at.expander[-1].label
    assert count_stuck(env) == 0


def test_a_viewer_sees_findings_but_no_action_button(env: ConsoleEnv) -> None:
    stuck_leases(env, 2)
    at = page("console.views.queue_detail", role="viewer", queue="lease")
    assert not at.exception
    assert "2 stuck lease(s)" in texts(at)
    assert [b.label for b in at.button] == ["Sign out"]  # no Preview, no Confirm, no action at all
    # the chart window and the items list to read (issue 32), not an action choice
    assert [g.key for g in at.get("button_group")] == ["qd_window", "it_list_lease"]
    assert len(at.get("form")) == 0
    assert "signed in as a viewer" in texts(at)


def test_audit_page_lists_and_searches_actions(env: ConsoleEnv) -> None:
    from queueops import actions, roles

    stuck_leases(env, 1)
    cfg = env.config()
    plan = actions.plan(cfg, "requeue", "lease")
    actions.execute(cfg, plan, actor=roles.Actor(OPERATOR[0], "operator", "test"))
    refused = actions.plan(cfg, "requeue", "lease")
    actions.execute(cfg, refused, actor=roles.Actor(VIEWER[0], "viewer", "test"))
    at = page("console.views.audit")
    assert not at.exception
    table = at.dataframe[0].value
    assert sorted(table["Outcome"]) == ["ok", "refused"]
    at.text_input(key="audit_text").input(VIEWER[0]).run()
    table = at.dataframe[0].value
    assert list(table["Outcome"]) == ["refused"] and list(table["User"]) == [VIEWER[0]]
    assert any("only operators" in e.value for e in at.error)  # the selected record's error


def test_trends_without_gold_tables_says_how_to_produce_them(env: ConsoleEnv) -> None:
    at = page("console.views.trends")
    assert not at.exception
    assert "queueops pipeline run" in texts(at)
    # The console tests' copy of lab.toml has after_export off: the page says what runs the pipeline.
    assert "queueops collect --config" in texts(at) and "after_export" not in texts(at)


def test_settings_masks_secrets_and_tests_the_connection(env: ConsoleEnv) -> None:
    at = page("console.views.settings")
    assert not at.exception
    secret = (env.lab.state_dir / "lab.secret").read_text().strip()
    at.button(key="test_lab").click().run()
    assert not at.exception
    assert any("Connected in" in s.value and "every queue table" in s.value for s in at.success)
    everything = texts(at) + "\n".join(str(j.value) for j in at.json)
    assert secret not in everything


def test_settings_shows_the_settings_that_can_never_judge_or_act(env: ConsoleEnv, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    at = page("console.views.settings")  # the lab's own config: nothing to tell
    assert not at.exception and not [w for w in at.warning if "can never judge" in w.value]
    text = env.config_path.read_text()
    # the due queue has no watermark: a level on watermark_drift judges nothing there; requeue on a
    # ring queue is refused every time
    head, due = text.split('name = "due"', 1)
    due = due.replace("thresholds = { ", 'thresholds = { watermark_drift = { crit = 0, direction = "below" }, ', 1)
    text = head + 'name = "due"' + due
    text += '\n[[autopilot]]\nqueue = "ring"\naction = "requeue"\nwhen = "depth > 5"\nmode = "propose"\n'
    path = tmp_path / "dead-levels.toml"
    path.write_text(text)
    monkeypatch.setenv("QUEUEOPS_CONFIG", str(path))
    at = page("console.views.settings")
    assert not at.exception
    shown = [w.value for w in at.warning if "can never judge" in w.value]
    assert len(shown) == 1 and "2 setting(s) can never judge or act" in shown[0], [w.value for w in at.warning]
    assert "(name='due').thresholds.watermark_drift` = `{'crit': 0.0, 'direction': 'below'}`: no collector " \
        "reads watermark_drift" in shown[0], shown[0]
    assert "`autopilot[0].action` = `'requeue'`: refused on queue 'ring'" in shown[0]


def write_gold(out: Path) -> None:
    """Gold tables in the pipeline's layout (pipeline/gold.py) with its column lists, as Spark writes
    them: partition columns in the folder names, not in the files."""
    import pandas as pd

    from pipeline.findings import FINDING_COLUMNS
    from pipeline.fleet import FLEET_COLUMNS
    from pipeline.forecasts import FORECAST_COLUMNS
    from pipeline.rollups import ROLLUP_COLUMNS

    now = pd.Timestamp.now(tz="UTC").floor("h")
    hours = [now - pd.Timedelta(hours=i) for i in range(3, 0, -1)]
    for i, h in enumerate(hours):
        rows = [{c: None for c in ROLLUP_COLUMNS} | {
            "window": "1h", "window_start": h, "window_end": h + pd.Timedelta(hours=1), "target": "lab",
            "database": "db", "queue": "lease", "metric": "depth", "samples": 720, "min": 1.0 + i,
            "mean": 5.0 + i, "max": 9.0 + i, "p95": 8.0 + i}]
        df = pd.DataFrame(rows).drop(columns=["window", "date", "hour"])
        folder = out / "rollups" / "window=1h" / f"date={h:%Y-%m-%d}" / f"hour={h:%H}"
        folder.mkdir(parents=True)
        df.to_parquet(folder / "part-00000.parquet")
    h = hours[-1]
    finding = {c: None for c in FINDING_COLUMNS} | {
        "rule": "stuck_leases_persist", "severity": "crit", "target": "lab", "database": "db", "queue": "lease",
        "metric": "stuck_leases", "hour_start": h, "value": 7.0, "summary": "7 stuck leases for 12 cycles",
        "action": "requeue", "evidence": "{}"}
    folder = out / "findings" / f"date={h:%Y-%m-%d}" / f"hour={h:%H}"
    folder.mkdir(parents=True)
    pd.DataFrame([finding]).drop(columns=["date", "hour"]).to_parquet(folder / "part-00000.parquet")
    forecast = {c: None for c in FORECAST_COLUMNS} | {
        "as_of": now, "target": "lab", "queue": "delete", "metric": "depth", "status": "ok", "hours_to_crit": 3.5,
        "last_value": 900.0, "crit": 20000.0, "r2": 0.93}
    (out / "forecasts").mkdir(parents=True)
    pd.DataFrame([forecast]).to_parquet(out / "forecasts" / "part-00000.parquet")
    fleet = {c: None for c in FLEET_COLUMNS} | {"as_of": now, "problem": "stuck_leases", "rank": 1,
                                                 "target": "lab", "queue": "lease", "value": 7.0, "detail": "peak"}
    (out / "fleet").mkdir(parents=True)
    pd.DataFrame([fleet]).to_parquet(out / "fleet" / "part-00000.parquet")


def test_trends_reads_the_gold_tables(env: ConsoleEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "gold"
    write_gold(out)
    cfg = tmp_path / "with-gold.toml"
    cfg.write_text(re.sub(r'(?m)^out = ".*"$', f'out = "{out}"', env.config_path.read_text(), count=1))
    monkeypatch.setenv("QUEUEOPS_CONFIG", str(cfg))
    at = page("console.views.trends")
    assert not at.exception
    assert "No gold tables" not in texts(at)
    charts = at.get("plotly_chart")
    assert len(charts) == 4  # fleet, forecasts, findings, hourly rollup
    fleet = json.loads(charts[0].proto.spec)
    assert [a["text"] for a in fleet["layout"]["annotations"]] == ["Stuck leases (items)"]  # subplot titles
    # Three hourly points: the axis is padded to six hours, not squeezed to the points' span.
    import pandas as pd

    lo, hi = (pd.Timestamp(t) for t in json.loads(charts[3].proto.spec)["layout"]["xaxis"]["range"])
    assert hi - lo >= pd.Timedelta(hours=6)
    findings = at.dataframe[0].value
    assert list(findings["Rule"]) == ["stuck_leases_persist"] and list(findings["Recommended action"]) == ["requeue"]
    assert "Last hour: mean 7" in texts(at)  # the newest of the three hourly rollups


def test_queue_detail_switches_queue_with_the_selector(env: ConsoleEnv) -> None:
    at = page("console.views.queue_detail", queue="lease")
    assert at.title[0].value == "Queue lease"
    at.selectbox(key="qd_queue").select("delete").run()
    assert not at.exception
    assert at.title[0].value == "Queue delete"
    assert at.query_params["queue"] == ["delete"] or at.query_params["queue"] == "delete"


def test_overview_says_when_history_is_stale(env: ConsoleEnv) -> None:
    from datetime import UTC, datetime, timedelta

    from queueops.rows import SnapshotRow
    from queueops.store import open_engine
    from queueops.store.schema import snapshots
    from queueops.store.writer import bulk_insert, snapshot_dict

    old = datetime.now(UTC) - timedelta(minutes=40)
    engine = open_engine(env.config())
    with engine.begin() as conn:
        bulk_insert(conn, snapshots, [snapshot_dict(SnapshotRow(old, "lab", "db", "lease", "depth", 3.0, "exact"))])
    engine.dispose()
    at = page("console.views.overview")
    assert not at.exception
    stale = [w.value for w in at.warning if "History is stale" in w.value]
    assert stale and "40 min" in stale[0] and "queueops collect" in stale[0]


def test_the_pages_are_built_from_the_apps_render_functions_and_a_missing_one_is_named() -> None:
    """console.nav imports no view (the Overview links to the queue page without an import
    circle): app.py gives every page's render function, and one left out is named."""
    import ast

    from console import nav

    tree = ast.parse((ROOT / "console" / "nav.py").read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [m for m in imported if m and m.startswith("console")], imported
    with pytest.raises(ValueError, match="settings"):
        nav.build({path: (lambda: None) for path in nav.PAGES if path != "settings"})
    assert len(nav.build({path: (lambda: None) for path in nav.PAGES})) == len(nav.PAGES)
