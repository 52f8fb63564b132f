"""The store on SQLite (WAL) and on a real PostgreSQL database: writes, UTC round trip, retention
in batches, buffering while the store is away, and schema upgrades."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, func, insert, inspect, select, text

from queueops.rows import SnapshotRow, StatusRow
from queueops.store import open_engine, reader
from queueops.store.db import ensure_schema
from queueops.store.retention import prune
from queueops.store.schema import audit_log, collector_status, snapshots
from queueops.store.writer import SERVICE_TARGET, StoreWriter
from tests.service.conftest import block_connections

NOW = datetime(2026, 11, 21, 10, 30, tzinfo=UTC)


def cycle(ts: datetime, n: int = 3, target: str = "t") -> tuple[list[SnapshotRow], list[StatusRow]]:
    rows = [SnapshotRow(ts, target, "db", f"q{i}", "depth", float(i)) for i in range(n)]
    return rows, [StatusRow(ts, target, "depth", True, 1.5, n)]


def count(engine: Engine, table=snapshots) -> int:  # noqa: ANN001
    with engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()


@pytest.fixture()
def sqlite_engine(tmp_path: Path) -> Engine:
    return open_engine(f"sqlite:///{tmp_path / 'store.db'}")


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path: Path, pg_store: str) -> Engine:  # noqa: ANN001
    if request.param == "sqlite":
        return open_engine(f"sqlite:///{tmp_path / 'store.db'}")
    eng = open_engine(pg_store)
    with eng.begin() as conn:
        for t in ("snapshots", "collector_status", "alert_state", "audit_log", "lake_exports", "service_state"):
            conn.execute(text(f'TRUNCATE "{t}"'))
    return eng


def test_rows_round_trip_in_utc(engine: Engine) -> None:
    w = StoreWriter(engine, bound=100)
    # a non-UTC aware time is stored as the same instant
    ts = datetime(2026, 11, 21, 12, 30, tzinfo=UTC).astimezone(datetime.now().astimezone().tzinfo)
    rep = w.write(*cycle(ts))
    assert rep.ok and rep.written == 4 and rep.buffered == 0
    got = reader.series(engine, "t", "q2", "depth", since=ts - timedelta(minutes=1))
    assert [(r["ts"], r["value"]) for r in got] == [(datetime(2026, 11, 21, 12, 30, tzinfo=UTC), 2.0)]
    assert got[0]["ts"].tzinfo is not None
    st = reader.status_since(engine, ts - timedelta(minutes=1))
    assert st[0]["ok"] is True and st[0]["rows"] == 3
    latest = reader.latest(engine, ts - timedelta(minutes=1))
    assert {r["queue"] for r in latest} == {"q0", "q1", "q2"}


def test_the_fast_insert_path_stores_exactly_what_sqlalchemy_would(engine: Engine) -> None:
    ts = datetime(2026, 11, 21, 12, 30, 0, 5, tzinfo=UTC)
    StoreWriter(engine, 10).write([SnapshotRow(ts, "fast", "db", "q", "depth", None, "n")],
                                  [StatusRow(ts, "fast", "depth", False, 1.0, 0, "boom", True)])
    with engine.begin() as conn:
        conn.execute(insert(snapshots), [{"ts": ts, "target": "core", "database": "db", "queue": "q",
                                          "metric": "depth", "value": None, "note": "n"}])
        conn.execute(insert(collector_status), [{"ts": ts, "target": "core", "collector": "depth", "ok": False,
                                                 "duration_ms": 1.0, "rows": 0, "error": "boom", "timeout": True}])
        queries = (text('SELECT ts, "database", queue, metric, value, note FROM snapshots WHERE target = :t'),
                   text("SELECT ts, collector, ok, duration_ms, rows, error, timeout FROM collector_status "
                        "WHERE target = :t"))
        for q in queries:  # as stored, untyped (SQLite hands back its text)
            assert conn.execute(q, {"t": "fast"}).all() == conn.execute(q, {"t": "core"}).all()
    assert [r["ts"] for r in reader.series(engine, "fast", "q", "depth", since=ts)] == [ts]
    assert reader.series(engine, "fast", "q", "depth", since=ts + timedelta(microseconds=1)) == []


def test_retention_prunes_in_batches_and_keeps_the_audit_log(engine: Engine) -> None:
    old, new = NOW - timedelta(days=15), NOW - timedelta(days=13)
    with engine.begin() as conn:
        conn.execute(insert(snapshots), [{"ts": old, "target": "t", "database": "", "queue": "q", "metric": "depth",
                                          "value": float(i), "note": ""} for i in range(2500)])
        conn.execute(insert(snapshots), [{"ts": new, "target": "t", "database": "", "queue": "q", "metric": "depth",
                                          "value": 1.0, "note": ""}])
        conn.execute(insert(collector_status), [{"ts": old, "target": "t", "collector": "depth", "ok": True,
                                                 "duration_ms": 1.0, "rows": 1, "error": "", "timeout": False}])
        conn.execute(insert(audit_log), [{"start_time": old, "user_name": "u", "role": "operator", "action": "requeue",
                                          "target": "t", "queue": "q", "command": "x", "outcome": "ok"}])
    out = prune(engine, retention_days=14, batch=1000, now=NOW)
    assert out["snapshots"] == 2500 and out["collector_status"] == 1
    assert out["batches"] == 3 + 1  # 1000 + 1000 + 500 for snapshots, one for status
    assert count(engine) == 1 and count(engine, audit_log) == 1


def test_sqlite_store_is_wal_and_a_reader_does_not_block_the_writer(sqlite_engine: Engine) -> None:
    path = sqlite_engine.url.database
    w = StoreWriter(sqlite_engine, bound=10)
    assert w.write(*cycle(NOW)).ok
    reader_conn = sqlite3.connect(path)
    assert reader_conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    reader_conn.execute("BEGIN")
    before = reader_conn.execute("SELECT count(*) FROM snapshots").fetchone()[0]  # read snapshot held open
    rep = w.write(*cycle(NOW + timedelta(seconds=1)))
    assert rep.ok and rep.buffered == 0
    assert reader_conn.execute("SELECT count(*) FROM snapshots").fetchone()[0] == before  # its snapshot
    reader_conn.rollback()
    assert reader_conn.execute("SELECT count(*) FROM snapshots").fetchone()[0] == before + 3
    reader_conn.close()


def test_store_outage_buffers_up_to_the_bound_then_flushes(lab, pg_store: str) -> None:  # noqa: ANN001
    engine = open_engine(pg_store)
    with engine.begin() as conn:
        conn.execute(text('TRUNCATE "snapshots", "collector_status"'))
    database = engine.url.database
    w = StoreWriter(engine, bound=10, retry_max_s=0)  # try the store on every write
    patient = StoreWriter(engine, bound=10, retry_max_s=1)  # backs off (here 1 s) while the store is away
    assert w.write(*cycle(NOW)).ok
    block_connections(lab, database, allow=False)
    try:
        reports = [w.write(*cycle(NOW + timedelta(seconds=s))) for s in (1, 2, 3)]  # 4 rows each
        assert [patient.write(*cycle(NOW)).ok for _ in range(3)] == [False] * 3
        assert patient.attempts == 1 and patient.buffered == 10 and patient.dropped_total == 2
    finally:
        block_connections(lab, database, allow=True)
    assert [r.ok for r in reports] == [False, False, False]
    assert [r.buffered for r in reports] == [4, 8, 10]
    assert reports[-1].dropped_total == 2 and reports[-1].bound == 10
    assert "ALLOW_CONNECTIONS" in reports[0].error or "not currently accepting" in reports[0].error
    back = w.write(*cycle(NOW + timedelta(seconds=4)))
    assert back.ok and back.written == 14 and back.buffered == 0
    assert patient.attempts == 1  # it did not hammer the store during its back-off...
    time.sleep(1.1)
    rep = patient.flush()          # ...and writes once the back-off has elapsed
    assert rep.ok and rep.written == 10 and patient.attempts == 2
    # the two oldest buffered rows (second 1: q0 and q1) were dropped; everything else is there
    with engine.connect() as conn:
        got = conn.execute(select(snapshots.c.ts, snapshots.c.queue).order_by(snapshots.c.id)).all()
    stamps = [(ts.astimezone(UTC).second, q) for ts, q in got]
    assert (1, "q0") not in stamps and (1, "q1") not in stamps and (1, "q2") in stamps
    assert len(stamps) == (3 + 1 + 3 + 3 + 3) + 7  # and the patient writer's 9 snapshot rows less the 2 dropped
    outage = reader.status_since(engine, NOW - timedelta(days=1), target=SERVICE_TARGET)
    assert len(outage) == 2 and not any(o["ok"] for o in outage)  # one report per writer
    assert all("bound 10" in o["error"] and "dropped 2" in o["error"] for o in outage)


def test_ensure_schema_adds_new_nullable_columns_to_an_old_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    raw = create_engine(url)
    with raw.begin() as conn:  # lake_exports as the first version created it
        conn.execute(text("CREATE TABLE lake_exports (hour DATETIME PRIMARY KEY, rows INTEGER NOT NULL, "
                          "exported_at DATETIME NOT NULL)"))
        conn.execute(text("INSERT INTO lake_exports VALUES ('2026-11-21 09:00:00.000000', 5, "
                          "'2026-11-21 10:01:00.000000')"))
    ensure_schema(raw)
    cols = {c["name"] for c in inspect(raw).get_columns("lake_exports")}
    assert "status_rows" in cols
    with raw.connect() as conn:
        assert conn.execute(text("SELECT rows, status_rows FROM lake_exports")).one() == (5, None)



def _open_store(url: str, start) -> None:  # noqa: ANN001 - a multiprocessing Barrier
    start.wait(30)
    open_engine(url)


def test_processes_opening_a_new_store_at_once_all_succeed(tmp_path: Path) -> None:
    """The service and the console may create the same new SQLite store at the same moment; the
    loser of the CREATE TABLE race used to die with "table ... already exists"."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")  # no import delay: the processes really race
    for i in range(8):
        url = f"sqlite:///{tmp_path / f's{i}.db'}"
        start = ctx.Barrier(3)
        procs = [ctx.Process(target=_open_store, args=(url, start)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0, 0, 0], f"store {i}"
        assert {"snapshots", "audit_log"} <= set(inspect(create_engine(url)).get_table_names())


def test_alert_states_are_saved_in_batches_and_match_memory(engine: Engine) -> None:
    """The manager writes a cycle's changed states with one batched UPDATE and DELETE; a cycle that
    mixes updated, new and dropped states must still leave the table equal to the states in memory,
    and a restarted manager must read back exactly those."""
    from queueops.alerts.manager import AlertManager
    from queueops.alerts.rules import Rule
    from queueops.store.schema import alert_state

    rules = [Rule("deep", "depth", ">", 5.0), Rule("deep-for", "depth", ">", 5.0, for_s=60.0)]

    def rows(values: dict[str, float]) -> list[SnapshotRow]:
        return [SnapshotRow(NOW, "t", "db", q, "depth", v) for q, v in values.items()]

    def stored() -> dict[tuple[str, str], tuple[str, float | None]]:
        with engine.connect() as conn:
            return {(r["rule"], r["queue"]): (r["state"], r["value"])
                    for r in conn.execute(select(alert_state)).mappings()}

    m = AlertManager(rules, engine, log_lines=False)
    m.on_cycle(rows({"q0": 9, "q1": 8, "q2": 1}), NOW)  # q0, q1: firing (deep) and pending (deep-for)
    m.on_cycle(rows({"q0": 10, "q1": 1, "q3": 7}), NOW + timedelta(seconds=1))  # q0 updated, q1 resolved, q3 new
    expected = {("deep", "q0"): ("firing", 10.0), ("deep-for", "q0"): ("pending", 10.0),
                ("deep", "q1"): ("resolved", 1.0),  # deep-for on q1 was pending: dropped
                ("deep", "q3"): ("firing", 7.0), ("deep-for", "q3"): ("pending", 7.0)}
    assert stored() == expected
    assert {(k[0], k[2]): (s.state, s.value) for k, s in m.states.items()} == expected
    m.on_cycle(rows({"q0": 11, "q3": 8}), NOW + timedelta(seconds=2))  # only stored states change: one batch
    expected.update({("deep", "q0"): ("firing", 11.0), ("deep-for", "q0"): ("pending", 11.0),
                     ("deep", "q3"): ("firing", 8.0), ("deep-for", "q3"): ("pending", 8.0)})
    assert stored() == expected
    m.close()
    again = AlertManager(rules, engine, log_lines=False)
    assert {(k[0], k[2]): (s.state, s.value) for k, s in again.states.items()} == expected
    again.close()


# The alert history's queue state (issue 32 leftovers): the rules of a queue 'jobs' whose table a
# session holds (a root cause) while its dequeues wait (a metric), held one 5 s interval.
ALERT_CFG = {
    "schedule": {"fast_s": 5},
    "targets": [{"name": "t", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
    "queues": [{"name": "jobs", "target": "t", "kind": "lease", "table": "jobs", "key": "id",
                "lease_column": "taken_at"}],
}


def _lock_hold(waiters: int, holder_s: float | None) -> list[SnapshotRow]:
    held = json.dumps({"holders": [{"pid": 5, "mode": "ExclusiveLock", "xact_age_s": holder_s}]})
    return [SnapshotRow(NOW, "t", "db", "jobs", "lock_blockers", 0 if holder_s is None else 1,
                        "exact" if holder_s is None else held),
            SnapshotRow(NOW, "t", "db", "jobs", "lock_waiters", waiters, '{"pids": [8]}' if waiters else "")]


def _alert_events(engine: Engine) -> list[dict]:
    from queueops.store.schema import alert_events

    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(alert_events).order_by(alert_events.c.id)).mappings()]


def test_a_transition_comes_back_from_alert_events_with_its_queue_state(engine: Engine) -> None:
    from queueops import config as config_mod
    from queueops.alerts.manager import AlertManager
    from queueops.alerts.rules import effective_rules

    with engine.begin() as conn:  # the PostgreSQL store is the session's: start from no alerts
        conn.execute(text('DELETE FROM "alert_events"'))
        conn.execute(text('DELETE FROM "alert_state"'))
    m = AlertManager(effective_rules(config_mod.parse(ALERT_CFG)), engine, log_lines=False)
    m.on_cycle(_lock_hold(1, 5), NOW)
    fired = m.on_cycle(_lock_hold(1, 5), NOW + timedelta(seconds=5))       # cause warn + waiters warn
    assert m.on_cycle(_lock_hold(1, 61), NOW + timedelta(seconds=10)) == []  # held 61 s: the crit's hold
    worse = m.on_cycle(_lock_hold(1, 66), NOW + timedelta(seconds=15))     # the cause's crit
    m.close()
    assert {(t.rule.name, t.queue_state) for t in fired} == {("cause:table_lock:warn", "warn"),
                                                             ("threshold:lock_waiters:warn", "warn")}
    assert [(t.rule.name, t.queue_state) for t in worse] == [("cause:table_lock:crit", "crit")]
    got = [(e["rule"], e["state"], e["queue_state"]) for e in _alert_events(engine)]
    assert sorted(got) == sorted((t.rule.name, t.state, t.queue_state) for t in (*fired, *worse))


def test_an_old_store_gains_alert_events_queue_state_and_keeps_its_rows(engine: Engine) -> None:
    """alert_events as the version that added it created it (commit ca21e44), with rows: opening the
    store adds the column in place (NULL on the old rows, which stay), and the next transitions
    write it."""
    from sqlalchemy import Column, DateTime, Float, Index, MetaData, String, Table, Text

    from queueops.alerts.manager import AlertManager
    from queueops.alerts.rules import Rule
    from queueops.store.schema import RowId
    from queueops.store.timeutil import to_utc

    old = Table(
        "alert_events", MetaData(),
        Column("id", RowId, primary_key=True, autoincrement=True),
        Column("at", DateTime(timezone=True), nullable=False),
        Column("rule", String(256), nullable=False),
        Column("target", String(128), nullable=False),
        Column("queue", String(128), nullable=False),
        Column("state", String(16), nullable=False),
        Column("severity", String(8), nullable=False),
        Column("metric", String(128), nullable=False),
        Column("value", Float, nullable=True),
        Column("active_since", DateTime(timezone=True), nullable=False),
        Column("condition", Text, nullable=False, default=""),
        Index("ix_alert_events_at", "at"))
    with engine.begin() as conn:
        conn.execute(text('DROP TABLE IF EXISTS "alert_events"'))
        conn.execute(text('DELETE FROM "alert_state"'))
    old.create(engine)
    kept = [{"at": NOW - timedelta(minutes=m), "rule": "deep", "target": "t", "queue": "jobs", "state": s,
             "severity": "warn", "metric": "depth", "value": v, "active_since": NOW - timedelta(minutes=9),
             "condition": "depth > 5"} for m, s, v in ((9, "firing", 9.0), (8, "resolved", 1.0))]
    with engine.begin() as conn:
        conn.execute(insert(old), kept)
    assert "queue_state" not in {c["name"] for c in inspect(engine).get_columns("alert_events")}

    ensure_schema(engine)  # what the service and open_engine do at start

    assert "queue_state" in {c["name"] for c in inspect(engine).get_columns("alert_events")}
    m = AlertManager([Rule("deep", "depth", ">", 5.0, severity="warn")], engine, log_lines=False)
    m.on_cycle([SnapshotRow(NOW, "t", "db", "jobs", "depth", 7.0)], NOW)
    m.close()
    rows = _alert_events(engine)
    assert [(r["state"], r["value"], r["queue_state"]) for r in rows] == [
        ("firing", 9.0, None), ("resolved", 1.0, None), ("firing", 7.0, "warn")]
    assert [to_utc(r["at"]) for r in rows[:2]] == [k["at"] for k in kept]
    assert rows[2]["id"] > rows[1]["id"] > rows[0]["id"]
