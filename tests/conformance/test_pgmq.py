"""Issue 29, PGMQ: the preset's figures against PGMQ's own metrics, at production size, in three
server time zones.

PGMQ is a PostgreSQL extension (or a SQL install into the fixed schema ``pgmq``); neither is used
here: its queue table and the statements its functions run are transcribed from pgmq/pgmq v1.5.1
(commit c8575e3), pgmq-extension/sql/pgmq.sql, into the schema ``pgmq`` of the test's lab:

* ``create_non_partitioned``: q_<queue> (msg_id identity, read_ct, enqueued_at, vt, message,
  headers) with its vt index, a_<queue> (the archive) with its archived_at index;
* ``send_batch``: one INSERT, every message of the batch with the same vt (the delay);
* ``read``: ``vt <= clock_timestamp() ORDER BY msg_id LIMIT qty FOR UPDATE SKIP LOCKED``, vt moved
  forward by the visibility timeout, read_ct + 1;
* ``delete``, ``archive`` (DELETE ... RETURNING into a_<queue>), ``set_vt``;
* ``metrics``: queue_length count(*), queue_visible_length count(vt <= now()), oldest_msg_age_sec
  now() - min(enqueued_at).

The figures are PGMQ's own metrics: depth = queue_visible_length (what read() can take),
rows_total = queue_length, count_not_due = the messages read and in flight or sent with a delay,
oldest_age_s = oldest_msg_age_sec. The last was the lateness of the most overdue visible message
(now - vt): it reset at every read, so a message a consumer keeps failing on (read again every
visibility timeout, never deleted) never looked older than its vt, where PGMQ's own metric grows
(the preset's age_from = "enqueued"). stuck_leases is not a PGMQ notion (no lease: the vt brings a
message back by itself), and requeue is refused.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from queueops import actions, livecheck, presets
from tests.conformance import common
from tests.conftest import Lab

UPSTREAM = ("pgmq/pgmq v1.5.1 (commit c8575e3): pgmq-extension/sql/pgmq.sql (create_non_partitioned, send_batch, "
            "read, delete, archive, set_vt, metrics)")
QUEUE = "orders"

# create_non_partitioned('orders'), its FORMAT()s filled in ({s}: the test's schema for pgmq).
CREATE = """
CREATE TABLE IF NOT EXISTS {s}.q_orders (
    msg_id BIGINT PRIMARY KEY GENERATED ALWAYS AS IDENTITY,
    read_ct INT DEFAULT 0 NOT NULL,
    enqueued_at TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL,
    vt TIMESTAMP WITH TIME ZONE NOT NULL,
    message JSONB,
    headers JSONB
);
CREATE TABLE IF NOT EXISTS {s}.a_orders (
  msg_id BIGINT PRIMARY KEY,
  read_ct INT DEFAULT 0 NOT NULL,
  enqueued_at TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL,
  archived_at TIMESTAMP WITH TIME ZONE DEFAULT now() NOT NULL,
  vt TIMESTAMP WITH TIME ZONE NOT NULL,
  message JSONB,
  headers JSONB
);
CREATE INDEX IF NOT EXISTS q_orders_vt_idx ON {s}.q_orders (vt ASC);
CREATE INDEX IF NOT EXISTS archived_at_idx_orders ON {s}.a_orders (archived_at);
"""
# The functions' statements ($n as psycopg placeholders).
SEND_BATCH = """
        INSERT INTO {s}.q_orders (vt, message, headers)
        SELECT %(delay)s, unnest(%(msgs)s::jsonb[]), unnest(coalesce(%(headers)s::jsonb[], ARRAY[]::jsonb[]))
        RETURNING msg_id;"""
READ = """
        WITH cte AS
        (
            SELECT msg_id
            FROM {s}.q_orders
            WHERE vt <= clock_timestamp() AND CASE
                WHEN '{{}}' != '{{}}'::jsonb THEN (message @> '{{}}')::integer
                ELSE 1
            END = 1
            ORDER BY msg_id ASC
            LIMIT %(qty)s
            FOR UPDATE SKIP LOCKED
        )
        UPDATE {s}.q_orders m
        SET
            vt = clock_timestamp() + make_interval(secs => %(vt)s),
            read_ct = read_ct + 1
        FROM cte
        WHERE m.msg_id = cte.msg_id
        RETURNING m.msg_id, m.read_ct, m.enqueued_at, m.vt, m.message, m.headers;"""
DELETE = """
        DELETE FROM {s}.q_orders
        WHERE msg_id = ANY(%(ids)s)
        RETURNING msg_id"""
ARCHIVE = """
        WITH archived AS (
            DELETE FROM {s}.q_orders
            WHERE msg_id = ANY(%(ids)s)
            RETURNING msg_id, vt, read_ct, enqueued_at, message, headers
        )
        INSERT INTO {s}.a_orders (msg_id, vt, read_ct, enqueued_at, message, headers)
        SELECT msg_id, vt, read_ct, enqueued_at, message, headers
        FROM archived
        RETURNING msg_id;"""
SET_VT = """
        UPDATE {s}.q_orders
        SET vt = (clock_timestamp() + make_interval(secs => %(vt)s))
        WHERE msg_id = %(id)s
        RETURNING *;"""
# metrics('orders'): q_summary (oldest_msg_age_sec is ::int there; as float here, to the second).
METRICS = """
SELECT count(*) AS rows_total,
       count(CASE WHEN vt <= NOW() THEN 1 END) AS depth,
       count(*) - count(CASE WHEN vt <= NOW() THEN 1 END) AS count_not_due,
       EXTRACT(epoch FROM (NOW() - min(enqueued_at)))::float8 AS oldest_age_s,
       NULL::float8 AS stuck_leases
FROM {s}.q_orders
"""

# The production shape: 200,000 messages in the queue table (ids in send order), 100,000 done ones
# in the archive (PGMQ keeps archived messages).
#   ids 1-20: a poison message batch sent 5 h ago, read 7 times, visible again since 20 s;
#   the next 6,000: one send_batch 2 h ago with a delay: one shared vt, visible since 1 min
#     (the most common value of vt);
#   the next 4,000: sent over the last 2 h at once, visible since then (never read: a backlog);
#   the next 30,000: read by consumers, invisible for another 10 s to 1 h (in flight);
#   the last 159,980: sent with delays, visible from 1 min to 3 days ahead.
SHAPE = """
INSERT INTO {s}.q_orders (read_ct, enqueued_at, vt, message)
SELECT CASE WHEN g <= 20 THEN 7 WHEN g BETWEEN 10021 AND 40020 THEN 1 ELSE 0 END,
       CASE WHEN g <= 20 THEN now() - interval '5 hours' ELSE now() - interval '2 hours' + g * interval '30 ms' END,
       CASE WHEN g <= 20 THEN now() - interval '20 s'
            WHEN g <= 6020 THEN date_trunc('second', now()) - interval '1 min'
            WHEN g <= 10020 THEN now() - interval '2 hours' + g * interval '30 ms'
            WHEN g <= 40020 THEN now() + interval '10 s' + (g - 10020) * interval '0.12 s'
            ELSE now() + interval '1 min' + (g - 40020) * interval '1.6 s' END,
       jsonb_build_object('order', g)
FROM generate_series(1, {n}) AS g
"""
ARCHIVED = """
INSERT INTO {s}.a_orders (msg_id, read_ct, enqueued_at, archived_at, vt, message)
SELECT -g, 1, now() - interval '3 days', now() - interval '2 days', now() - interval '2 days', '{{}}'
FROM generate_series(1, 100000) AS g
"""


@pytest.fixture(scope="module")
def pgmq(lab: Lab) -> Iterator[str]:
    """PGMQ's queue table at production size, moved by PGMQ's own statements, analyzed; built once,
    in the schema PGMQ creates its queues in (``pgmq``; this module's own in the session's lab)."""
    name = "pgmq"
    s = f'"{name}"'
    started = time.monotonic()
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        conn.execute(CREATE.format(s=s))
        conn.execute(SHAPE.format(s=s, n=common.ROWS))
        conn.execute(ARCHIVED.format(s=s))
        # consumers read 2 x 500 (vt 30 s): the poison batch first, then the shared-vt batch; they
        # delete 300, archive 300; one gives 50 back at once (set_vt 0); a producer sends 1,000.
        read = [r[0] for _ in range(2) for r in conn.execute(READ.format(s=s), {"qty": 500, "vt": 30})]
        assert len(read) == 1000 and read[:20] == list(range(1, 21))
        # the poison messages stay: read again and again, never deleted
        assert len(conn.execute(DELETE.format(s=s), {"ids": read[20:320]}).fetchall()) == 300
        assert len(conn.execute(ARCHIVE.format(s=s), {"ids": read[320:620]}).fetchall()) == 300
        for msg in read[620:670]:
            assert conn.execute(SET_VT.format(s=s), {"vt": 0, "id": msg}).fetchall()
        # send_batch(queue, msgs): send_batch(queue, msgs, NULL, clock_timestamp())
        now = conn.execute("SELECT clock_timestamp()").fetchone()[0]
        sent = conn.execute(SEND_BATCH.format(s=s), {"delay": now, "headers": None,
                                                     "msgs": ['{"order": "new"}'] * 1000}).fetchall()
        assert len(sent) == 1000
        common.analyze(conn, f"{s}.q_orders")
    print(f"\nPGMQ build {time.monotonic() - started:.1f} s")
    yield name
    with lab.connect() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def _cfg(lab: Lab, schema: str, zone: str) -> Any:
    return common.make_config(lab.url, Path(lab.server.password_file), zone,
                              [{"name": QUEUE, "preset": "pgmq", "schema": schema, "table": "q_orders"}])


def _truth(lab: Lab, schema: str) -> dict[str, float | None]:
    with lab.connect() as conn:
        return common.truth(conn, METRICS.format(s=f'"{schema}"'))


def test_figures_are_pgmqs_own_metrics_in_every_zone(lab: Lab, pgmq: str) -> None:
    _, truth = common.in_every_zone("pgmq", UPSTREAM, lab.url, lab.password, QUEUE,
                                    lambda zone: _cfg(lab, pgmq, zone), lambda: _truth(lab, pgmq))
    # the shape: more visible than the cap, PGMQ's oldest message (a poison one, 5 h) far older than
    # the lateness of any visible one (at most 2 h, and 20 s for the poison batch itself)
    assert truth["depth"] > common.CAP and truth["rows_total"] == common.ROWS - 600 + 1000  # type: ignore[operator]
    assert truth["oldest_age_s"] is not None and truth["oldest_age_s"] > 5 * 3600 - 60


def test_reads_are_bounded_by_the_cap_and_the_live_check_says_seek(lab: Lab, pgmq: str) -> None:
    """Item 5: depth reads the vt index up to the cap; oldest_age_s one entry of the key."""
    cfg = _cfg(lab, pgmq, "UTC")
    with lab.connect() as conn:
        reads = common.measured_reads(cfg, QUEUE, conn)
    for r in reads:
        print(f"\nPGMQ reads {r.collector}: {r.buffers} buffers of {r.relpages} pages via {r.read_by}")
    # stuck_leases is not collected for PGMQ (the preset: no lease to be stuck)
    assert {r.collector for r in reads} == {"depth", "oldest_age_s"}
    assert all(r.buffers <= common.BUFFER_BOUND < r.relpages for r in reads), reads
    report = livecheck.report_live(cfg)
    scans = [f for f in report.findings if "scan" in f.reason or "not counted" in f.reason]
    assert not scans, scans


def test_discover_recognises_the_preset_on_the_librarys_ddl(lab: Lab, pgmq: str) -> None:
    """Item 6: ``discover`` proposes the pgmq preset for q_orders as pgmq.create() makes it in the schema pgmq (its archive a_orders is a side table), and none of the
    library's other tables as a queue of its own."""
    found = common.proposed(_cfg(lab, pgmq, "UTC"), pgmq)
    assert found == [("q_orders", "pgmq")], found


def test_requeue_is_refused_and_the_preset_says_when_pgmq_takes_a_message_again(lab: Lab, pgmq: str) -> None:
    """Item 4: a message whose consumer died is visible again when its vt passes (the seconds its
    consumer passed to read()); requeue is refused with that reason, and read() takes it again."""
    with pytest.raises(actions.NotOffered, match="vt"):
        actions.plan(_cfg(lab, pgmq, "UTC"), "requeue", QUEUE, {})
    rescue = presets.get("pgmq").rescue
    assert rescue.by_itself and "read(queue, vt, qty)" in rescue.how and "seconds after its read" in rescue.how
    s = f'"{pgmq}"'
    with lab.connect() as conn:
        # a consumer reads 20 messages (vt 1 s) and dies: no one else takes them meanwhile, and
        # read() takes them again after 1 s (among the lowest visible ids: 40 read, in case the
        # poison batch read at the build's end comes back meanwhile)
        first = {r[0] for r in conn.execute(READ.format(s=s), {"qty": 20, "vt": 1})}
        assert len(first) == 20
        assert not first & {r[0] for r in conn.execute(READ.format(s=s), {"qty": 1000, "vt": 30})}
        time.sleep(1.2)
        again = {r[0] for r in conn.execute(READ.format(s=s), {"qty": 40, "vt": 30})}
        assert first <= again


def test_age_from_enqueued_needs_a_due_queue_with_enqueued_at() -> None:
    from queueops import config

    base = {"name": "q", "target": "t", "table": "jobs", "key": "id", "age_from": "enqueued"}
    with pytest.raises(ValueError, match="age_from"):
        config.Queue.model_validate({**base, "kind": "due", "due_column": "vt"})
    with pytest.raises(ValueError, match="age_from"):
        config.Queue.model_validate({**base, "kind": "status", "status_column": "s", "enqueued_at": "at"})
    assert config.Queue.model_validate({**base, "kind": "due", "due_column": "vt", "enqueued_at": "at"}).age_from \
        == "enqueued"
