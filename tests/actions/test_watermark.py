"""watermark-reset on the real PostgreSQL: stranded items come back; a move back is written over
whatever the consumers did meanwhile, a move forward only over the previewed value."""

from __future__ import annotations

import threading
import time

import pytest

from queueops import actions
from queueops.actions import audit
from queueops.store import open_engine

# The watermark pattern's dequeue: only keys at or above the watermark are ever looked at.
DEQUEUE = ("DELETE FROM @del WHERE id = (SELECT id FROM @del WHERE id >= (SELECT low_key FROM @wm WHERE id = 1) "
           "ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id")


def _wm(acts) -> int:  # noqa: ANN001
    return acts.sql("SELECT low_key FROM @wm")[0][0]


def _drain(acts) -> list[int]:  # noqa: ANN001
    taken = []
    with acts.connect() as conn:
        while (row := conn.execute(DEQUEUE).fetchone()) is not None:
            taken.append(row[0])
    return taken


def test_reset_releases_stranded_items(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @del (payload) SELECT 'x' FROM generate_series(1, 100)")
    acts.sql("UPDATE @wm SET low_key = 61")  # a jump: items 1..60 are stranded
    assert len(_drain(acts)) == 40 and acts.sql("SELECT count(*) FROM @del")[0][0] == 60  # nobody gets them
    acts.sql("INSERT INTO @del (payload) SELECT 'y' FROM generate_series(1, 10)")  # 101..110, reachable
    cfg = acts.config()
    plan = actions.plan(cfg, "watermark-reset", "delete")
    p = plan.preview
    assert p.rows[0] == {"old_value": 61, "new_value": 1, "lowest_pending": 1, "buffer": 0, "stranded": 60,
                         "drift_before": -60, "drift_after": 0}
    assert p.row_count == 1 and [r["item"] for r in p.details["stranded_items"]] == list(range(1, 61))
    assert [st.label for st in p.steps] == ["lock", "move back"]
    assert list(p.steps[1].statement.params) == [1, 1] and 'WHERE "low_key" >= %s' in p.steps[1].statement.sql
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 1)
    assert _wm(acts) == 1
    lowest = acts.sql("SELECT min(id) FROM @del")[0][0]
    assert lowest - _wm(acts) >= 0  # watermark_drift is back to >= 0
    assert sorted(_drain(acts)) == list(range(1, 61)) + list(range(101, 111))  # the stranded items dequeue


def test_buffer_and_empty_queue(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @del (payload) SELECT 'x' FROM generate_series(1, 50)")
    acts.sql("DELETE FROM @del WHERE id < 40")
    acts.sql("UPDATE @wm SET low_key = 45")
    cfg = acts.config()
    plan = actions.plan(cfg, "watermark-reset", "delete", {"buffer": 5})
    assert plan.preview.rows[0]["new_value"] == 35 and plan.preview.rows[0]["drift_after"] == 5
    assert actions.execute(cfg, plan).outcome == "ok" and _wm(acts) == 35
    acts.sql("DELETE FROM @del")
    plan = actions.plan(cfg, "watermark-reset", "delete")
    assert plan.preview.rows[0]["new_value"] == 0 and plan.preview.rows[0]["stranded"] == 0
    assert actions.execute(cfg, plan).outcome == "ok" and _wm(acts) == 0
    # Already there: nothing to write, and the preview says so.
    plan = actions.plan(cfg, "watermark-reset", "delete")
    assert plan.preview.row_count == 0 and "nothing to do" in plan.preview.warnings[0]
    assert actions.execute(cfg, plan).rows_affected == 0


def test_consumers_moving_the_watermark_forward_do_not_stop_a_reset(acts) -> None:  # noqa: ANN001
    """Issue 32: on the live lab consumers move the watermark ~10 keys between preview and
    confirmation, and a compare-and-set on the previewed value failed every time from the console.
    Moving it back strands nothing, so the confirmed value is written and the result says where the
    watermark had moved."""
    acts.sql("INSERT INTO @del (payload) SELECT 'x' FROM generate_series(1, 20)")
    acts.sql("UPDATE @wm SET low_key = 15")
    cfg = acts.config()
    plan = actions.plan(cfg, "watermark-reset", "delete")
    acts.sql("UPDATE @wm SET low_key = 18")  # a dequeuer moved it meanwhile
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 1), r.error
    assert _wm(acts) == 1
    assert any("had moved from 15 to 18" in n for n in r.notes), r.notes
    assert r.rows == [{"old_value": 18, "new_value": 1, "written": True}]
    rec = audit.entry(open_engine(cfg), r.audit_id)
    assert rec["outcome"] == "ok" and "had moved from 15 to 18" in rec["error"]
    assert sorted(_drain(acts)) == list(range(1, 21))  # every stranded item dequeues


def test_a_watermark_already_moved_further_back_is_never_moved_forward(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @del (payload) SELECT 'x' FROM generate_series(1, 20)")
    acts.sql("DELETE FROM @del WHERE id < 10")
    acts.sql("UPDATE @wm SET low_key = 15")
    cfg = acts.config()
    plan = actions.plan(cfg, "watermark-reset", "delete")
    assert plan.preview.rows[0]["new_value"] == 10
    acts.sql("UPDATE @wm SET low_key = 3")  # another reset, by hand, went further back
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 0), r.error
    assert _wm(acts) == 3 and any("already is 3" in n for n in r.notes), r.notes


def test_a_forward_move_is_only_made_over_the_previewed_value(acts) -> None:  # noqa: ANN001
    """Forward (nothing pending below the new value) stays a compare-and-set: an item that came back
    below the new value meanwhile would be stranded by it."""
    acts.sql("INSERT INTO @del (payload) SELECT 'x' FROM generate_series(1, 20)")
    acts.sql("DELETE FROM @del WHERE id < 12")
    acts.sql("UPDATE @wm SET low_key = 5")
    cfg = acts.config()
    plan = actions.plan(cfg, "watermark-reset", "delete")
    assert plan.preview.rows[0]["new_value"] == 12 and [st.label for st in plan.preview.steps] == ["compare-and-set"]
    acts.sql("UPDATE @wm SET low_key = 7")
    r = actions.execute(cfg, plan)
    assert r.outcome == "failed" and r.rows_affected == 0
    assert "conflict" in r.error and "no longer is 5" in r.error
    assert _wm(acts) == 7


@pytest.mark.parametrize("hold_s", [0.2, 1.5])
def test_a_reset_racing_a_concurrent_update_waits_for_it_or_gives_up(acts, hold_s: float) -> None:  # noqa: ANN001
    """The concurrent update holds the watermark row while the reset runs. Committing within the
    lock timeout (0.5 s): the reset then reads the new value under its own lock and moves it back.
    Holding longer: the reset gives up at its lock timeout and the concurrent value stays."""
    acts.sql("INSERT INTO @del (payload) SELECT 'x' FROM generate_series(1, 20)")
    acts.sql("UPDATE @wm SET low_key = 15")
    cfg = acts.config()
    plan = actions.plan(cfg, "watermark-reset", "delete")
    holding = threading.Event()

    def concurrent() -> None:
        with acts.connect(autocommit=False) as conn:
            conn.execute("UPDATE @wm SET low_key = 19")
            holding.set()
            time.sleep(hold_s)
            conn.commit()

    t = threading.Thread(target=concurrent)
    t.start()
    holding.wait(5)
    r = actions.execute(cfg, plan)
    t.join()
    if hold_s < 0.5:
        assert (r.outcome, r.rows_affected) == ("ok", 1), r.error
        assert _wm(acts) == 1 and any("from 15 to 19" in n for n in r.notes)
    else:
        assert r.outcome == "failed" and r.rows_affected == 0 and "lock timeout" in r.error
        assert _wm(acts) == 19


def test_queues_without_a_watermark_are_refused(acts) -> None:  # noqa: ANN001
    with pytest.raises(actions.ActionError, match="has no watermark"):
        actions.plan(acts.config(), "watermark-reset", "lease")


def test_the_reset_writes_the_previewed_value_whatever_moved_since(acts) -> None:  # noqa: ANN001
    """Issue 30: bound to what was confirmed. Items dequeued and added after the preview change
    the lowest pending key, but the reset writes the previewed value, only over the previewed one
    (compare-and-set), never a value computed again at execution."""
    acts.sql("INSERT INTO @del (payload) SELECT 'x' FROM generate_series(1, 100)")
    acts.sql("UPDATE @wm SET low_key = 61")
    cfg = acts.config()
    plan = actions.plan(cfg, "watermark-reset", "delete")
    assert (plan.preview.rows[0]["old_value"], plan.preview.rows[0]["new_value"]) == (61, 1)
    acts.sql("DELETE FROM @del WHERE id <= 10")  # someone cleared some stranded items by hand
    acts.sql("INSERT INTO @del (payload) SELECT 'y' FROM generate_series(1, 10)")
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 1), r.error
    assert _wm(acts) == 1  # the previewed value, not the lowest pending key now (11)
    from queueops.actions import executor

    back = [c for c in executor.commands(open_engine(cfg), r.audit_id) if c["step"] == "move back"]
    assert len(back) == 1 and back[0]["params"] == "[1,1]" and back[0]["rows"] == 1
