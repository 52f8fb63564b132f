"""terminate against the lab's real faults (issue 16): the held snapshot and the held table lock end,
and the guards refuse a changed session, the queueops session itself and a background process.

One workload process for the module (the real producers and consumers, their ledger and lock
timeout counters); the faults are the lab's own fault switches.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from queueops import actions, engine
from queueops import config as config_mod
from queueops.actions import audit
from queueops.lab import control
from queueops.store import open_engine
from tests.conftest import wait_for
from tests.lab.conftest import counter, counters_flushed, one
from tests.lab.conftest import start as start_workload
from tests.lab.conftest import stop as stop_workload

SETTINGS = {"produce_per_s": "8", "consume_per_s": "16", "wave_period_s": "20", "lock_hold_queue": "lease"}
HOLDER = ("SELECT pid FROM pg_stat_activity WHERE application_name = %s AND state = 'idle in transaction'")
DEAD = "SELECT dead_tuple_count FROM pgstattuple('lab.q_delete')"


class W:
    def __init__(self, lab: Any, path: Path):
        self.lab, self.path = lab, path

    def cfg(self) -> config_mod.Config:
        return config_mod.load(self.path)

    def cli(self, *args: str) -> tuple[int, Any]:
        out = self.lab.cli(*args, "--config", str(self.path))
        return out.returncode, (json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else out.stderr)

    def fault(self, name: str, on: bool) -> None:
        control.set_fault(name, on, self.lab.state_dir)


def _older_than_min_age(lab: Any, pid: int | None = None, application: str | None = None) -> None:
    """Wait until the session (by pid or application name) has been in its transaction for longer
    than the plans' ``min_age_s`` of 1 s (terminate leaves younger sessions alone)."""
    wait_for(lambda: one(lab, "SELECT extract(epoch FROM now() - xact_start) FROM pg_stat_activity "
                              "WHERE pid = %s OR application_name = %s", pid, application) >= 1.5,
             10, what="a transaction older than min_age_s")


@pytest.fixture(scope="module")
def w(lab) -> Iterator[W]:  # noqa: ANN001
    text = re.sub(r'(?m)^url = "sqlite:///.*"$', f'url = "sqlite:///{lab.state_dir}/terminate-store.db"',
                  lab.config_path.read_text())
    path = lab.state_dir / "terminate.toml"
    path.write_text(text + '\n[actions]\nterminate_deny_logins = ["replicator"]\n')
    running = start_workload(lab, path, SETTINGS)
    try:
        yield W(lab, path)
    finally:
        stop_workload(running)
        lab.reset()


def _oldest_snapshot_age(cfg: config_mod.Config) -> float:
    from collectors import registry, runner

    rows = runner.run_collectors(cfg, cfg.target("lab"), [registry.by_name("oldest_snapshot")]).rows
    return next(r.value for r in rows if r.metric == "oldest_snapshot_age_s")


def test_snapshot_hold_terminate_then_vacuum(w: W) -> None:
    lab = w.lab
    w.fault("snapshot-hold", True)
    try:
        pid = wait_for(lambda: one(lab, HOLDER, "queueops-lab-snapshot-hold"), 15, what="the snapshot holder")
        counters_flushed(lab)
        start = counter(lab, "processed.delete")
        wait_for(lambda: counter(lab, "processed.delete") >= start + 60, 40, what="60 dequeues under the snapshot")

        def dead_after_vacuum() -> int:
            with lab.connect() as conn:
                conn.execute("VACUUM lab.q_delete")
            return int(one(lab, DEAD))

        held_dead = wait_for(lambda: (n := dead_after_vacuum()) >= 40 and n, 30, what="pinned dead tuples")
        rc, preview = w.cli("act", "terminate", "--queue", "delete", "--dry-run", "--json", "--min-age-s", "3")
        assert rc == 0, preview
        row = preview["rows"][0]
        assert row["session_id"] == pid and row["cause"] == "snapshot"
        assert row["application"] == "queueops-lab-snapshot-hold" and row["xact_age_s"] >= 3
        assert "pg_terminate_backend" in preview["sql"] and preview["destructive"]
        before_age = _oldest_snapshot_age(w.cfg())
        rc, result = w.cli("act", "terminate", "--queue", "delete", "--yes", "--json", "--min-age-s", "3")
        assert rc == 0 and result["outcome"] == "ok", result
        assert result["rows"][0] == {**result["rows"][0], "session_id": pid, "ended": True}
        assert not one(lab, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", pid)
        after_age = _oldest_snapshot_age(w.cfg())
        assert after_age < 2 <= before_age, (before_age, after_age)
        shown = {r["metric"]: r for r in result["rows"] if "metric" in r}
        assert shown["oldest_snapshot_age_s"]["before"] >= 3 > shown["oldest_snapshot_age_s"]["after"]
        offer = next(r for r in result["rows"] if r.get("offer") == "VACUUM")
        assert offer["command"] == "queueops act rebuild --queue delete --vacuum-only"
        # The offered VACUUM, through the action layer: the dead tuples the snapshot pinned go.
        rc, vac = w.cli("act", "rebuild", "--queue", "delete", "--vacuum-only", "--yes", "--json")
        assert rc == 0 and vac["outcome"] == "ok", vac
        assert [s["label"] for s in vac["preview"]["statements"]] == ['vacuum "lab"."q_delete"']
        assert int(one(lab, DEAD)) < held_dead / 2, held_dead
        rec = audit.entry(open_engine(w.cfg()), result["audit_id"])
        assert rec["outcome"] == "ok" and rec["action"] == "terminate" and rec["end_time"] >= rec["start_time"]
        assert json.loads(rec["preview"])["rows"][0]["session_id"] == pid
    finally:
        w.fault("snapshot-hold", False)


def test_lock_hold_terminate_resumes_dequeuers(w: W) -> None:
    lab = w.lab
    w.fault("lock-hold", True)
    try:
        pid = wait_for(lambda: one(lab, HOLDER, "queueops-lab-lock-hold"), 15, what="the lock holder")
        timeouts = counter(lab, "lock_timeouts.lease")
        wait_for(lambda: counter(lab, "lock_timeouts.lease") >= timeouts + 3, 20, what="dequeuers timing out")
        cfg = w.cfg()
        plan = actions.plan(cfg, "terminate", "lease")
        assert plan.preview.rows[0]["session_id"] == pid and plan.preview.rows[0]["cause"] == "blocker"
        # A lock blocker's preview says nothing of some young snapshot ("... for -0 s", issue 32).
        assert not [x for x in plan.preview.warnings if "oldest snapshot" in x], plan.preview.warnings
        result = actions.execute(cfg, plan)
        assert result.outcome == "ok", result.error
        counters_flushed(lab)
        stopped = counter(lab, "lock_timeouts.lease")
        processed = counter(lab, "processed.lease")
        wait_for(lambda: counter(lab, "processed.lease") >= processed + 10, 30, what="lease dequeuers to resume")
        counters_flushed(lab)
        assert counter(lab, "lock_timeouts.lease") == stopped  # no more lock timeouts
        refused = [r for r in audit.entries(open_engine(cfg), action="terminate", limit=10) if r["outcome"] == "ok"]
        assert {r["queue"] for r in refused} >= {"lease"}
    finally:
        w.fault("lock-hold", False)


def test_a_session_that_changed_is_refused(w: W) -> None:
    """Preview a holder, let its transaction end and another begin on the same session: refused."""
    cfg = w.cfg()
    with w.lab.connect() as conn:
        conn.execute("SET application_name = 'test-holder'")
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT 1")
        _older_than_min_age(w.lab, application="test-holder")
        plan = actions.plan(cfg, "terminate", "delete", {"min_age_s": 1})
        assert plan.preview.rows[0]["application"] == "test-holder"
        conn.execute("COMMIT")
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT 1")  # same session, new transaction
        result = actions.execute(cfg, plan)
        assert result.outcome == "refused" and "another transaction" in result.error, result.error
        assert conn.execute("SELECT 1").fetchone() == (1,)  # still alive: nothing was signalled
        conn.execute("COMMIT")
    assert audit.entry(open_engine(cfg), result.audit_id)["outcome"] == "refused"
    # Gone altogether: refused too.
    result = actions.execute(cfg, plan)
    assert result.outcome == "refused" and "ended" in result.error


def test_cancel_only_cancels_the_statement_and_keeps_the_session(w: W) -> None:
    import threading

    import psycopg

    cfg = w.cfg()
    box: dict[str, Any] = {}
    conn = w.lab.connect()
    conn.execute("SET application_name = 'test-sleeper'")
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    conn.execute("SELECT 1")
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]

    def sleep() -> None:
        try:
            conn.execute("SELECT pg_sleep(60)")
        except psycopg.Error as exc:
            box["error"] = exc

    t = threading.Thread(target=sleep, daemon=True)
    t.start()
    try:
        wait_for(lambda: one(w.lab, "SELECT state FROM pg_stat_activity WHERE pid = %s", pid) == "active", 10,
                 what="the sleeping statement")
        plan = wait_for(lambda: (p := actions.plan(cfg, "terminate", "delete", {"min_age_s": 1, "cancel_only": True}))
                        .preview.rows and p, 15, what="the snapshot to be a second old")
        assert plan.preview.rows[0]["session_id"] == pid and "pg_cancel_backend" in plan.preview.sql
        result = actions.execute(cfg, plan)
        assert result.outcome == "ok", result.error
        t.join(15)
        assert isinstance(box.get("error"), psycopg.errors.QueryCanceled)
        assert one(w.lab, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", pid) == 1  # still connected
    finally:
        conn.close()
        t.join(15)


def test_guards_refuse_queueops_and_background_sessions(w: W) -> None:
    cfg = w.cfg()
    target = cfg.target("lab")
    collector = engine.connect(target, "collect", cfg.base_dir)  # application 'queueops-collect'
    try:
        pid = collector.execute(sqlfile_pid())[0]["pid"]
        with pytest.raises(actions.ActionError, match="belongs to queueops itself"):
            actions.plan(cfg, "terminate", "delete", {"session": pid})
    finally:
        collector.close()
    bg = one(w.lab, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
    with pytest.raises(actions.ActionError, match="system or background process"):
        actions.plan(cfg, "terminate", "delete", {"session": bg})
    rc, err = w.cli("act", "terminate", "--queue", "delete", "--session", str(bg), "--yes")
    assert rc == 2 and "background process (checkpointer)" in err
    # A forged plan naming a background process, or the action's own session, is refused at execution
    # and audited as refused.
    with w.lab.connect() as conn:
        conn.execute("SET application_name = 'test-holder-2'")
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT 1")
        _older_than_min_age(w.lab, application="test-holder-2")
        plan = actions.plan(cfg, "terminate", "delete", {"min_age_s": 1})
        conn.execute("COMMIT")
    forged = one(w.lab, "SELECT row_to_json(a) FROM (SELECT pid AS session_id, backend_start AS session_start, "
                        "xact_start FROM pg_stat_activity WHERE backend_type = 'checkpointer') AS a")
    with w.lab.connect() as conn:
        row = conn.execute("SELECT backend_start, xact_start FROM pg_stat_activity WHERE pid = %s", (bg,)).fetchone()
    plan.observed["session"] = {"session_id": forged["session_id"], "session_start": row[0], "xact_start": row[1]}
    result = actions.execute(cfg, plan)
    assert result.outcome == "refused" and "background process" in result.error, result.error
    assert one(w.lab, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", bg) == 1
    assert audit.entry(open_engine(cfg), result.audit_id)["outcome"] == "refused"
    # The deny list.
    from queueops.actions.decide import terminate_refusal

    assert "deny list" in terminate_refusal({"session_id": 7, "login": "Replicator", "user_process": True,
                                             "application": "x"}, own_session_id=None, deny_logins=["replicator"])


def sqlfile_pid() -> Any:
    from queueops.sqlfiles import Statement

    return Statement("SELECT pg_backend_pid() AS pid")


def test_the_guard_rules() -> None:
    from queueops.actions.decide import pick_cause, terminate_changed, terminate_refusal

    s = {"session_id": 5, "login": "app", "application": "billing", "user_process": True, "process_type": "client"}
    assert terminate_refusal(s, own_session_id=6) is None
    assert "running this action" in terminate_refusal(s, own_session_id=5)
    assert "queueops itself" in terminate_refusal({**s, "application": "queueops-action-requeue-3"}, own_session_id=6)
    assert terminate_refusal({**s, "application": "queueops-lab-snapshot-hold"}, own_session_id=6) is None
    assert "background" in terminate_refusal({**s, "user_process": 0}, own_session_id=6)
    assert "deny list" in terminate_refusal(s, own_session_id=6, deny_logins=["APP"])
    assert "no longer exists" in terminate_refusal(None, own_session_id=6)
    obs = {"session_id": 5, "session_start": 1, "xact_start": 2}
    assert terminate_changed(obs, {**obs, "state": "idle"}) is None
    assert "another session" in terminate_changed(obs, {**obs, "session_start": 9})
    assert "another transaction" in terminate_changed(obs, {**obs, "xact_start": 3})
    assert "another transaction" in terminate_changed({**obs, "xact_id": 1}, {**obs, "xact_id": 2})
    assert "ended" in terminate_changed(obs, None)
    cands = [{"session_id": 1, "cause": "blocker"}, {"session_id": 2, "cause": "snapshot"}]
    assert pick_cause(cands)["session_id"] == 1 and pick_cause(cands, 2)["session_id"] == 2
    assert pick_cause(cands, 3) is None and pick_cause([]) is None


def test_the_tsql_kill_has_its_expected_shape() -> None:
    """KILL takes a literal id, and runs only inside a compare-and-set on the session's identity:
    'IF EXISTS (<same id, same login_time, a user session, not this one>) BEGIN KILL <integer>;
    SELECT 1 AS signalled; END'. sqlglot parses that block (not 'KILL n WITH STATUSONLY', so
    rollback progress is read from sys.dm_exec_requests.percent_complete instead)."""
    import sqlglot
    from sqlglot import exp

    from queueops import sqlfiles
    from queueops.actions.terminate import _signal_statement

    started = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)
    stmt = _signal_statement(sqlfiles.load("mssql", "actions/terminate"), "mssql", "terminate",
                             {"session_id": 53, "session_start": started})
    text = re.sub(r"(?m)^\s*--.*\n", "", stmt.sql).strip()
    assert stmt.params == (53, started)
    tree = sqlglot.parse_one(text.replace("?", "NULL"), read="tsql")
    assert isinstance(tree, exp.IfBlock)
    cond = tree.this.sql("tsql")
    # login_time is datetime; the bound value is converted on the server (issue 33, item 10), so a
    # datetime2 parameter from pyodbc still matches it exactly.
    for part in ("s.session_id = NULL", "s.login_time = CAST(CAST(NULL AS DATETIME2(7)) AS DATETIME)",
                 "s.is_user_process = 1", "s.session_id <> @@SPID"):
        assert part in cond, (part, cond)
    kills = [e for e in tree.args["true"].expressions if isinstance(e, exp.Kill)]
    assert len(kills) == 1 and kills[0].this.this == "53"
    assert any(isinstance(e, exp.Select) and e.expressions[0].alias == "signalled"
               for e in tree.args["true"].expressions)
    with pytest.raises(ValueError):
        _signal_statement(sqlfiles.load("mssql", "actions/terminate"), "mssql", "terminate",
                          {"session_id": "53; DROP TABLE x", "session_start": started})


def test_only_the_previewed_backend_is_signalled(acts) -> None:  # noqa: ANN001
    """Issue 30: terminate is bound to the previewed pid *and* its backend start (and transaction
    start). A plan whose session is the same pid with another backend start (a reused pid) is
    refused before the signal, and the signal's own statement is a compare-and-set on all three."""
    from queueops.sqlfiles import load

    cfg = acts.config()
    with acts.connect() as conn:
        conn.execute("SET application_name = 'test-bound-holder'")
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT 1")
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        _older_than_min_age(acts.lab, pid=pid)
        plan = actions.plan(cfg, "terminate", "delete", {"min_age_s": 1})
        obs = plan.observed["session"]
        assert obs["session_id"] == pid and plan.preview.rows[0]["application"] == "test-bound-holder"
        reused = {**obs, "session_start": obs["session_start"].replace(microsecond=(obs["session_start"].microsecond + 1)
                                                                       % 1_000_000)}
        plan.observed["session"] = reused
        r = actions.execute(cfg, plan)
        assert r.outcome == "refused" and "now belongs to another session" in r.error, r.error
        assert conn.execute("SELECT 1").fetchone() == (1,)  # not signalled
        # The signal statement itself: no row (nothing signalled) unless pid, backend start and
        # transaction start are all the previewed ones.
        sql = load("postgresql", "actions/terminate")
        with acts.connect() as other:
            for ident in (reused, {**obs, "xact_start": obs["session_start"]}):
                stmt = sql.render("cancel", {}, {"session_id": ident["session_id"], "session_start": ident["session_start"],
                                                 "xact_start": ident["xact_start"]})
                assert other.execute(stmt.sql, stmt.params).fetchall() == []
        assert conn.execute("SELECT 1").fetchone() == (1,)
        conn.execute("COMMIT")
    assert audit.entry(open_engine(cfg), r.audit_id)["outcome"] == "refused"


def test_a_lock_on_one_partition_is_the_partitioned_queues_root_cause(acts) -> None:  # noqa: ANN001
    """A LOCK (or VACUUM FULL) of one partition stalls every dequeue through the parent and holds
    nothing on the parent: terminate found no root cause (it matched the parent alone), and
    pg_partition_tree would have waited behind that very lock. The holder is the candidate, and
    ending it lets the waiting dequeue through."""
    from tests.actions.conftest import PARTED

    acts.sql("DROP TABLE IF EXISTS @S.parted_q")
    acts.sql("CREATE TABLE @S.parted_q (id bigint NOT NULL, enqueued_at timestamptz NOT NULL DEFAULT now(), "
             "payload text NOT NULL DEFAULT '', PRIMARY KEY (id)) PARTITION BY RANGE (id)")
    acts.sql("CREATE TABLE @S.parted_q_a PARTITION OF @S.parted_q FOR VALUES FROM (0) TO (100)")
    acts.sql("CREATE TABLE @S.parted_q_b PARTITION OF @S.parted_q FOR VALUES FROM (100) TO (200)")
    acts.sql("INSERT INTO @S.parted_q (id) SELECT g FROM generate_series(1, 199) AS g")
    acts.write_config("parted", 'user = "olga"\nroles = { olga = "operator" }', extra=PARTED)
    cfg = acts.config("parted")
    holder = acts.connect()
    try:
        holder.execute("SET application_name = 'partition-holder'")
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE @S.parted_q_b IN ACCESS EXCLUSIVE MODE")
        pid = holder.execute("SELECT pg_backend_pid()").fetchone()[0]
        _older_than_min_age(acts.lab, pid=pid)
        plan = actions.plan(cfg, "terminate", "parted", {"min_age_s": 1})
        assert plan.observed["session"]["session_id"] == pid, plan.preview.rows
        row = plan.preview.rows[0]
        # A blocker of the queue: the old SQL found it only as the oldest snapshot of the database
        # (its xid), which any older transaction elsewhere would have taken from it.
        assert (row["cause"], row["application"]) == ("blocker", "partition-holder"), plan.preview.rows
        assert actions.execute(cfg, plan).outcome == "ok"
        wait_for(lambda: not one(acts.lab, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", pid), 10,
                 what="the holder ended")
        with acts.connect() as conn:
            conn.execute("SET lock_timeout = '2s'")
            assert conn.execute("DELETE FROM @S.parted_q WHERE id = 150 RETURNING id").fetchall() == [(150,)]
    finally:
        holder.close()
        acts.sql("DROP TABLE IF EXISTS @S.parted_q")
