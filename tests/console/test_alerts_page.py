"""The Alerts page (issue 32, item 5) in Streamlit's AppTest: what fires now and the history, read
from the store the service writes (alert_state, alert_events). The alerts are made by the real
AlertManager on rows of our own; no database target is contacted by this page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from queueops import config as config_mod
from queueops.alerts.manager import AlertManager
from queueops.alerts.rules import effective_rules
from queueops.rows import SnapshotRow
from queueops.store import open_engine
from tests.console.conftest import page, texts

TOML = """\
[store]
url = "sqlite:///{store}"

[alerts]
rules = [{{ metric = "lock_waiters", op = ">=", value = 1, name = "waiters" }}]

[[targets]]
name = "t"
dialect = "postgresql"
url = "postgresql://nobody@127.0.0.1:9/none"

[[queues]]
name = "jobs"
target = "t"
kind = "lease"
table = "jobs"
key = "id"
lease_column = "taken_at"

[[queues]]
name = "mail"
target = "t"
kind = "delete"
table = "mail"
key = "id"
"""


@pytest.fixture()
def alerts_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> config_mod.Config:
    import streamlit as st

    path = tmp_path / "alerts.toml"
    path.write_text(TOML.format(store=tmp_path / "store.db"))
    monkeypatch.setenv("QUEUEOPS_CONFIG", str(path))
    st.cache_resource.clear()
    return config_mod.load(path)


def feed(cfg: config_mod.Config) -> None:
    """Waiters on 'jobs' flap three times (explicit rule: no hysteresis); 'mail' gets deep and stays so."""
    engine = open_engine(cfg)
    m = AlertManager(effective_rules(cfg), engine, log_lines=False)
    t = datetime.now(UTC) - timedelta(minutes=10)

    def rows(waiters: float, depth: float) -> list[SnapshotRow]:
        return [SnapshotRow(t, "t", "d", "jobs", "lock_waiters", waiters),
                SnapshotRow(t, "t", "d", "mail", "depth", depth)]

    for i, (w, d) in enumerate([(2, 10), (0, 10), (3, 10), (0, 10), (1, 200_000), (0, 200_000)]):
        m.on_cycle(rows(w, d), t + timedelta(seconds=30 * i))
    m.close()
    engine.dispose()


def test_firing_now_and_the_history_with_flapping_named(alerts_env: config_mod.Config) -> None:
    feed(alerts_env)
    at = page("console.views.alerts")
    assert not at.exception, at.exception
    firing, per_rule, history = (d.value for d in at.dataframe)  # firing now, per rule, the history
    assert list(zip(firing["rule"], firing["queue"], firing["severity"], strict=True)) == [
        ("threshold:depth:crit", "mail", "crit"), ("threshold:depth:warn", "mail", "warn")]
    assert firing["condition"].iloc[0] == "depth >= 100000" and firing["value"].iloc[0] == 200_000
    got = {(r, q): (f, s) for r, q, f, s in per_rule[["rule", "queue", "firings", "resolutions"]].itertuples(
        index=False)}
    assert got == {("waiters", "jobs"): (3, 3), ("threshold:depth:crit", "mail"): (1, 0),
                   ("threshold:depth:warn", "mail"): (1, 0)}
    assert len(history) == 8 and history["state"].tolist().count("resolved") == 3
    assert set(history.loc[history["state"] == "resolved", "lasted"]) == {"30 s"}
    text = texts(at)
    assert "**5** firing(s) and **3** resolution(s)" in text
    assert "Fired 3 times or more: waiters on jobs" in text


def test_one_queue_and_no_alerts(alerts_env: config_mod.Config) -> None:
    at = page("console.views.alerts")
    assert not at.exception
    assert "No alert is firing." in texts(at) and "No alert fired or resolved in the last 24 h" in texts(at)
    feed(alerts_env)
    at = page("console.views.alerts", queue="jobs")
    assert "No alert is firing on queue jobs." in texts(at)
    assert set(at.dataframe[-1].value["queue"]) == {"jobs"}


def test_a_store_from_before_clearing_since_still_shows_what_fires(alerts_env: config_mod.Config) -> None:
    """The console opens the store without altering it: an older store lacks alert_state.clearing_since."""
    import sqlite3

    feed(alerts_env)
    with sqlite3.connect(alerts_env.store.url.removeprefix("sqlite:///")) as db:
        db.execute("ALTER TABLE alert_state DROP COLUMN clearing_since")
    at = page("console.views.alerts")
    assert not at.exception, at.exception
    assert list(at.dataframe[0].value["rule"]) == ["threshold:depth:crit", "threshold:depth:warn"]
