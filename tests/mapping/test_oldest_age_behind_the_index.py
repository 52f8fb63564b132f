"""oldest_age_s on a status table whose status index puts other columns before the enqueue time
(River's and Oban's fetch index: state, queue, priority, scheduled_at, id).

The first cap of ready items in that index's order are the first prefix's (queue, priority): an
older item of another prefix behind them was not read, and the age read as exact (River at 200,000
rows: 1,803 s for 5,403 s). Where the prefix columns are NOT NULL the age is read by a skip read
of the index, exact; where one is nullable (a row comparison with NULL would end the walk early)
the cap read stays and says 'at least'. Both against a direct min() of the ready rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors import runner
from tests.conftest import Lab
from tests.mapping.conftest import oldest_age, target_section
from tests.mapping.test_readiness import _setup, _sql

TASKS = """
CREATE TABLE {s}.tasks (
    id bigserial PRIMARY KEY,
    status text NOT NULL,
    tenant text,
    created_at timestamptz NOT NULL
);
CREATE INDEX tasks_fetch ON {s}.tasks (status, tenant, created_at, id);
INSERT INTO {s}.tasks (status, tenant, created_at)
SELECT 'ready', 'a', now() - interval '1 min' FROM generate_series(1, 1100);
INSERT INTO {s}.tasks (status, tenant, created_at) VALUES ('ready', 'b', now() - interval '20 min'),
    ('running', 'a', now() - interval '2 hours'), ('done', 'a', now() - interval '3 hours');
ANALYZE {s}.tasks;
"""
QUEUE = ('[[queues]]\nname = "tasks"\ntarget = "lab"\nkind = "status"\nschema = "{schema}"\ntable = "tasks"\n'
         'key = "id"\nenqueued_at = "created_at"\nstatus_column = "status"\nready_values = ["ready"]\n'
         'processing_values = ["running"]\ndone_values = ["done"]\n')


def test_an_older_item_of_another_prefix_is_read_or_the_age_says_at_least(lab: Lab, schema: str, write_cfg,  # noqa: ANN001
                                                                           tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _setup(lab, schema, TASKS)
    cfg = write_cfg(target_section(lab) + QUEUE.format(schema=schema))
    truth = _sql(lab, schema, "SELECT extract(epoch FROM now() - min(created_at))::float8 FROM @S.tasks "
                              "WHERE status = 'ready'")[0][0]
    assert 1190 < truth < 1260
    # tenant is nullable: the cap read of tenant 'a' stops at the cap and says so
    value, note = oldest_age(cfg, "tasks")
    assert 55 < value < 120 and note.startswith("at least"), (value, note)
    # NOT NULL: the skip read takes the first item of tenants 'a' and 'b': the 20 min one, exact
    _sql(lab, schema, "ALTER TABLE @S.tasks ALTER COLUMN tenant SET NOT NULL")
    # The service reads the change without a restart once its catalog types are TYPES_TTL_S old.
    assert oldest_age(cfg, "tasks")[1].startswith("at least")  # still the types read before the change
    monkeypatch.setattr(runner, "TYPES_TTL_S", 0.0)
    value, note = oldest_age(cfg, "tasks")
    assert abs(value - truth) < 30 and not note, (value, note)


# procrastinate's shape: jobs deferred to run at once have a NULL scheduled_at. 1,500 old waiting
# jobs sit behind 3,000 finished ones that a cleanup deleted; VACUUM gave their pages back, and
# 1,500 new jobs landed there: in physical order (and in a (status, scheduled_at) index, whose equal
# keys are in physical order) the new jobs come first.
NULL_RUNNABLE = """
CREATE TABLE {s}.jobs (
    id bigserial PRIMARY KEY, status text NOT NULL, scheduled_at timestamptz, enqueued_at timestamptz NOT NULL
) WITH (autovacuum_enabled = false);
CREATE INDEX jobs_status ON {s}.jobs (status, scheduled_at);
INSERT INTO {s}.jobs (status, enqueued_at) SELECT 'done', now() - interval '3 hours' FROM generate_series(1, 3000);
INSERT INTO {s}.jobs (status, enqueued_at) SELECT 'todo', now() - interval '2 hours' + g * interval '1 s'
FROM generate_series(1, 1500) AS g;
DELETE FROM {s}.jobs WHERE status = 'done';
"""
NULL_RUNNABLE_AFTER = """
INSERT INTO {s}.jobs (status, enqueued_at) SELECT 'todo', now() - interval '1 min' FROM generate_series(1, 1500);
ANALYZE {s}.jobs;
"""
NULL_RUNNABLE_QUEUE = ('[[queues]]\nname = "tasks"\ntarget = "lab"\nkind = "status"\nschema = "{schema}"\n'
                       'table = "jobs"\nkey = "id"\nenqueued_at = "enqueued_at"\nstatus_column = "status"\n'
                       'ready_values = ["todo"]\nprocessing_values = ["doing"]\ndone_values = ["done"]\n'
                       'runnable_at = "scheduled_at"\n')


def test_the_oldest_of_the_jobs_without_a_runnable_time_is_read_whatever_their_physical_order(
        lab: Lab, schema: str, write_cfg) -> None:  # noqa: ANN001
    """The age read the NULL range of a nullable runnable column in (status, runnable_at) order: no
    order there, so the cap it kept was the first 1,000 in physical order, the new jobs in the
    freed pages (60 s for 7,200 s). It reads that range in key order now (fifo: the lowest key is
    the oldest); the drill-down's list begins with the same job."""
    cfg = _after_vacuum(lab, schema, write_cfg, NULL_RUNNABLE, NULL_RUNNABLE_AFTER,
                        NULL_RUNNABLE_QUEUE.format(schema=schema))
    _the_oldest_is_read(lab, schema, cfg, "tasks", "waiting_reads", "enqueued_at", "status = 'todo'",
                        "ctid")


def _after_vacuum(lab: Lab, schema: str, write_cfg, ddl: str, after: str, queue: str):  # noqa: ANN001, ANN202
    """The shape: old rows deleted, VACUUM, new jobs into the freed pages; the config of ``queue``."""
    _setup(lab, schema, ddl)
    with lab.connect() as conn:
        conn.execute(f'VACUUM "{schema}".jobs')
    _setup(lab, schema, after)
    return write_cfg(target_section(lab) + queue)


def _the_oldest_is_read(lab: Lab, schema: str, cfg, queue: str, block: str, enqueued: str,  # noqa: ANN001
                        waiting: str, first_order: str) -> None:
    """In ``first_order`` over the waiting jobs without a runnable time a new job comes first; the
    age is the oldest waiting job's, and the drill-down's list (``block``) begins with it."""
    from tests.mapping.test_waiting_list_is_the_age import _waiting

    first = _sql(lab, schema, f"SELECT {enqueued} > now() - interval '5 min' FROM @S.jobs "  # noqa: S608
                              f"WHERE {waiting} ORDER BY {first_order} LIMIT 1")[0][0]
    assert first, "the shape: a new job comes first in the order the range was read in"
    truth = _sql(lab, schema, f"SELECT extract(epoch FROM now() - min({enqueued}))::float8 FROM @S.jobs "  # noqa: S608
                              f"WHERE {waiting}")[0][0]
    value, note = oldest_age(cfg, queue)
    print(f"\nNULL RANGE ({queue}): age {value} s for {truth} s ({note})")
    assert abs(value - truth) < 30, (value, truth, note)
    listed, rows = _waiting(cfg, queue)
    assert listed == block and abs(rows[0]["age_s"] - value) < 2, (listed, rows[:2])


# The lease kind's shape of the same: graphile-worker-like jobs whose immediate ones have a NULL
# run_at, read through the partial index on the free jobs by run_at (equal NULL keys: physical order).
LEASE_NULL_RUNNABLE = """
CREATE TABLE {s}.jobs (
    id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, run_at timestamptz,
    attempts int NOT NULL DEFAULT 0, max_attempts int NOT NULL DEFAULT 25, last_error text,
    locked_at timestamptz, locked_by text
) WITH (autovacuum_enabled = false);
CREATE INDEX jobs_free_run_at ON {s}.jobs (run_at) WHERE locked_at IS NULL;
INSERT INTO {s}.jobs (created_at) SELECT now() - interval '3 hours' FROM generate_series(1, 3000);
INSERT INTO {s}.jobs (created_at) SELECT now() - interval '2 hours' + g * interval '1 s'
FROM generate_series(1, 1500) AS g;
DELETE FROM {s}.jobs WHERE created_at < now() - interval '150 min';
"""
LEASE_NULL_RUNNABLE_AFTER = """
INSERT INTO {s}.jobs (created_at) SELECT now() - interval '1 min' FROM generate_series(1, 1500);
ANALYZE {s}.jobs;
"""


def test_a_lease_queue_reads_the_oldest_of_its_jobs_without_a_runnable_time(lab: Lab, schema: str,
                                                                             write_cfg) -> None:  # noqa: ANN001
    """Block lease_follow_runnable read the NULL range in run_at order, through the partial index on
    the free jobs: the cap it kept was the first in physical order (the new jobs in the pages the
    deleted ones freed). It reads the range in {runnable_null_order} now, as the list does."""
    from tests.mapping.test_readiness import FOLLOW, _jobs_queue

    cfg = _after_vacuum(lab, schema, write_cfg, LEASE_NULL_RUNNABLE, LEASE_NULL_RUNNABLE_AFTER,
                        _jobs_queue(schema, FOLLOW))
    _the_oldest_is_read(lab, schema, cfg, "jobs", "waiting_lease_follow_runnable", "created_at",
                        "locked_at IS NULL AND run_at IS NULL", "run_at")
