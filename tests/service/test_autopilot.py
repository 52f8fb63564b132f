"""The autopilot in the real collector service (issue 16): with the lab's dead consumer taking lease
items, an ``act`` policy requeues the stuck leases through the action layer, audited as user
``autopilot`` with its policy, never more than ``max_per_hour``; with the kill switch on nothing
runs and the status says so; the lab ledger shows nothing lost and nothing processed twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from queueops import config as config_mod
from queueops import sqlfiles
from queueops.actions import audit
from queueops.autopilot import state
from queueops.autopilot.policy import decide, parse_when, step
from queueops.lab import control
from queueops.store import open_engine
from tests.conftest import wait_for
from tests.lab.conftest import start as start_workload
from tests.lab.conftest import stop as stop_workload
from tests.service.conftest import write_config

POLICY = """
[identity]
user = "olga"
roles = { olga = "operator", vera = "viewer" }

[[autopilot]]
name = "lease-stuck"
queue = "lease"
action = "requeue"
when = "stuck_leases >= 1 for 3 samples"
max_per_hour = 2
mode = "act"
"""
SETTINGS = {"produce_per_s": "5", "consume_per_s": "12", "dead_consumer_per_s": "2", "wave_period_s": "20"}


def _config(lab: Any, tmp_path: Path, extra: str, alerts: str = "") -> Path:
    return write_config(lab, tmp_path / "autopilot.toml", store_url=f"sqlite:///{tmp_path}/store.db",
                        lake=tmp_path / "lake", schedule="fast_s = 1\nslow_s = 30", extra=extra, alerts=alerts,
                        lease_timeout_s=3)


@pytest.fixture()
def setup(lab, tmp_path) -> Iterator[tuple[Path, Any]]:  # noqa: ANN001
    path = _config(lab, tmp_path, POLICY)
    running = start_workload(lab, path, SETTINGS)
    try:
        yield path, lab
    finally:
        stop_workload(running)
        lab.reset()


def _runs(store: Any) -> list[dict[str, Any]]:
    return [r for r in audit.entries(store, user="autopilot", limit=100) if r["outcome"] != "refused"]


def test_autopilot_requeues_stuck_leases_within_its_limits(setup, service_process) -> None:  # noqa: ANN001
    path, lab = setup
    cfg = config_mod.load(path)
    assert lab.cli("autopilot", "off", "--config", str(path)).returncode == 0  # the kill switch first
    store = open_engine(cfg)
    control.set_fault("dead-consumer", True, lab.state_dir)
    svc = service_process(path, "--no-lake")
    try:
        # Kill switch on: stuck leases pile up, the policy is judged "killed", nothing runs.
        wait_for(lambda: state.policy_state(store, "lease-stuck").get("verdict") == "killed"
                 and (state.policy_state(store, "lease-stuck").get("streak") or 0) >= 5, 60,
                 what="the policy to see stuck leases for 5 samples while killed")
        assert _runs(store) == []
        out = lab.cli("autopilot", "status", "--config", str(path))
        assert "OFF (kill switch): nothing runs" in out.stdout and "last verdict killed" in out.stdout
        # Switched on: the policy fires through the action layer, as user autopilot.
        on_at = datetime.now(UTC)
        assert lab.cli("autopilot", "on", "--config", str(path)).returncode == 0
        first = wait_for(lambda: [r for r in _runs(store) if r["outcome"] == "ok"], 60, what="an autopilot requeue")
        assert first[0]["action"] == "requeue" and first[0]["queue"] == "lease" and first[0]["rows_affected"] >= 1
        preview = json.loads(audit.entry(store, first[0]["id"])["preview"])
        assert preview["details"]["autopilot"] == {"policy": "lease-stuck", "when": "stuck_leases >= 1 for 3 samples",
                                                   "mode": "act"}
        assert first[0]["start_time"] >= on_at
        # The rate limit: at most 2 in the hour, however long the leases stay stuck.
        wait_for(lambda: state.policy_state(store, "lease-stuck").get("verdict") == "rate_limited", 90,
                 what="the policy to hit max_per_hour")
        assert len(_runs(store)) == 2
        time_ok = state.policy_state(store, "lease-stuck")
        assert time_ok["runs_last_hour"] == 2 and len(time_ok["last"]) == 2
    finally:
        control.set_fault("dead-consumer", False, lab.state_dir)
        svc.kill()
    assert len(_runs(store)) == 2
    control.stop_workload(lab.state_dir)  # the ledger audit needs a quiet queue
    with lab.connect() as conn:
        cur = conn.execute(sqlfiles.load("postgresql", "lab/ledger_check").text)
        cols = [d.name for d in cur.description]
        ledger = {row[0]: dict(zip(cols, row, strict=True)) for row in cur.fetchall()}
    row = ledger["lease"]
    assert row["lost"] == 0 and row["processed_twice"] == 0, row
    assert row["produced"] == row["processed"] + row["queued"], row


def test_propose_sends_the_preview_and_the_command(setup, service_process, webhook, tmp_path) -> None:  # noqa: ANN001
    _, lab = setup
    path = _config(lab, tmp_path, POLICY.replace('mode = "act"', 'mode = "propose"'),
                   alerts=f'[alerts]\nwebhook_url = "{webhook.url}"\nthresholds = false')
    store = open_engine(config_mod.load(path))
    control.set_fault("dead-consumer", True, lab.state_dir)
    svc = service_process(path, "--no-lake")
    try:
        assert webhook.wait_for(lambda calls: any(c.get("state") == "proposed" for c in calls), 60)
        body = next(c for c in webhook.calls if c.get("state") == "proposed")
        assert body["command"] == "queueops act requeue --queue lease --yes"
        assert body["preview"]["action"] == "requeue" and body["preview"]["row_count"] >= 1
        assert body["alert"] == "autopilot:lease-stuck"
    finally:
        control.set_fault("dead-consumer", False, lab.state_dir)
        svc.kill()
    assert _runs(store) == []  # proposed, never run
    assert state.policy_state(store, "lease-stuck")["last"][0]["outcome"] == "proposed"


def test_the_rule_is_a_small_pure_function() -> None:
    cond = parse_when("stuck_leases >= 1 for 3 samples")
    streak = 0
    for value in (2, 1, None, 5):  # None: not sampled this cycle, the streak stands
        streak = step(cond, streak, value)
    assert streak == 3
    assert step(cond, streak, 0) == 0
    kw = {"runs_last_hour": 0, "max_per_hour": 2}
    assert decide(cond, 3, mode="act", enabled=True, **kw) == "act"
    assert decide(cond, 3, mode="propose", enabled=True, **kw) == "propose"
    assert decide(cond, 2, mode="act", enabled=True, **kw) == "waiting"
    assert decide(cond, 3, mode="act", enabled=False, **kw) == "killed"
    assert decide(cond, 3, mode="off", enabled=False, **kw) == "off"
    assert decide(cond, 3, mode="act", enabled=True, runs_last_hour=2, max_per_hour=2) == "rate_limited"
    assert decide(cond, 3, mode="act", enabled=True, sampled=False, **kw) == "no_data"
    with pytest.raises(ValueError, match="METRIC OP NUMBER"):
        parse_when("stuck_leases is high")
    with pytest.raises(config_mod.ConfigError, match="no queue of that name"):
        config_mod.parse({"targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h/d"}],
                          "autopilot": [{"queue": "nope", "action": "requeue", "when": "depth > 1"}]})
    with pytest.raises(config_mod.ConfigError, match="autopilot"):
        config_mod.parse({"targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h/d"}],
                          "autopilot": [{"queue": "q", "action": "recommended", "when": "depth > 1"}]})
