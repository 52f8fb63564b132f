"""The mapping fields of issue 33 on PostgreSQL, against counts computed by SQL on the same rows:
``partition`` (a queue is the rows of a shared table where column = value: MassTransit's QueueId,
Hangfire's Queue), ``expires_column`` (Rebus expiration, NServiceBus Expires: an expired item is not
waiting), ``max_attempts`` on a due queue (MassTransit's DeliveryCount < MaxDeliveryCount) and
``times_from.only`` / ``latest`` (Hangfire's latest 'Enqueued' state). The same fields render on SQL
Server (tests/mapping/test_mssql_preset_shapes.py); here they run."""

from __future__ import annotations

import pytest
from psycopg import sql

from collectors import registry, runner
from queueops import config as config_mod
from queueops.fragments import fragments_for
from tests.conftest import Lab
from tests.mapping.conftest import target_section

DELIVERY = """
CREATE TABLE {s}.message_delivery (
    message_delivery_id bigint PRIMARY KEY,
    queue_id bigint NOT NULL,
    priority smallint NOT NULL DEFAULT 100,
    enqueue_time timestamptz NOT NULL,
    expiration_time timestamptz,
    delivery_count int NOT NULL DEFAULT 0,
    max_delivery_count int NOT NULL DEFAULT 3
);
CREATE INDEX ON {s}.message_delivery (queue_id, enqueue_time);
"""


def _queues(schema: str) -> str:
    out = ""
    for name, qid in (("orders", 1), ("orders_error", 2)):
        out += (f'\n[[queues]]\nname = "{name}"\ntarget = "lab"\nkind = "due"\nschema = "{schema}"\n'
                f'table = "message_delivery"\nkey = "message_delivery_id"\ndue_column = "enqueue_time"\n'
                f'attempts_column = "delivery_count"\nmax_attempts = "max_delivery_count"\n'
                f'expires_column = "expiration_time"\npartition = {{ column = "queue_id", value = {qid} }}\n')
    return out


def _fill(conn, schema: str) -> None:  # noqa: ANN001
    s = sql.Identifier(schema)
    # queue 1: 40 due, 7 of them at their max delivery count, 5 expired, 9 locked / scheduled ahead;
    # queue 2 (the error queue): 300 faulted deliveries, due long ago.
    conn.execute(sql.SQL(
        "INSERT INTO {}.message_delivery (message_delivery_id, queue_id, enqueue_time, expiration_time, delivery_count) "
        "SELECT g, 1, now() - make_interval(secs => g * 10), "
        "CASE WHEN g > 40 THEN now() - interval '1 minute' END, CASE WHEN g <= 7 THEN 3 ELSE 1 END "
        "FROM generate_series(1, 45) g").format(s))
    conn.execute(sql.SQL(
        "INSERT INTO {}.message_delivery (message_delivery_id, queue_id, enqueue_time, delivery_count) "
        "SELECT 100 + g, 1, now() + interval '5 minutes', 1 FROM generate_series(1, 9) g").format(s))
    conn.execute(sql.SQL(
        "INSERT INTO {}.message_delivery (message_delivery_id, queue_id, enqueue_time) "
        "SELECT 1000 + g, 2, now() - interval '3 days' FROM generate_series(1, 300) g").format(s))


def test_partition_expiry_and_max_attempts_on_a_due_queue(lab: Lab, schema: str, write_cfg) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        conn.execute(DELIVERY.format(s=sql.Identifier(schema).as_string(conn)))
        _fill(conn, schema)
        s = sql.Identifier(schema)
        live = sql.SQL("queue_id = 1 AND (expiration_time IS NULL OR expiration_time > now())")
        ready, exhausted, oldest = conn.execute(sql.SQL(
            "SELECT count(*) FILTER (WHERE delivery_count < max_delivery_count), "
            "count(*) FILTER (WHERE delivery_count >= max_delivery_count), "
            "extract(epoch FROM now() - min(enqueue_time) FILTER (WHERE delivery_count < max_delivery_count)) "
            "FROM {}.message_delivery WHERE enqueue_time <= now() AND {}").format(s, live)).fetchone()
        not_due = conn.execute(sql.SQL("SELECT count(*) FROM {}.message_delivery WHERE enqueue_time > now() AND {}")
                               .format(s, live)).fetchone()[0]
    assert (ready, exhausted, not_due) == (33, 7, 9)
    cfg = write_cfg(target_section(lab) + _queues(schema))
    result = runner.run_once(cfg, [registry.by_name("depth"), registry.by_name("oldest_age_s")])
    assert all(st.ok for st in result.status), [st.error for st in result.status]
    got = {(r.queue, r.metric): r.value for r in result.rows}
    assert got[("orders", "depth")] == ready  # before: every queue's 300 faulted deliveries counted too
    assert got[("orders", "count_exhausted")] == exhausted
    assert got[("orders", "count_not_due")] == not_due
    assert got[("orders", "rows_total")] == ready + exhausted + not_due  # the 5 expired are not the queue's
    assert got[("orders", "oldest_age_s")] == pytest.approx(float(oldest), abs=5)  # the exhausted 7 are older
    assert got[("orders_error", "depth")] == 300  # the error queue is a queue of its own


def test_partition_and_expiry_render_on_both_dialects_and_are_refused_where_they_cannot_hold() -> None:
    def cfg(extra: str, kind: str = 'kind = "delete"') -> config_mod.Config:
        return config_mod.parse(__import__("tomllib").loads(
            '[[targets]]\nname = "t"\ndialect = "postgresql"\nurl = "postgresql://u@h/db"\n'
            f'[[queues]]\nname = "q"\ntarget = "t"\n{kind}\ntable = "jobs"\nkey = "id"\n{extra}'))

    q = cfg('partition = { column = "queue", value = "default" }\nexpires_column = "expires"').queues[0]
    assert fragments_for(q, "postgresql")["open_where"] == \
        ' WHERE "queue" = \'default\' AND ("expires" IS NULL OR "expires" > now())'
    assert fragments_for(q, "mssql")["open_and"] == \
        " AND [queue] = N'default' AND ([expires] IS NULL OR [expires] > SYSUTCDATETIME())"
    assert fragments_for(cfg('partition = { column = "queue_id", value = 7 }').queues[0], "mssql")["open_and"] \
        == " AND [queue_id] = 7"
    for extra, message in (('partition = { column = "q", value = "x\'; DROP TABLE jobs --" }', "plain name"),
                           ('partition = { column = "id", value = 1 }', "is also key"),
                           ('partition = { column = "q", value = 1 }\nwatermark = { table = "w", column = "c" }',
                            "watermark")):
        with pytest.raises(config_mod.ConfigError, match=message):
            cfg(extra)
    with pytest.raises(config_mod.ConfigError, match="ring"):
        cfg('partition = { column = "q", value = 1 }', 'kind = "ring"\nsequence_table = "s"\npush_column = "p"\n'
            'pop_column = "o"\ncapacity = 8')
    # max_attempts on a due queue is honoured (due_follow); on a delete queue refused, as before.
    assert cfg('attempts_column = "n"\nmax_attempts = 3', 'kind = "due"\ndue_column = "run_at"').queues[0]
    with pytest.raises(config_mod.ConfigError, match="max_attempts"):
        cfg('attempts_column = "n"\nmax_attempts = 3')


HANGFIRE_PG = """
CREATE TABLE {s}.job_queue (id bigint NOT NULL, job_id bigint NOT NULL, queue varchar(50) NOT NULL,
                            fetched_at timestamp, PRIMARY KEY (queue, id));
CREATE TABLE {s}.state (id bigint NOT NULL, job_id bigint NOT NULL, name varchar(20) NOT NULL,
                        created_at timestamptz NOT NULL, PRIMARY KEY (job_id, id));
"""


def test_times_from_only_latest_reads_the_latest_enqueue_of_the_partition(lab: Lab, schema: str, write_cfg) -> None:  # noqa: ANN001
    """Hangfire's shape on PostgreSQL: a job created 3 h ago, scheduled, enqueued 10 min ago (then
    failed and enqueued again 2 min ago) waits since its latest 'Enqueued' state: 120 s, not 3 h; a
    job of another named queue, waiting a day, is another queue's."""
    with lab.connect() as conn:
        conn.execute(HANGFIRE_PG.format(s=sql.Identifier(schema).as_string(conn)))
        s = sql.Identifier(schema)
        conn.execute(sql.SQL(
            "INSERT INTO {}.job_queue VALUES (1, 10, 'default', NULL), (2, 20, 'critical', NULL), (3, 30, 'default', NULL);"
            "INSERT INTO {}.state VALUES (1, 10, 'Scheduled', now() - interval '3 hours'),"
            " (2, 10, 'Enqueued', now() - interval '10 minutes'), (3, 10, 'Failed', now() - interval '5 minutes'),"
            " (4, 10, 'Enqueued', now() - interval '2 minutes'), (5, 20, 'Enqueued', now() - interval '1 day'),"
            " (6, 30, 'Enqueued', now() - interval '30 seconds')").format(s, s))
    cfg = write_cfg(target_section(lab) + (
        f'\n[[queues]]\nname = "default"\ntarget = "lab"\nkind = "lease"\nschema = "{schema}"\ntable = "job_queue"\n'
        'key = "id"\nlease_column = "fetched_at"\npartition = { column = "queue", value = "default" }\n'
        'times_from = { table = "state", key = "job_id", column = "created_at", ref = "job_id", '
        'only = { column = "name", value = "Enqueued" }, latest = true }\n'))
    result = runner.run_once(cfg, [registry.by_name("depth"), registry.by_name("oldest_age_s")])
    assert all(st.ok for st in result.status), [st.error for st in result.status]
    got = {r.metric: r.value for r in result.rows if r.queue == "default"}
    assert got["depth"] == 2
    assert got["oldest_age_s"] == pytest.approx(120, abs=10)
