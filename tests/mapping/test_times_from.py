"""Times kept in another table (``times_from``): procrastinate keeps a job's times in
``procrastinate_events``, Hangfire's ``JobQueue`` in ``Job.CreatedAt``. The collectors read them
through a correlated subquery on the side table's key, so ``oldest_age_s`` and ``stuck_leases``
exist for such queues, equal to direct counts, and the side table is read by index."""

from __future__ import annotations

import tempfile
from pathlib import Path

import psycopg
import sqlglot
from psycopg import sql

from collectors import registry, runner
from queueops import config as config_mod
from queueops import engine
from queueops.sqlfiles import Statement
from tests.collectors.plans import nodes
from tests.conftest import Lab
from tests.mapping.conftest import target_section
from tests.mapping.shapes import PROCRASTINATE

EVENTS = """
CREATE TABLE {s}.procrastinate_events (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL REFERENCES {s}.procrastinate_jobs ON DELETE CASCADE,
    type text,
    at timestamptz DEFAULT now()
);
CREATE INDEX procrastinate_events_job_id_fkey ON {s}.procrastinate_events (job_id);
"""


def _queue(schema: str, timeout_s: int = 60) -> str:
    """procrastinate's table mapped by hand with its times from its events: the preset itself now
    judges a running job by its worker's heartbeat (heartbeat_from, procrastinate 3), which this
    older shape has no table for; times_from is what is tested here."""
    return (f'[[queues]]\nname = "jobs"\ntarget = "lab"\nkind = "status"\nschema = "{schema}"\n'
            'table = "procrastinate_jobs"\nkey = "id"\nstatus_column = "status"\nready_values = ["todo"]\n'
            'processing_values = ["doing"]\ndone_values = ["succeeded", "failed"]\n'
            'times_from = { table = "procrastinate_events", key = "job_id", column = "at" }\n'
            f"lease_timeout_s = {timeout_s}\n")


def _fill(conn: psycopg.Connection, schema: str) -> None:
    """200 jobs: todo ones deferred 10 min ago, doing ones started 5 min or 10 s ago (stuck or not)."""
    s = sql.Identifier(schema)
    conn.execute(sql.SQL("INSERT INTO {}.procrastinate_jobs (queue_name, task_name, status) "
                         "SELECT 'q', 't', (ARRAY['todo', 'doing', 'succeeded', 'doing'])[1 + g % 4]"
                         "::{}.procrastinate_job_status FROM generate_series(1, 200) AS g").format(s, s))
    conn.execute(sql.SQL("INSERT INTO {}.procrastinate_events (job_id, type, at) "
                         "SELECT id, 'deferred', now() - interval '10 minutes' + id * interval '1 second' "
                         "FROM {}.procrastinate_jobs").format(s, s))
    conn.execute(sql.SQL("INSERT INTO {}.procrastinate_events (job_id, type, at) "
                         "SELECT id, 'started', now() - CASE WHEN id % 8 = 1 THEN interval '5 minutes' "
                         "ELSE interval '10 seconds' END FROM {}.procrastinate_jobs WHERE status <> 'todo'")
                 .format(s, s))
    conn.execute(sql.SQL("ANALYZE {}.procrastinate_jobs; ANALYZE {}.procrastinate_events").format(s, s))


def test_procrastinate_times_come_from_its_events(lab: Lab, schema: str, write_cfg) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        for ddl in (PROCRASTINATE, EVENTS):
            conn.execute(ddl.format(s=sql.Identifier(schema).as_string(conn)))
        _fill(conn, schema)
        s = sql.Identifier(schema)
        oldest = conn.execute(sql.SQL(
            "SELECT extract(epoch FROM now() - min(e.at)) FROM {}.procrastinate_events e "
            "JOIN {}.procrastinate_jobs j ON j.id = e.job_id WHERE j.status = 'todo' AND e.type = 'deferred' "
            "AND j.id = (SELECT min(id) FROM {}.procrastinate_jobs WHERE status = 'todo')").format(s, s, s)).fetchone()[0]
        stuck = conn.execute(sql.SQL(
            "SELECT count(*) FROM {}.procrastinate_jobs j WHERE j.status = 'doing' AND "
            "(SELECT max(at) FROM {}.procrastinate_events e WHERE e.job_id = j.id) < now() - interval '60 s'")
            .format(s, s)).fetchone()[0]
    assert stuck > 0
    cfg = write_cfg(target_section(lab) + _queue(schema))
    result = runner.run_once(cfg, [registry.by_name("oldest_age_s"), registry.by_name("stuck_leases")])
    assert all(st.ok for st in result.status), [st.error for st in result.status]
    got = {r.metric: r.value for r in result.rows if r.queue == "jobs"}
    assert got["stuck_leases"] == stuck
    assert abs(got["oldest_age_s"] - float(oldest)) < 5


def test_the_side_table_is_read_by_its_index(lab: Lab, schema: str, write_cfg) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        for ddl in (PROCRASTINATE, EVENTS):
            conn.execute(ddl.format(s=sql.Identifier(schema).as_string(conn)))
        _fill(conn, schema)
    cfg: config_mod.Config = write_cfg(target_section(lab) + _queue(schema))
    conn = engine.connect(cfg.targets[0], "collector", cfg.base_dir)
    try:
        stmt = runner.build_statement(registry.by_name("oldest_age_s"), cfg.targets[0], cfg.queues)
        assert stmt is not None and "procrastinate_events" in stmt.sql
        conn.execute(Statement("SET enable_seqscan = off"))  # on a few hundred rows the planner's choice is noise
        plan = conn.execute(Statement("EXPLAIN (FORMAT JSON) " + stmt.sql, stmt.params))[0]["QUERY PLAN"]
    finally:
        conn.close()
    events = [n for n in nodes(plan[0]["Plan"]) if n.get("Relation Name") == "procrastinate_events"]
    assert events and all(n["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan") for n in events)


def test_hangfire_enqueue_time_is_the_latest_enqueued_state_through_jobid() -> None:
    """Issue 33, item 2: the age of a waiting Hangfire job counts from its latest 'Enqueued' state
    (State.CreatedAt, State's clustered key (JobId, Id)), not Job.CreatedAt (a scheduled job or a
    retry is enqueued hours after it was created), and the oldest free item of the queue is read
    along JobQueue's clustered key (Queue, Id)."""
    folder = Path(tempfile.mkdtemp())
    (folder / "q.toml").write_text('[[targets]]\nname = "hf"\ndialect = "mssql"\n'
                                   'url = "mssql+pyodbc://u@h/db?driver=FreeTDS"\n\n'
                                   '[[queues]]\nname = "jobs"\ntarget = "hf"\npreset = "hangfire"\n'
                                   'partition = { column = "Queue", value = "default" }\n')
    cfg = config_mod.load(folder / "q.toml")
    stmt = runner.build_statement(registry.by_name("oldest_age_s"), cfg.targets[0], cfg.queues)
    assert stmt is not None
    # A two-part outer reference (the deprecated three-part column name is never used), the oldest
    # free item by key (one side read, no sort of every free item by a subquery), and it parses.
    assert ("(SELECT MAX(qo_side.[CreatedAt]) FROM [HangFire].[State] AS qo_side WHERE qo_side.[JobId] = "
            "[JobQueue].[JobId] AND qo_side.[Name] = N'Enqueued')") in stmt.sql
    assert "[HangFire].[Job]" not in stmt.sql and "[HangFire].[JobQueue].[JobId]" not in stmt.sql
    assert "WHERE [FetchedAt] IS NULL AND [Queue] = N'default' ORDER BY [Id]" in stmt.sql
    sqlglot.parse(stmt.sql, read="tsql")
