"""Issue 32, item 5: the console's smaller readability rules, as the pure functions that make them
(the browser tests in test_e2e_browser.py check what they draw)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from console import style
from console.views import actions_panel, audit, overview, queue_detail, trends
from queueops.config import parse
from tests.console.conftest import OPERATOR, VIEWER, ConsoleEnv, page, stuck_leases

NOW = datetime(2026, 11, 26, 17, 44, tzinfo=UTC)


def _cfg():  # noqa: ANN202 - a Config
    return parse({"targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h/d"}],
                  "queues": [{"name": k, "target": "t", "kind": k, "table": f"q_{k}", "key": "id",
                              **extra} for k, extra in (
                      ("lease", {"lease_column": "leased_at", "enqueued_at": "created_at", "lease_timeout_s": 20}),
                      ("due", {"due_column": "run_at"}),
                      ("delete", {"enqueued_at": "created_at",
                                  "thresholds": {"depth": {"warn": 2000, "crit": 20000}}}))]})


def test_time_ticks_never_repeat_a_label() -> None:
    """17:43 17:43 17:44: ticks 20 s apart labelled in minutes. Short windows show seconds, longer ones
    keep ticks at least a minute apart."""
    assert style.time_axis_format(timedelta(minutes=3)) == ("%H:%M:%S", 1_000)
    assert style.time_axis_format(timedelta(hours=1)) == ("%H:%M", 60_000)
    data, spec = style.level_chart(pd.Series([NOW - timedelta(seconds=40), NOW]), pd.Series([0.0, 97.0]), "Depth",
                                   None, color="#000", warn=None, crit=None,
                                   x_range=(NOW - timedelta(minutes=3), NOW), title="t", unit="items")
    axis = spec["layer"][0]["encoding"]["x"]["axis"]  # type: ignore[index]
    assert axis["format"] == "%H:%M:%S" and axis["tickMinStep"] == 1_000
    # Hover values carry their unit.
    assert list(data["shown"]) == ["0 items", "97 items"]
    assert spec["layer"][0]["encoding"]["tooltip"][0]["field"] == "shown"  # type: ignore[index]
    assert style.value_text(12_345.0, "items") == "12,345 items" and style.value_text(42.94, "%") == "42.94 %"


def test_sparklines_share_one_scale_and_the_why_column_fits_its_longest_reason() -> None:
    spark = {("t", "a"): [0.0, 0.0], ("t", "b"): [12.0, 97.0, float("nan")], ("t", "c"): []}
    assert overview.spark_scale(spark) == 97.0  # 0 is flat at the bottom, 97 reaches the top
    assert overview.spark_scale({("t", "a"): [0.0]}) == 1.0
    short = "stuck leases 9 ≥ 1 · oldest age 25 s ≥ 20 s"
    assert overview.why_layout(["", short]) == (7 * len(short) + 24, None)  # one line, whole
    assert overview.why_layout([""]) == (200, None)
    long = ("A session blocks others: session 21142 (queueops, queueops-lab-lock-hold, 127.0.0.1/32) holds "
            "ExclusiveLock on queue lease's table for 4 s")
    width, row = overview.why_layout([short, long])
    assert width == 420 and row is not None and row > 64  # Streamlit wraps text in rows taller than 4 rem
    lines = (row - 12) // overview.LINE_PX
    assert lines * (width - 24) / 7 >= len(long)  # its lines hold it


def test_lease_timeout_is_said_only_for_queues_with_leases() -> None:
    cfg = _cfg()
    assert queue_detail.lease_text(cfg.queue("lease")) == "lease timeout 20 s · "
    assert queue_detail.lease_text(cfg.queue("due")) == ""
    assert queue_detail.lease_text(cfg.queue("delete")) == ""


def test_queue_charts_label_times_under_every_chart_with_units_in_the_hover() -> None:
    cfg = _cfg()
    ts = [NOW - timedelta(seconds=s) for s in (30, 20, 10)]
    df = pd.DataFrame({"ts": pd.to_datetime(ts * 2, utc=True), "metric": ["depth"] * 3 + ["oldest_age_s"] * 3,
                       "value": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]})
    fig = queue_detail.chart_figure(cfg.queue("lease"), df, ["depth", "oldest_age_s"], [], timedelta(hours=1),
                                    NOW, None)
    axes = [fig.layout[name] for name in fig.layout if name.startswith("xaxis")]
    assert len(axes) == 2 and all(a.showticklabels for a in axes)
    assert [t.hovertemplate.split("<br>")[0] for t in fig.data] == ["%{y:,.4~g} items", "%{y:,.4~g} s"]
    assert fig.layout.plot_bgcolor == "rgba(0,0,0,0)" and fig.layout.template.layout.plot_bgcolor is None
    config = style.toolbar("queueops-lease-3600s")
    assert config["modeBarButtons"] == [["zoom2d", "resetScale2d", "toImage"]] and config["displayModeBar"]


def test_trends_colour_a_bar_from_the_queues_own_levels() -> None:
    cfg = _cfg()
    assert trends.bar_state(cfg, "depth", "delete", 120) == "ok"  # warn is 2,000: not red
    assert trends.bar_state(cfg, "depth", "delete", 2_500) == "warn"
    assert trends.bar_state(cfg, "depth", "delete", 25_000) == "crit"
    assert trends.bar_state(cfg, "lock_timeouts", "delete", 10**6) == "ok"  # no level: neutral
    assert trends.bar_state(cfg, "depth", "gone", 10**6) == "ok"


def test_the_audit_timeline_starts_near_its_records_and_draws_failures_last() -> None:
    times = pd.Series(pd.to_datetime([NOW - timedelta(minutes=20), NOW - timedelta(minutes=5)], utc=True))
    start = audit.timeline_start(times, NOW - timedelta(days=7), NOW)
    assert NOW - timedelta(minutes=25) < start < NOW - timedelta(minutes=20)  # not seven days of empty axis
    old = pd.Series(pd.to_datetime([NOW - timedelta(days=6)], utc=True))
    assert NOW - timedelta(days=7) <= audit.timeline_start(old, NOW - timedelta(days=7), NOW) < NOW - timedelta(days=6)
    assert audit.OUTCOME_ORDER[0] == "ok" and audit.OUTCOME_ORDER[-1] == "failed"


def test_rebuild_says_why_an_index_is_not_rebuilt() -> None:
    rows = [{"index": "q_pkey", "operation": "none", "reason": "12 pages < 1000: too small for fragmentation to matter"}]
    note = actions_panel.index_work_note("rebuild", rows)
    assert note.startswith("No index is rebuilt, so only the table maintenance below runs")
    assert "`q_pkey`: 12 pages < 1000: too small" in note
    both = [*rows, {"index": "q_ix", "operation": "reindex_concurrently", "reason": "bloat 40 %"}]
    assert actions_panel.index_work_note("rebuild", both).startswith("Some indexes are left as they are")
    assert actions_panel.index_work_note("requeue", rows) == ""


# -- on the lab (AppTest) ------------------------------------------------------------------------


def _all(at: object, name: str) -> list[str]:
    value = at.query_params[name]  # type: ignore[attr-defined]
    return list(value) if isinstance(value, list) else [value]


def test_the_audit_filters_come_from_and_go_to_the_url(env: ConsoleEnv) -> None:
    from queueops import actions, roles

    stuck_leases(env, 1)
    cfg = env.config()
    actions.execute(cfg, actions.plan(cfg, "requeue", "lease"), actor=roles.Actor(OPERATOR[0], "operator", "test"))
    actions.execute(cfg, actions.plan(cfg, "requeue", "lease"), actor=roles.Actor(VIEWER[0], "viewer", "test"))
    at = page("console.views.audit", period="24h", outcome="refused")  # a link someone sent
    assert not at.exception
    assert at.selectbox(key="audit_period").value == "24 h"
    assert list(at.dataframe[0].value["Outcome"]) == ["refused"]
    at.text_input(key="audit_text").input(VIEWER[0]).run()
    assert _all(at, "q") == [VIEWER[0]] and _all(at, "outcome") == ["refused"]
    at.multiselect(key="audit_outcome").set_value([]).run()
    assert "outcome" not in at.query_params and _all(at, "period") == ["24h"]


def test_rebuild_on_a_small_table_says_only_vacuum_runs_and_why(env: ConsoleEnv) -> None:
    at = page("console.views.queue_detail", queue="lease")
    at.button_group(key="act_choice_lease").set_value("rebuild").run()
    at.button(key="FormSubmitter:act_form_lease_rebuild-Preview").click().run()
    assert not at.exception
    note = next(i.value for i in at.info if "No index is rebuilt" in i.value)
    assert "only the table maintenance below runs" in note and "too small" in note
    assert any("VACUUM" in c.value for c in at.code)
