"""The console's audit page shows, under each action, every statement it executed (its command rows)."""

from __future__ import annotations

from queueops import actions, roles
from queueops.actions import executor
from queueops.store import open_engine
from tests.console.conftest import OPERATOR, ConsoleEnv, page, stuck_leases, texts


def test_audit_page_lists_the_statements_an_action_executed(env: ConsoleEnv) -> None:
    stuck_leases(env, 3)
    cfg = env.config()
    result = actions.execute(cfg, actions.plan(cfg, "requeue", "lease"),
                             actor=roles.Actor(OPERATOR[0], "operator", "test"))
    assert result.outcome == "ok"
    stored = executor.commands(open_engine(cfg), result.audit_id)
    at = page("console.views.audit")
    assert not at.exception
    assert len(stored) == 2 and f"**Statements executed** ({len(stored)})" in texts(at)
    shown = at.dataframe[1].value  # under the records' table
    assert list(shown["Statement"]) == [r["statement"] for r in stored]
    assert list(shown["Step"]) == ["batch", "(check)"] and list(shown["Rows"]) == [3, 1]
    assert all(d.endswith(" s") for d in shown["Duration"]) and set(shown["Error"]) == {""}
