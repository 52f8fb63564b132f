"""The queue page's Items section in Streamlit's AppTest on the real lab (issue 32, item 6): the
counts by state from the sample, the stuck items and one item by key, read only when asked."""

from __future__ import annotations

from tests.console.conftest import ConsoleEnv, page, stuck_leases, texts


def _ids(env: ConsoleEnv, sql: str) -> list[int]:
    with env.lab.connect() as conn:
        return [r[0] for r in conn.execute(sql)]


def test_counts_by_state_and_the_stuck_items_behind_them(env: ConsoleEnv) -> None:
    stuck_leases(env, 4, ready=2)
    at = page("console.views.queue_detail", queue="lease")
    assert not at.exception, at.exception
    body = texts(at)
    assert "ready **2**" in body and "stuck **4**" in body and "running **0**" in body, body
    assert len(at.get("vega_lite_chart")) >= 1
    assert "Pick a list to read up to 100 items" in body  # nothing read before a list is picked
    lists = next(b for b in at.get("button_group") if "it_list_lease" in str(b.id))
    lists.set_value("stuck").run()
    assert not at.exception, at.exception
    assert "4 stuck item(s), oldest lease first" in texts(at)
    shown = at.dataframe[0].value
    truth = _ids(env, "SELECT id FROM lab.q_lease WHERE processing_started_at < now() - interval '20 s' "
                      "AND errors IS NULL ORDER BY processing_started_at, id")
    assert [int(x) for x in shown["item"]] == truth
    assert any("LIMIT" in c.value and "processing_started_at" in c.value for c in at.code)
    # By key: an exact match, the typed text bound as a value.
    lists.set_value("key").run()
    at.text_input(key="it_key_lease").input(str(truth[2]))
    at.button(key="FormSubmitter:it_key_form_lease-Find").click().run()
    assert not at.exception, at.exception
    assert [int(x) for x in at.dataframe[0].value["item"]] == [truth[2]]
    at.text_input(key="it_key_lease").input("12345678")
    at.button(key="FormSubmitter:it_key_form_lease-Find").click().run()
    assert "No item with this key" in texts(at)


def test_a_viewer_reads_the_items_but_has_no_requeue(env: ConsoleEnv) -> None:
    stuck_leases(env, 2)
    at = page("console.views.queue_detail", role="viewer", queue="lease")
    lists = next(b for b in at.get("button_group") if "it_list_lease" in str(b.id))
    lists.set_value("stuck").run()
    assert not at.exception, at.exception
    assert "2 stuck item(s)" in texts(at)
    assert not [b for b in at.button if "Requeue" in str(b.label)]
