"""archive on the real PostgreSQL: delete and move whole items (queue row + payload row), resumable."""

from __future__ import annotations

import pytest

from queueops import actions
from queueops.actions import audit
from queueops.store import open_engine


def _fill(acts, done_old: int = 100) -> None:  # noqa: ANN001
    """done_old finished items older than an hour, plus items that must stay: done recently,
    ready for an hour, processing."""
    with acts.connect() as conn:
        conn.execute("INSERT INTO @meta (status, status_changed_at) SELECT 2, now() - interval '2 hours' "
                     "FROM generate_series(1, %s)", (done_old,))
        conn.execute("INSERT INTO @meta (status, status_changed_at) SELECT 2, now() FROM generate_series(1, 10)")
        conn.execute("INSERT INTO @meta (status, status_changed_at) SELECT 0, now() - interval '2 hours' "
                     "FROM generate_series(1, 20)")
        conn.execute("INSERT INTO @meta (status) SELECT 1 FROM generate_series(1, 5)")
        conn.execute("INSERT INTO @data (id, payload) SELECT id, 'payload ' || id FROM @meta")


def _counts(acts) -> dict[str, int]:  # noqa: ANN001
    return {t: acts.sql("SELECT count(*) FROM " + t)[0][0] for t in ("@meta", "@data", "@meta_arch", "@data_arch")}  # noqa: S608


def test_delete_mode_removes_whole_finished_items_only(acts) -> None:  # noqa: ANN001
    _fill(acts)
    cfg = acts.config()
    plan = actions.plan(cfg, "archive", "status", {"older_than_s": 3600, "batch_size": 30, "pause_s": 0.01})
    p = plan.preview
    assert p.row_count == 100 and p.destructive and p.details["batches"] == 4
    assert [s.label for s in p.steps] == ["pick", "delete payload rows", "delete queue rows"]
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 100)
    assert [b["rows"] for b in r.rows] == [30, 30, 30, 10]
    assert acts.sql("SELECT status, count(*) FROM @meta GROUP BY status ORDER BY status") == [(0, 20), (1, 5), (2, 10)]
    # Every remaining item still has its payload, and no payload is orphaned.
    assert acts.sql("SELECT count(*) FROM @data d LEFT JOIN @meta m USING (id) WHERE m.id IS NULL")[0][0] == 0
    assert acts.sql("SELECT count(*) FROM @meta m LEFT JOIN @data d USING (id) WHERE d.id IS NULL")[0][0] == 0


def test_move_mode_copies_rows_then_removes_them(acts) -> None:  # noqa: ANN001
    _fill(acts)
    before = acts.sql("SELECT m.id, m.status, m.status_changed_at, d.payload FROM @meta m JOIN @data d USING (id) "
                      "WHERE m.status = 2 AND m.status_changed_at < now() - interval '1 hour' ORDER BY m.id")
    cfg = acts.config()
    plan = actions.plan(cfg, "archive", "status", {
        "older_than_s": 3600, "mode": "move", "archive_table": "status_meta_archive",
        "archive_data_table": "status_data_archive", "batch_size": 40, "pause_s": 0})
    assert [s.label for s in plan.preview.steps] == ["pick", "copy payload rows", "delete payload rows",
                                                     "copy queue rows", "delete queue rows"]
    assert '"qa äct"."status_meta_archive"' in plan.preview.sql
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 100)
    moved = acts.sql("SELECT m.id, m.status, m.status_changed_at, d.payload FROM @meta_arch m "
                     "JOIN @data_arch d USING (id) ORDER BY m.id")
    assert moved == before
    assert _counts(acts) == {"@meta": 35, "@data": 35, "@meta_arch": 100, "@data_arch": 100}


def test_archive_is_resumable_and_never_duplicates(acts) -> None:  # noqa: ANN001
    _fill(acts, done_old=95)
    cfg = acts.config()
    opts = {"older_than_s": 3600, "mode": "move", "archive_table": "status_meta_archive",
            "archive_data_table": "status_data_archive", "batch_size": 20, "pause_s": 0, "max_items": 50}
    first = actions.plan(cfg, "archive", "status", opts)
    assert first.preview.row_count == 50
    assert actions.execute(cfg, first).rows_affected == 50
    assert actions.execute(cfg, actions.plan(cfg, "archive", "status", opts)).rows_affected == 45
    assert actions.plan(cfg, "archive", "status", opts).preview.row_count == 0
    assert acts.sql("SELECT count(*), count(DISTINCT id) FROM @meta_arch")[0] == (95, 95)


def test_bad_archive_requests_are_refused_before_anything_runs(acts) -> None:  # noqa: ANN001
    _fill(acts, done_old=5)
    cfg = acts.config()
    with pytest.raises(actions.ActionError, match="has 2 columns, the queue table 5"):
        actions.plan(cfg, "archive", "status", {"mode": "move", "archive_table": "status_bad_archive",
                                                "archive_data_table": "status_data_archive"})
    with pytest.raises(actions.ActionError, match="does not exist"):
        actions.plan(cfg, "archive", "status", {"mode": "move", "archive_table": "nope",
                                                "archive_data_table": "status_data_archive"})
    with pytest.raises(actions.ActionError, match="--archive-data-table"):
        actions.plan(cfg, "archive", "status", {"mode": "move", "archive_table": "status_meta_archive"})
    with pytest.raises(actions.ActionError, match="not a safe identifier"):
        actions.plan(cfg, "archive", "status", {"mode": "move", "archive_table": 'x"; DROP TABLE lab.ledger; --',
                                                "archive_data_table": "status_data_archive"})
    with pytest.raises(actions.ActionError, match="only apply to --mode move"):
        actions.plan(cfg, "archive", "status", {"archive_table": "status_meta_archive"})
    with pytest.raises(actions.ActionError, match="archive applies to status queues"):
        actions.plan(cfg, "archive", "lease")
    assert _counts(acts)["@meta"] == 40  # nothing was touched


# ---------------------------------------------------------------------------------------------
# Issue 30: the execution archives only what the preview confirmed.

ENQUEUED_AGE = '''
[[queues]]
name = "status-enq"
target = "lab"
kind = "status"
schema = "qa äct"
table = "status_meta"
data_table = "status_data"
data_key = "id"
key = "id"
enqueued_at = "enqueued_at"
status_column = "status"
ready_values = [0]
processing_values = [1]
done_values = [2]
'''


def _enqueued_age_config(acts):  # noqa: ANN001, ANN202
    """The status queue mapped without status_changed_at: an item's age is its enqueued_at, so an
    item that finishes after the preview is at once 'finished and old enough'."""
    acts.write_config("enqueued-age", 'default_role = "operator"', extra=ENQUEUED_AGE)
    return acts.config("enqueued-age")


def _fill_issue_30(acts, done_every: int = 51) -> list[int]:  # noqa: ANN001
    """510 items enqueued two hours ago: every ``done_every``-th is done, the rest processing.
    status_changed_at is recent on all of them (this queue's config does not map it)."""
    with acts.connect() as conn:
        conn.execute("INSERT INTO @meta (status, enqueued_at, status_changed_at) "
                     "SELECT CASE WHEN g %% %s = 0 THEN 2 ELSE 1 END, now() - interval '2 hours', now() "
                     "FROM generate_series(1, 510) AS g", (done_every,))
        conn.execute("INSERT INTO @data (id, payload) SELECT id, 'p' || id FROM @meta")
    return [i for (i,) in acts.sql("SELECT id FROM @meta WHERE status = 2 ORDER BY id")]


def _archived(acts, before: set[int]) -> list[int]:  # noqa: ANN001
    return sorted(before - {i for (i,) in acts.sql("SELECT id FROM @meta")})


def test_items_finished_after_the_preview_are_not_archived(acts) -> None:  # noqa: ANN001
    """Issue 30's case: preview 10, then 500 processing items of the same age finish. The
    execution archives exactly the 10 previewed items (their keys are bound), not 510."""
    cfg = _enqueued_age_config(acts)
    previewed = _fill_issue_30(acts)
    assert len(previewed) == 10
    plan = actions.plan(cfg, "archive", "status-enq", {"older_than_s": 3600, "batch_size": 4, "pause_s": 0})
    p = plan.preview
    assert p.row_count == 10 and p.details["bound"] == {"by": "keys", "keys": 10}
    assert "exactly these 10 item(s)" in p.summary
    acts.sql("UPDATE @meta SET status = 2 WHERE status = 1")  # 500 finish after the preview
    before = {i for (i,) in acts.sql("SELECT id FROM @meta")}
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 10), r.error
    assert _archived(acts, before) == previewed  # exactly the previewed items, none of the 500
    assert acts.sql("SELECT count(*) FROM @meta WHERE status = 2")[0][0] == 500
    assert acts.sql("SELECT count(*) FROM @data")[0][0] == 500
    assert r.notes == []
    assert r.rows[-1]["left"] == 500 and "finished after the preview" in r.rows[-1]["note"]
    rec = audit.entry(open_engine(cfg), r.audit_id)
    assert (rec["outcome"], rec["rows_affected"], rec["error"]) == ("ok", 10, "")


def test_fewer_items_qualifying_than_previewed_is_said_in_the_result_and_the_audit(acts) -> None:  # noqa: ANN001
    cfg = _enqueued_age_config(acts)
    previewed = _fill_issue_30(acts, done_every=17)  # 30 done
    plan = actions.plan(cfg, "archive", "status-enq", {"older_than_s": 3600, "batch_size": 7, "pause_s": 0})
    assert plan.preview.row_count == 30
    # Meanwhile: three previewed items are requeued, one is deleted by the application.
    acts.sql("UPDATE @meta SET status = 0 WHERE id = ANY(%s)", (previewed[:3],))
    acts.sql("DELETE FROM @meta WHERE id = %s", (previewed[3],))
    before = {i for (i,) in acts.sql("SELECT id FROM @meta")}
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 26), r.error
    assert _archived(acts, before) == previewed[4:]
    assert len(r.notes) == 1 and "the preview counted 30 item(s), 26 were archived: 4 no longer qualified" in r.notes[0]
    assert r.to_json()["notes"] == r.notes
    rec = audit.entry(open_engine(cfg), r.audit_id)
    assert rec["outcome"] == "ok" and rec["error"] == f"note: {r.notes[0]}"


def test_a_large_archive_is_capped_by_the_previewed_count_and_bounded_by_its_highest_key(acts, monkeypatch) -> None:  # noqa: ANN001
    """Beyond KEYS_MAX items the plan keeps the count and the highest key, not the keys: the
    execution never removes more than the count, nor any item with a higher key."""
    from queueops.actions import archive

    monkeypatch.setattr(archive, "KEYS_MAX", 5)
    cfg = _enqueued_age_config(acts)
    previewed = _fill_issue_30(acts)  # 10 done, interleaved with 500 processing
    plan = actions.plan(cfg, "archive", "status-enq", {"older_than_s": 3600, "batch_size": 4, "pause_s": 0})
    p = plan.preview
    assert p.row_count == 10 and p.details["bound"] == {"by": "count and highest key", "count": 10,
                                                        "last_key": previewed[-1]}
    assert "id\" <= %s" in p.sql and "at most these 10 item(s)" in p.summary
    acts.sql("UPDATE @meta SET status = 2 WHERE status = 1")  # 500 finish after the preview
    before = {i for (i,) in acts.sql("SELECT id FROM @meta")}
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 10), r.error  # never the 510
    assert len(_archived(acts, before)) == 10 and [b["rows"] for b in r.rows if "batch" in b] == [4, 4, 2]
    # Items added after the preview with higher keys are never taken, even when previewed ones went.
    acts.reset()
    previewed = _fill_issue_30(acts)
    plan = actions.plan(cfg, "archive", "status-enq", {"older_than_s": 3600, "batch_size": 4, "pause_s": 0})
    acts.sql("DELETE FROM @meta WHERE id = ANY(%s)", (previewed[:3],))
    acts.sql("INSERT INTO @meta (status, enqueued_at) SELECT 2, now() - interval '2 hours' FROM generate_series(1, 5)")
    before = {i for (i,) in acts.sql("SELECT id FROM @meta")}
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 7), r.error
    assert _archived(acts, before) == previewed[3:]  # nothing of the processing items finished, none added
    assert "the preview counted 10 item(s), 7 were archived" in r.notes[0]
