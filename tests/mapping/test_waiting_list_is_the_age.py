"""The drill-down's "oldest waiting" list is read as oldest_age_s reads its age: its first item is
the one the age is of, with the same age, and it lists nothing the age leaves out.

Before, every status queue's list was its first ready items in (status, key) order, aged from the
enqueue time: on pg-boss (uuid keys) a random hundred of them, jobs sent for later among them; on
River and Oban the first (queue, priority)'s, never an older job of another queue or priority; an
exhausted Oban job at the top. Each shape here is read against a direct min() of its ready rows.
"""

from __future__ import annotations

import pytest

from queueops import config as config_mod
from queueops import engine, items
from tests.conftest import Lab
from tests.mapping.conftest import oldest_age, target_section
from tests.mapping.test_readiness import _setup, _sql

# River's and Oban's fetch index: (state, queue, priority, scheduled_at, id), NOT NULL prefix;
# 1,100 fresh jobs of queue 'a' ahead of an older job of queue 'b', and an exhausted one older still.
SKIP = """
CREATE TABLE {s}.jobs (
    id bigserial PRIMARY KEY, state text NOT NULL, queue text NOT NULL, priority int NOT NULL,
    scheduled_at timestamptz NOT NULL, attempt int NOT NULL DEFAULT 0, max_attempts int NOT NULL DEFAULT 20
);
CREATE INDEX jobs_fetch ON {s}.jobs (state, queue, priority, scheduled_at, id);
INSERT INTO {s}.jobs (state, queue, priority, scheduled_at)
SELECT 'available', 'a', 1, now() - interval '1 min' FROM generate_series(1, 1100);
INSERT INTO {s}.jobs (state, queue, priority, scheduled_at) VALUES ('available', 'b', 4, now() - interval '20 min');
INSERT INTO {s}.jobs (state, queue, priority, scheduled_at, attempt, max_attempts)
VALUES ('available', 'c', 1, now() - interval '2 hours', 20, 20);
ANALYZE {s}.jobs;
"""
SKIP_QUEUE = ('[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "status"\nschema = "{schema}"\ntable = "jobs"\n'
              'key = "id"\nenqueued_at = "scheduled_at"\nstatus_column = "state"\nready_values = ["available"]\n'
              'processing_values = ["executing"]\ndone_values = ["completed"]\n{more}')

# pg-boss's shape: uuid keys (order = heap), start_after: 300 jobs sent for later (created long
# ago, runnable tomorrow), 50 waiting since their own start_after, one retried job created 3 hours
# ago and runnable 10 minutes ago (it has waited 10 minutes, not 3 hours).
RUNNABLE = """
CREATE TABLE {s}.job (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(), state text NOT NULL, created_on timestamptz NOT NULL,
    start_after timestamptz NOT NULL, retry_count int NOT NULL DEFAULT 0
);
CREATE INDEX job_fetch ON {s}.job (state, start_after);
INSERT INTO {s}.job (state, created_on, start_after)
SELECT 'created', now() - interval '5 hours', now() + interval '1 day' FROM generate_series(1, 300);
INSERT INTO {s}.job (state, created_on, start_after)
SELECT 'created', now() - g * interval '1 min', now() - g * interval '1 min' FROM generate_series(1, 50) AS g;
INSERT INTO {s}.job (state, created_on, start_after, retry_count)
VALUES ('retry', now() - interval '3 hours', now() - interval '10 min', 1);
ANALYZE {s}.job;
"""
RUNNABLE_QUEUE = ('[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "status"\nschema = "{schema}"\ntable = "job"\n'
                  'key = "id"\norder = "heap"\nenqueued_at = "created_on"\nstatus_column = "state"\n'
                  'ready_values = ["created", "retry"]\nprocessing_values = ["active"]\ndone_values = ["completed"]\n'
                  'attempts_column = "retry_count"\nrunnable_at = "start_after"\n')


def _waiting(cfg: config_mod.Config, queue: str = "jobs") -> tuple[str, list[dict[str, object]]]:
    q = cfg.queue(queue)
    with engine.connection(cfg.target(q.target), "collect", cfg.base_dir) as conn:
        read, rows = items.load(conn, q, "waiting")
    return read.block, rows


@pytest.mark.parametrize("follow", [False, True])
def test_river_and_oban_shape_lists_the_older_job_of_another_queue_first(lab: Lab, schema: str, write_cfg,  # noqa: ANN001
                                                                          follow: bool) -> None:
    """River (no attempt limit mapped) and Oban (max_attempts): the 20-minute job of queue 'b' is
    the age and the list's first item, ahead of queue 'a''s fresh ones; with max_attempts the
    2-hour job at its limit is in neither (without it, it is the oldest waiting job and both say so)."""
    _setup(lab, schema, SKIP)
    more = 'attempts_column = "attempt"\nmax_attempts = "max_attempts"\n' if follow else ""
    cfg = write_cfg(target_section(lab) + SKIP_QUEUE.format(schema=schema, more=more))
    value, note = oldest_age(cfg, "jobs")
    block, rows = _waiting(cfg)
    print(f"\nWAITING follow={follow}: block {block}, {len(rows)} rows, first {rows[0]['age_s']} s; age {value} s ({note})")
    assert block == "waiting_reads"
    expected = 1200 if follow else 7200
    assert abs(value - expected) < 30 and abs(rows[0]["age_s"] - value) < 2, (value, rows[:2])
    ages = [r["age_s"] for r in rows]
    assert ages == sorted(ages, reverse=True) and len(rows) == items.LIMIT
    if follow:  # the exhausted job is in no list; the next ones are queue 'a''s
        assert 1100 < ages[0] < 1300 and all(a < 120 for a in ages[1:])


def test_pgboss_shape_lists_no_job_sent_for_later_and_ages_a_retry_from_its_start_after(lab: Lab, schema: str,
                                                                                        write_cfg) -> None:  # noqa: ANN001
    _setup(lab, schema, RUNNABLE)
    cfg = write_cfg(target_section(lab) + RUNNABLE_QUEUE.format(schema=schema))
    truth = _sql(lab, schema, "SELECT extract(epoch FROM now() - min(greatest(created_on, start_after)))::float8 "
                              "FROM @S.job WHERE state IN ('created', 'retry') AND start_after <= now()")[0][0]
    value, _ = oldest_age(cfg, "jobs")
    block, rows = _waiting(cfg)
    print(f"\nWAITING pg-boss shape: block {block}, {len(rows)} rows, first {rows[0]['age_s']} s; age {value} s")
    assert block == "waiting_reads"
    assert abs(value - truth) < 30 and abs(rows[0]["age_s"] - value) < 2, (truth, value, rows[:2])
    assert len(rows) == 51 and all(0 < r["age_s"] < 3100 for r in rows), "none of the 300 sent for later"
    retried = _sql(lab, schema, "SELECT id FROM @S.job WHERE state = 'retry'")[0][0]
    row = next(r for r in rows if r["item"] == retried)
    assert 590 < row["age_s"] < 700 and row["attempts"] == 1, row  # since its start_after, not 3 hours


def test_a_plain_status_queue_keeps_its_key_order_list(lab: Lab, schema: str, write_cfg) -> None:  # noqa: ANN001
    """No skip read, no readiness field: the (status, key) list the age's first item comes from."""
    _setup(lab, schema, SKIP.replace("CREATE INDEX jobs_fetch ON {s}.jobs (state, queue, priority, scheduled_at, id);",
                                     "CREATE INDEX jobs_fetch ON {s}.jobs (state, id);"))
    cfg = write_cfg(target_section(lab) + SKIP_QUEUE.format(schema=schema, more=""))
    value, _ = oldest_age(cfg, "jobs")
    block, rows = _waiting(cfg)
    assert block == "waiting_status" and abs(rows[0]["age_s"] - value) < 2 and abs(value - 60) < 30, rows[:1]


# A hand-rolled lease queue with runnable_at and max_attempts: 40 free items runnable for 1 to 40
# minutes, one free item scheduled for tomorrow but enqueued 6 hours ago, one at its attempt limit
# enqueued 5 hours ago, one leased (taken) 3 hours old.
LEASE = """
CREATE TABLE {s}.jobs (
    id bigserial PRIMARY KEY, enqueued_at timestamptz NOT NULL, run_at timestamptz,
    leased_until timestamptz, attempts int NOT NULL DEFAULT 0
);
INSERT INTO {s}.jobs (enqueued_at, run_at) SELECT now() - g * interval '1 min', now() - g * interval '1 min'
FROM generate_series(1, 40) AS g;
INSERT INTO {s}.jobs (enqueued_at, run_at) VALUES (now() - interval '6 hours', now() + interval '1 day');
INSERT INTO {s}.jobs (enqueued_at, run_at, attempts) VALUES (now() - interval '5 hours', now() - interval '5 hours', 5);
INSERT INTO {s}.jobs (enqueued_at, run_at, leased_until) VALUES (now() - interval '3 hours', NULL, now() + interval '1 hour');
ANALYZE {s}.jobs;
"""
LEASE_QUEUE = ('[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "lease"\nschema = "{schema}"\ntable = "jobs"\n'
               'key = "id"\nenqueued_at = "enqueued_at"\nlease_column = "leased_until"\nattempts_column = "attempts"\n'
               'max_attempts = 5\nrunnable_at = "run_at"\n')

# A due queue with max_attempts (MassTransit's shape, on PostgreSQL): 30 due items 1 to 30 minutes
# late, one at its delivery limit 4 hours late.
DUE = """
CREATE TABLE {s}.jobs (
    id bigserial PRIMARY KEY, due_at timestamptz NOT NULL, deliveries int NOT NULL DEFAULT 0,
    max_deliveries int NOT NULL DEFAULT 3
);
CREATE INDEX jobs_due ON {s}.jobs (due_at);
INSERT INTO {s}.jobs (due_at) SELECT now() - g * interval '1 min' FROM generate_series(1, 30) AS g;
INSERT INTO {s}.jobs (due_at, deliveries) VALUES (now() - interval '4 hours', 3);
ANALYZE {s}.jobs;
"""
DUE_QUEUE = ('[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "due"\nschema = "{schema}"\ntable = "jobs"\n'
             'key = "id"\ndue_column = "due_at"\nattempts_column = "deliveries"\nmax_attempts = "max_deliveries"\n')


# A delete queue whose key is a uuid (order = "heap"): 25 items enqueued 1 to 25 minutes ago.
DELETE_HEAP = """
CREATE TABLE {s}.jobs (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), enqueued_at timestamptz NOT NULL);
CREATE INDEX jobs_enqueued ON {s}.jobs (enqueued_at);
INSERT INTO {s}.jobs (enqueued_at) SELECT now() - g * interval '1 min' FROM generate_series(1, 25) AS g;
ANALYZE {s}.jobs;
"""
DELETE_HEAP_QUEUE = ('[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "delete"\nschema = "{schema}"\n'
                     'table = "jobs"\nkey = "id"\norder = "heap"\nenqueued_at = "enqueued_at"\n')


@pytest.mark.parametrize(("ddl", "queue", "block", "oldest_s", "listed"), [
    (LEASE, LEASE_QUEUE, "waiting_lease_follow_runnable", 40 * 60, 40),
    (DUE, DUE_QUEUE, "waiting_due_follow", 30 * 60, 30),
    (DELETE_HEAP, DELETE_HEAP_QUEUE, "waiting_delete_heap", 25 * 60, 25)])
def test_a_lease_or_due_queue_lists_no_item_its_age_leaves_out(lab: Lab, schema: str, write_cfg, ddl: str,  # noqa: ANN001
                                                              queue: str, block: str, oldest_s: int,
                                                              listed: int) -> None:
    """The age leaves out an item scheduled for later, one at its attempt limit and a leased one:
    so does the list (before, the lease queue's list began with the 6-hour scheduled item and the
    due queue's with the 4-hour one at its delivery limit); a heap-ordered delete queue's list is in
    enqueue order, as its age (it was in uuid order)."""
    _setup(lab, schema, ddl)
    cfg = write_cfg(target_section(lab) + queue.format(schema=schema))
    value, _ = oldest_age(cfg, "jobs")
    got, rows = _waiting(cfg)
    print(f"\nWAITING {block}: {len(rows)} rows, first {rows[0]['age_s']} s; age {value} s")
    assert got == block
    assert abs(value - oldest_s) < 30 and abs(rows[0]["age_s"] - value) < 2, (value, rows[:2])
    assert len(rows) == listed and all(r["age_s"] < oldest_s + 30 for r in rows)
