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


def feed_causes(cfg: config_mod.Config) -> None:
    """Ten minutes of cycles: a session holds the target's oldest snapshot for over 600 s (every
    queue's root cause) and another holds ExclusiveLock on 'jobs' (that queue's only)."""
    engine = open_engine(cfg)
    m = AlertManager(effective_rules(cfg), engine, log_lines=False)
    t = datetime.now(UTC) - timedelta(minutes=10)
    for i in range(8):
        at = t + timedelta(seconds=60 * i)
        rows = [SnapshotRow(at, "t", "d", "", "oldest_snapshot_age_s", 700.0 + 60 * i,
                            '{"kind": "backend", "pid": 42, "state": "idle in transaction"}'),
                SnapshotRow(at, "t", "d", "jobs", "depth", 3), SnapshotRow(at, "t", "d", "mail", "depth", 3),
                SnapshotRow(at, "t", "d", "jobs", "lock_blockers", 1,
                            '{"holders": [{"pid": 5, "mode": "ExclusiveLock", "xact_age_s": 5}]}'),
                SnapshotRow(at, "t", "d", "mail", "lock_blockers", 0, "exact (pg_locks now)")]
        m.on_cycle(rows, at)
    m.close()
    engine.dispose()


def test_root_cause_alerts_say_the_cause_the_queue_state_and_the_advice(alerts_env: config_mod.Config) -> None:
    from queueops import judge

    feed_causes(alerts_env)
    at = page("console.views.alerts")
    assert not at.exception, at.exception
    firing = at.dataframe[0].value
    got = {(r, q): (c, s) for r, q, c, s in firing[["rule", "queue", "cause", "queue state"]].itertuples(index=False)}
    assert got == {("cause:snapshot:crit", "jobs"): ("old snapshot", "CRITICAL"),
                   ("cause:snapshot:warn", "jobs"): ("old snapshot", "CRITICAL"),
                   ("cause:snapshot:crit", "mail"): ("old snapshot", "CRITICAL"),
                   ("cause:snapshot:warn", "mail"): ("old snapshot", "CRITICAL"),
                   ("cause:table_lock:warn", "jobs"): ("table lock", "CRITICAL")}
    advice = dict(zip(zip(firing["rule"], firing["queue"], strict=True), firing["advice"], strict=True))
    assert advice[("cause:snapshot:crit", "mail")] == judge.advice("ghosts_held_by_snapshot", "mail", "postgresql")
    assert advice[("cause:table_lock:warn", "jobs")] == judge.advice("blocker", "jobs", "postgresql")
    history = at.dataframe[-1].value
    assert set(history.loc[history["rule"].str.startswith("cause:table_lock"), "cause"]) == {"table lock"}


def test_a_queue_state_is_the_worst_of_its_firing_alerts_metrics_and_causes_alike() -> None:
    import pandas as pd

    from console.views.alerts import cause_words, queue_states

    cfg = config_mod.parse({
        "targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
        "queues": [{"name": q, "target": "t", "kind": "lease", "table": q, "key": "id", "lease_column": "taken_at"}
                   for q in ("jobs", "mail")]})
    rules = {r.name: r for r in effective_rules(cfg)}
    states = pd.DataFrame({"rule": ["threshold:depth:warn", "cause:head_blocker:crit", "cause:snapshot:crit"],
                           "target": ["t", "t", "t"], "queue": ["jobs", "jobs", "mail"],
                           "state": ["firing", "firing", "resolved"]})
    assert queue_states(states, rules) == {("t", "jobs"): "crit"}  # a resolved alert weighs nothing
    assert [cause_words(r) for r in ("cause:head_blocker:warn", "cause:snapshot:crit", "threshold:depth:warn")] == [
        "head blocker", "old snapshot", ""]


def feed_lock_hold(cfg: config_mod.Config) -> tuple[AlertManager, list]:
    """A session holds 'jobs''s table (5 s into its transaction: the cause's warning) while two
    dequeues wait on it (the explicit crit rule 'waiters', which resolves in the third cycle);
    'mail' is deep (metric alerts, crit). Returns the manager, still open, and every transition."""
    engine = open_engine(cfg)
    m = AlertManager(effective_rules(cfg), engine, log_lines=False)
    t = datetime.now(UTC) - timedelta(minutes=10)
    holder = '{"holders": [{"pid": 5, "mode": "ExclusiveLock", "xact_age_s": 5}]}'
    transitions = []
    for i, waiters in enumerate((2, 2, 0)):
        rows = [SnapshotRow(t, "t", "d", "jobs", "lock_blockers", 1, holder),
                SnapshotRow(t, "t", "d", "jobs", "lock_waiters", waiters, '{"pids": [8, 9]}' if waiters else ""),
                SnapshotRow(t, "t", "d", "mail", "lock_blockers", 0, "exact"),
                SnapshotRow(t, "t", "d", "mail", "depth", 200_000)]
        transitions += m.on_cycle(rows, t + timedelta(seconds=30 * i))
    return m, transitions


def test_the_service_and_the_console_give_a_queue_the_same_state(alerts_env: config_mod.Config) -> None:
    """One computation (queueops.alerts.rules.queue_states): the manager's queue_state, which every
    transition carries, and the console's, from the alert_state rows the manager stored, agree --
    a root cause's alert (cause:table_lock:warn) and metrics' (waiters, depth) alike, a resolved
    alert weighing nothing."""
    from console.data import Store
    from console.views.alerts import queue_states, rules_by_name

    m, transitions = feed_lock_hold(alerts_env)
    firing = {(s.rule, s.queue) for s in m.firing()}
    assert firing == {("cause:table_lock:warn", "jobs"), ("threshold:depth:crit", "mail"),
                      ("threshold:depth:warn", "mail")}
    console = queue_states(Store(alerts_env).alert_states(), rules_by_name(alerts_env))
    service = {(tg, q): m.queue_state(tg, q) for tg, q in (("t", "jobs"), ("t", "mail"))}
    assert console == service == {("t", "jobs"): "warn", ("t", "mail"): "crit"}  # 'waiters' (crit) resolved
    last = {(t.target, t.queue): t.queue_state for t in transitions}  # each queue's latest transition
    assert last == service
    # While 'waiters' fired beside the cause, the queue was crit: the transitions of that cycle say so.
    assert {(t.rule.name, t.queue_state) for t in transitions if t.queue == "jobs"} == {
        ("waiters", "crit"), ("cause:table_lock:warn", "crit"), ("waiters", "warn")}
    m.close()
    at = page("console.views.alerts")
    assert not at.exception, at.exception
    shown = at.dataframe[0].value
    assert dict(zip(shown["queue"], shown["queue state"], strict=True)) == {"jobs": "WARNING", "mail": "CRITICAL"}


def test_the_history_shows_each_transitions_queue_state(alerts_env: config_mod.Config) -> None:
    """Alerts -> History: the queue state each transition carried, read back from alert_events."""
    m, _ = feed_lock_hold(alerts_env)
    m.close()
    at = page("console.views.alerts")
    assert not at.exception, at.exception
    history = at.dataframe[-1].value
    got = sorted(zip(history["rule"], history["state"], history["queue state"], strict=True))
    assert got == [("cause:table_lock:warn", "firing", "CRITICAL"), ("threshold:depth:crit", "firing", "CRITICAL"),
                   ("threshold:depth:warn", "firing", "CRITICAL"), ("waiters", "firing", "CRITICAL"),
                   ("waiters", "resolved", "WARNING")]


def test_a_store_from_before_the_queue_state_column_still_shows_the_history(alerts_env: config_mod.Config) -> None:
    """The console opens the store without altering it: until a newer service upgrades it, an older
    store's alert_events lacks queue_state, and the history says 'not recorded' instead of failing."""
    import sqlite3

    m, _ = feed_lock_hold(alerts_env)
    m.close()
    with sqlite3.connect(alerts_env.store.url.removeprefix("sqlite:///")) as db:
        db.execute("ALTER TABLE alert_events DROP COLUMN queue_state")
    at = page("console.views.alerts")
    assert not at.exception, at.exception
    history = at.dataframe[-1].value
    assert len(history) == 5 and set(history["queue state"]) == {"not recorded"}
