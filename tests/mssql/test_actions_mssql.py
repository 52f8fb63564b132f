"""Every action against a real SQL Server: requeue, archive, watermark-reset, rebuild, a killed session.

Runs only when QUEUEOPS_TEST_MSSQL_URL names a server (see conftest.py): SQL Server cannot run on
this machine, and a fake would prove nothing. Uses the T-SQL lab of sql/mssql/lab/schema.sql;
test-support steps are blocks of sql/mssql/lab/actions.sql.
"""

from __future__ import annotations

import os

import pytest

if not os.environ.get("QUEUEOPS_TEST_MSSQL_URL"):
    pytest.skip("QUEUEOPS_TEST_MSSQL_URL is not set: the SQL Server suite needs a real server (a SQLAlchemy "
                "mssql+pyodbc URL of a disposable database; see tests/mssql/conftest.py)", allow_module_level=True)

import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

from queueops import actions  # noqa: E402
from queueops import config as config_mod  # noqa: E402
from queueops.actions import audit  # noqa: E402
from queueops.store import open_engine  # noqa: E402
from tests.mssql.conftest import LEASE_TIMEOUT_S  # noqa: E402


@pytest.fixture()
def act(mssql, tmp_path) -> Iterator[tuple[Any, config_mod.Config, Any]]:  # noqa: ANN001
    """The emptied SQL Server lab, a config acting as an operator with its own store, a connection."""
    server, cfg, conn = mssql
    cfg = cfg.model_copy(update={
        "store": config_mod.Store(url=f"sqlite:///{tmp_path}/store.db"),
        "identity": config_mod.Identity(user="olga", default_role="operator"),
    })
    server.run(conn, "drop_archive", "actions")
    yield server, cfg, conn
    server.run(conn, "drop_archive", "actions")


def counts(server: Any, conn: Any) -> dict[str, Any]:
    return server.run(conn, "counts", "actions")[0]


def test_requeue_lease_and_status(act) -> None:  # noqa: ANN001
    server, cfg, conn = act
    server.run(conn, "produce_lease", n=40, age_s=0)
    server.run(conn, "dead_consumer_lease", n=25)
    server.run(conn, "produce_status", n=20, age_s=0)
    server.run(conn, "dead_consumer_status", n=12)
    time.sleep(LEASE_TIMEOUT_S + 1)
    plan = actions.plan(cfg, "requeue", "lease", {"batch_size": 10})
    assert plan.preview.row_count == 25 and "READPAST" in plan.preview.sql
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 25), r.error
    plan = actions.plan(cfg, "requeue", "status", {"bump_attempts": True})
    assert plan.preview.row_count == 12
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 12), r.error
    c = counts(server, conn)
    assert (c["lease_leased"], c["lease_ready"]) == (0, 40)
    assert (c["status_processing"], c["status_ready"], c["status_ready_retried"]) == (0, 20, 12)


def test_archive_delete_then_move(act) -> None:  # noqa: ANN001
    server, cfg, conn = act
    server.run(conn, "produce_status", n=30, age_s=0)
    server.run(conn, "dead_consumer_status", n=30)
    server.run(conn, "finish_status", "actions", n=20, age_s=3600)
    server.run(conn, "payloads", "actions")
    plan = actions.plan(cfg, "archive", "status", {"older_than_s": 60, "batch_size": 7, "pause_s": 0})
    assert plan.preview.row_count == 20 and plan.preview.destructive
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 20), r.error
    c = counts(server, conn)
    assert (c["status_done"], c["status_processing"], c["status_payloads"]) == (0, 10, 10)
    # move: the rest, once finished, into archive tables of the same layout
    server.run(conn, "finish_status", "actions", n=10, age_s=3600)
    server.run(conn, "create_archive", "actions")
    plan = actions.plan(cfg, "archive", "status", {
        "older_than_s": 60, "mode": "move", "archive_table": "q_status_meta_archive",
        "archive_data_table": "q_status_data_archive", "batch_size": 4, "pause_s": 0})
    assert plan.preview.row_count == 10
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 10), r.error
    assert server.run(conn, "archive_counts", "actions")[0] == {"meta": 10, "data": 10}
    assert counts(server, conn)["status_payloads"] == 0


def test_watermark_reset_and_a_concurrent_update(act) -> None:  # noqa: ANN001
    server, cfg, conn = act
    server.run(conn, "produce_delete", n=30, age_s=0)
    server.run(conn, "watermark_jump")
    plan = actions.plan(cfg, "watermark-reset", "delete")
    row = plan.preview.rows[0]
    assert row["stranded"] == 30 and row["drift_before"] < 0
    r = actions.execute(cfg, plan)
    assert r.outcome == "ok", r.error
    c = counts(server, conn)
    assert c["watermark"] == c["delete_lowest"]
    server.run(conn, "set_watermark", "actions", value=999)
    plan = actions.plan(cfg, "watermark-reset", "delete")
    server.run(conn, "set_watermark", "actions", value=1000)  # consumers moved it forward meanwhile
    r = actions.execute(cfg, plan)  # a move back is written over it (issue 32), and says so
    assert r.outcome == "ok" and any("had moved from 999 to 1000" in n for n in r.notes), (r.error, r.notes)
    c = counts(server, conn)
    assert c["watermark"] == c["delete_lowest"]
    # a move forward stays a compare-and-set on the previewed value
    server.run(conn, "set_watermark", "actions", value=0)
    plan = actions.plan(cfg, "watermark-reset", "delete")
    assert plan.preview.rows[0]["new_value"] > 0
    server.run(conn, "set_watermark", "actions", value=1)
    r = actions.execute(cfg, plan)
    assert r.outcome == "failed" and "no longer is 0" in r.error
    assert counts(server, conn)["watermark"] == 1


def test_rebuild_chooses_by_fragmentation_and_runs(act) -> None:  # noqa: ANN001
    server, cfg, conn = act
    server.run(conn, "churn_insert", n=60000)
    server.run(conn, "churn_delete")
    plan = actions.plan(cfg, "rebuild", "due", {"min_pages": 0})
    rows = {r["index"]: r for r in plan.preview.rows}
    assert rows and all(r["reason"] for r in rows.values())
    assert not any(r["offline"] for r in rows.values())  # never offline unless allowed
    acted = {n: r for n, r in rows.items() if r["operation"] != "none"}
    for name, r in acted.items():
        assert r["fragmentation_pct"] >= 5 and name in plan.preview.sql
    r = actions.execute(cfg, plan)
    assert r.outcome == "ok", r.error
    assert r.rows_affected == len(plan.preview.steps)
    after = {x["index"]: x for x in actions.plan(cfg, "rebuild", "due", {"min_pages": 0}).preview.rows}
    for name, before in acted.items():
        assert after[name]["fragmentation_pct"] < before["fragmentation_pct"], (name, before, after[name])


def test_killed_session_mid_requeue(act) -> None:  # noqa: ANN001
    server, cfg, conn = act
    server.run(conn, "produce_lease", n=3000, age_s=0)
    server.run(conn, "dead_consumer_lease", n=3000)
    time.sleep(LEASE_TIMEOUT_S + 1)
    plan = actions.plan(cfg, "requeue", "lease", {"batch_size": 100, "pause_s": 0.2})
    reached = threading.Event()
    box: dict[str, actions.Result] = {}

    def progress(p: actions.Progress) -> None:
        if p.phase == "batches" and (p.done or 0) >= 5:
            reached.set()

    t = threading.Thread(target=lambda: box.setdefault("r", actions.execute(cfg, plan, progress=progress)))
    t.start()
    assert reached.wait(60)
    sessions = [s for s in server.run(conn, "action_sessions", "actions", pattern="queueops-action-requeue-%")
                if not s["program_name"].endswith(("-preview", "-progress"))]
    assert len(sessions) == 1, sessions
    server.run(conn, "kill", "actions", frags={"session_n": str(int(sessions[0]["session_id"]))})
    t.join(60)
    r = box["r"]
    assert r.outcome == "interrupted", r.error
    c = counts(server, conn)
    assert c["lease_ready"] + c["lease_leased"] == 3000
    assert c["lease_ready"] % 100 == 0 and 500 <= c["lease_ready"] < 3000  # whole batches only
    assert r.rows_affected <= c["lease_ready"] <= r.rows_affected + 100
    assert audit.entry(open_engine(cfg), r.audit_id)["outcome"] == "interrupted"


def test_terminate_kills_the_blocker_and_the_snapshot_holder(act) -> None:  # noqa: ANN001
    """terminate on SQL Server: KILL of the head blocker of the lease table (a waiting dequeuer then
    goes on), KILL of the oldest snapshot transaction, a changed session refused, and the shape of
    the KILL statement (a literal id, nothing else)."""
    import re

    import pyodbc

    from tests.conftest import wait_for
    from tests.mssql.conftest import SQL_TXN_SS_SNAPSHOT

    server, cfg, conn = act
    server.run(conn, "produce_lease", n=5, age_s=0)
    holder = server.connect(autocommit=False)
    waiter = server.connect()
    done = threading.Event()
    try:
        spid = server.run(holder, "spid")[0]["spid"]
        server.run(holder, "lock_hold_lease")  # TABLOCKX held until the transaction ends

        def dequeue() -> None:
            server.run(waiter, "set_lock_timeout", frags={"lock_timeout_ms": "30000"})
            server.run(waiter, "dequeue_lease")
            done.set()

        t = threading.Thread(target=dequeue, daemon=True)
        t.start()
        plan = wait_for(lambda: (p := actions.plan(cfg, "terminate", "lease")).preview.rows and p, 30,
                        what="the dequeuer to wait behind the lock holder")
        row = plan.preview.rows[0]
        assert row["session_id"] == spid and row["cause"] == "blocker" and row["blocked"] >= 1, row
        assert re.fullmatch(r"KILL \d+", plan.preview.sql.strip()), plan.preview.sql
        assert "log to roll back" in row["rollback"]
        r = actions.execute(cfg, plan)
        assert r.outcome == "ok", r.error
        assert done.wait(30), "the dequeuer is still blocked after the KILL"
        assert audit.entry(open_engine(cfg), r.audit_id)["outcome"] == "ok"
    finally:
        for c in (holder, waiter):
            try:
                c.close()
            except Exception:  # noqa: BLE001 - the killed session's connection is already gone
                pass
    # The oldest snapshot transaction; then a new transaction on the same session is refused.
    holder = server.connect(autocommit=False)
    try:
        holder.set_attr(pyodbc.SQL_ATTR_TXN_ISOLATION, SQL_TXN_SS_SNAPSHOT)
        spid = server.run(holder, "spid")[0]["spid"]
        server.run(holder, "snapshot_read")
        plan = wait_for(lambda: (p := actions.plan(cfg, "terminate", "delete", {"min_age_s": 1})).preview.rows
                        and p, 30, what="the snapshot transaction to be a second old")
        assert plan.preview.rows[0]["session_id"] == spid and plan.preview.rows[0]["cause"] == "snapshot"
        holder.commit()
        server.run(holder, "snapshot_read")  # same session, a new transaction
        r = actions.execute(cfg, plan)
        assert r.outcome == "refused" and "another transaction" in r.error, r.error
        plan = actions.plan(cfg, "terminate", "delete", {"min_age_s": 0})
        r = actions.execute(cfg, plan)
        assert r.outcome == "ok", r.error
    finally:
        try:
            holder.close()
        except Exception:  # noqa: BLE001
            pass
    with pytest.raises(actions.ActionError, match="cannot cancel"):
        actions.plan(cfg, "terminate", "lease", {"cancel_only": True})
