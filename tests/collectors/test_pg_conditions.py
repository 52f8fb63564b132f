"""Each metric moves the right way when its condition is created for real on PostgreSQL, and back.

The conditions are made directly in SQL (an old lease, a moved watermark, an open REPEATABLE READ
transaction, a held lock, churn), independent of the lab's workload process; the fault-switch
versions are in test_lab_faults.py.
"""

from __future__ import annotations

import contextlib
import json

import psycopg
import pytest
from psycopg import sql

from collectors import runner
from collectors.counters import CounterRates
from collectors.runner import COUNT_CAP, COUNT_SKIP_ABOVE, run_once
from queueops import coltypes, engine
from queueops import config as config_mod
from tests.collectors.conftest import (
    LEASE_TIMEOUT_S,
    collect,
    holding,
    one_queue,
    reader_login,
    wait_until,
    waiting,
)
from tests.collectors.plans import explain, nodes, scans_of


def test_depth_rows_total_and_per_status_counts_are_exact_below_the_cap(cfg, clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_delete (enqueued_at) SELECT now() FROM generate_series(1, 12)")
        conn.execute("INSERT INTO lab.q_status_meta (status) SELECT s FROM unnest(ARRAY[0,0,0,0,1,1,2,2,2,3]) AS s")
        conn.execute("INSERT INTO lab.q_lease (processing_started_at) VALUES (NULL), (NULL), (NULL), (now())")
        conn.execute("INSERT INTO lab.q_due (due_at) VALUES (now() - interval '1 minute'), (now() + interval '1 hour'), "
                     "(now() + interval '2 hours')")
    c = collect(cfg, "depth")
    assert c.ok("depth").ok
    assert (c.value("delete", "depth"), c.value("delete", "rows_total")) == (12, 12)
    assert c.value("status", "depth") == 4
    assert c.value("status", "count_processing") == 2
    assert c.value("status", "count_done") == 3
    assert c.value("status", "count_other") == 1  # status 3 (failed) is none of the configured values
    assert c.value("status", "rows_total") == 10
    assert (c.value("lease", "depth"), c.value("lease", "count_leased"), c.value("lease", "rows_total")) == (3, 1, 4)
    assert (c.value("due", "depth"), c.value("due", "count_not_due")) == (1, 2)
    assert all(r.note.startswith("exact") for r in c.rows if r.metric in ("depth", "rows_total"))


def test_depth_above_the_cap_is_an_estimate_that_says_so(cfg, clean_lab) -> None:  # noqa: ANN001
    n = COUNT_CAP * 3
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_status_meta (status) SELECT CASE WHEN g %% 3 = 0 THEN 0 ELSE 2 END "
                     "FROM generate_series(1, %s) AS g", (n,))
        conn.execute("ANALYZE lab.q_status_meta")
    c = collect(cfg, "depth")
    depth = c.row("status", "depth")
    assert depth.note == "estimate (pg_stats MCV)"
    assert abs(depth.value - n / 3) < n * 0.05  # the statistics' share of status 0 times reltuples
    assert c.row("status", "rows_total").note == "estimate (pg_class.reltuples)"
    assert c.value("status", "rows_total") == n
    assert c.value("status", "count_other") is None


SKIPPED = "estimate (pg_stat_user_tables.n_live_tup; not counted: far above the cap)"


FLAGGED_QUEUE = {"kind": "status", "table": "flagged_q", "key": "id", "status_column": "state",
                 "ready_values": ["created", "retry"], "processing_values": ["active"],
                 "done_values": ["completed", "cancelled"], "closed_when_true": ["blocked"]}
# Oban's shape of mapping: a status queue with max_attempts and no runnable_at (block status_follow).
FLAGGED_FOLLOW = {**FLAGGED_QUEUE, "attempts_column": "attempts", "max_attempts": 5}


STATES = ("created", "retry", "active", "completed", "cancelled")


@contextlib.contextmanager
def _flagged_table(lab, partitions: int = 0, int_status: bool = False, forget: bool = True):  # noqa: ANN001, ANN202
    """pg-boss's cancelJobs leaves ``blocked`` set on cancelled flow children: 60,000 rows, of
    which 15,000 are cancelled and blocked, 2,000 waiting on a parent (created, blocked) and 3,000
    waiting (created). With ``partitions``, hashed over that many leaves; with ``int_status``, the
    status is a smallint, each state its position in ``STATES``. ``forget``: drop the column types
    the collectors keep for target 'lab' (a test before may have made the table with the other
    status type, and kept types are read again only TYPES_RECHECK_S after they were read)."""
    kind = "smallint" if int_status else "lab.flagged_state"
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.flagged_q")
        conn.execute("DROP TYPE IF EXISTS lab.flagged_state")
        conn.execute(f"CREATE TYPE lab.flagged_state AS ENUM ({', '.join(repr(x) for x in STATES)})")
        conn.execute(f"CREATE TABLE lab.flagged_q (id bigint GENERATED ALWAYS AS IDENTITY, "
                     f"state {kind} NOT NULL, blocked boolean NOT NULL DEFAULT false, "
                     "attempts int NOT NULL DEFAULT 0, PRIMARY KEY (id))"
                     + (" PARTITION BY HASH (id)" if partitions else ""))
        for i in range(partitions):
            conn.execute(f"CREATE TABLE lab.flagged_q_{i} PARTITION OF lab.flagged_q "
                         f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {i})")
        conn.execute("CREATE INDEX ON lab.flagged_q (state)")
        state = "(array_position(%s::text[], v.s) - 1)::smallint" if int_status else "v.s::lab.flagged_state"
        conn.execute(f"INSERT INTO lab.flagged_q (state, blocked) SELECT {state}, b FROM "  # noqa: S608 - own text
                     "(VALUES ('completed', false, 40000), ('cancelled', true, 15000), ('created', true, 2000), "
                     "('created', false, 3000)) AS v (s, b, n) CROSS JOIN LATERAL generate_series(1, v.n)",
                     (list(STATES),) if int_status else None)
        conn.execute("ANALYZE lab.flagged_q")
    if forget:
        runner.forget_types("lab")
    try:
        yield
    finally:
        with lab.connect() as conn:
            conn.execute("DROP TABLE lab.flagged_q")
            conn.execute("DROP TYPE lab.flagged_state")


def _flagged_depths(lab) -> tuple[object, object]:  # noqa: ANN001
    """Depth of the flagged table mapped as a plain status queue and as one with max_attempts, with
    the column types read afresh (the collectors keep them TYPES_TTL_S: an index made since is
    read once they are read again)."""
    runner.forget_types("lab")
    cfg = one_queue(lab, {"name": "f", **FLAGGED_QUEUE})
    follow = one_queue(lab, {"name": "f", **FLAGGED_FOLLOW})
    return collect(cfg, "depth").row("f", "depth"), collect(follow, "depth").row("f", "depth")


def test_flagged_rows_in_other_statuses_make_depth_at_least_the_count_not_an_estimate_of_it(lab) -> None:  # noqa: ANN001
    """The share of flagged rows (closed_when_true) is taken off the ready statuses' share as if
    all of them were waiting; when most are cancelled the estimate falls below what the cap's read
    counted, and depth read 1,000, noted 'estimate (pg_stats MCV)', for 3,000 waiting jobs. Without
    a partial index on the waiting rows it says 'at least', in both status blocks."""
    with _flagged_table(lab):
        plain, follow = _flagged_depths(lab)
        assert (plain.value, plain.note) == (COUNT_CAP, "at least (cap reached; the statistics estimate no more)")
        assert (follow.value, follow.note) == (COUNT_CAP,
                                               "at least (cap of ready items read; the statistics estimate no more)")


@pytest.mark.parametrize("predicate", ["state < 'active' AND NOT blocked", "NOT blocked AND state <= 'retry'",
                                       "state IN ('retry', 'created') AND NOT blocked"])
def test_the_librarys_partial_index_on_the_waiting_rows_gives_depth_above_the_cap(lab, predicate: str) -> None:  # noqa: ANN001
    """pg-boss 12's fetch index job_i11 (WHERE state < 'active' AND NOT blocked) holds the joint
    figure pg_stats lacks: its reltuples is the waiting rows. Depth above the cap reads it (3,000
    within 10 %), in both status blocks; an index whose predicate selects other rows is not read."""
    with _flagged_table(lab):
        with lab.connect() as conn:
            # Not the waiting rows: another status set, an extra condition, a flag missing.
            conn.execute("CREATE INDEX flagged_other ON lab.flagged_q (id) WHERE state < 'completed' AND NOT blocked")
            conn.execute("CREATE INDEX flagged_extra ON lab.flagged_q (id) WHERE state < 'active' AND NOT blocked AND attempts = 0")
            conn.execute("CREATE INDEX flagged_noflag ON lab.flagged_q (id) WHERE state < 'active'")
            conn.execute("ANALYZE lab.flagged_q")
        plain, follow = _flagged_depths(lab)
        assert plain.note.startswith("at least") and follow.note.startswith("at least"), (plain, follow)
        with lab.connect() as conn:
            conn.execute(f"CREATE INDEX flagged_waiting ON lab.flagged_q (id) WHERE {predicate}")
            conn.execute("ANALYZE lab.flagged_q")
        plain, follow = _flagged_depths(lab)
        assert plain.note == "estimate (partial index of the ready rows: reltuples)", plain
        assert follow.note == ("estimate (partial index of the ready rows: reltuples x the share below max_attempts "
                               "in the cap read)"), follow
        assert abs(plain.value - 3000) <= 300 and abs(follow.value - 3000) <= 300, (plain, follow)
        # The catalog types keep it apart from the indexes a count reads through: it holds only
        # the unflagged part of its statuses' rows.
        cfg = one_queue(lab, {"name": "f", **FLAGGED_QUEUE})
        with engine.connection(cfg.targets[0], "collect", cfg.base_dir) as conn:
            status = coltypes.type_of(cfg.queues[0], "status_column", coltypes.read_types(conn, cfg.queues),
                                      "postgresql")
        assert status is not None
        assert [(p.name, sorted(p.values), p.flags) for p in status.flagged_partials] == [
            ("flagged_other", ["active", "created", "retry"], ("blocked",)),
            ("flagged_waiting", ["created", "retry"], ("blocked",))], status.flagged_partials
        assert not [p for p in status.partials if p[0] in ("flagged_waiting", "flagged_other")], status.partials


def test_a_status_column_migrated_to_another_type_is_read_again_not_reported_wrong(lab, monkeypatch) -> None:  # noqa: ANN001
    """The collectors keep a target's column types for ten minutes. A table recreated with its
    status an integer where it was an enum (same target, queue and table names) read
    'ready_values ... not a label of the enum' from the kept types, and nothing was collected for
    it, until they expired. Kept types that find a mapping error are read again once they are
    TYPES_RECHECK_S old (30 s; a mapping that stays wrong costs one catalog read per that time)."""
    with _flagged_table(lab):
        assert collect(one_queue(lab, {"name": "f", **FLAGGED_QUEUE}), "depth").row("f", "depth").value == COUNT_CAP
    queue = {**FLAGGED_QUEUE, "name": "f", "ready_values": [0, 1], "processing_values": [2], "done_values": [3, 4]}
    with _flagged_table(lab, int_status=True, forget=False):
        cfg = one_queue(lab, queue)
        c = collect(cfg, "depth")  # the kept types are seconds old: not read again yet
        assert [r.note for r in c.rows if r.metric == "queue_error"], c.rows
        monkeypatch.setattr(runner, "TYPES_RECHECK_S", 0.0)  # as if they were older than that
        c = collect(cfg, "depth")
        assert not [r.note for r in c.rows if r.metric == "queue_error"], c.rows
        assert c.row("f", "depth").value == COUNT_CAP


def test_the_live_check_says_when_no_partial_index_holds_the_waiting_rows_and_its_index_is_found(lab) -> None:  # noqa: ANN001
    """config check --live names a closed_when_true queue whose table lacks the partial index on
    exactly its waiting rows and gives the statement that creates it; once it is created (an
    integer status here: its predicate prints bare numbers) and analyzed, the warning is gone and
    depth above the cap reads it."""
    from queueops import livecheck

    queue = {**FLAGGED_QUEUE, "name": "f", "ready_values": [0, 1], "processing_values": [2], "done_values": [3, 4]}
    with _flagged_table(lab, int_status=True):
        cfg = one_queue(lab, queue)
        found = [f for f in livecheck.report_live(cfg).findings if f.field == "closed_when_true"]
        assert len(found) == 1 and found[0].severity == "warning", found
        assert found[0].fix == ('CREATE INDEX CONCURRENTLY ON "lab"."flagged_q" ("id") '
                                'WHERE "state" IN (0, 1) AND NOT "blocked"'), found[0].fix
        assert collect(cfg, "depth").row("f", "depth").note.startswith("at least")
        with lab.connect() as conn:
            conn.execute(found[0].fix)
            conn.execute("ANALYZE lab.flagged_q")
        assert not [f for f in livecheck.report_live(cfg).findings if f.field == "closed_when_true"]
        runner.forget_types("lab")
        depth = collect(cfg, "depth").row("f", "depth")
        assert depth.note == "estimate (partial index of the ready rows: reltuples)", depth
        assert abs(depth.value - 3000) <= 300, depth


def test_on_a_partitioned_table_every_leaf_must_have_the_partial_index(lab) -> None:  # noqa: ANN001
    """pg-boss 12 builds job_i11 on each partition of its own (no index on pgboss.job): the figure
    is the leaves' summed reltuples, and with one leaf missing the index it is not read at all
    (a sum over some leaves would read a fraction of the waiting rows as all of them)."""
    with _flagged_table(lab, partitions=3):
        with lab.connect() as conn:
            for i in range(2):
                conn.execute(f"CREATE INDEX ON lab.flagged_q_{i} (id) WHERE state < 'active' AND NOT blocked")
            conn.execute("ANALYZE lab.flagged_q_0, lab.flagged_q_1, lab.flagged_q_2")
        plain, _ = _flagged_depths(lab)
        assert plain.note.startswith("at least"), plain
        with lab.connect() as conn:
            conn.execute("CREATE INDEX ON lab.flagged_q_2 (id) WHERE state < 'active' AND NOT blocked")
            conn.execute("ANALYZE lab.flagged_q_2")
        plain, _ = _flagged_depths(lab)
        assert plain.note == "estimate (partial index of the ready rows: reltuples)", plain
        assert abs(plain.value - 3000) <= 300, plain


def test_a_leafs_copy_made_after_the_types_were_read_is_found_by_its_predicate(lab) -> None:  # noqa: ANN001
    """The catalog types name each leaf's copy of the index; a copy made since (pg-boss builds its
    indexes on each new queue's partition) is not among them until the types are read again. Depth
    finds it on that leaf by the predicate text the other copies print, and still reads the index."""
    with _flagged_table(lab, partitions=3):
        with lab.connect() as conn:
            conn.execute("CREATE INDEX ON lab.flagged_q_0 (id) WHERE state < 'active' AND NOT blocked")
            conn.execute("CREATE INDEX ON lab.flagged_q_1 (id) WHERE state < 'active' AND NOT blocked")
            conn.execute("CREATE INDEX flagged_q_2_old ON lab.flagged_q_2 (id) WHERE state < 'active' AND NOT blocked")
            conn.execute("ANALYZE lab.flagged_q_0, lab.flagged_q_1, lab.flagged_q_2")
        cfg = one_queue(lab, {"name": "f", **FLAGGED_QUEUE})
        runner.forget_types("lab")
        assert collect(cfg, "depth").row("f", "depth").note.startswith("estimate (partial index")
        with lab.connect() as conn:  # the types kept name flagged_q_2_old; another copy replaces it
            conn.execute("DROP INDEX lab.flagged_q_2_old")
            conn.execute("CREATE INDEX flagged_q_2_new ON lab.flagged_q_2 (id) WHERE state < 'active' AND NOT blocked")
            conn.execute("ANALYZE lab.flagged_q_2")
        depth = collect(cfg, "depth").row("f", "depth")
        assert depth.note == "estimate (partial index of the ready rows: reltuples)", depth
        assert abs(depth.value - 3000) <= 300, depth
        with lab.connect() as conn:  # and a copy with another predicate on that leaf is no copy
            conn.execute("DROP INDEX lab.flagged_q_2_new")
            conn.execute("CREATE INDEX ON lab.flagged_q_2 (id) WHERE state < 'completed' AND NOT blocked")
        assert collect(cfg, "depth").row("f", "depth").note.startswith("at least")


def test_status_values_of_any_text_get_their_share_above_the_cap(lab) -> None:  # noqa: ANN001
    """The prelude reads each status list's share of the rows from the column's most common values;
    the lists travel as JSON arrays, so a value holding a quote, a comma, a bracket or a newline is
    one value, not several (5,000 ready, 1,500 processing, 3,500 done; all above the cap)."""
    ready, doing, done = "it's \"ready\"]", "a,b\nc", "done"
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.odd_status")
        conn.execute("CREATE TABLE lab.odd_status (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                     "status text NOT NULL)")
        conn.execute("CREATE INDEX ON lab.odd_status (status, id)")
        conn.execute("INSERT INTO lab.odd_status (status) SELECT v.s FROM (VALUES (%s, 5000), (%s, 1500), "
                     "(%s, 3500)) AS v (s, n) CROSS JOIN LATERAL generate_series(1, v.n)", (ready, doing, done))
        conn.execute("ANALYZE lab.odd_status")
    try:
        cfg = one_queue(lab, {"name": "odd", "kind": "status", "table": "odd_status", "key": "id",
                              "status_column": "status", "ready_values": [ready],
                              "processing_values": [doing], "done_values": [done]})
        c = collect(cfg, "depth")
        for metric, truth in (("depth", 5000), ("count_processing", 1500), ("count_done", 3500)):
            row = c.row("odd", metric)
            assert row.note == "estimate (pg_stats MCV)" and abs(row.value - truth) <= truth * 0.1, (metric, row)
    finally:
        with lab.connect() as conn:
            conn.execute("DROP TABLE lab.odd_status")


def test_a_total_far_above_the_cap_is_not_counted_and_the_ready_counts_still_are(cfg, clean_lab) -> None:  # noqa: ANN001
    n = COUNT_SKIP_ABOVE + COUNT_CAP
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_delete (enqueued_at) SELECT now() FROM generate_series(1, %s)", (n,))
        conn.execute("INSERT INTO lab.q_status_meta (status) SELECT CASE WHEN g %% 3 = 0 THEN 0 ELSE 2 END "
                     "FROM generate_series(1, %s) AS g", (n,))
        conn.execute("INSERT INTO lab.q_lease (processing_started_at) VALUES (NULL), (now())")  # far below: exact
        conn.execute("SELECT pg_stat_force_next_flush()")  # the insert counts first, then VACUUM's own (see labdata)
        conn.execute("VACUUM ANALYZE lab.q_delete, lab.q_status_meta, lab.q_lease")
    c = collect(cfg, "depth")
    for queue, metric in (("delete", "depth"), ("delete", "rows_total"), ("status", "rows_total")):
        assert c.row(queue, metric).note == SKIPPED, (queue, metric)
        assert abs(c.value(queue, metric) - n) < n * 0.05, (queue, metric)
    assert c.row("status", "depth").note == "estimate (pg_stats MCV)"  # the ready count ran and reached the cap
    assert (c.value("lease", "depth"), c.value("lease", "rows_total"), c.row("lease", "rows_total").note) == (1, 2, "exact")
    # The skipped counts (a key-ordered read with no condition) are in the plan but never run; the
    # status queue's ready, processing and done counts (a condition on status) do run.
    plan = explain(cfg, "depth")
    reads = [x for x in nodes(plan) if x.get("Relation Name") in ("q_delete", "q_status_meta")]
    # A total is a read of the key with no condition; the ready count read through the lab's partial
    # index on the ready value (q_status_meta_ready, WHERE status = 0) has no condition either, its
    # predicate is the index's own (issue 29: a value is read through the index that serves it).
    totals = [x for x in reads if "Filter" not in x and "Index Cond" not in x
              and str(x.get("Index Name", "")).endswith("_pkey")]
    assert len(totals) == 2 and all(x["Actual Loops"] == 0 for x in totals), totals
    assert all(x["Actual Loops"] == 1 for x in reads if x not in totals) and len(reads) == 5, reads
    # A drained backlog reads 0 at once, whatever the counter and the last ANALYZE say.
    with clean_lab.connect() as conn:
        conn.execute("UPDATE lab.q_status_meta SET status = 2 WHERE status = 0")
    c = collect(cfg, "depth")
    assert (c.value("status", "depth"), c.row("status", "depth").note) == (0, "exact")


def test_a_queue_with_open_when_null_counts_its_open_rows_whatever_the_live_row_counter(lab) -> None:  # noqa: ANN001
    # The counter includes the finished rows kept in the table: it says nothing about the open ones.
    n = COUNT_SKIP_ABOVE + COUNT_CAP
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.kept_jobs")
        conn.execute("CREATE TABLE lab.kept_jobs (id bigint PRIMARY KEY, enqueued_at timestamptz NOT NULL DEFAULT now(), "
                     "finished_at timestamptz)")
        conn.execute("CREATE INDEX ON lab.kept_jobs (id) WHERE finished_at IS NULL")
        conn.execute("INSERT INTO lab.kept_jobs (id, finished_at) SELECT g, CASE WHEN g > 7 THEN now() END "
                     "FROM generate_series(1, %s) AS g", (n,))
        conn.execute("VACUUM ANALYZE lab.kept_jobs")
    cfg = one_queue(lab, {"name": "kept", "kind": "delete", "table": "kept_jobs", "key": "id", "enqueued_at": "enqueued_at",
                          "open_when_null": ["finished_at"]}, lock_timeout_ms=500, statement_timeout_ms=3000)
    try:
        c = collect(cfg, "depth")
        assert (c.value("kept", "depth"), c.row("kept", "depth").note) == (7, "exact")
        assert (c.value("kept", "rows_total"), c.row("kept", "rows_total").note) == (7, "exact")
    finally:
        with lab.connect() as conn:
            conn.execute("DROP TABLE lab.kept_jobs")


def test_the_index_on_exactly_the_open_rows_is_found_in_the_catalog_types(lab) -> None:  # noqa: ANN001
    """Que's que_poll_idx (WHERE finished_at IS NULL AND expired_at IS NULL) is the open rows of an
    open_when_null queue: the catalog types find it, in either order of its conjuncts and under a
    quoted column name, and not an index with another condition or on only some of the columns."""
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.open_jobs")
        conn.execute('CREATE TABLE lab.open_jobs (id bigint PRIMARY KEY, run_at timestamptz NOT NULL, '
                     '"Finished At" timestamptz, expired_at timestamptz)')
        conn.execute('CREATE INDEX open_some ON lab.open_jobs (run_at) WHERE "Finished At" IS NULL')
        conn.execute('CREATE INDEX open_more ON lab.open_jobs (run_at) WHERE "Finished At" IS NULL '
                     'AND expired_at IS NULL AND id > 5')
        conn.execute('CREATE INDEX open_rows ON lab.open_jobs (run_at) WHERE expired_at IS NULL AND "Finished At" IS NULL')
    cfg = one_queue(lab, {"name": "open", "kind": "due", "table": "open_jobs", "key": "id", "due_column": "run_at",
                          "open_when_null": ["Finished At", "expired_at"]})
    try:
        with engine.connection(cfg.targets[0], "collect", cfg.base_dir) as conn:
            types = coltypes.read_types(conn, cfg.queues)
        found = runner.compiled(cfg.queues[0], "postgresql", types).open_index
        assert found is not None and found.copies == ("lab.open_rows",), found
        # A queue open while "Finished At" alone is NULL has its own index among the same types.
        only = one_queue(lab, {"name": "open", "kind": "due", "table": "open_jobs", "key": "id", "due_column": "run_at",
                               "open_when_null": ["Finished At"]})
        some = coltypes.open_index(only.queues[0], types, "postgresql")
        assert some is not None and some.copies == ("lab.open_some",), some
    finally:
        with lab.connect() as conn:
            conn.execute("DROP TABLE lab.open_jobs")


def test_a_due_queue_never_analyzed_says_at_least_its_count_not_its_whole_table(lab) -> None:  # noqa: ANN001
    # No histogram and no reltuples: the lower bound is the count that reached the cap. The live-row
    # counter (all rows, due or not) is no lower bound of the due items.
    n = COUNT_SKIP_ABOVE * 2
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.fresh_due")
        conn.execute("CREATE TABLE lab.fresh_due (id bigint PRIMARY KEY, due_at timestamptz NOT NULL, "
                     "enqueued_at timestamptz NOT NULL DEFAULT now()) WITH (autovacuum_enabled = off)")
        conn.execute("CREATE INDEX ON lab.fresh_due (due_at, id)")
        conn.execute("INSERT INTO lab.fresh_due (id, due_at) SELECT g, now() + make_interval(secs => g - %s) "
                     "FROM generate_series(1, %s) AS g", (n // 2, n))
        conn.execute("SELECT pg_stat_force_next_flush()")
    cfg = one_queue(lab, {"name": "fresh", "kind": "due", "table": "fresh_due", "key": "id", "enqueued_at": "enqueued_at",
                          "due_column": "due_at"})
    try:
        c = collect(cfg, "depth")
        depth = c.row("fresh", "depth")
        assert (depth.value, depth.note) == (COUNT_CAP, "at least (cap reached; no statistics)")
    finally:
        with lab.connect() as conn:
            conn.execute("DROP TABLE lab.fresh_due")


def test_stuck_leases_after_the_lease_timeout_and_back(cfg, clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_lease (processing_started_at) SELECT now() - interval '1 minute' "
                     "FROM generate_series(1, 5)")
        conn.execute("INSERT INTO lab.q_lease (processing_started_at) VALUES (now() + interval '1 hour')")  # fresh
        conn.execute("INSERT INTO lab.q_status_meta (status, status_changed_at) SELECT 1, now() - interval '1 minute' "
                     "FROM generate_series(1, 3)")
        conn.execute("INSERT INTO lab.q_status_meta (status, status_changed_at) VALUES (1, now()), (0, now() - interval '1 hour')")
    c = collect(cfg, "stuck_leases")
    assert c.value("lease", "stuck_leases") == 5 and c.row("lease", "stuck_leases").note == "exact"
    assert 55 <= c.value("lease", "oldest_lease_age_s") < 600
    assert c.value("lease", "missing_index") == 0  # the lab has q_lease_leased
    assert c.value("status", "stuck_leases") == 3  # processing and older than the timeout; ready rows do not count
    assert 55 <= c.value("status", "oldest_lease_age_s") < 600
    with clean_lab.connect() as conn:
        conn.execute("UPDATE lab.q_lease SET processing_started_at = NULL")
        conn.execute("UPDATE lab.q_status_meta SET status = 0")
    c = collect(cfg, "stuck_leases")
    assert c.value("lease", "stuck_leases") == 0 and c.value("status", "stuck_leases") == 0
    assert c.value("lease", "oldest_lease_age_s") == 0


def test_status_stuck_leases_read_at_most_the_cap_of_processing_items(cfg, clean_lab) -> None:  # noqa: ANN001
    # More processing items than the cap: the first cap (in key order) are read once for the count
    # and the oldest, the count says it covers only those, and the stuck items after them are not read.
    fresh, stuck = COUNT_CAP - 10, 30
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_status_meta (status, status_changed_at) SELECT 1, now() - interval '1 minute' "
                     "FROM generate_series(1, 10)")
        conn.execute("INSERT INTO lab.q_status_meta (status, status_changed_at) SELECT 1, now() FROM generate_series(1, %s)",
                     (fresh,))
        conn.execute("INSERT INTO lab.q_status_meta (status, status_changed_at) SELECT 1, now() - interval '1 minute' "
                     "FROM generate_series(1, %s)", (stuck,))
    c = collect(cfg, "stuck_leases")
    assert c.value("status", "stuck_leases") == 10
    assert c.row("status", "stuck_leases").note == "at least (cap of processing items read)"
    assert 55 <= c.value("status", "oldest_lease_age_s") < 600
    with clean_lab.connect() as conn:  # one processing item fewer than the cap: every stuck item is counted
        conn.execute("DELETE FROM lab.q_status_meta WHERE id IN (SELECT id FROM lab.q_status_meta ORDER BY id LIMIT %s)",
                     (stuck + 1,))
    c = collect(cfg, "stuck_leases")
    assert (c.value("status", "stuck_leases"), c.row("status", "stuck_leases").note) == (stuck, "exact")


def test_a_fresh_lease_becomes_stuck_once_the_timeout_passes(cfg, clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_lease (processing_started_at) VALUES (now())")
    assert collect(cfg, "stuck_leases").value("lease", "stuck_leases") == 0
    assert wait_until(lambda: collect(cfg, "stuck_leases").value("lease", "stuck_leases") == 1,
                      timeout=LEASE_TIMEOUT_S * 5, interval=0.5)


def _lease_table(conn: psycopg.Connection, name: str, rows: int) -> None:
    conn.execute(sql.SQL("DROP TABLE IF EXISTS lab.{}").format(sql.Identifier(name)))
    conn.execute(sql.SQL("CREATE TABLE lab.{} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                         "created_at timestamptz NOT NULL DEFAULT now(), leased_at timestamptz)").format(sql.Identifier(name)))
    conn.execute(sql.SQL("INSERT INTO lab.{} (leased_at) SELECT CASE WHEN g %% 10 = 0 THEN now() - interval '1 hour' END "
                         "FROM generate_series(1, %s) AS g").format(sql.Identifier(name)), (rows,))
    conn.execute(sql.SQL("VACUUM ANALYZE lab.{}").format(sql.Identifier(name)))


def _lease_cfg(lab, table: str) -> config_mod.Config:  # noqa: ANN001
    return one_queue(lab, {"name": "noidx", "kind": "lease", "table": table, "key": "id", "enqueued_at": "created_at",
                           "lease_column": "leased_at", "lease_timeout_s": 60}, lock_timeout_ms=500, statement_timeout_ms=3000)


def test_a_missing_lease_index_is_reported_not_scanned(lab) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        _lease_table(conn, "big_no_lease_index", 100_000)
    cfg = _lease_cfg(lab, "big_no_lease_index")
    c = collect(cfg, "stuck_leases")
    assert c.value("noidx", "stuck_leases") is None
    assert c.value("noidx", "missing_index") == 1
    assert c.row("noidx", "missing_index").note == (
        'CREATE INDEX CONCURRENTLY ON "lab"."big_no_lease_index" (leased_at) WHERE leased_at IS NOT NULL')
    # The plan contains a scan of the table, but it never runs: the CASE does not reach it.
    nodes = scans_of(explain(cfg, "stuck_leases"), {"big_no_lease_index"})
    assert nodes and all(n["Actual Loops"] == 0 for n in nodes), nodes
    # With the index the operator is told to create, it counts (10 % of rows leased an hour ago).
    with lab.connect() as conn:
        conn.execute("CREATE INDEX ON lab.big_no_lease_index (leased_at) WHERE leased_at IS NOT NULL")
    c = collect(cfg, "stuck_leases")
    assert c.value("noidx", "missing_index") == 0
    assert c.value("noidx", "stuck_leases") == COUNT_CAP and c.row("noidx", "stuck_leases").note == "at least (cap reached)"
    with lab.connect() as conn:
        conn.execute("DROP TABLE lab.big_no_lease_index")


def test_a_small_table_without_the_index_is_still_counted(lab) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        _lease_table(conn, "small_no_lease_index", 200)
    c = collect(_lease_cfg(lab, "small_no_lease_index"), "stuck_leases")
    assert c.value("noidx", "stuck_leases") == 20
    assert c.row("noidx", "stuck_leases").note == "exact (small table, no lease index)"
    assert c.value("noidx", "missing_index") == 1
    with lab.connect() as conn:
        conn.execute("DROP TABLE lab.small_no_lease_index")


def test_watermark_past_ready_rows_is_negative_drift_with_the_stranded_count(cfg, clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_delete (enqueued_at) SELECT now() FROM generate_series(1, 50)")  # ids 1..50
        conn.execute("UPDATE lab.q_delete_watermark SET low_key = 1")
    c = collect(cfg, "watermark_drift")
    assert c.value("delete", "watermark_drift") == 0 and c.value("delete", "stranded_count") == 0
    with clean_lab.connect() as conn:
        conn.execute("UPDATE lab.q_delete_watermark SET low_key = 31")  # ids 1..30 can never be dequeued now
    c = collect(cfg, "watermark_drift")
    assert c.value("delete", "watermark_drift") == -30
    assert c.value("delete", "stranded_count") == 30
    assert c.value("delete", "watermark") == 31
    assert c.row("delete", "watermark_drift").note.startswith("stranded")
    with clean_lab.connect() as conn:
        conn.execute("UPDATE lab.q_delete_watermark SET low_key = 1")
    c = collect(cfg, "watermark_drift")
    assert c.value("delete", "watermark_drift") == 0 and c.value("delete", "stranded_count") == 0


def test_ring_occupancy_free_slots_and_pop_ahead_of_push(cfg, clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("UPDATE lab.q_ring_slot SET reference_count = 1 WHERE slot < 10")
        conn.execute("UPDATE lab.q_ring_seq SET push_seq = 110, pop_seq = 100")
    c = collect(cfg, "ring_occupancy")
    assert c.value("ring", "occupancy") == 10 and c.value("ring", "free_slots") == 1014
    assert c.value("ring", "slots_in_use") == 10 and c.value("ring", "pop_ahead_of_push") == 0
    with clean_lab.connect() as conn:
        conn.execute("UPDATE lab.q_ring_seq SET push_seq = 2000, pop_seq = 976")  # full
    assert collect(cfg, "ring_occupancy").row("ring", "free_slots").note == "full: producers stall"
    with clean_lab.connect() as conn:
        conn.execute("UPDATE lab.q_ring_seq SET push_seq = 100, pop_seq = 103")  # the bug
    c = collect(cfg, "ring_occupancy")
    assert c.value("ring", "pop_ahead_of_push") == 3 and c.value("ring", "occupancy") == 0


def _dead(cfg: config_mod.Config) -> float:
    c = collect(cfg, "ghost_records")
    assert c.row("delete", "ghost_records").note == "pgstattuple_approx"
    return c.value("delete", "ghost_records") or 0.0


def test_snapshot_hold_keeps_dead_tuples_and_names_the_holder(cfg, clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_delete (enqueued_at) SELECT now() FROM generate_series(1, 5000)")
        conn.execute("VACUUM lab.q_delete")
    assert _dead(cfg) == 0
    with holding(clean_lab.connect, "SET application_name = 'report-job'") as holder:
        holder_pid = holder.execute("SELECT pg_backend_pid()").fetchone()[0]
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM lab.q_status_meta")  # takes the snapshot
        with clean_lab.connect() as conn:
            conn.execute("DELETE FROM lab.q_delete WHERE id <= 4000")
            conn.execute("VACUUM lab.q_delete")  # cannot remove them: the holder may still see them
        assert _dead(cfg) == 4000
        c = collect(cfg, "oldest_snapshot")
        note = json.loads(c.row("", "oldest_snapshot_age_s").note)
        assert note["pid"] == holder_pid and note["kind"] == "backend"
        assert note["state"] == "idle in transaction" and note["application_name"] == "report-job"
        assert "q_status_meta" in note["query"]
        assert c.value("", "oldest_xmin_age_xids") >= 1
        assert c.value("", "snapshot_transactions") >= 1
    # The holder is gone: the same vacuum now removes them.
    with clean_lab.connect() as conn:
        conn.execute("VACUUM lab.q_delete")
    assert _dead(cfg) == 0
    c = collect(cfg, "oldest_snapshot")
    assert c.row("", "oldest_snapshot_age_s").note == "{}" or json.loads(c.row("", "oldest_snapshot_age_s").note)["pid"] != holder_pid


def test_dead_tuples_statistic_follows_deletes(lab) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.dead_stat")
        conn.execute("CREATE TABLE lab.dead_stat (id bigint PRIMARY KEY) WITH (autovacuum_enabled = false)")
        conn.execute("INSERT INTO lab.dead_stat SELECT g FROM generate_series(1, 3000) AS g")
    with lab.connect() as conn:  # statistics are flushed when this session ends
        conn.execute("DELETE FROM lab.dead_stat WHERE id % 2 = 0")
    cfg = one_queue(lab, {"name": "d", "kind": "delete", "table": "dead_stat", "key": "id"})
    assert wait_until(lambda: (collect(cfg, "ghost_records").value("d", "dead_tuples") or 0) == 1500)
    c = collect(cfg, "ghost_records")
    assert c.row("d", "dead_tuples").note == "estimate (pg_stat_user_tables)"
    assert c.value("d", "ghost_records") == 1500 and c.row("d", "ghost_records").note == "pgstattuple_approx"
    assert c.value("d", "dead_tuple_pct") == 50
    with lab.connect() as conn:
        conn.execute("DROP TABLE lab.dead_stat")


def test_dead_tuples_of_a_partitioned_table_are_its_partitions(lab) -> None:  # noqa: ANN001
    """pg-boss's job table is partitioned: the parent holds no rows, its own statistics are zeros,
    it is never vacuumed, and pgstattuple_approx refuses it (the statement failed). Its ghost
    records are its partitions', and its vacuum age that of the least recently vacuumed partition
    holding dead tuples."""
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.dead_part")
        conn.execute("CREATE TABLE lab.dead_part (name text NOT NULL, id bigint NOT NULL, PRIMARY KEY (name, id)) "
                     "PARTITION BY LIST (name)")
        for part in ("a", "b"):
            conn.execute(f"CREATE TABLE lab.dead_part_{part} PARTITION OF lab.dead_part FOR VALUES IN ('{part}') "
                         "WITH (autovacuum_enabled = false)")
        conn.execute("INSERT INTO lab.dead_part SELECT CASE WHEN g % 3 = 0 THEN 'a' ELSE 'b' END, g "
                     "FROM generate_series(1, 3000) AS g")
    with lab.connect() as conn:  # statistics are flushed when this session ends
        conn.execute("DELETE FROM lab.dead_part WHERE id % 2 = 0")  # 500 of a's 1,000, 1,000 of b's 2,000
    with lab.connect() as conn:
        conn.execute("VACUUM lab.dead_part_a")  # a's dead rows removed; b never vacuumed
    cfg = one_queue(lab, {"name": "p", "kind": "delete", "table": "dead_part", "key": "id"})
    assert wait_until(lambda: (collect(cfg, "ghost_records").value("p", "dead_tuples") or 0) == 1000)
    c = collect(cfg, "ghost_records")
    assert c.value("p", "ghost_records") == 1000 and c.row("p", "ghost_records").note == "pgstattuple_approx"
    assert c.value("p", "dead_tuple_pct") == 100 * 1000 / 2500
    # b holds the dead tuples and was never vacuumed: a's vacuum a moment ago does not hide it.
    assert c.value("p", "vacuum_age_s") is None
    assert c.row("p", "vacuum_age_s").note == "never vacuumed: a partition holding dead tuples (1 of 2 partitions hold some)"
    with lab.connect() as conn:
        conn.execute("VACUUM lab.dead_part_b")
    assert wait_until(lambda: collect(cfg, "ghost_records").value("p", "dead_tuples") == 0)
    c = collect(cfg, "ghost_records")
    assert c.row("p", "vacuum_age_s").note == "pg_stat_user_tables: the least recently vacuumed of 2 partitions"
    assert 0 <= c.value("p", "vacuum_age_s") < 60 and c.value("p", "ghost_records") == 0
    with lab.connect() as conn:
        conn.execute("DROP TABLE lab.dead_part")


def _drop(lab, table: str) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        conn.execute(f"DROP TABLE {table}")


def test_fragmentation_of_a_partitioned_table_is_its_partitions(lab) -> None:  # noqa: ANN001
    """PGMQ's partitioned queues: the parent has no pages, and its key index is a partitioned index
    that pgstatindex refuses ('is not a btree index'), as pgstattuple_approx refuses the parent: the
    statement failed where pgstattuple is installed, and read nothing useful where it is not. The
    figures are the partitions' and their key indexes', weighted by pages."""
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.frag_part")
        conn.execute("CREATE TABLE lab.frag_part (msg_id bigint NOT NULL, body text) PARTITION BY RANGE (msg_id)")
        conn.execute("CREATE TABLE lab.frag_part_a PARTITION OF lab.frag_part FOR VALUES FROM (0) TO (20000) "
                     "WITH (autovacuum_enabled = false)")
        conn.execute("CREATE TABLE lab.frag_part_b PARTITION OF lab.frag_part FOR VALUES FROM (20000) TO (40000) "
                     "WITH (autovacuum_enabled = false)")
        conn.execute("CREATE INDEX frag_part_msg_id_idx ON lab.frag_part (msg_id)")
        conn.execute("INSERT INTO lab.frag_part SELECT g, repeat('x', 40) FROM generate_series(1, 39999) AS g")
        conn.execute("VACUUM ANALYZE lab.frag_part_a, lab.frag_part_b")
    cfg = one_queue(lab, {"name": "p", "kind": "delete", "table": "frag_part", "key": "msg_id"})
    with lab.connect() as conn:
        pages = dict(conn.execute("SELECT relname, relpages FROM pg_class WHERE relname IN "
                                  "('frag_part_a', 'frag_part_b')").fetchall())
    # Without pgstattuple's functions (a login outside pg_stat_scan_tables) the figures are the
    # estimates from the partitions' pg_class and pg_stats rows.
    with contextlib.ExitStack() as stack:
        reader = stack.enter_context(reader_login(lab, "lab.frag_part", "lab.frag_part_a", "lab.frag_part_b"))
        stack.callback(_drop, lab, "lab.frag_part")
        estimated = one_queue(lab, {"name": "p", "kind": "delete", "table": "frag_part", "key": "msg_id"}, **reader)
        before, est_before = collect(cfg, "fragmentation_pct"), collect(estimated, "fragmentation_pct")
        for c, source in ((before, "pgstatindex"), (est_before, "estimate (pg_class, pg_stats)")):
            assert c.ok("fragmentation_pct").ok, c.ok("fragmentation_pct")
            note = json.loads(c.row("p", "page_density_pct").note)
            assert note == {"source": source, "index": "frag_part_msg_id_idx", "partitions": 2}
            assert c.value("p", "table_pages") == sum(pages.values())
            assert c.value("p", "page_count") > 100  # the two partitions' index pages, not the parent's none
            assert c.value("p", "page_density_pct") > 80 and c.value("p", "table_bloat_pct") < 20, c.rows
        with lab.connect() as conn:  # 9 of every 10 rows of partition b go: its pages stay, mostly empty
            conn.execute("DELETE FROM lab.frag_part WHERE msg_id >= 20000 AND msg_id % 10 <> 0")
            conn.execute("VACUUM lab.frag_part_b")
        # Half the pages (b's) are now about 10 % full: the page-weighted figures land between.
        for b, c in ((before, collect(cfg, "fragmentation_pct")), (est_before, collect(estimated, "fragmentation_pct"))):
            assert 30 < c.value("p", "page_density_pct") < b.value("p", "page_density_pct") - 30, c.rows
            assert c.value("p", "table_bloat_pct") > b.value("p", "table_bloat_pct") + 30, c.rows


def test_a_lock_on_one_partition_names_its_holder_as_the_queues_blocker(lab) -> None:  # noqa: ANN001
    """A VACUUM FULL or LOCK of one of pg-boss's partitions stalls every dequeue through the parent,
    and the holder holds nothing on the parent: matched on the parent alone, the waiter was counted
    but no blocker named (lock_blockers 0), so the console had no session to end."""
    with lab.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS lab.lock_part")
        conn.execute("CREATE TABLE lab.lock_part (name text NOT NULL, id bigint NOT NULL, PRIMARY KEY (name, id)) "
                     "PARTITION BY LIST (name)")
        for part in ("a", "b"):
            conn.execute(f"CREATE TABLE lab.lock_part_{part} PARTITION OF lab.lock_part FOR VALUES IN ('{part}')")
        conn.execute("INSERT INTO lab.lock_part SELECT CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, g "
                     "FROM generate_series(1, 100) AS g")
    cfg = one_queue(lab, {"name": "p", "kind": "delete", "table": "lock_part", "key": "id"})
    # A login without pgstattuple's functions: its ghost records and fragmentation are read from the
    # catalogue and the statistics alone, which a lock on a partition does not hold up.
    with contextlib.ExitStack() as stack:
        reader = stack.enter_context(reader_login(lab, "lab.lock_part", "lab.lock_part_a", "lab.lock_part_b"))
        stack.callback(_drop, lab, "lab.lock_part")
        catalogue_only = one_queue(lab, {"name": "p", "kind": "delete", "table": "lock_part", "key": "id"}, **reader)
        with holding(lab.connect, "SET application_name = 'partition-holder'", "BEGIN",
                     "LOCK TABLE lab.lock_part_b IN ACCESS EXCLUSIVE MODE") as holder:
            # The partitions are found in pg_inherits: pg_partition_tree locked each one, and these
            # statements, which read no row, waited behind the holder to their lock timeout.
            c = collect(catalogue_only, "ghost_records", "fragmentation_pct")
            for name in ("ghost_records", "fragmentation_pct"):
                assert c.ok(name).ok, c.ok(name)
            assert c.value("p", "table_pages") is not None and c.value("p", "dead_tuples") is not None
            c = collect(cfg, "lock_waits")
            assert c.value("p", "lock_blockers") == 1, c.rows  # held before any waiter is caught
            held = json.loads(c.row("p", "lock_blockers").note)["holders"]
            assert [(h["pid"], h["mode"], h["application_name"]) for h in held] == [
                (holder.info.backend_pid, "AccessExclusiveLock", "partition-holder")]
            with waiting(lab.connect, "DELETE FROM lab.lock_part WHERE id = 1") as waiter_pid:
                assert wait_until(lambda: collect(cfg, "lock_waits").value("p", "lock_waiters") >= 1)
                assert waiter_pid in json.loads(collect(cfg, "lock_waits").row("p", "lock_waiters").note)["pids"]
        assert collect(cfg, "lock_waits").value("p", "lock_blockers") == 0


def test_lock_hold_shows_waiters_the_blocker_and_times_out_only_the_collectors_that_need_the_table(
        cfg, clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_lease (created_at) SELECT now() FROM generate_series(1, 10)")
    with holding(clean_lab.connect, "SET application_name = 'lock-holder'", "BEGIN",
                 "LOCK TABLE lab.q_lease IN ACCESS EXCLUSIVE MODE") as holder:
        holder_pid = holder.info.backend_pid
        with waiting(clean_lab.connect, "DELETE FROM lab.q_lease WHERE id = 1") as waiter_pid:
            assert wait_until(lambda: collect(cfg, "lock_waits").value("lease", "lock_waiters") >= 1)
            c = collect(cfg)  # every collector, while the lock is held
            # The collectors that read lab.q_lease stop at their lock timeout for that queue only: the
            # status says which queue timed out, and every other queue still has its figure (issue 33,
            # item 3: one timeout no longer blanks a collector for every queue of the target).
            for name in ("depth", "oldest_age_s", "stuck_leases", "ghost_records", "fragmentation_pct"):
                st = c.ok(name)
                assert st.timeout and "lock timeout" in st.error and st.error.startswith("lease: "), (name, st)
            assert c.value("delete", "depth") is not None and c.value("status", "depth") is not None
            # ...and everything else answers, naming the waiter and the blocker.
            for name in ("watermark_drift", "ring_occupancy", "lock_waits", "lock_timeouts", "oldest_snapshot",
                         "blocking_chains"):
                assert c.ok(name).ok, c.ok(name)
            assert c.value("lease", "lock_waiters") >= 1
            assert waiter_pid in json.loads(c.row("lease", "lock_waiters").note)["pids"]
            assert c.value("lease", "lock_wait_max_s") > 0
            assert c.value("delete", "lock_waiters") == 0
            # The holder is reported in every sample, whether or not a waiter is caught waiting.
            assert c.value("lease", "lock_blockers") == 1 and c.value("delete", "lock_blockers") == 0
            assert json.loads(c.row("lease", "lock_blockers").note)["held"] == [f"{holder_pid}:AccessExclusiveLock"]
            # ...with the session itself, so the console can name it and end it (issue 32).
            held = json.loads(c.row("lease", "lock_blockers").note)["holders"]
            assert [(h["pid"], h["mode"], h["application_name"]) for h in held] == [
                (holder_pid, "AccessExclusiveLock", "lock-holder")]
            assert held[0]["backend_start"] and held[0]["xact_age_s"] >= 0
            assert c.value("", "blocked_sessions") >= 1 and c.value("", "head_blockers") >= 1
            heads = json.loads(c.row("", "head_blockers").note)
            assert heads[0]["pid"] == holder_pid and heads[0]["application_name"] == "lock-holder"
            assert heads[0]["state"] == "idle in transaction" and heads[0]["blocked"] >= 1
            assert waiter_pid in heads[0]["waiters"] and heads[0]["backend_start"]
            assert c.value("", "lock_waiters_total") >= 1
            assert c.value("", "probe_lock_timeouts") == 5
    c = collect(cfg, "lock_waits", "blocking_chains", "depth")
    assert c.value("lease", "lock_waiters") == 0 and c.value("", "blocked_sessions") == 0
    assert c.value("lease", "lock_blockers") == 0
    assert c.ok("depth").ok


def test_a_blocking_chain_reports_its_head_depth_and_size(cfg, clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_due (due_at) VALUES (now())")
    with holding(clean_lab.connect, "BEGIN", "UPDATE lab.q_due SET payload = 'head' WHERE id = 1") as head:
        head_pid = head.info.backend_pid
        # second waits on the row; third waits on a lock the second will want after it (the table)
        with waiting(clean_lab.connect, "UPDATE lab.q_due SET payload = 'second' WHERE id = 1"), \
             waiting(clean_lab.connect, "BEGIN; LOCK TABLE lab.q_due IN ACCESS EXCLUSIVE MODE"):
            assert wait_until(lambda: collect(cfg, "blocking_chains").value("", "blocked_sessions") >= 2)
            c = collect(cfg, "blocking_chains")
            heads = json.loads(c.row("", "head_blockers").note)
            assert [h["pid"] for h in heads] == [head_pid]
            assert heads[0]["blocked"] == 2 and heads[0]["depth"] >= 1


def test_blocking_chains_find_the_blockers_pg_blocking_pids_finds_queued_ones_too(cfg, clean_lab) -> None:  # noqa: ANN001
    """The chains are built from one read of pg_locks (not pg_blocking_pids, which takes every lock
    manager lock per call): a reader that conflicts only with a queued ACCESS EXCLUSIVE request, not
    with the holder, is still blocked by that request, as pg_blocking_pids says."""
    def lock_waiters() -> dict[int, list[int]]:
        with clean_lab.connect() as conn:
            return dict(conn.execute("SELECT pid, pg_blocking_pids(pid) FROM pg_stat_activity "
                                     "WHERE wait_event_type = 'Lock' AND datname = current_database()").fetchall())

    with holding(clean_lab.connect, "BEGIN", "SELECT count(*) FROM lab.q_due") as head:
        head_pid = head.info.backend_pid
        with waiting(clean_lab.connect, "BEGIN; LOCK TABLE lab.q_due IN ACCESS EXCLUSIVE MODE") as ddl:
            assert wait_until(lambda: ddl in lock_waiters())
            with waiting(clean_lab.connect, "SELECT count(*) FROM lab.q_due") as reader:
                assert wait_until(lambda: reader in lock_waiters())
                assert lock_waiters() == {ddl: [head_pid], reader: [ddl]}
                c = collect(cfg, "blocking_chains")
                assert c.value("", "blocked_sessions") == 2 and c.value("", "head_blockers") == 1
                heads = json.loads(c.row("", "head_blockers").note)
                assert [(h["pid"], h["blocked"], h["depth"]) for h in heads] == [(head_pid, 2, 2)]
                assert c.value("", "blocking_max_wait_s") > 0
    assert collect(cfg, "blocking_chains").value("", "blocked_sessions") == 0
    # Nobody waits now: pg_locks is not read at all (its function scan is never executed).
    scans = [n for n in nodes(explain(cfg, "blocking_chains")) if n.get("Function Name") == "pg_lock_status"]
    assert scans and all(n.get("Actual Loops") == 0 for n in scans), scans


def test_churn_lowers_density_and_raises_bloat_and_a_rebuild_restores_them(cfg, clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_delete (enqueued_at) SELECT now() FROM generate_series(1, 20000)")
        conn.execute("VACUUM ANALYZE lab.q_delete")
    before = collect(cfg, "fragmentation_pct")
    with clean_lab.connect() as conn:  # delete 9 of every 10 rows, scattered: pages stay, mostly empty
        conn.execute("DELETE FROM lab.q_delete WHERE id % 10 <> 0")
        conn.execute("VACUUM lab.q_delete")
    after = collect(cfg, "fragmentation_pct")
    assert after.value("delete", "table_bloat_pct") > before.value("delete", "table_bloat_pct") + 50
    assert after.value("delete", "page_density_pct") < before.value("delete", "page_density_pct") - 50
    assert json.loads(after.row("delete", "fragmentation_pct").note)["source"] == "pgstatindex"
    with clean_lab.connect() as conn:
        conn.execute("VACUUM FULL lab.q_delete")
    rebuilt = collect(cfg, "fragmentation_pct")
    assert rebuilt.value("delete", "table_bloat_pct") < 20
    assert rebuilt.value("delete", "page_density_pct") > 80


def test_a_real_deadlock_moves_the_counter_and_its_rate(cfg, clean_lab) -> None:  # noqa: ANN001
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_due (due_at) VALUES (now()), (now())")
    rates = CounterRates()
    first = run_once(cfg, None, rates)
    before = next(r.value for r in first.rows if r.metric == "deadlocks_total")
    assert next(r for r in first.rows if r.metric == "deadlocks_per_s").note == "first sample"
    a = clean_lab.connect(autocommit=False)
    b = clean_lab.connect(autocommit=False)
    try:
        a.execute("UPDATE lab.q_due SET payload = 'a' WHERE id = 1")
        b.execute("UPDATE lab.q_due SET payload = 'b' WHERE id = 2")
        import threading

        errors: list[Exception] = []

        def cross() -> None:
            try:
                a.execute("UPDATE lab.q_due SET payload = 'a' WHERE id = 2")
            except psycopg.Error as exc:
                errors.append(exc)
                a.rollback()

        t = threading.Thread(target=cross)
        t.start()
        wait_until(lambda: collect(cfg, "blocking_chains").value("", "blocked_sessions") >= 1)
        try:
            b.execute("UPDATE lab.q_due SET payload = 'b' WHERE id = 1")
        except psycopg.errors.DeadlockDetected as exc:
            errors.append(exc)
            b.rollback()  # the victim's locks go only with its transaction
        t.join(10)
        assert any(isinstance(e, psycopg.errors.DeadlockDetected) for e in errors)
    finally:
        a.rollback()
        b.rollback()
        a.close()
        b.close()
    assert wait_until(lambda: next(r.value for r in run_once(cfg, None).rows if r.metric == "deadlocks_total") > before)
    second = run_once(cfg, None, rates)
    rate_row = next(r for r in second.rows if r.metric == "deadlocks_per_s")
    assert rate_row.value > 0 and rate_row.note.startswith("delta over")


def test_a_table_lock_counts_as_a_lock_wait_for_as_long_as_it_is_held(cfg, clean_lab) -> None:  # noqa: ANN001
    """Dequeuers with a short lock_timeout wait 200 ms at a time and retry: the queue's wait is the
    hold's, from the holding transaction's start, whether or not a waiter is caught (issue 32)."""
    with holding(clean_lab.connect, "BEGIN", "SELECT pg_sleep(1.5)", "LOCK TABLE lab.q_lease IN EXCLUSIVE MODE"):
        c = collect(cfg, "lock_waits")
        assert c.value("lease", "lock_waiters") == 0  # nobody waits at this instant...
        assert c.value("lease", "lock_blockers") == 1
        assert c.value("lease", "lock_wait_max_s") >= 1.5  # ...but the queue has been held since then
        assert c.value("delete", "lock_wait_max_s") == 0
