"""Issue 29 conformance: the pgmq preset on PGMQ's own schema and functions, at production size, in
three server time zones, and a real consumer killed mid-message.

PGMQ 1.13.0 is installed by PGMQ's official Python client, pgmq-py 1.1.4 (PyPI, pinned in
constraints.txt): its installer (``pgmq.install.install_pgmq_from_sql``) runs the install script
the package ships (``pgmq/sql/pgmq.sql``, PGMQ's ``pgmq-extension/sql/pgmq.sql`` of that release)
into a database of this module's own. Nothing of PGMQ is transcribed: the queue table is made by
``pgmq.create`` (the client's ``create_queue``) and messages move only through the client's calls
of PGMQ's functions ``send_batch``, ``read``, ``delete``, ``archive``, ``set_vt``. (Until this
module, tests/conformance/test_pgmq.py transcribed v1.5.1's statements; 1.13.0's table has a column
more, ``last_read_at``, which the preset does not read.)

The figures are PGMQ's own ``pgmq.metrics(queue)``: depth = ``queue_visible_length`` (what
``read()`` can take: ``vt <= now()``), rows_total = ``queue_length``, count_not_due = the
difference (read and in flight, or sent with a delay), oldest_age_s = ``oldest_msg_age_sec`` (now
minus the oldest ``enqueued_at``, read or not: a message a consumer keeps failing on grows old).
stuck_leases is not a PGMQ notion (no lease: the vt brings a message back by itself), and requeue
is refused with that reason.

The production shape: 200,000 messages in the queue table, written set-based into the table
``pgmq.create`` made, as ``send_batch`` / ``read`` leave them but with back-dated times; 100,000
archived ones (PGMQ keeps them in ``a_<queue>``); then the client reads, deletes, archives, sets
vt and sends.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pgmq import SyncPGMQueue
from pgmq.install import get_embedded_sql_version, install_pgmq_from_sql
from psycopg_pool import ConnectionPool

from queueops import actions, config, livecheck, presets
from tests.conformance import common
from tests.conftest import wait_for
from tests.libraries.conformance_db import own_database
from tests.libraries.conftest import LibServer

VERSION = "1.13.0"
UPSTREAM = (f"PGMQ {VERSION}, installed by pgmq-py 1.1.4 (PyPI) from pgmq/sql/pgmq.sql; pgmq.create, send_batch, "
            "read, delete, archive, set_vt, metrics called through the client")
QUEUE = "orders"

# The shape, by msg_id (send order):
#   1-20: a poison batch sent 5 h ago, read 7 times, visible again since 20 s;
#   the next 6,000: one send_batch 2 h ago with a delay: one shared vt, visible since 1 min
#     (the most common value of vt);
#   the next 4,000: sent over the last 2 h at once, visible since then (never read: a backlog);
#   the next 30,000: read by consumers, invisible for another 10 s to 1 h (in flight);
#   the last 159,980: sent with delays, visible from 1 min to 3 days ahead.
SHAPE = """
INSERT INTO pgmq.q_orders (read_ct, enqueued_at, last_read_at, vt, message)
SELECT CASE WHEN g <= 20 THEN 7 WHEN g BETWEEN 10021 AND 40020 THEN 1 ELSE 0 END,
       CASE WHEN g <= 20 THEN now() - interval '5 hours' ELSE now() - interval '2 hours' + g * interval '30 ms' END,
       CASE WHEN g <= 20 THEN now() - interval '50 s'
            WHEN g BETWEEN 10021 AND 40020 THEN now() - interval '1 min' END,
       CASE WHEN g <= 20 THEN now() - interval '20 s'
            WHEN g <= 6020 THEN date_trunc('second', now()) - interval '1 min'
            WHEN g <= 10020 THEN now() - interval '2 hours' + g * interval '30 ms'
            WHEN g <= 40020 THEN now() + interval '10 s' + (g - 10020) * interval '0.12 s'
            ELSE now() + interval '1 min' + (g - 40020) * interval '1.6 s' END,
       jsonb_build_object('order', g)
FROM generate_series(1, %(n)s) AS g
"""
ARCHIVED = """
INSERT INTO pgmq.a_orders (msg_id, read_ct, enqueued_at, last_read_at, archived_at, vt, message)
SELECT -g, 1, now() - interval '3 days', now() - interval '2 days', now() - interval '2 days',
       now() - interval '2 days', '{}'
FROM generate_series(1, 100000) AS g
"""


def _client(db: LibServer) -> SyncPGMQueue:
    """PGMQ's own client on ``db`` (the schema is installed already: no CREATE EXTENSION)."""
    pool = ConnectionPool(db.url, kwargs={"password": db.password}, min_size=1, max_size=2, open=True)
    return SyncPGMQueue(pool=pool, init_extension=False)


def _install(db: LibServer) -> None:
    """PGMQ's own installer (pgmq-py), on a connection of ours (it must not be autocommit)."""
    with psycopg.connect(db.url, password=db.password) as conn:
        install_pgmq_from_sql(conn=conn)
        conn.commit()


@pytest.fixture(scope="module")
def shaped(libserver: LibServer) -> Iterator[tuple[LibServer, SyncPGMQueue]]:
    with own_database(libserver, "conformance_pgmq") as db:
        assert get_embedded_sql_version() == VERSION
        started = time.monotonic()
        _install(db)
        client = _client(db)
        try:
            client.create_queue(QUEUE)
            with db.connect() as conn:
                conn.execute(SHAPE, {"n": common.ROWS})
                conn.execute(ARCHIVED)
            assert _moves(client, QUEUE)[:20] == list(range(1, 21))  # the poison batch read first
            with db.connect() as conn:
                common.analyze(conn, "pgmq.q_orders")
            print(f"\nBUILD pgmq {VERSION}: {client.metrics(QUEUE).queue_length} messages in "
                  f"{time.monotonic() - started:.1f} s")
            yield db, client
        finally:
            client.close()


def _moves(client: SyncPGMQueue, queue: str) -> list[int]:
    """PGMQ's own calls on the built table: consumers read 2 x 500 (vt 30 s), the poison batch first,
    then the shared-vt batch; they delete 300 and archive 300 (the poison messages stay: read again
    and again, never deleted); one gives 50 back at once (set_vt 0); a producer sends 1,000.
    Returns the ids read."""
    read = [m.msg_id for _ in range(2) for m in client.read(queue, vt=30, qty=500)]
    assert len(read) == 1000
    assert len(client.delete_batch(queue, read[20:320])) == 300
    assert len(client.archive_batch(queue, read[320:620])) == 300
    for msg in read[620:670]:
        assert client.set_vt(queue, msg, 0) is not None
    assert len(client.send_batch(queue, [{"order": "new"}] * 1000)) == 1000
    return read


def _cfg(db: LibServer, zone: str) -> config.Config:
    return common.make_config(db.url, Path(db.info.password_file), zone,
                              [{"name": QUEUE, "preset": "pgmq", "table": f"q_{QUEUE}"}])


def _truth(client: SyncPGMQueue, queue: str = QUEUE) -> dict[str, float | None]:
    """PGMQ's own figures (``pgmq.metrics``, through the client), as queueops's metrics."""
    m = client.metrics(queue)
    return {"depth": m.queue_visible_length, "rows_total": m.queue_length,
            "count_not_due": m.queue_length - m.queue_visible_length,
            "oldest_age_s": None if m.oldest_msg_age_sec is None else float(m.oldest_msg_age_sec),
            "stuck_leases": None}


def test_figures_are_pgmqs_own_metrics_in_every_zone(shaped: tuple[LibServer, SyncPGMQueue]) -> None:
    db, client = shaped
    _, truth = common.in_every_zone("pgmq", UPSTREAM, db.url, db.password, QUEUE, lambda zone: _cfg(db, zone),
                                    lambda: _truth(client))
    # the shape: more visible than the cap, PGMQ's oldest message (a poison one, 5 h) far older than
    # the lateness of any visible one (at most 2 h, and 20 s for the poison batch itself)
    assert truth["depth"] > common.CAP and truth["rows_total"] == common.ROWS - 600 + 1000  # type: ignore[operator]
    assert truth["oldest_age_s"] is not None and truth["oldest_age_s"] > 5 * 3600 - 60


def test_the_oldest_waiting_list_begins_with_pgmqs_oldest_message(
        shaped: tuple[LibServer, SyncPGMQueue], partitioned: tuple[LibServer, SyncPGMQueue]) -> None:
    """The drill-down's oldest-waiting list begins with ``pgmq.metrics()``' oldest message (the
    poison batch, 5 h, visible again since 20 s: the list by lateness began with a 2-hour-old
    message), plain and partitioned, in every zone."""
    for (db, client), queue, cfg in ((shaped, QUEUE, _cfg), (partitioned, PARTITIONED, _partitioned_cfg)):
        rows = common.assert_waiting_list_is_the_age(lambda zone, db=db, cfg=cfg: cfg(db, zone), queue,
                                                     _truth(client, queue)["oldest_age_s"])
        assert [r["item"] for r in rows[:20]] == list(range(1, 21)), rows[:3]


def test_reads_are_bounded_by_the_cap_and_the_live_check_says_seek(shaped: tuple[LibServer, SyncPGMQueue]) -> None:
    """Item 5: depth reads PGMQ's vt index up to the cap; oldest_age_s one entry of the key."""
    db, _ = shaped
    cfg = _cfg(db, "UTC")
    with db.connect() as conn:
        reads = common.measured_reads(cfg, QUEUE, conn)
    for r in reads:
        print(f"\nPGMQ reads {r.collector}: {r.buffers} buffers of {r.relpages} pages via {r.read_by}")
    # stuck_leases is not collected for PGMQ (the preset: no lease to be stuck)
    assert {r.collector for r in reads} == {"depth", "oldest_age_s"}
    assert all(r.buffers <= common.BUFFER_BOUND < r.relpages for r in reads), reads
    report = livecheck.report_live(cfg)
    scans = [f for f in report.findings if "scan" in f.reason or "not counted" in f.reason]
    assert not scans, scans


def test_discover_recognises_the_preset_on_pgmqs_own_schema(shaped: tuple[LibServer, SyncPGMQueue]) -> None:
    """Item 6: ``discover`` proposes the pgmq preset for q_orders as ``pgmq.create()`` made it, and
    none of PGMQ's other tables (a_orders, meta, the notify throttle, the topic bindings) as a queue."""
    db, _ = shaped
    with db.connect() as conn:
        side = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'pgmq'")}
    assert {"q_orders", "a_orders", "meta"} <= side, side
    found = common.proposed(_cfg(db, "UTC"), "pgmq")
    assert found == [("q_orders", "pgmq")], found


def test_requeue_is_refused_and_pgmqs_read_takes_a_message_again_after_its_vt(
        shaped: tuple[LibServer, SyncPGMQueue]) -> None:
    """Item 4: a message whose consumer died is visible again when its vt passes (the seconds its
    consumer passed to read()); requeue is refused with that reason, and read() takes it again."""
    db, client = shaped
    with pytest.raises(actions.NotOffered, match="vt"):
        actions.plan(_cfg(db, "UTC"), "requeue", QUEUE, {})
    rescue = presets.get("pgmq").rescue
    assert rescue.by_itself and "read(queue, vt, qty)" in rescue.how and "seconds after its read" in rescue.how
    # a consumer reads 20 messages (vt 1 s) and dies: no one else takes them meanwhile, and read()
    # takes them again after 1 s (among the lowest visible ids: 40 read, in case the poison batch
    # read at the build's end comes back meanwhile)
    first = {m.msg_id for m in client.read(QUEUE, vt=1, qty=20)}
    assert len(first) == 20
    assert not first & {m.msg_id for m in client.read(QUEUE, vt=30, qty=1000)}
    time.sleep(1.2)
    assert first <= {m.msg_id for m in client.read(QUEUE, vt=30, qty=40)}


# -- a partitioned queue (pg_partman) ---------------------------------------------------------------
PARTITIONED = "events"
PARTITION_ROWS = 50_000  # pgmq.create_partitioned's partition_interval: five partitions of msg_id


@pytest.fixture(scope="module")
def partitioned(libserver: LibServer) -> Iterator[tuple[LibServer, SyncPGMQueue]]:
    """A queue made by ``pgmq.create_partitioned`` (the client's ``create_partitioned_queue``) on
    pg_partman 4 (Debian's postgresql-N-partman, scripts/setup-system.sh): pgmq.q_events partitioned
    by msg_id, 50,000 ids a partition, pg_partman's premake of 4 covering the shape; the same
    200,000 messages and the same moves as the plain queue's."""
    with own_database(libserver, "conformance_pgmq_partitioned") as db:
        with db.connect() as conn:
            conn.execute("CREATE SCHEMA partman")
            conn.execute("CREATE EXTENSION pg_partman SCHEMA partman")
        _install(db)
        client = _client(db)
        try:
            client.create_partitioned_queue(PARTITIONED, partition_interval=PARTITION_ROWS,
                                            retention_interval=10 * PARTITION_ROWS)
            with db.connect() as conn:
                conn.execute(SHAPE.replace("q_orders", f"q_{PARTITIONED}"), {"n": common.ROWS})
            _moves(client, PARTITIONED)
            with db.connect() as conn:
                common.analyze(conn, f"pgmq.q_{PARTITIONED}")
                parts = conn.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass(%s)",
                                     (f"pgmq.q_{PARTITIONED}",)).fetchone()[0]
            print(f"\nBUILD pgmq {VERSION} partitioned: {client.metrics(PARTITIONED).queue_length} messages in "
                  f"{parts} partitions")
            assert parts >= 5
            yield db, client
        finally:
            client.close()


def _partitioned_cfg(db: LibServer, zone: str) -> config.Config:
    return common.make_config(db.url, Path(db.info.password_file), zone,
                              [{"name": PARTITIONED, "preset": "pgmq", "table": f"q_{PARTITIONED}"}])


def test_a_partitioned_queues_figures_are_pgmqs_own_metrics_in_every_zone(
        partitioned: tuple[LibServer, SyncPGMQueue]) -> None:
    db, client = partitioned
    _, truth = common.in_every_zone("pgmq_partitioned", UPSTREAM + "; pgmq.create_partitioned on pg_partman 4",
                                    db.url, db.password, PARTITIONED, lambda zone: _partitioned_cfg(db, zone),
                                    lambda: _truth(client, PARTITIONED))
    assert truth["depth"] > common.CAP and truth["rows_total"] == common.ROWS - 600 + 1000  # type: ignore[operator]


def test_a_partitioned_queues_reads_and_the_live_check_agree(partitioned: tuple[LibServer, SyncPGMQueue]) -> None:
    """PGMQ indexes a partitioned queue on its partition column only (msg_id): no vt index, which
    its plain queue has. Each read is measured, and ``config check --live``'s seek-or-scan verdict
    on it is what the read measured, with an index it can create on a partitioned table."""
    db, _ = partitioned
    cfg = _partitioned_cfg(db, "UTC")
    with db.connect() as conn:
        reads = {r.collector: r for r in common.measured_reads(cfg, PARTITIONED, conn)}
    report = livecheck.report_live(cfg)
    print("\nPGMQ partitioned reads: " + "; ".join(f"{r.collector} {r.buffers} buffers of {r.relpages} pages"
                                                  for r in reads.values()))
    print("LIVE pgmq partitioned:\n" + "\n".join(f.line("") for f in report.findings))
    scans = {f.field: f for f in report.findings if "scans instead of seeking" in f.reason}
    assert set(reads) == {"depth", "oldest_age_s"}
    for r in reads.values():
        assert (r.buffers <= common.BUFFER_BOUND) == (r.collector not in scans), (r, list(scans))
    assert not [f for f in report.findings if f.severity == "error"], report.findings
    for f in scans.values():  # the index proposed can be made on the partitioned parent
        assert '"pgmq"."q_events"' in f.fix and "a partitioned table" in f.fix, f.fix


PARTS_TRUTH = """
WITH leaves AS (SELECT p.relid FROM pg_partition_tree('pgmq.q_events') AS p WHERE p.isleaf),
keyidx AS (SELECT DISTINCT ON (l.relid) i.indexrelid FROM leaves AS l
           JOIN pg_index AS i ON i.indrelid = l.relid
           JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] AND a.attname = 'msg_id'
           WHERE i.indisvalid AND i.indpred IS NULL
           ORDER BY l.relid, i.indisprimary DESC, i.indnatts, i.indexrelid)
SELECT (SELECT count(*) FROM leaves) AS partitions,
       (SELECT sum(c.relpages) FROM leaves AS l JOIN pg_class AS c ON c.oid = l.relid) AS table_pages,
       (SELECT sum(s.leaf_pages) FROM keyidx CROSS JOIN LATERAL pgstatindex(keyidx.indexrelid::regclass) AS s)
           AS page_count,
       (SELECT sum(a.dead_tuple_count) FROM leaves AS l CROSS JOIN LATERAL pgstattuple_approx(l.relid::regclass) AS a)
           AS ghost_records
"""


def test_a_partitioned_queues_page_figures_are_its_partitions(partitioned: tuple[LibServer, SyncPGMQueue]) -> None:
    """With pgstattuple installed (as a DBA who reads bloat has it), the parent of pg_partman's
    partitions and its partitioned msg_id index are refused by pgstatindex and pgstattuple_approx:
    fragmentation_pct and ghost_records failed on this table. Their figures are the partitions'
    own, which pgstattuple gives per partition here."""
    db, _ = partitioned
    with db.connect() as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
        before = common.truth(conn, PARTS_TRUTH)
        parent_index = conn.execute(
            "SELECT c.relname FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid "
            "JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] "
            "WHERE i.indrelid = 'pgmq.q_events'::regclass AND a.attname = 'msg_id'").fetchone()[0]
    figures = common.collect(_partitioned_cfg(db, "UTC"), PARTITIONED)  # fails the test on a failed collector
    with db.connect() as conn:
        after = common.truth(conn, PARTS_TRUTH)  # autovacuum may clean dead tuples meanwhile, never add
    print(f"\nPGMQ partitioned pages: {before}; queueops "
          + ", ".join(f"{m} {figures[m].value}" for m in ("table_pages", "page_count", "ghost_records")))
    note = json.loads(figures["fragmentation_pct"].note)
    assert note == {"source": "pgstatindex", "index": parent_index, "partitions": before["partitions"]}
    assert before["partitions"] >= 5
    # as of the read: an autovacuum in between may move relpages (and free index pages)
    assert figures["table_pages"].value in (before["table_pages"], after["table_pages"])
    assert figures["page_count"].value in (before["page_count"], after["page_count"])
    assert figures["ghost_records"].note == "pgstattuple_approx"
    assert after["ghost_records"] <= figures["ghost_records"].value <= before["ghost_records"]  # type: ignore[operator]
    assert figures["page_density_pct"].value is not None and figures["table_bloat_pct"].value is not None


# -- a real consumer killed mid-message ------------------------------------------------------------
JOBS, KILLED, VT_S = 6, 2, 6  # the consumer reads two at a time, with a 6 s visibility timeout


def test_a_consumer_killed_mid_message_is_seen_and_pgmq_gives_the_messages_again_exactly_once(
        libserver: LibServer, tmp_path: Path) -> None:
    """PGMQ's own client as the consumer (tests/libraries/apps/pgmq_app.py), SIGKILLed while it holds
    two messages. queueops's depth, in-flight count, rows and age equal ``pgmq.metrics`` before the
    vt passes (2 in flight) and after (every message visible again); requeue is refused; a fresh
    consumer then handles every message, each to its end exactly once, the killed two started twice
    (PGMQ's at-least-once redelivery)."""
    from tests.libraries.apps import runs

    with own_database(libserver, "real_pgmq") as db:
        _install(db)
        with db.connect() as conn:
            conn.execute(runs.DDL)
        client = _client(db)
        try:
            client.create_queue("jobs")
            db.set_gate("pgmq", False)
            ids = sorted(str(i) for i in client.send_batch("jobs", [{"n": n} for n in range(JOBS)]))
            consumer = [sys.executable, "-m", "tests.libraries.apps.pgmq_app", "jobs", str(VT_S)]
            worker = db.spawn(consumer, tmp_path / "consumer1.log")
            started = db.wait_started("pgmq", KILLED)
            db.kill(worker)
            read_at = time.monotonic()
            assert len(started) == KILLED

            cfg = common.make_config(db.url, Path(db.info.password_file), "Asia/Tokyo",
                                     [{"name": "jobs", "preset": "pgmq", "table": "q_jobs"}])
            got, truth = common.collect(cfg, "jobs"), _truth(client, "jobs")
            assert time.monotonic() - read_at < VT_S, "the figures were read before the vt passed"
            assert truth["depth"] == JOBS - KILLED and truth["count_not_due"] == KILLED
            for metric in ("depth", "rows_total", "count_not_due"):
                assert got[metric].value == truth[metric], (metric, got[metric], truth[metric])
            assert got["oldest_age_s"].value is not None and abs(got["oldest_age_s"].value - truth["oldest_age_s"]) <= 5
            with pytest.raises(actions.NotOffered, match="vt"):
                actions.plan(cfg, "requeue", "jobs", {})

            def visible_again() -> dict[str, common.Figure] | None:
                seen = common.collect(cfg, "jobs")
                return seen if seen["depth"].value == JOBS else None

            again = wait_for(visible_again, VT_S + 20, interval=0.5, what="the killed messages visible again")
            assert _truth(client, "jobs")["depth"] == JOBS and again["count_not_due"].value == 0

            db.set_gate("pgmq", True)
            fresh = db.spawn(consumer, tmp_path / "consumer2.log")
            try:
                wait_for(lambda: client.metrics("jobs").queue_length == 0, 60, interval=0.3,
                         what="every message deleted")
            finally:
                db.stop(fresh)
        finally:
            client.close()
        ends, starts = db.runs("pgmq", "end"), db.runs("pgmq", "start")
        print(f"\nPGMQ consumer killed: started {starts}, ended {ends}")
        assert sorted(ends) == ids and set(ends.values()) == {1}, ends
        assert {k for k, n in starts.items() if n == 2} == set(started), starts


def test_age_from_enqueued_needs_a_due_queue_with_enqueued_at() -> None:
    base = {"name": "q", "target": "t", "table": "jobs", "key": "id", "age_from": "enqueued"}
    with pytest.raises(ValueError, match="age_from"):
        config.Queue.model_validate({**base, "kind": "due", "due_column": "vt"})
    with pytest.raises(ValueError, match="age_from"):
        config.Queue.model_validate({**base, "kind": "status", "status_column": "s", "enqueued_at": "at"})
    assert config.Queue.model_validate({**base, "kind": "due", "due_column": "vt", "enqueued_at": "at"}).age_from \
        == "enqueued"
