"""rebuild on the real PostgreSQL: bloat falls while dequeuers keep running; failures leave no
invalid index behind; the preview says what will run and why."""

from __future__ import annotations

import re
import time

import pytest

from queueops import actions
from queueops.actions import audit, rebuild
from queueops.store import open_engine
from tests.actions.conftest import CHURN_NAME, PARTED, Dequeuers, snapshot_held

DEQUEUE = "DELETE FROM @churn WHERE id = (SELECT id FROM @churn ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id"


def _churn(acts, rows: int = 450_000) -> None:  # noqa: ANN001
    """Fill, then delete 90 % of the rows: dead tuples and index pages that are mostly garbage."""
    with acts.connect() as conn:
        conn.execute("INSERT INTO @churn (id, payload) SELECT g, 'p' FROM generate_series(1, %s) AS g", (rows,))
        conn.execute("DELETE FROM @churn WHERE id % 10 <> 0")
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.execute("SELECT 1")  # the next statement's end flushes this session's counters
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _table(acts)["dead"] < rows * 0.8:
        time.sleep(0.1)


def _table(acts) -> dict[str, int]:  # noqa: ANN001
    row = acts.sql("SELECT n_dead_tup, pg_indexes_size(relid), pg_relation_size(relid) FROM pg_stat_user_tables "
                   "WHERE relid = to_regclass(%s)", (CHURN_NAME,))[0]
    return {"dead": row[0], "index_bytes": row[1], "heap_bytes": row[2]}


def _invalid(acts) -> list[str]:  # noqa: ANN001
    return [r[0] for r in acts.sql("SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                                   "WHERE i.indrelid = to_regclass(%s) AND NOT i.indisvalid", (CHURN_NAME,))]


def test_rebuild_after_churn_bloat_falls_and_dequeuers_keep_running(acts, monkeypatch) -> None:  # noqa: ANN001
    _churn(acts)
    before = _table(acts)
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn")
    p = plan.preview
    by_name = {r["index"]: r for r in p.rows}
    assert set(by_name) == {"churn_q_pkey", "churn_q_enq"}
    for r in by_name.values():
        assert r["operation"] == "reindex_concurrently" and r["bloat_pct"] >= 30 and r["bytes"] > 0, (r, p.details)
        assert ">= 30 %" in r["reason"] and not r["offline"]
    assert [s.label for s in p.steps] == ["reindex_concurrently churn_q_enq", "reindex_concurrently churn_q_pkey",
                                          'vacuum "qa äct"."churn_q"']
    assert "REINDEX INDEX CONCURRENTLY" in p.sql and "VACUUM (ANALYZE)" in p.sql
    assert p.row_count == 3 and not p.destructive
    monkeypatch.setattr(rebuild, "POLL_S", 0.02)
    deq = Dequeuers()
    deq.start(acts.connect, DEQUEUE, n=2, lock_timeout_ms=500)
    time.sleep(0.3)
    seen: list[actions.Progress] = []
    start = time.monotonic()
    result = actions.execute(cfg, plan, progress=seen.append)
    end = time.monotonic()
    time.sleep(0.2)
    deq.finish()
    assert result.outcome == "ok", result.error
    assert result.rows_affected == 3 and [r["statement"] for r in result.rows] == [s.label for s in p.steps]
    after = _table(acts)
    assert after["index_bytes"] < before["index_bytes"] / 3  # bloat fell
    assert after["dead"] < before["dead"] / 10
    bloat_before = {r["index"]: r["bloat_pct"] for r in p.rows}
    bloat_after = {r["index"]: r["bloat_pct"] for r in actions.plan(cfg, "rebuild", "churn").preview.rows}
    assert all(bloat_after[i] < 15 < bloat_before[i] for i in bloat_before), (bloat_before, bloat_after)
    # Dequeuers kept running and none waited past its 500 ms lock timeout.
    assert deq.errors == []
    assert sum(1 for t in deq.times if start <= t <= end) > 0
    # Progress came from the engine's own views, per statement.
    engine_phases = [s.phase for s in seen if ": " in s.phase and s.total is not None]
    assert engine_phases, [s.phase for s in seen]
    assert {s.step for s in seen} == {1, 2, 3} and all(s.steps == 3 for s in seen)
    print(f"\nlongest dequeue stall during rebuild: {deq.longest_gap(start, end) * 1000:.0f} ms "
          f"over {end - start:.2f} s")




def test_a_partitioned_queue_is_rebuilt_partition_by_partition(acts) -> None:  # noqa: ANN001
    """pg-boss's job table and PGMQ's partitioned queues: the parent's indexes are partitioned
    indexes that pgstatindex refuses, so every bloat figure was unknown and nothing was reindexed.
    The partitions' own indexes are measured, each with its own table's rows, and only the bloated
    partition's are rebuilt; VACUUM of the parent reaches every partition."""
    acts.sql("DROP TABLE IF EXISTS @S.parted_q")
    acts.sql("CREATE TABLE @S.parted_q (id bigint NOT NULL, enqueued_at timestamptz NOT NULL DEFAULT now(), "
             "payload text NOT NULL DEFAULT '', PRIMARY KEY (id)) PARTITION BY RANGE (id)")
    acts.sql("CREATE TABLE @S.parted_q_a PARTITION OF @S.parted_q FOR VALUES FROM (0) TO (200001) "
             "WITH (autovacuum_enabled = off)")
    acts.sql("CREATE TABLE @S.parted_q_b PARTITION OF @S.parted_q FOR VALUES FROM (200001) TO (400001) "
             "WITH (autovacuum_enabled = off)")
    try:
        with acts.connect() as conn:  # a's rows churn (9 of 10 deleted); b's stay
            conn.execute("INSERT INTO @S.parted_q (id) SELECT g FROM generate_series(1, 400000) AS g")
            conn.execute("DELETE FROM @S.parted_q WHERE id <= 200000 AND id % 10 <> 0")
            conn.execute("SELECT pg_stat_force_next_flush()")
        acts.sql("ANALYZE @S.parted_q_a, @S.parted_q_b")
        acts.sql("VACUUM @S.parted_q_b")  # b vacuumed, a never: the table's last vacuum is none yet
        acts.write_config("parted", 'user = "olga"\nroles = { olga = "operator" }', extra=PARTED)
        cfg = acts.config("parted")
        plan = actions.plan(cfg, "rebuild", "parted", {"min_pages": 100})  # each partition's index: 551 pages
        p = plan.preview
        by_name = {r["index"]: r for r in p.rows}
        assert set(by_name) == {"parted_q_a_pkey", "parted_q_b_pkey"}, p.rows
        assert not any("failed" in w for w in p.warnings), p.warnings
        assert by_name["parted_q_a_pkey"]["operation"] == "reindex_concurrently", by_name
        assert by_name["parted_q_a_pkey"]["bloat_pct"] >= 30
        assert by_name["parted_q_b_pkey"]["operation"] == "none" and by_name["parted_q_b_pkey"]["bloat_pct"] < 30
        assert [s.label for s in p.steps] == ["reindex_concurrently parted_q_a_pkey", 'vacuum "qa äct"."parted_q"']
        assert p.details["table"]["dead_tuples"] >= 150_000  # the partitions' dead tuples, not the parent's 0
        # The least recently vacuumed partition's time, and none while one never was (min() alone
        # skipped partition a and read b's, as if the table had been vacuumed).
        assert p.details["table"]["last_vacuum"] is None, p.details["table"]
        result = actions.execute(cfg, plan)
        assert result.outcome == "ok", result.error
        again = actions.plan(cfg, "rebuild", "parted", {"min_pages": 0}).preview
        assert again.details["table"]["last_vacuum"] is not None, again.details["table"]
        after = {r["index"]: r for r in again.rows}
        assert after["parted_q_a_pkey"]["bloat_pct"] < 15 and after["parted_q_a_pkey"]["operation"] == "none", after
        assert acts.sql("SELECT count(*) FROM @S.parted_q")[0][0] == 220_000
        assert acts.sql("SELECT sum(n_dead_tup) FROM pg_stat_user_tables WHERE relname LIKE 'parted_q_%%'")[0][0] == 0
    finally:
        acts.sql("DROP TABLE IF EXISTS @S.parted_q")


def test_small_or_healthy_indexes_are_left_alone(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 2000) AS g")
    cfg = acts.config()
    p = actions.plan(cfg, "rebuild", "churn").preview
    assert all(r["operation"] == "none" and "too small" in r["reason"] for r in p.rows)
    assert [s.label for s in p.steps] == ['vacuum "qa äct"."churn_q"']
    p = actions.plan(cfg, "rebuild", "churn", {"min_pages": 0, "vacuum": False}).preview
    assert all(r["operation"] == "none" and r["bloat_pct"] < 30 for r in p.rows), p.rows
    assert p.steps == [] and p.row_count == 0
    # Named by the operator: rebuilt whatever its figures.
    p = actions.plan(cfg, "rebuild", "churn", {"indexes": ["churn_q_enq"], "vacuum": False}).preview
    assert [s.label for s in p.steps] == ["reindex_concurrently churn_q_enq"]
    with pytest.raises(actions.ActionError, match="no index 'nope' on this table; its indexes: churn_q_enq, churn_q_pkey"):
        actions.plan(cfg, "rebuild", "churn", {"indexes": ["nope"]})


def test_leftover_of_a_failed_reindex_is_listed_and_dropped_first(acts) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 100) AS g")
    with pytest.raises(Exception, match="could not create unique index"):
        acts.sql("CREATE UNIQUE INDEX CONCURRENTLY churn_q_enq_ccnew ON @churn (payload)")
    assert _invalid(acts) == ["churn_q_enq_ccnew"]
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn", {"vacuum": False})
    assert [s.label for s in plan.preview.steps] == ["drop_leftover churn_q_enq_ccnew"]
    assert "DROP INDEX CONCURRENTLY" in plan.preview.sql
    assert actions.execute(cfg, plan).outcome == "ok"
    assert _invalid(acts) == []


def test_lock_timeout_fails_cleanly_without_leaving_an_invalid_index(acts) -> None:  # noqa: ANN001
    """An old snapshot makes REINDEX CONCURRENTLY wait; the lock timeout ends the wait, the
    half-built index is dropped, the retries give up, and the audit says failed."""
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 1000) AS g")
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn", {"indexes": ["churn_q_enq"], "vacuum": False, "lock_retries": 1})
    with snapshot_held(acts):
        result = actions.execute(cfg, plan)
    assert result.outcome == "failed" and "lock timeout" in result.error
    assert "dropped leftover churn_q_enq_ccnew" in result.error  # it had built one, and removed it
    assert _invalid(acts) == []
    assert acts.sql("SELECT count(*) FROM @churn")[0][0] == 1000


# ---------------------------------------------------------------------------------------------
# Issue 30: the execution works on the previewed indexes only, and drops only its own leftovers.


@pytest.fixture()
def churn_indexes(acts):  # noqa: ANN001, ANN201
    """These tests rename, add and break indexes of the churn table: put back its own two after."""
    yield acts
    for (name,) in acts.sql("SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                            "WHERE i.indrelid = to_regclass(%s) AND NOT i.indisprimary", (CHURN_NAME,)):
        acts.sql(f'DROP INDEX @S."{name}"')
    acts.sql("CREATE INDEX churn_q_enq ON @churn (enqueued_at, id)")


def _index(acts, name: str) -> tuple[int, int] | None:  # noqa: ANN001
    """(OID, relfilenode) of an index of the churn table: a REINDEX gives it a new relfilenode,
    a REINDEX CONCURRENTLY a new OID too."""
    rows = acts.sql("SELECT c.oid::bigint, c.relfilenode::bigint FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid "
                    "WHERE i.indrelid = to_regclass(%s) AND c.relname = %s", (CHURN_NAME, name))
    return rows[0] if rows else None


def test_an_index_renamed_and_replaced_after_the_preview_is_not_touched(acts, churn_indexes) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 200) AS g")
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn", {"indexes": ["churn_q_enq"], "vacuum": False})
    assert [s.label for s in plan.preview.steps] == ["reindex_concurrently churn_q_enq"]
    # Meanwhile someone renames the index and creates another one under its name.
    acts.sql("ALTER INDEX @S.churn_q_enq RENAME TO churn_q_enq_before")
    acts.sql("CREATE INDEX churn_q_enq ON @churn (payload)")
    new, old = _index(acts, "churn_q_enq"), _index(acts, "churn_q_enq_before")
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 0), r.error
    assert (_index(acts, "churn_q_enq"), _index(acts, "churn_q_enq_before")) == (new, old)  # neither touched
    assert r.rows == [{"step": 1, "statement": "reindex_concurrently churn_q_enq",
                       "skipped": r.rows[0]["skipped"]}] and "another OID" in r.rows[0]["skipped"]
    assert r.notes == [f"reindex_concurrently churn_q_enq: not run: {r.rows[0]['skipped']}"]
    assert audit.entry(open_engine(cfg), r.audit_id)["error"] == f"note: {r.notes[0]}"


def test_an_index_rebuilt_by_someone_else_after_the_preview_is_measured_again_and_left(acts, churn_indexes) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 20000) AS g")
    acts.sql("DELETE FROM @churn WHERE id % 10 <> 0")
    acts.sql("VACUUM (ANALYZE) @churn")  # the deleted rows' entries gone: mostly empty leaf pages
    cfg = acts.config()
    opts = {"min_pages": 0, "vacuum": False}
    plan = actions.plan(cfg, "rebuild", "churn", opts)
    bloat = {r["index"]: r["bloat_pct"] for r in plan.preview.rows}
    assert [s.label for s in plan.preview.steps] == ["reindex_concurrently churn_q_enq",
                                                     "reindex_concurrently churn_q_pkey"], bloat
    acts.sql("REINDEX INDEX @S.churn_q_pkey")  # another operator rebuilt it meanwhile (same OID)
    pkey, enq = _index(acts, "churn_q_pkey"), _index(acts, "churn_q_enq")
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 1), r.error
    assert _index(acts, "churn_q_pkey") == pkey and _index(acts, "churn_q_enq") != enq  # only the bloated one
    skipped = [x for x in r.rows if "skipped" in x]
    assert [x["statement"] for x in skipped] == ["reindex_concurrently churn_q_pkey"]
    assert "measured again" in skipped[0]["skipped"] and "no longer needs a rebuild" in skipped[0]["skipped"]
    assert len(r.notes) == 1 and "churn_q_pkey: not run: measured again" in r.notes[0]


def _leftover(acts, name: str) -> None:  # noqa: ANN001
    """An invalid index named like a REINDEX CONCURRENTLY leftover: a unique build that failed."""
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1000001, 1000002) AS g")  # two '' payloads
    with pytest.raises(Exception, match="could not create unique index"):
        acts.sql(f"CREATE UNIQUE INDEX CONCURRENTLY {name} ON @churn (payload)")


def test_a_leftover_dropped_by_someone_else_is_reported_gone_not_dropped(acts, churn_indexes) -> None:  # noqa: ANN001
    _leftover(acts, "churn_q_enq_ccnew")
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn", {"vacuum": False})
    assert [s.label for s in plan.preview.steps] == ["drop_leftover churn_q_enq_ccnew"]
    acts.sql("DROP INDEX @S.churn_q_enq_ccnew")  # another rebuild's cleanup got there first
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", 0), r.error
    assert r.rows[0]["skipped"].startswith("already gone") and r.notes


def test_a_leftover_another_session_is_dropping_is_left_to_it(acts, churn_indexes) -> None:  # noqa: ANN001
    """Two rebuilds previewed the same leftover; the first one's DROP INDEX CONCURRENTLY waits for a
    reader of the table. The second leaves the leftover to it instead of queueing behind it."""
    import threading

    _leftover(acts, "churn_q_enq_ccnew")
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn", {"vacuum": False})
    reader = acts.connect(autocommit=False)
    reader.execute("SELECT count(*) FROM @churn")  # holds the table's ACCESS SHARE lock to its end
    box: dict[str, object] = {}

    def drop() -> None:
        with acts.connect() as conn:
            conn.execute("SET application_name = 'other-rebuild'")
            conn.execute("DROP INDEX CONCURRENTLY @S.churn_q_enq_ccnew")
            box["done"] = True

    t = threading.Thread(target=drop)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not acts.sql(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = 'other-rebuild' AND wait_event_type = 'Lock'"):
            time.sleep(0.05)
        r = actions.execute(cfg, plan)
    finally:
        reader.rollback()
        reader.close()
        t.join(10)
    assert box.get("done")
    assert (r.outcome, r.rows_affected) == ("ok", 0), r.error
    assert "building or dropping it now" in r.rows[0]["skipped"]
    assert _invalid(acts) == []


def test_a_failed_reindex_drops_only_its_own_leftover(acts, churn_indexes) -> None:  # noqa: ANN001
    """Another index's leftover that appeared after the preview (another rebuild's, which that
    rebuild drops itself) is not this run's to drop."""
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 1000) AS g")
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn", {"indexes": ["churn_q_enq"], "vacuum": False, "lock_retries": 0})
    _leftover(acts, "churn_q_pkey_ccnew")
    with snapshot_held(acts):  # the REINDEX waits for the old snapshot until its lock timeout
        r = actions.execute(cfg, plan)
    assert r.outcome == "failed" and "lock timeout" in r.error
    assert "dropped leftover churn_q_enq_ccnew)" in r.error  # its own, and only that
    assert _invalid(acts) == ["churn_q_pkey_ccnew"]


def test_an_index_being_built_concurrently_is_never_dropped_as_a_leftover(acts, churn_indexes) -> None:  # noqa: ANN001
    """A CREATE INDEX CONCURRENTLY in progress (invalid until it ends, named like a leftover) makes
    this run's REINDEX fail at its lock timeout; the cleanup leaves the other session's index
    alone (before: it tried to DROP it and waited for the lock timeout too)."""
    import threading

    from queueops.actions import executor

    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 1000) AS g")
    cfg = acts.config()
    plan = actions.plan(cfg, "rebuild", "churn", {"indexes": ["churn_q_enq"], "vacuum": False, "lock_retries": 0})
    box: dict[str, object] = {}

    def build() -> None:
        with acts.connect() as conn:
            conn.execute("CREATE INDEX CONCURRENTLY churn_q_enq_ccnew ON @churn (payload)")
            box["built"] = True

    with snapshot_held(acts):  # keeps the other session's build waiting for old snapshots
        t = threading.Thread(target=build)
        t.start()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not acts.sql(
                "SELECT 1 FROM pg_stat_progress_create_index WHERE phase LIKE 'waiting for old snapshots%%'"):
            time.sleep(0.05)
        r = actions.execute(cfg, plan)
    t.join(30)
    assert box.get("built") and _invalid(acts) == []  # the other session's index is whole and valid
    assert r.outcome == "failed" and "lock timeout" in r.error and "leftover" not in r.error, r.error
    ran = [re.sub(r"(?m)^\s*--.*\n", "", c["statement"]).strip() for c in executor.commands(open_engine(cfg), r.audit_id)]
    assert ran and not any(text.startswith("DROP") for text in ran), ran
