"""One place where action statements run (CommandExecute-style): each statement an action executes
is its own command row under the audit record, is the statement the preview showed, carries its
error when it fails, and stays open when the action's process is killed during it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from queueops import actions, engine
from queueops.actions import executor
from queueops.actions.model import ActionError, dumps, shown_sql
from queueops.store import open_engine
from tests.actions.conftest import snapshot_held
from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def executed(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every statement the action connections really send (recorded, then run for real)."""
    seen: list[dict[str, Any]] = []
    original = engine.Connection.execute

    def spy(self: engine.Connection, stmt: Any) -> list[dict[str, Any]]:  # noqa: ANN401 - a Statement
        rows = original(self, stmt)
        app = self.raw.info.parameter_status("application_name") or ""
        if app.startswith("queueops-action-") and not app.endswith(("-preview", "-progress")):
            seen.append({"sql": shown_sql(stmt.sql, self.dialect), "params": dumps(list(stmt.params)),
                         "rows": len(rows)})
        return rows

    monkeypatch.setattr(engine.Connection, "execute", spy)
    return seen


def test_requeue_command_rows_are_the_statements_executed(acts, executed) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @lease (processing_started_at) SELECT now() - interval '1 minute' "
             "FROM generate_series(1, 250)")
    cfg = acts.config()
    plan = actions.plan(cfg, "requeue", "lease", {"batch_size": 100})
    executed.clear()  # the preview's reads are not the action's statements
    result = actions.execute(cfg, plan)
    assert result.outcome == "ok" and result.rows_affected == 250
    rows = executor.commands(open_engine(cfg), result.audit_id)
    ran = executed[1:]  # the first is the session's settings, sent by open_session
    assert [(r["statement"], r["params"], r["rows"]) for r in rows] == [
        (e["sql"], e["params"], e["rows"]) for e in ran]
    batches = [r for r in rows if r["step"] == "batch"]
    assert [r["rows"] for r in batches] == [100, 100, 50]
    assert len(rows) == 4 and rows[-1]["step"] == "" and rows[-1]["rows"] == 1  # the count of what is left
    step = plan.preview.steps[0]
    previewed = json.loads(dumps(list(step.statement.params)))
    for r, size in zip(batches, (100, 100, 50), strict=True):
        assert r["statement"] == shown_sql(step.statement.sql, "postgresql")  # byte-identical to the preview
        # Same cutoff; the batch size, cut to what is left of the preview's count (never more in total).
        assert json.loads(r["params"]) == [previewed[0], size]
        assert r["error"] == "" and r["end_time"] >= r["start_time"] and '"lease q"' in r["object"]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4]
    # The CLI shows them under the record.
    out = acts.cli("audit", "--id", str(result.audit_id), "--json")
    assert out.returncode == 0, out.stderr
    shown = json.loads(out.stdout)["commands"]
    assert [(c["step"], c["rows"]) for c in shown] == [("batch", 100), ("batch", 100), ("batch", 50), ("", 1)]
    text = acts.cli("audit", "--id", str(result.audit_id))
    assert "commands: 4 statement(s) executed" in text.stdout and "#3 batch" in text.stdout


def test_archive_batches_run_the_previewed_statements_with_the_picked_keys(acts, executed) -> None:  # noqa: ANN001
    with acts.connect() as conn:
        conn.execute("INSERT INTO @meta (status, status_changed_at) SELECT 2, now() - interval '2 hours' "
                     "FROM generate_series(1, 30)")
        conn.execute("INSERT INTO @data (id, payload) SELECT id, 'p' || id FROM @meta")
    cfg = acts.config()
    plan = actions.plan(cfg, "archive", "status", {"older_than_s": 3600, "batch_size": 20, "pause_s": 0})
    executed.clear()
    result = actions.execute(cfg, plan)
    assert result.outcome == "ok" and result.rows_affected == 30
    rows = executor.commands(open_engine(cfg), result.audit_id)
    assert [(r["statement"], r["rows"]) for r in rows] == [(e["sql"], e["rows"]) for e in executed[1:]]
    steps = {s.label: shown_sql(s.statement.sql, "postgresql") for s in plan.preview.steps}
    picks = [r for r in rows if r["step"] == "pick"]
    assert [r["rows"] for r in picks] == [20, 10]
    # The pick binds the keys the preview read, a batch's worth at a time: the first is the preview's
    # statement byte for byte, the second the same with fewer key placeholders.
    assert picks[0]["statement"] == steps["pick"] and "IN (%s," in steps["pick"]
    assert all(executor.same_as_previewed(r["statement"], steps["pick"]) for r in picks)
    assert [json.loads(r["params"])[:-2] for r in picks] == [list(range(1, 21)), list(range(21, 31))]
    deletes = [r for r in rows if r["step"] == "delete queue rows"]
    assert [r["rows"] for r in deletes] == [20, 10]
    for r in deletes:  # the preview's statement with one placeholder per picked key
        assert r["statement"] != steps["delete queue rows"]
        assert executor.same_as_previewed(r["statement"], steps["delete queue rows"])
    assert {r["object"] for r in rows if r["step"] == "delete payload rows"} == {'"qa äct"."status_data"'}


def test_a_statement_other_than_the_previewed_one_never_runs(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @lease (processing_started_at) SELECT now() - interval '1 minute' FROM generate_series(1, 3)")
    cfg = acts.config()
    plan = actions.plan(cfg, "requeue", "lease", {})
    other = plan.preview.steps[0].statement.sql.replace("LIMIT", "LIMIT 1 +")
    with pytest.raises(ActionError, match="not the one the preview showed"):
        executor.previewed_step(plan.preview, "batch", type(plan.preview.steps[0].statement)(other, ()))
    with pytest.raises(ActionError, match="no step"):
        executor.previewed_step(plan.preview, "pick", plan.preview.steps[0].statement)
    assert executor.same_as_previewed("IN (%s, %s,%s) AND x = %s", "IN (%s) AND x = %s")
    assert not executor.same_as_previewed("IN (%s, %s) AND x = %s", "IN (%s) AND y = %s")


def test_a_failing_statement_row_carries_its_error(acts) -> None:  # noqa: ANN001
    """REINDEX CONCURRENTLY waits behind an old snapshot until the lock timeout: that command row
    holds the error, the cleanup's statements follow it, the record says failed."""
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 500) AS g")
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn", {"indexes": ["churn_q_enq"], "vacuum": False, "lock_retries": 0})
    with snapshot_held(acts):
        result = actions.execute(cfg, plan)
    assert result.outcome == "failed" and "lock timeout" in result.error
    rows = executor.commands(open_engine(cfg), result.audit_id)
    failed = [r for r in rows if r["error"]]
    assert len(failed) == 1
    bad = failed[0]
    assert bad["step"].startswith("reindex_concurrently") and "lock timeout" in bad["error"]
    assert bad["end_time"] is not None and bad["rows"] is None and bad["object"] == "churn_q_enq"
    assert bad["statement"] == shown_sql(plan.preview.steps[0].statement.sql, "postgresql")
    assert rows[0]["statement"].startswith("SELECT set_config") or "statement_timeout" in rows[0]["statement"]
    assert any("DROP INDEX" in r["statement"] and r["error"] == "" for r in rows[rows.index(bad) + 1:])


def test_a_killed_action_leaves_its_last_command_row_open(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @lease (processing_started_at) SELECT now() - interval '1 minute' FROM generate_series(1, 50)")
    acts.write_config("slowlock", 'user = "olga"\nroles = { olga = "operator" }', lock_timeout_ms=120_000)
    cfg = acts.config("slowlock")
    store = open_engine(cfg)
    holder = acts.connect(autocommit=False)
    proc = None
    try:
        # SHARE mode: the preview's reads pass, the batch's UPDATE waits behind it.
        holder.execute("LOCK TABLE @lease IN SHARE MODE")
        proc = subprocess.Popen(
            [sys.executable, "-m", "queueops.cli", "act", "requeue", "--queue", "lease", "--config",
             str(acts.configs["slowlock"]), "--yes"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def waiting() -> list[dict[str, Any]]:
            from queueops.actions import audit

            recs = audit.entries(store, queue="lease", outcome="running", limit=1)
            if not recs:
                return []
            rows = executor.commands(store, recs[0]["id"])
            return rows if rows and rows[-1]["step"] == "batch" and rows[-1]["end_time"] is None else []

        rows = wait_for(waiting, 60, what="the batch statement waiting on the lock")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        # The killed client's backend still waits for the lock: end it before releasing.
        acts.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE "
                 "'queueops-action-requeue-%%'")
        holder.rollback()
        holder.close()
    audit_id = rows[-1]["audit_id"]
    out = acts.cli("audit", "--id", str(audit_id), "--json", config="slowlock")
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert rec["outcome"] == "interrupted"
    last = rec["commands"][-1]
    assert last["step"] == "batch" and last["end_time"] is None and last["rows"] is None and last["error"] == ""
