"""One collection path: while the collector service writes the store, the console reads its latest
cycles (job by job of the service's own plan) and runs no collector statement on the monitored
server; with no fresh cycle it collects by itself, through the same plan."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import streamlit as st

from console.data import LiveSampler
from queueops import engine
from tests.conftest import ROOT, wait_for
from tests.console.conftest import ConsoleEnv, page, stuck_leases


@pytest.fixture()
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Statements this test process sends to monitored servers (the service runs in another
    process, so each one here is the console's own)."""
    seen: list[str] = []
    original = engine.Connection.execute

    def counted(self: engine.Connection, stmt: Any) -> list[dict[str, Any]]:  # noqa: ANN401 - a Statement
        seen.append(stmt.sql)
        return original(self, stmt)

    monkeypatch.setattr(engine.Connection, "execute", counted)
    return seen


def _overview_states(at: Any) -> dict[str, str]:  # noqa: ANN401 - AppTest
    df = at.dataframe[0].value
    df = df.data if hasattr(df, "data") else df
    return dict(zip(df["Queue"], df["State"], strict=True))


def test_a_page_view_reads_the_services_cycle_and_runs_no_collector(env: ConsoleEnv, statements: list[str]) -> None:
    stuck_leases(env, 3)
    cfg = env.config()
    # No service yet: the page view collects by itself (the counter does count collections).
    at = page("console.views.overview")
    assert not at.exception and _overview_states(at)["lease"] == "CRITICAL"
    assert statements, "the console collected nothing without a service"

    service = subprocess.Popen([sys.executable, "-m", "queueops.cli", "collect", "--config", str(env.config_path),
                                "--no-lake", "--duration", "300"], cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        probe = LiveSampler(cfg)
        assert len(probe.plans) >= 2  # fast and slow jobs, as the service plans them
        wait_for(lambda: len(probe._fresh_cycles(probe.plans)) == len(probe.plans), 120, 0.2,
                 "a fresh service cycle of every job in the store")
        st.cache_resource.clear()  # a new console process, as it were
        statements.clear()
        at = page("console.views.overview")
        assert not at.exception
        assert statements == [], f"the console ran {len(statements)} statement(s) on the server while the service runs"
        assert _overview_states(at)["lease"] == "CRITICAL"  # the service's values, judged the same way
        sampler = LiveSampler(cfg)
        sample = sampler.sample()
        assert sampler.collected_jobs == 0 and sampler.stored_jobs == len(sampler.plans)
        assert sample.values()[("lab", "lease")]["stuck_leases"] == 3
        assert statements == []
        # After an action the console looks again itself: the service's cycle predates it.
        sampler.invalidate()
        sampler.sample()
        assert sampler.collected_jobs >= 1 and statements
    finally:
        service.terminate()
        service.wait(60)
