"""archive on the real PostgreSQL: delete and move whole items (queue row + payload row), resumable."""

from __future__ import annotations

import pytest

from queueops import actions


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
