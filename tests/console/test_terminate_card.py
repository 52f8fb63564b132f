"""The root-cause card's "End session" button (issue 16), in Streamlit's AppTest against the real lab:
a session holds a lock on the lease queue's table and a dequeuer waits behind it; an operator
previews, types the session id, ends it, and the dequeuer goes on. Viewers get no button; the
autopilot's kill switch shows on the page."""

from __future__ import annotations

import threading

from queueops.autopilot import state
from queueops.store import open_engine
from tests.conftest import wait_for
from tests.console.conftest import ConsoleEnv, page, texts


def _one(env: ConsoleEnv, sql: str, *params: object) -> object:
    with env.lab.connect() as conn:
        row = conn.execute(sql, params).fetchone()
        return row[0] if row else None


def test_an_operator_ends_the_head_blocker_from_its_card(env: ConsoleEnv) -> None:
    holder = env.lab.connect()
    holder.execute("SET application_name = 'test-card-holder'")
    holder.execute("BEGIN")
    holder.execute("LOCK TABLE lab.q_lease IN EXCLUSIVE MODE")
    pid = holder.execute("SELECT pg_backend_pid()").fetchone()[0]
    done = threading.Event()

    def dequeue() -> None:
        with env.lab.connect() as conn:
            conn.execute("SET lock_timeout = '60s'")
            conn.execute("DELETE FROM lab.q_lease WHERE id = -1")
        done.set()

    waiter = threading.Thread(target=dequeue, daemon=True)
    waiter.start()
    try:
        wait_for(lambda: _one(env, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                   "AND %s = ANY(pg_blocking_pids(pid))", pid), 10, what="a blocked dequeuer")
        viewer = page("console.views.queue_detail", role="viewer", queue="lease")
        assert not [b for b in viewer.button if b.label.startswith("End session")]
        at = page("console.views.queue_detail", queue="lease")
        assert not at.exception
        next(b for b in at.button if b.key and b.key.startswith("term_preview_") and b.key.endswith(f"_{pid}")).click().run()
        assert not at.exception
        assert any("pg_terminate_backend" in c.value for c in at.code), texts(at)
        assert f"session {pid}" in texts(at) and "blocks the queue table" in texts(at)
        run = at.button(key="term_run")
        assert run.disabled  # typed confirmation first
        at.text_input(key=f"term_typed_{pid}").input("12").run()
        assert at.button(key="term_run").disabled
        at.text_input(key=f"term_typed_{pid}").input(str(pid)).run()
        at.button(key="term_run").click().run()
        assert not at.exception
        assert any("terminate" in s.value and "ok" in s.value for s in at.success), texts(at)
        assert done.wait(15), "the dequeuer is still blocked"
        assert _one(env, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", pid) == 0
    finally:
        holder.close()
        waiter.join(15)


def test_the_kill_switch_shows_on_the_page(env: ConsoleEnv, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    import streamlit as st

    path = tmp_path / "autopilot-console.toml"
    path.write_text(env.config_path.read_text() + '\n[[autopilot]]\nname = "lease-stuck"\nqueue = "lease"\n'
                    'action = "requeue"\nwhen = "stuck_leases >= 1 for 3 samples"\nmode = "act"\n')
    monkeypatch.setenv("QUEUEOPS_CONFIG", str(path))
    st.cache_resource.clear()
    store = open_engine(env.config())
    state.set_switch(store, False, "oncall")
    try:
        at = page("console.views.queue_detail", queue="lease")
        assert not at.exception
        assert "Autopilot is OFF (kill switch, set by oncall" in texts(at) and "lease-stuck" in texts(at)
        viewer = page("console.views.queue_detail", role="viewer", queue="lease")
        assert not viewer.get("toggle")  # only operators get the switch
        at.toggle(key="autopilot_switch_lease").set_value(True).run()
        assert not at.exception
        assert state.switch(store)["enabled"] is True and state.switch(store)["by"] == "oncall"
        assert "Autopilot is OFF" not in texts(at)
    finally:
        state.set_switch(store, True, "oncall")


def test_the_preview_outlives_a_sample_without_its_blocker_and_confirm_checks_again(env: ConsoleEnv) -> None:
    """Issue 32, item 3: a head blocker is only seen while someone waits behind it. Its preview stays
    open when the next sample no longer names it; confirming re-checks and refuses, saying why."""
    import time

    with env.lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_lease (id, created_at) OVERRIDING SYSTEM VALUE VALUES (-7, now())")
    holder = env.lab.connect()
    holder.execute("BEGIN")
    holder.execute("SELECT id FROM lab.q_lease WHERE id = -7 FOR UPDATE")
    pid = holder.execute("SELECT pg_backend_pid()").fetchone()[0]
    waiter = env.lab.connect()
    waiter_pid = waiter.execute("SELECT pg_backend_pid()").fetchone()[0]
    waiter.execute("SET lock_timeout = '60s'")
    thread = threading.Thread(target=lambda: _quiet(waiter, "UPDATE lab.q_lease SET attempts = 1 WHERE id = -7"),
                              daemon=True)
    thread.start()
    try:
        wait_for(lambda: _one(env, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                   "AND %s = ANY(pg_blocking_pids(pid))", pid), 10, what="a blocked updater")
        at = page("console.views.queue_detail", queue="lease")
        next(b for b in at.button if b.key and b.key.startswith("term_preview_") and b.key.endswith(f"_{pid}")).click().run()
        assert any("pg_terminate_backend" in c.value for c in at.code), texts(at)
        _one(env, "SELECT pg_cancel_backend(%s)", waiter_pid)  # nobody waits behind it any more
        thread.join(10)
        time.sleep(6)  # past [console] cache_s: the next run samples again
        at.run()
        assert f"session {pid}**: not named by the latest sample" in texts(at)
        assert "paused while previewing" in texts(at)
        at.text_input(key=f"term_typed_{pid}").input(str(pid)).run()
        at.button(key="term_run").click().run()
        assert not at.exception
        warned = "\n".join(w.value for w in at.warning)
        assert "refused" in warned and "no longer a root cause" in warned, texts(at)
        assert _one(env, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", pid) == 1  # never signalled
    finally:
        holder.close()
        waiter.close()
        with env.lab.connect() as conn:
            conn.execute("DELETE FROM lab.q_lease WHERE id = -7")


def _quiet(conn, sql: str) -> None:  # noqa: ANN001
    try:
        conn.execute(sql)
    except Exception:  # noqa: BLE001 - cancelled on purpose
        pass
