"""Hostile values typed into every field of the console, and a viewer trying to act.

Each text field (sign-in user and password, the audit search, the destructive action's
typed confirmation) and the ``?queue=`` link get strings built to break out of SQL, format
strings, HTML and Unicode comparisons. The console must treat each as plain text: no exception
on the page, no statement run from it (the lab's tables and rows are untouched, no session sleeps),
no sign-in, no action. A viewer is refused on every queue's page, even with a forged preview in
the session.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.console.conftest import OPERATOR, TIMEOUT, ConsoleEnv, count_stuck, page, stuck_leases, texts

HOSTILE = [
    "lease'; DROP TABLE lab.q_lease; --",
    '"; SELECT pg_sleep(30); --',
    "' OR '1'='1",
    "%s %(x)s {0} %%",
    "<script>alert(1)</script>",
    "ｌｅａｓｅ",              # full-width look-alike of a queue name
    "lease\u200b",            # a zero-width space after a real name
    "lease ",                 # a real name with a trailing space
    "]]; DELETE FROM [lab].[q_lease]; --",
    "x" * 5000,
]


def _intact(env: ConsoleEnv) -> tuple[int, int, int]:
    """Rows of the lease and status queues and sessions sleeping: what an injection would change."""
    with env.lab.connect() as conn:
        lease = conn.execute("SELECT count(*) FROM lab.q_lease").fetchone()[0]
        status = conn.execute("SELECT count(*) FROM lab.q_status_meta").fetchone()[0]
        sleeping = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE '%pg_sleep%' "
                                "AND pid <> pg_backend_pid()").fetchone()[0]
    return lease, status, sleeping


def test_sign_in_fields_take_hostile_text_literally(env: ConsoleEnv) -> None:
    """Each value through the sign-in endpoint's own procedure (console.signin.attempt; the HTTP
    form is driven in test_signin_browser.py), the throttle cleared before each so the password
    is really checked every time."""
    from console import signin
    from queueops.store import open_engine, sessions

    before = _intact(env)
    store = open_engine(env.config())
    for value in HOSTILE:
        for user, password in ((value, OPERATOR[1]), (OPERATOR[0], value)):
            for key in sessions.throttle_keys(user.strip(), "hostile"):
                sessions.clear(store, key)
            got = signin.attempt(store, env.users_path, user, password, "hostile")
            assert got.outcome == "failed" and got.session_id is None, (user[:40], password[:40])
            assert got.message == "Unknown user or wrong password.", (user[:40], password[:40])
    assert _intact(env) == before


def test_audit_search_takes_hostile_text_literally(env: ConsoleEnv) -> None:
    from queueops import actions, roles

    stuck_leases(env, 1)
    cfg = env.config()
    actions.execute(cfg, actions.plan(cfg, "requeue", "lease"), actor=roles.Actor(OPERATOR[0], "operator", "test"))
    before = _intact(env)
    at = page("console.views.audit")
    assert len(at.dataframe[0].value) >= 1
    for value in HOSTILE:
        at.text_input(key="audit_text").input(value).run()
        assert not at.exception, value[:40]
        if value != "lease ":  # a real substring of the records (the queue, its SQL); the others match nothing
            assert any(c.value.startswith("0 of ") for c in at.caption), value[:40]
    assert _intact(env) == before


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_queue_link_opens_no_queue_of_that_name(env: ConsoleEnv, value: str) -> None:
    before = _intact(env)
    at = page("console.views.queue_detail", queue=value)
    assert not at.exception
    title = at.title[0].value
    assert title.startswith("Queue ") and title.removeprefix("Queue ") in {"delete", "status", "lease", "due", "ring"}
    assert value not in texts(at) or value in {"lease "}  # a configured name is shown as configured
    assert _intact(env) == before


def test_the_destructive_confirmation_accepts_only_the_exact_queue_name(env: ConsoleEnv) -> None:
    with env.lab.connect() as conn:  # finished items old enough to archive
        conn.execute("INSERT INTO lab.q_status_meta (status, status_changed_at) "
                     "SELECT 2, now() - interval '3 days' FROM generate_series(1, 20)")
    before = _intact(env)
    at = page("console.views.queue_detail", queue="status")
    at.button_group(key="act_choice_status").set_value("archive").run()
    submit = next(b for b in at.button if b.key and b.key.startswith("FormSubmitter:act_form_status_archive"))
    submit.click().run()
    assert not at.exception
    confirm = at.text_input(key="act_typed_status")
    for value in [*HOSTILE, "ｓｔａｔｕｓ", "Status", "status;", "status'--"]:
        confirm.input(value).run()
        assert not at.exception
        assert at.button(key="act_run").disabled, value[:40]
    assert _intact(env) == before
    confirm.input("status").run()
    assert not at.button(key="act_run").disabled  # the exact name, and only it, enables the action


@pytest.mark.parametrize("queue", ["delete", "status", "lease", "due", "ring"])
def test_a_viewer_gets_no_action_on_any_queue_even_with_a_forged_preview(env: ConsoleEnv, queue: str) -> None:
    from console.views.actions_panel import PLAN_KEY, Pending
    from queueops import actions

    stuck_leases(env, 3)
    plan = actions.plan(env.config(), "requeue", "lease")
    at = AppTest.from_function(_forged, args=(queue, Pending("lease", plan, {})), default_timeout=TIMEOUT)
    at.session_state["qo_identity"] = {"name": "watcher", "role": "viewer", "method": "local"}
    at.query_params["queue"] = queue
    at.run()
    assert not at.exception
    assert [b.label for b in at.button] == ["Sign out"], queue
    assert "signed in as a viewer" in texts(at)
    assert PLAN_KEY in at.session_state  # the forged preview was there, and nothing ran it
    assert count_stuck(env) == 3


def _forged(queue: str, pending: object) -> None:
    import streamlit as st

    from console.views import actions_panel, queue_detail

    st.session_state[actions_panel.PLAN_KEY] = pending
    queue_detail.render()
