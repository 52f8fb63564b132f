"""The items behind a number and requeue of selected keys (issue 32, item 6), on the real lab
PostgreSQL, in a schema whose name needs quoting: each drill-down read equals its SQL ground
truth, is bounded (EXPLAIN: a Limit over the collector's index), and requeue with ``keys``
releases exactly the selected stuck items, once."""

from __future__ import annotations

import json

import pytest

from queueops import actions, engine, items
from queueops.actions.model import MAX_KEYS
from queueops.sqlfiles import Statement


def _read(acts, queue: str, which: str, **kw) -> tuple[list[dict], str]:  # noqa: ANN001
    cfg = acts.config()
    q = cfg.queue(queue)
    stmt = items.read_of(q, "postgresql", which, **kw).statement
    with engine.connection(cfg.target(q.target), "collect", cfg.base_dir) as conn:
        rows = conn.execute(stmt)
        plan = "\n".join(r["QUERY PLAN"] for r in conn.execute(Statement("EXPLAIN " + stmt.sql, stmt.params)))
    return rows, plan


def _seed_lease(acts) -> None:  # noqa: ANN001
    # 150 stuck (ages 40..189 s, attempts i % 4), 10 of them failed (error set); 5 live leases; 30 free
    # waiting a while, and 20,000 newer free ones: a table where an index is worth reading.
    acts.sql("INSERT INTO @lease (created_at, processing_started_at, attempts, errors) "
             "SELECT now() - make_interval(secs => 600 + i), now() - make_interval(secs => 40 + i), i % 4, "
             "CASE WHEN i % 15 = 0 THEN 'boom ' || i END FROM generate_series(1, 150) AS i")
    acts.sql("INSERT INTO @lease (processing_started_at) SELECT now() FROM generate_series(1, 5)")
    acts.sql("INSERT INTO @lease (created_at) SELECT now() - make_interval(secs => i) FROM generate_series(1, 30) AS i")
    acts.sql("INSERT INTO @lease (created_at) SELECT now() + make_interval(secs => i) FROM generate_series(1, 20000) AS i")
    acts.sql("ANALYZE @lease")


def test_stuck_leases_equal_the_sql_ground_truth_bounded_by_the_lease_index(acts) -> None:  # noqa: ANN001
    _seed_lease(acts)
    rows, plan = _read(acts, "lease", "stuck")
    truth = acts.sql("SELECT id, attempts FROM @lease WHERE processing_started_at < now() - interval '30 s' "
                     "AND errors IS NULL ORDER BY processing_started_at, id LIMIT 100")
    assert [(r["item"], r["attempts"]) for r in rows] == [tuple(t) for t in truth]
    assert len(rows) == items.LIMIT and all(r["last_error"] is None for r in rows)
    assert rows[0]["age_s"] >= rows[-1]["age_s"] > 30  # oldest lease first
    assert "Limit" in plan and "lease_q_leased" in plan, plan
    # all stuck ones (140 unfailed) when asked for more, never the failed, live or free ones
    more, _ = _read(acts, "lease", "stuck", limit=1000)
    assert len(more) == 140 == acts.sql("SELECT count(*) FROM @lease WHERE processing_started_at < "
                                        "now() - interval '30 s' AND errors IS NULL")[0][0]


def test_oldest_waiting_and_one_key(acts) -> None:  # noqa: ANN001
    _seed_lease(acts)
    rows, plan = _read(acts, "lease", "waiting", limit=10)
    truth = acts.sql("SELECT id FROM @lease WHERE processing_started_at IS NULL ORDER BY created_at, id LIMIT 10")
    assert [r["item"] for r in rows] == [t[0] for t in truth]
    assert "Limit" in plan and "lease_q_pop" in plan, plan
    failed_id = acts.sql("SELECT id FROM @lease WHERE errors IS NOT NULL ORDER BY id LIMIT 1")[0][0]
    found, plan = _read(acts, "lease", "key", key=str(failed_id))  # typed text, compared as the bigint key
    assert [(r["item"], r["last_error"]) for r in found] == [
        (failed_id, acts.sql("SELECT errors FROM @lease WHERE id = %s", (failed_id,))[0][0])]
    assert "lease q_pkey" in plan, plan
    assert _read(acts, "lease", "key", key="999999")[0] == []


def test_a_key_that_is_not_a_number_is_an_error_not_an_injection(acts) -> None:  # noqa: ANN001
    _seed_lease(acts)
    with pytest.raises(engine.TargetError, match="invalid input syntax"):
        _read(acts, "lease", "key", key="1 OR 1=1")
    assert acts.sql("SELECT count(*) FROM @lease")[0][0] == 20185


def test_stuck_status_items_and_oldest_ready_items(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @meta (status, enqueued_at, status_changed_at, attempts) "
             "SELECT CASE WHEN i <= 120 THEN 1 WHEN i <= 140 THEN 0 ELSE 2 END, now() - make_interval(secs => 900 - i), "
             "now() - make_interval(secs => CASE WHEN i % 3 = 0 THEN 5 ELSE 40 + i END), i % 5 "
             "FROM generate_series(1, 160) AS i")
    acts.sql("INSERT INTO @meta (status) SELECT 2 FROM generate_series(1, 20000)")  # done: the bulk of the table
    acts.sql("ANALYZE @meta")
    rows, plan = _read(acts, "status", "stuck")
    truth = acts.sql("SELECT id, attempts FROM @meta WHERE status = 1 AND status_changed_at < now() - interval '30 s' "
                     "ORDER BY status_changed_at, id LIMIT 100")
    assert [(r["item"], r["attempts"]) for r in rows] == [tuple(t) for t in truth] and len(rows) == 80
    assert "Limit" in plan and "status_meta_status" in plan, plan
    rows, plan = _read(acts, "status", "waiting")
    assert [r["item"] for r in rows] == list(range(121, 141))
    assert "Limit" in plan and "status_meta_status" in plan, plan


def test_requeue_of_selected_keys_releases_only_those_once(acts) -> None:  # noqa: ANN001
    _seed_lease(acts)
    stuck, _ = _read(acts, "lease", "stuck", limit=10)
    picked = [stuck[1]["item"], stuck[4]["item"], stuck[7]["item"]]
    live = acts.sql("SELECT id FROM @lease WHERE processing_started_at > now() - interval '10 s' LIMIT 1")[0][0]
    failed = acts.sql("SELECT id FROM @lease WHERE errors IS NOT NULL LIMIT 1")[0][0]
    before = dict(acts.sql("SELECT id, processing_started_at FROM @lease"))
    cfg = acts.config()
    plan = actions.plan(cfg, "requeue", "lease", {"keys": [*picked, live, failed, 424242]})
    p = plan.preview
    assert p.row_count == 3 and sorted(r["item"] for r in p.rows) == sorted(picked)
    assert "IN (%s, %s, %s, %s, %s, %s)" in p.sql and p.details["keys"][:3] == picked
    assert any("3 of the 6 selected key(s) qualify" in w for w in p.warnings), p.warnings
    result = actions.execute(cfg, plan)
    assert result.outcome == "ok" and result.rows_affected == 3, result.error
    after = dict(acts.sql("SELECT id, processing_started_at FROM @lease"))
    changed = {k for k in before if before[k] != after[k]}
    assert changed == set(picked) and all(after[k] is None for k in picked)
    # once: the same selection again has nothing left to release
    again = actions.plan(cfg, "requeue", "lease", {"keys": picked})
    assert again.preview.row_count == 0 and again.nothing_to_do


def test_requeue_key_from_the_command_line_and_the_bound(acts) -> None:  # noqa: ANN001
    _seed_lease(acts)
    stuck, _ = _read(acts, "lease", "stuck", limit=2)
    out = acts.cli("act", "requeue", "--queue", "lease", "--key", str(stuck[0]["item"]), "--yes", "--json")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["outcome"] == "ok" and res["rows_affected"] == 1
    assert acts.sql("SELECT processing_started_at IS NULL FROM @lease WHERE id = %s", (stuck[0]["item"],))[0][0]
    assert acts.sql("SELECT processing_started_at IS NULL FROM @lease WHERE id = %s", (stuck[1]["item"],))[0][0] is False
    with pytest.raises(actions.ActionError, match="at most 1000"):
        actions.plan(acts.config(), "requeue", "lease", {"keys": list(range(MAX_KEYS + 1))})
    bad = acts.cli("act", "rebuild", "--queue", "lease", "--key", "1", "--dry-run")
    assert bad.returncode == 2 and "--key does not apply to rebuild" in bad.stderr
