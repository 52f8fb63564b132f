"""Mappings that follow the table (issue 31): runnable_at, max_attempts, lease_ready, ready_flag,
owner_column, error_at. Every figure is compared with a direct SQL count on tables of the shapes
the issue met (a graphile-worker-like jobs table, a lock-until task table, a visibility-flag
table), and every release is taken by a dequeue written like the library's own.

Each test first shows the finding on the mapping of before (the same table without the new
fields): those assertions are what today's code reported."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from collectors import registry, runner
from queueops import actions, engine, items
from queueops import config as config_mod
from queueops.actions.model import NotOffered
from tests.conftest import Lab
from tests.mapping.conftest import target_section

# graphile-worker's shape (simplified): run_at, attempts / max_attempts per job, last_error kept on
# retry, locked_at / locked_by; a partial index on the free jobs by run_at (what its dequeue reads).
JOBS = """
CREATE TABLE {s}.jobs (
    id bigserial PRIMARY KEY,
    task text NOT NULL DEFAULT 't',
    created_at timestamptz NOT NULL DEFAULT now(),
    run_at timestamptz DEFAULT now(),
    attempts int NOT NULL DEFAULT 0,
    max_attempts int NOT NULL DEFAULT 25,
    last_error text,
    last_error_at timestamptz,
    locked_at timestamptz,
    locked_by text
);
CREATE INDEX jobs_free_run_at ON {s}.jobs (run_at) WHERE locked_at IS NULL;
CREATE INDEX jobs_locked_at ON {s}.jobs (locked_at) WHERE locked_at IS NOT NULL;
"""


def _jobs_queue(schema: str, extra: str = "", timeout_s: float = 60) -> str:
    return (f'[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "lease"\nschema = "{schema}"\ntable = "jobs"\n'
            f'key = "id"\nenqueued_at = "created_at"\nlease_column = "locked_at"\nattempts_column = "attempts"\n'
            f"lease_timeout_s = {timeout_s}\n{extra}")


FOLLOW = 'runnable_at = "run_at"\nmax_attempts = "max_attempts"\nowner_column = "locked_by"\n'


def _setup(lab: Lab, schema: str, ddl: str) -> None:
    with lab.connect() as conn:
        conn.execute(ddl.format(s=sql.Identifier(schema).as_string(conn)))


def _sql(lab: Lab, schema: str, text: str, params: tuple = ()) -> list[tuple]:
    with lab.connect() as conn:
        cur = conn.execute(text.replace("@S", sql.Identifier(schema).as_string(conn)), params)
        return cur.fetchall() if cur.description else []


def _collect(cfg: config_mod.Config, *names: str) -> dict[str, tuple[float | None, str]]:
    result = runner.run_once(cfg, [registry.by_name(n) for n in names])
    assert all(st.ok for st in result.status), [st.error for st in result.status]
    errors = [r.note for r in result.rows if r.metric == runner.QUEUE_ERROR]
    assert not errors, errors
    return {r.metric: (r.value, r.note) for r in result.rows if r.queue == "jobs"}


def _cfg(lab: Lab, write_cfg, tmp_path: Path, queue: str) -> config_mod.Config:  # noqa: ANN001
    return write_cfg(f'[store]\nurl = "sqlite:///{tmp_path}/store.db"\n\n[identity]\ndefault_role = "operator"\n\n'
                     + target_section(lab) + queue)


READY_TRUTH = ("SELECT count(*) FROM @S.jobs WHERE locked_at IS NULL AND (run_at IS NULL OR run_at <= now()) "
               "AND attempts < max_attempts")


def test_depth_above_the_cap_is_estimated_only_where_no_kept_failed_job_is_free(lab: Lab, schema: str, write_cfg,  # noqa: ANN001
                                                                                tmp_path: Path) -> None:
    """Above the cap, depth is the rows times the free share less the scheduled counted. A table
    that keeps failed jobs free (no flag keeps them out) would put them in that share, and their
    old run times put them first in the capped runnable read: then depth stays 'at least', never
    4,000 kept failures read as waiting."""
    _setup(lab, schema, JOBS)
    _sql(lab, schema, "INSERT INTO @S.jobs (created_at, run_at) SELECT now() - interval '10 minutes', "
                      "now() - interval '5 minutes' FROM generate_series(1, 3000)")
    _sql(lab, schema, "INSERT INTO @S.jobs (run_at) SELECT now() + interval '1 hour' FROM generate_series(1, 200)")
    _sql(lab, schema, "INSERT INTO @S.jobs (locked_at, locked_by) SELECT now(), 'w' FROM generate_series(1, 800)")
    _sql(lab, schema, "ANALYZE @S.jobs")
    cfg = _cfg(lab, write_cfg, tmp_path, _jobs_queue(schema, FOLLOW))
    got = _collect(cfg, "depth")
    assert got["depth"][1] == "estimate (pg_stats: the free share less the scheduled counted)", got["depth"]
    assert abs(got["depth"][0] - 3000) < 0.1 * 3000 and got["count_scheduled"] == (200, "exact")
    # 4,000 failed jobs kept free at their limit, older than every waiting one.
    _sql(lab, schema, "INSERT INTO @S.jobs (created_at, run_at, attempts, max_attempts) "
                      "SELECT now() - interval '1 day', now() - interval '1 day', 25, 25 FROM generate_series(1, 4000)")
    _sql(lab, schema, "ANALYZE @S.jobs")
    got = _collect(cfg, "depth")
    assert got["depth"] == (0, "at least (cap of runnable items read)"), got["depth"]
    assert got["count_exhausted"][0] > 0


def test_depth_counts_neither_scheduled_nor_exhausted_jobs(lab: Lab, schema: str, write_cfg, tmp_path: Path) -> None:  # noqa: ANN001
    _setup(lab, schema, JOBS)
    # 39 ready (30 with run_at passed, 9 with run_at NULL: run now) and 3 past their max attempts.
    _sql(lab, schema, "INSERT INTO @S.jobs (created_at, run_at) SELECT now() - interval '10 minutes', "
                      "now() - interval '5 minutes' FROM generate_series(1, 30)")
    _sql(lab, schema, "INSERT INTO @S.jobs (created_at, run_at) SELECT now() - interval '2 minutes', NULL "
                      "FROM generate_series(1, 9)")
    _sql(lab, schema, "INSERT INTO @S.jobs (created_at, run_at, attempts, max_attempts) "
                      "SELECT now() - interval '1 hour', now() - interval '1 hour', 25, 25 FROM generate_series(1, 3)")
    before = _collect(_cfg(lab, write_cfg, tmp_path, _jobs_queue(schema)), "depth")
    assert before["depth"][0] == 42  # the finding: 42 against 39 ready
    cfg = _cfg(lab, write_cfg, tmp_path, _jobs_queue(schema, FOLLOW))
    got = _collect(cfg, "depth", "oldest_age_s")
    truth = _sql(lab, schema, READY_TRUTH)[0][0]
    assert truth == 39
    assert got["depth"] == (39, "exact")
    assert got["count_exhausted"][0] == 3 and got["count_scheduled"][0] == 0
    # The age counts from when a job became runnable (run_at 5 minutes ago, not created 10 ago);
    # the exhausted jobs (an hour old) do not make it.
    age = _sql(lab, schema, "SELECT extract(epoch FROM now() - min(greatest(created_at, coalesce(run_at, created_at)))) "
                            "FROM @S.jobs WHERE locked_at IS NULL AND (run_at IS NULL OR run_at <= now()) "
                            "AND attempts < max_attempts")[0][0]
    assert abs(got["oldest_age_s"][0] - float(age)) < 5 and 290 < got["oldest_age_s"][0] < 320

    # After the drain: 5 exhausted jobs are not 5 ready, and their age does not grow for ever.
    _sql(lab, schema, "DELETE FROM @S.jobs WHERE attempts < max_attempts")
    _sql(lab, schema, "INSERT INTO @S.jobs (run_at, attempts, max_attempts) SELECT now() - interval '1 hour', 3, 3 "
                      "FROM generate_series(1, 2)")
    before = _collect(_cfg(lab, write_cfg, tmp_path, _jobs_queue(schema)), "depth", "oldest_age_s")
    assert before["depth"][0] == 5 and before["oldest_age_s"][0] > 3000  # before: an age that only grows
    got = _collect(cfg, "depth", "oldest_age_s")
    assert got["depth"] == (0, "exact") and got["count_exhausted"][0] == 5 and got["oldest_age_s"][0] == 0

    # 30,000 jobs scheduled an hour ahead: depth 0, not 30,005; their count stops at the cap.
    _sql(lab, schema, "INSERT INTO @S.jobs (run_at) SELECT now() + interval '1 hour' FROM generate_series(1, 30000)")
    _sql(lab, schema, "ANALYZE @S.jobs")
    assert _collect(_cfg(lab, write_cfg, tmp_path, _jobs_queue(schema)), "depth")["depth"][0] >= 30_000  # before
    got = _collect(cfg, "depth", "oldest_age_s")
    assert _sql(lab, schema, READY_TRUTH)[0][0] == 0
    assert got["depth"] == (0, "exact")
    assert got["count_scheduled"] == (runner.COUNT_CAP, "at least (cap reached)")
    assert got["count_exhausted"][0] == 5 and got["oldest_age_s"][0] == 0

    # More than the cap ready beside them: a lower bound that says so, never the scheduled ones.
    _sql(lab, schema, "INSERT INTO @S.jobs (run_at) SELECT now() - interval '1 minute' "
                      "FROM generate_series(1, %s)", (runner.COUNT_CAP + 200,))
    got = _collect(cfg, "depth")
    # (the 5 exhausted jobs are among the first cap read by run_at: 995, at least)
    assert got["depth"][0] >= runner.COUNT_CAP - 5 and got["depth"][1].startswith("at least")


def test_the_runnable_reads_seek_the_run_at_index(lab: Lab, schema: str, write_cfg, tmp_path: Path) -> None:  # noqa: ANN001
    _setup(lab, schema, JOBS)
    _sql(lab, schema, "INSERT INTO @S.jobs (run_at) SELECT now() + interval '1 hour' FROM generate_series(1, 30000)")
    _sql(lab, schema, "ANALYZE @S.jobs")
    cfg = _cfg(lab, write_cfg, tmp_path, _jobs_queue(schema, FOLLOW))
    for name in ("depth", "oldest_age_s"):
        stmt = runner.build_statement(registry.by_name(name), cfg.targets[0], cfg.queues)
        assert stmt is not None
        with lab.connect() as conn:
            plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + stmt.sql, stmt.params).fetchone()[0]
        from tests.collectors.plans import nodes

        reads = [n for n in nodes(plan[0]["Plan"]) if n.get("Relation Name") == "jobs"]
        assert not [n for n in reads if n["Node Type"] == "Seq Scan"], name
        # The ready ranges read nothing of the 30,000 scheduled jobs.
        by_index = [n for n in reads if n.get("Index Name") == "jobs_free_run_at"]
        assert by_index, name
        assert sum(n.get("Actual Rows", 0) * n.get("Actual Loops", 1) for n in by_index
                   if "> now()" not in n.get("Index Cond", "")) == 0, name


def test_a_retried_job_keeping_its_last_error_is_stuck_and_requeued(lab: Lab, schema: str, write_cfg,  # noqa: ANN001
                                                                    tmp_path: Path) -> None:
    _setup(lab, schema, JOBS)
    # Failed a minute ago, retried, locked again 17 s ago (timeout 5 s): its last error kept.
    _sql(lab, schema, "INSERT INTO @S.jobs (attempts, last_error, last_error_at, locked_at, locked_by) "
                      "VALUES (1, 'boom', now() - interval '60 s', now() - interval '17 s', 'worker-1')")
    # Failed while leased (its error newer than its lease): failed, not stuck.
    _sql(lab, schema, "INSERT INTO @S.jobs (attempts, last_error, last_error_at, locked_at, locked_by) "
                      "VALUES (1, 'bad', now() - interval '10 s', now() - interval '30 s', 'worker-2')")
    base = _jobs_queue(schema, 'error_column = "last_error"\n', timeout_s=5)
    before = _cfg(lab, write_cfg, tmp_path, base)
    assert _collect(before, "stuck_leases")["stuck_leases"][0] == 0  # the finding: hidden as failed
    assert "nothing to requeue" in " ".join(actions.plan(before, "requeue", "jobs").preview.warnings)
    cfg = _cfg(lab, write_cfg, tmp_path, _jobs_queue(schema, FOLLOW + 'error_column = "last_error"\n'
                                                     'error_at = "last_error_at"\n', timeout_s=5))
    assert _collect(cfg, "stuck_leases")["stuck_leases"] == (1, "exact")
    assert _collect(cfg, "depth")["count_failed"][1] != ""  # still reported beside the readiness counts
    plan = actions.plan(cfg, "requeue", "jobs")
    assert plan.preview.row_count == 1
    result = actions.execute(cfg, plan)
    assert (result.outcome, result.rows_affected) == ("ok", 1), result.error
    rows = _sql(lab, schema, "SELECT last_error, locked_at IS NULL, locked_by FROM @S.jobs ORDER BY id")
    assert rows == [("boom", True, None), ("bad", False, "worker-2")]  # locked_by cleared, not left stale


def _graphile_dequeue(conn: psycopg.Connection, schema: str) -> int | None:
    """graphile-worker's get_job, reduced to the job table: free, runnable, below its max attempts."""
    s = sql.Identifier(schema)
    row = conn.execute(sql.SQL(
        "UPDATE {}.jobs SET locked_at = now(), locked_by = 'w', attempts = attempts + 1 WHERE id = ("
        "SELECT id FROM {}.jobs WHERE locked_at IS NULL AND run_at <= now() AND attempts < max_attempts "
        "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id").format(s, s)).fetchone()
    return row[0] if row else None


def test_requeue_never_releases_an_exhausted_job(lab: Lab, schema: str, write_cfg, tmp_path: Path) -> None:  # noqa: ANN001
    _setup(lab, schema, JOBS)
    _sql(lab, schema, "INSERT INTO @S.jobs (run_at, attempts, max_attempts, locked_at, locked_by) "
                      "SELECT now() - interval '1 hour', mod(g, 3) + 1, 3, now() - interval '10 minutes', 'gone' "
                      "FROM generate_series(1, 9) AS g")  # attempts 1, 2, 3 (of 3): three exhausted
    cfg = _cfg(lab, write_cfg, tmp_path, _jobs_queue(schema, FOLLOW))
    assert _collect(cfg, "stuck_leases")["stuck_leases"][0] == 6
    plan = actions.plan(cfg, "requeue", "jobs", {"bump_attempts": True})
    assert plan.preview.row_count == 3  # attempts 1 only: a bump would exhaust attempts 2
    plan = actions.plan(cfg, "requeue", "jobs")
    assert plan.preview.row_count == 6 and "locked_by" in plan.preview.summary
    assert actions.execute(cfg, plan).rows_affected == 6
    taken = []
    with lab.connect() as conn:
        while (job := _graphile_dequeue(conn, schema)) is not None:
            taken.append(job)
    assert len(taken) == 6 and set(Counter(taken).values()) == {1}
    assert _sql(lab, schema, "SELECT count(*) FROM @S.jobs WHERE locked_by = 'gone'")[0][0] == 3


# A task table whose library dequeues lock < now(): the lock is a lock-until time.
TASKS = """
CREATE TABLE {s}.tasks (
    id bigserial PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    "lock" timestamptz,
    locked_by text
);
CREATE INDEX tasks_lock ON {s}.tasks ("lock");
"""


def _tasks_queue(schema: str, extra: str = "") -> str:
    return (f'[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "lease"\nschema = "{schema}"\ntable = "tasks"\n'
            f'key = "id"\nenqueued_at = "created_at"\nlease_column = "lock"\nlease_timeout_s = 60\n{extra}')


def _lock_until_dequeue(conn: psycopg.Connection, schema: str) -> int | None:
    s = sql.Identifier(schema)
    row = conn.execute(sql.SQL(
        "UPDATE {}.tasks SET \"lock\" = now() + interval '5 minutes', locked_by = 'w' WHERE id = ("
        "SELECT id FROM {}.tasks WHERE \"lock\" < now() ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) "
        "RETURNING id").format(s, s)).fetchone()
    return row[0] if row else None


def test_a_lock_until_lease_is_ready_once_passed_and_requeue_sets_it_to_now(lab: Lab, schema: str, write_cfg,  # noqa: ANN001
                                                                             tmp_path: Path) -> None:
    _setup(lab, schema, TASKS)
    # 24 waiting tasks (their lock passed).
    _sql(lab, schema, "INSERT INTO @S.tasks (\"lock\") SELECT now() - interval '10 minutes' FROM generate_series(1, 24)")
    before = _cfg(lab, write_cfg, tmp_path, _tasks_queue(schema))
    old = actions.plan(before, "requeue", "jobs")
    # The finding, which the mapping of before still makes while no lock lies ahead to show what
    # the column means: 24 waiting tasks to be set NULL (never run again).
    assert old.preview.row_count == 24 and '"lock" = NULL' in old.preview.sql
    # 4 held by a lock a day ahead (a dead worker's), 2 running: now the column shows what it is.
    _sql(lab, schema, "INSERT INTO @S.tasks (\"lock\", locked_by) SELECT now() + interval '1 day', 'dead' "
                      "FROM generate_series(1, 4)")
    _sql(lab, schema, "INSERT INTO @S.tasks (\"lock\", locked_by) SELECT now() + interval '30 s', 'live' "
                      "FROM generate_series(1, 2)")
    with pytest.raises(NotOffered, match=r"'lock' holds a time \d+ s ahead .*lock-until.*lease_ready = \"past\""):
        actions.plan(before, "requeue", "jobs")
    cfg = _cfg(lab, write_cfg, tmp_path, _tasks_queue(schema, 'lease_ready = "past"\nowner_column = "locked_by"\n'))
    got = _collect(cfg, "depth", "stuck_leases")
    assert got["depth"] == (24, "exact") and got["stuck_leases"][0] == 4
    # The drill-down's stuck list (it had none for lock-until leases): the same 4, by the same rule.
    dead = sorted(r[0] for r in _sql(lab, schema, "SELECT id FROM @S.tasks WHERE locked_by = 'dead'"))
    with engine.connection(cfg.targets[0], "collect", cfg.base_dir) as conn:
        assert sorted(r["item"] for r in items.read(conn, cfg.queue("jobs"), "stuck")) == dead
    plan = actions.plan(cfg, "requeue", "jobs")
    assert plan.preview.row_count == 4 and '"lock" = now()' in plan.preview.sql
    assert actions.execute(cfg, plan).rows_affected == 4
    assert _sql(lab, schema, "SELECT count(*) FROM @S.tasks WHERE locked_by = 'dead'")[0][0] == 0
    taken = []
    with lab.connect() as conn:
        while (task := _lock_until_dequeue(conn, schema)) is not None:
            taken.append(task)
    assert len(taken) == 28 and set(Counter(taken).values()) == {1}  # 24 waiting + 4 released, each once


VISIBLE = """
CREATE TABLE {s}.messages (
    id bigserial PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    visible boolean NOT NULL DEFAULT true,
    leased_at timestamptz
);
CREATE INDEX messages_visible ON {s}.messages (id) WHERE visible;
CREATE INDEX messages_leased ON {s}.messages (leased_at) WHERE leased_at IS NOT NULL;
"""


def _messages_queue(schema: str, extra: str = "") -> str:
    return (f'[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "lease"\nschema = "{schema}"\ntable = "messages"\n'
            f'key = "id"\nenqueued_at = "created_at"\nlease_column = "leased_at"\nlease_timeout_s = 60\n{extra}')


def _visible_dequeue(conn: psycopg.Connection, schema: str) -> int | None:
    s = sql.Identifier(schema)
    row = conn.execute(sql.SQL(
        "UPDATE {}.messages SET visible = false, leased_at = now() WHERE id = ("
        "SELECT id FROM {}.messages WHERE visible ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id")
        .format(s, s)).fetchone()
    return row[0] if row else None


def test_a_visibility_flag_is_counted_and_set_by_requeue(lab: Lab, schema: str, write_cfg, tmp_path: Path) -> None:  # noqa: ANN001
    _setup(lab, schema, VISIBLE)
    _sql(lab, schema, "INSERT INTO @S.messages (visible, leased_at) SELECT false, now() - interval '10 minutes' "
                      "FROM generate_series(1, 12)")
    before = _cfg(lab, write_cfg, tmp_path, _messages_queue(schema))
    assert actions.execute(before, actions.plan(before, "requeue", "jobs")).rows_affected == 12
    with lab.connect() as conn:
        assert _visible_dequeue(conn, schema) is None  # the finding: "ok: 12 rows", nothing redelivered
    assert _collect(before, "depth")["depth"][0] == 12  # ... and depth 12 for ever
    _sql(lab, schema, "UPDATE @S.messages SET leased_at = now() - interval '10 minutes'")
    cfg = _cfg(lab, write_cfg, tmp_path, _messages_queue(schema, 'ready_flag = "visible"\n'))
    got = _collect(cfg, "depth", "stuck_leases")
    assert got["depth"][0] == 0 and got["stuck_leases"][0] == 12
    plan = actions.plan(cfg, "requeue", "jobs")
    assert plan.preview.row_count == 12 and '"visible" = true' in plan.preview.sql
    assert actions.execute(cfg, plan).rows_affected == 12
    assert _collect(cfg, "depth")["depth"][0] == 12
    taken = []
    with lab.connect() as conn:
        while (m := _visible_dequeue(conn, schema)) is not None:
            taken.append(m)
    assert len(taken) == 12 and set(Counter(taken).values()) == {1}
    assert _collect(cfg, "depth")["depth"][0] == 0


# graphile-worker (0.13+) serialises named queues through a side table: a job of a named queue is
# taken only while its queue row is unlocked, and get_job locks both.
SIDE = """
CREATE TABLE {s}.job_queues (
    id serial PRIMARY KEY,
    queue_name text NOT NULL UNIQUE,
    locked_at timestamptz,
    locked_by text
);
CREATE TABLE {s}.jobs (
    id bigserial PRIMARY KEY,
    job_queue_id int REFERENCES {s}.job_queues (id),
    created_at timestamptz NOT NULL DEFAULT now(),
    locked_at timestamptz,
    locked_by text
);
"""


def test_requeue_is_refused_when_a_side_table_lock_decides_readiness(lab: Lab, schema: str, write_cfg,  # noqa: ANN001
                                                                     tmp_path: Path) -> None:
    _setup(lab, schema, SIDE)
    _sql(lab, schema, "INSERT INTO @S.job_queues (queue_name, locked_at, locked_by) VALUES ('q', now() - interval '1 hour', 'dead')")
    _sql(lab, schema, "INSERT INTO @S.jobs (job_queue_id, locked_at, locked_by) VALUES (1, now() - interval '1 hour', 'dead')")
    cfg = _cfg(lab, write_cfg, tmp_path, f'[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "lease"\n'
               f'schema = "{schema}"\ntable = "jobs"\nkey = "id"\nlease_column = "locked_at"\n'
               'owner_column = "locked_by"\n')
    with pytest.raises(NotOffered, match=r"job_queues\.locked_at .*job_queue_id"):
        actions.plan(cfg, "requeue", "jobs")


NOT_NULL = """
CREATE TABLE {s}.jobs (
    id bigserial PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    locked_until timestamptz NOT NULL DEFAULT '-infinity'
);
COMMENT ON COLUMN {s}.jobs.locked_until IS 'the job is invisible until this time';
"""


def test_requeue_is_refused_where_it_would_write_null_into_a_not_null_lock(lab: Lab, schema: str, write_cfg,  # noqa: ANN001
                                                                          tmp_path: Path) -> None:
    _setup(lab, schema, NOT_NULL)
    queue = (f'[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "lease"\nschema = "{schema}"\ntable = "jobs"\n'
             'key = "id"\nlease_column = "locked_until"\n')
    cfg = _cfg(lab, write_cfg, tmp_path, queue)
    with pytest.raises(NotOffered, match="NOT NULL"):
        actions.plan(cfg, "requeue", "jobs")
    # Described as a lock-until time, requeue is offered and writes now().
    cfg = _cfg(lab, write_cfg, tmp_path, queue + 'lease_ready = "past"\n')
    assert '"locked_until" = now()' in actions.plan(cfg, "requeue", "jobs").preview.sql


def test_readiness_fields_are_refused_where_they_would_be_ignored(write_cfg) -> None:  # noqa: ANN001
    pg = '[[targets]]\nname = "lab"\ndialect = "postgresql"\nurl = "postgresql://u@h/db"\n'
    with pytest.raises(config_mod.ConfigError, match="honoured on lease and status queues only"):
        write_cfg(pg + '[[queues]]\nname = "d"\ntarget = "lab"\nkind = "delete"\ntable = "t"\nkey = "id"\n'
                  'runnable_at = "run_at"\n')
    with pytest.raises(config_mod.ConfigError, match="ready_flag: honoured on lease queues only"):
        write_cfg(pg + '[[queues]]\nname = "s"\ntarget = "lab"\nkind = "status"\ntable = "t"\nkey = "id"\n'
                  'status_column = "s"\nready_flag = "visible"\n')
    with pytest.raises(config_mod.ConfigError, match="max_attempts needs attempts_column"):
        write_cfg(pg + '[[queues]]\nname = "l"\ntarget = "lab"\nkind = "lease"\ntable = "t"\nkey = "id"\n'
                  'lease_column = "l"\nmax_attempts = 5\n')
    ok = write_cfg(pg + '[[queues]]\nname = "l"\ntarget = "lab"\nkind = "lease"\ntable = "t"\nkey = "id"\n'
                   'lease_column = "l"\nattempts_column = "a"\nmax_attempts = 5\n')
    assert ok.queues[0].max_attempts == 5


def test_live_check_says_per_queue_whether_requeue_can_be_offered(lab: Lab, schema: str, tmp_path: Path) -> None:
    from tests.mapping.test_live_check import live, read_only_target

    _setup(lab, schema, SIDE)
    _setup(lab, schema, NOT_NULL.replace(".jobs", ".timed"))
    _setup(lab, schema, VISIBLE)
    _setup(lab, schema, JOBS.replace(".jobs", ".gjobs"))

    def q(name: str, table: str, lease: str, extra: str = "") -> str:
        return (f'[[queues]]\nname = "{name}"\ntarget = "lab"\nkind = "lease"\nschema = "{schema}"\n'
                f'table = "{table}"\nkey = "id"\nenqueued_at = "created_at"\nlease_column = "{lease}"\n{extra}')

    path = tmp_path / "check.toml"
    path.write_text(read_only_target(lab) + q("named", "jobs", "locked_at") + q("timed", "timed", "locked_until")
                    + q("timed_past", "timed", "locked_until", 'lease_ready = "past"\n')
                    + q("flagged", "messages", "leased_at", 'ready_flag = "visible"\n')
                    + q("retrying", "gjobs", "locked_at", 'error_column = "last_error"\nattempts_column = "attempts"\n'
                        'max_attempts = "max_attempts"\nrunnable_at = "run_at"\n'))
    proc = live(path)
    out = proc.stdout
    assert "queue 'named': requeue not offered: readiness also depends on" in out and "job_queues.locked_at" in out
    assert "queue 'timed': requeue not offered: the lease column 'locked_until' is NOT NULL" in out
    assert re.search(r"warning: queue 'timed': lease_column = 'locked_until': its comment says .*lock-until", out)
    assert "queue 'timed_past': requeue can be offered (it sets \"locked_until\" = now())" in out
    assert "queue 'flagged': requeue can be offered (it sets \"leased_at\" = NULL, \"visible\" = true)" in out
    assert "warning: queue 'retrying': error_at = '': error_column 'last_error' without error_at" in out
    assert "error:" not in out, out


MSSQL = """
[[targets]]
name = "sql"
dialect = "mssql"
url = "mssql+pyodbc://queueops@db.example:1433/jobs?driver=FreeTDS"

[[queues]]
name = "graphile"
target = "sql"
kind = "lease"
table = "jobs"
key = "id"
enqueued_at = "created_at"
lease_column = "locked_at"
attempts_column = "attempts"
max_attempts = "max_attempts"
runnable_at = "run_at"
owner_column = "locked_by"
error_column = "last_error"
error_at = "last_error_at"

[[queues]]
name = "tasks"
target = "sql"
kind = "lease"
table = "tasks"
key = "id"
enqueued_at = "created_at"
lease_column = "lock"
lease_ready = "past"
owner_column = "locked_by"
attempts_column = "attempts"
max_attempts = 5

[[queues]]
name = "messages"
target = "sql"
kind = "lease"
table = "messages"
key = "id"
enqueued_at = "created_at"
lease_column = "leased_at"
ready_flag = "visible"

[[queues]]
name = "river"
target = "sql"
kind = "status"
table = "river_job"
key = "id"
enqueued_at = "created_at"
status_column = "state"
status_changed_at = "attempted_at"
ready_values = ["available"]
processing_values = ["running"]
done_values = ["completed"]
attempts_column = "attempt"
max_attempts = "max_attempts"
runnable_at = "scheduled_at"
owner_column = "attempted_by"
"""


def test_the_readiness_statements_render_as_t_sql_that_parses(tmp_path: Path) -> None:
    """SQL Server cannot run here: every statement the readiness fields make is rendered exactly as
    queueops renders it and parsed with sqlglot's tsql dialect, every placeholder bound."""
    import sqlglot
    from sqlglot import exp

    from queueops import mapping, sqlfiles
    from queueops.actions import requeue
    from queueops.fragments import fragments_for

    (tmp_path / "ms.toml").write_text(MSSQL)
    cfg = config_mod.load(tmp_path / "ms.toml")

    def parse(stmt: sqlfiles.Statement) -> str:
        trees = sqlglot.parse(stmt.sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
        assert trees and all(t is not None for t in trees), stmt.sql
        assert sum(len(list(t.find_all(exp.Placeholder))) for t in trees) == len(stmt.params), stmt.sql
        return stmt.sql

    texts = {}
    for name in ("depth", "oldest_age_s", "stuck_leases"):
        for q in cfg.queues:
            stmt = runner.build_statement(registry.by_name(name), cfg.targets[0], [q])
            assert stmt is not None, (name, q.name)
            texts[(name, q.name)] = parse(stmt)
    assert "[run_at] <= SYSUTCDATETIME()" in texts[("depth", "graphile")]
    assert "count_scheduled" in texts[("depth", "graphile")]
    assert "[attempts] >= [max_attempts]" in texts[("depth", "graphile")]
    assert "[visible] = 1" in texts[("depth", "messages")]
    assert "([lock] IS NULL OR [lock] <= SYSUTCDATETIME())" in texts[("depth", "tasks")]
    assert "[last_error_at] IS NULL OR [locked_at] <= [last_error_at]" in texts[("stuck_leases", "graphile")]
    assert "[lock] > DATEADD(SECOND, 300, SYSUTCDATETIME())" in texts[("stuck_leases", "tasks")]  # compiled stuck rule
    sqlf = sqlfiles.load("mssql", "actions/requeue")
    for q in cfg.queues:
        for bump in (False, True):
            if bump and not q.attempts_column:
                continue
            follow, frags = requeue._follow(q, fragments_for(q, "mssql"), bump)
            values = {**requeue._values(mapping.compile_queue(q, "mssql"), "2026-01-01"), "limit_n": 10, "sample_n": 10, "batch_n": 10}
            for block in (f"count_{q.kind}{follow}", f"sample_{q.kind}{follow}", f"batch_{q.kind}{follow}"):
                texts[(block, q.name, bump)] = parse(sqlf.render(block, frags, values))
    assert "UPDATE picked SET [locked_at] = NULL, [locked_by] = NULL OUTPUT" in " ".join(
        texts[("batch_lease_follow", "graphile", False)].split())
    assert "SET [lock] = SYSUTCDATETIME(), [locked_by] = NULL, [attempts] = [attempts] + 1" in \
        texts[("batch_lease_follow_past", "tasks", True)]
    assert "[attempts] + 1 >= 5" in texts[("batch_lease_follow_past", "tasks", True)]
    assert "SET [leased_at] = NULL, [visible] = 1" in texts[("batch_lease_follow", "messages", False)]
    river = texts[("batch_status_follow", "river", True)]
    assert "[attempted_by] = NULL, [attempt] = [attempt] + 1" in river and "[attempt] + 1 >= [max_attempts]" in river
    assert "[state] IN (" in texts[("depth", "river")] and "[scheduled_at] > SYSUTCDATETIME()" in texts[("depth", "river")]
    for block in ("columns", "side_locks"):
        parse(sqlfiles.load("mssql", "catalog_readiness").render(block, {}, {"qualified_table": "[dbo].[jobs]"}))


def test_index_advice_for_runnable_at_names_the_run_at_index(tmp_path: Path) -> None:
    from queueops import indexadvice

    (tmp_path / "ms.toml").write_text(MSSQL)
    q = config_mod.load(tmp_path / "ms.toml").queues[0]
    need = indexadvice.needed("depth", q)
    assert need is not None and need.columns == ("run_at",) and need.where == "locked_at IS NULL"
    assert "([run_at]) WHERE [locked_at] IS NULL" in indexadvice.create_index(q, need, "mssql")
    assert indexadvice.served(need, [indexadvice.Index("IX_run", ("run_at",), "([locked_at] IS NULL)")])


# A status queue that schedules and retries (procrastinate's scheduled_at, River's max_attempts):
# the status says 'todo', the schedule and the attempts say whether it is ready.
STATUS_JOBS = """
CREATE TABLE {s}.sjobs (
    id bigserial PRIMARY KEY,
    status text NOT NULL DEFAULT 'todo',
    created_at timestamptz NOT NULL DEFAULT now(),
    changed_at timestamptz NOT NULL DEFAULT now(),
    scheduled_at timestamptz,
    attempts int NOT NULL DEFAULT 0,
    worker_id text
);
CREATE INDEX sjobs_status_scheduled ON {s}.sjobs (status, scheduled_at);
CREATE INDEX sjobs_status_id ON {s}.sjobs (status, id);
"""


def _status_queue(schema: str, extra: str = "") -> str:
    return (f'[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "status"\nschema = "{schema}"\ntable = "sjobs"\n'
            'key = "id"\nenqueued_at = "created_at"\nstatus_column = "status"\nstatus_changed_at = "changed_at"\n'
            'ready_values = ["todo"]\nprocessing_values = ["doing"]\ndone_values = ["done"]\n'
            f'attempts_column = "attempts"\nlease_timeout_s = 60\n{extra}')


STATUS_FOLLOW = 'runnable_at = "scheduled_at"\nmax_attempts = 3\nowner_column = "worker_id"\n'


def test_a_status_queue_follows_its_schedule_and_attempts(lab: Lab, schema: str, write_cfg, tmp_path: Path) -> None:  # noqa: ANN001
    _setup(lab, schema, STATUS_JOBS)
    _sql(lab, schema, "INSERT INTO @S.sjobs (created_at, scheduled_at) SELECT now() - interval '10 minutes', "
                      "now() - interval '5 minutes' FROM generate_series(1, 20)")
    _sql(lab, schema, "INSERT INTO @S.sjobs (created_at, scheduled_at) SELECT now() - interval '2 minutes', NULL "
                      "FROM generate_series(1, 7)")
    _sql(lab, schema, "INSERT INTO @S.sjobs (attempts) SELECT 3 FROM generate_series(1, 4)")  # exhausted
    _sql(lab, schema, "INSERT INTO @S.sjobs (scheduled_at) SELECT now() + interval '1 hour' "
                      "FROM generate_series(1, 30000)")
    # Stuck: 5 processing for 10 minutes (2 of them on their last attempt), 1 fresh.
    _sql(lab, schema, "INSERT INTO @S.sjobs (status, changed_at, attempts, worker_id) "
                      "SELECT 'doing', now() - interval '10 minutes', CASE WHEN g <= 2 THEN 3 ELSE 1 END, 'gone' "
                      "FROM generate_series(1, 5) AS g")
    _sql(lab, schema, "INSERT INTO @S.sjobs (status, attempts, worker_id) VALUES ('doing', 1, 'live')")
    _sql(lab, schema, "ANALYZE @S.sjobs")
    before = _collect(_cfg(lab, write_cfg, tmp_path, _status_queue(schema)), "depth")
    assert before["depth"][0] >= 30_000  # before: every 'todo' row, scheduled or exhausted
    cfg = _cfg(lab, write_cfg, tmp_path, _status_queue(schema, STATUS_FOLLOW))
    got = _collect(cfg, "depth", "oldest_age_s", "stuck_leases")
    truth = _sql(lab, schema, "SELECT count(*) FROM @S.sjobs WHERE status = 'todo' "
                              "AND (scheduled_at IS NULL OR scheduled_at <= now()) AND attempts < 3")[0][0]
    assert truth == 27 and got["depth"] == (27, "exact")
    assert got["count_exhausted"][0] == 4
    # Past the cap, the scheduled jobs are the share of scheduled_at ahead of the clock in pg_stats
    # (issue 29): an estimate of the 30,000 (it was 'at least' the cap).
    assert got["count_scheduled"][1].startswith("estimate") and abs(got["count_scheduled"][0] - 30_000) <= 3_000
    assert 290 < got["oldest_age_s"][0] < 320
    assert got["stuck_leases"][0] == 3
    plan = actions.plan(cfg, "requeue", "jobs", {"bump_attempts": True})
    assert plan.preview.row_count == 3 and '"worker_id" = NULL' in plan.preview.sql
    assert actions.execute(cfg, plan).rows_affected == 3
    assert _sql(lab, schema, "SELECT count(*) FROM @S.sjobs WHERE worker_id = 'gone'")[0][0] == 2  # the exhausted
    taken = []
    with lab.connect() as conn:
        s = sql.Identifier(schema)
        while (row := conn.execute(sql.SQL(
                "UPDATE {}.sjobs SET status = 'doing', worker_id = 'w' WHERE id = (SELECT id FROM {}.sjobs "
                "WHERE status = 'todo' AND (scheduled_at IS NULL OR scheduled_at <= now()) AND attempts < 3 "
                "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, attempts").format(s, s)).fetchone()):
            taken.append(row)
    assert len(taken) == 30 and len({t[0] for t in taken}) == 30  # 27 ready and the 3 released, once each
    assert sorted(a for _, a in taken if a == 2) == [2, 2, 2]  # the released ones with their bumped attempt
