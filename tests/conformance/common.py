"""The conformance harness shared by every preset module (issue 29).

A module builds its library's real table once (installed by the library itself, or its migrations'
DDL transcribed with the upstream version and file named), fills it at production size with
set-based SQL, moves jobs with the library's own fetch / complete / retry / rescue statements, and
then compares queueops's figures with the library's own definitions written as SQL (``truth``).
The comparison is the same in every module: exact below the count cap; above it an estimate that
says so in its note and lies within 10 % of the truth; ages within a few seconds; and the same in
the three server time zones. Every comparison is recorded in ``artifacts/conformance/<preset>.json``
(library x metric x zone: truth, queueops, note) so the figures can be read after a run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from collectors import runner
from queueops import actions, config
from tests.conftest import ROOT

ZONES = ("UTC", "Asia/Tokyo", "America/New_York")
CAP = runner.COUNT_CAP
ROWS = 200_000  # the production shape's size (issue 29: at least 200,000 rows)
ESTIMATE_TOLERANCE = 0.10
AGE_SLACK_S = 30.0  # figures read a few seconds apart, in three zones
ARTIFACTS = ROOT / "artifacts" / "conformance"


def zone_url(url: str, zone: str) -> str:
    """``url`` for a session whose TimeZone is ``zone`` (libpq options): what a server whose
    ``timezone`` setting is ``zone`` gives every new session."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-c TimeZone={zone}', safe='')}"


def session_zone(url: str, password: str, zone: str) -> str:
    with psycopg.connect(zone_url(url, zone), password=password) as conn:
        row = conn.execute("SHOW TimeZone").fetchone()
        return str(row[0]) if row else ""


def make_config(url: str, password_file: Path, zone: str, queues: Iterable[Mapping[str, Any]],
                store: Path | None = None, role: str | None = None) -> config.Config:
    """A config of one target (the test server, read in ``zone``) and ``queues`` on it; ``store``:
    the SQLite file actions audit to (a test's own tmp path); ``role``: the identity's default role
    (``operator`` to execute an action)."""
    raw: dict[str, Any] = {"targets": [{"name": "t", "dialect": "postgresql", "url": zone_url(url, zone),
                                        "password": f"file:{Path(password_file).resolve()}"}],
                           "queues": [{"target": "t", **q} for q in queues]}
    if store is not None:
        raw["store"] = {"url": f"sqlite:///{store}"}
    if role is not None:
        raw["identity"] = {"default_role": role}
    return config.parse(raw)


@dataclass(frozen=True)
class Figure:
    value: float | None
    note: str = ""

    @property
    def estimate(self) -> bool:
        """The statistics' figure, not a count: its note begins 'estimate'."""
        return self.note.startswith("estimate")

    @property
    def bound(self) -> bool:
        """A lower bound: its note begins 'at least' (the cap's count, with or without statistics)."""
        return self.note.startswith("at least")


def collect(cfg: config.Config, queue: str) -> dict[str, Figure]:
    """One collection cycle, as the service runs it: the queue's metric rows with their notes.
    A collector that failed, or a queue_error row for ``queue``, fails the test with the reason."""
    result = runner.run_collectors(cfg, cfg.targets[0])
    errors = [f"{s.collector}: {s.error}" for s in result.status if not s.ok]
    assert not errors, errors
    rows = {r.metric: Figure(r.value, r.note) for r in result.rows if r.queue == queue}
    assert runner.QUEUE_ERROR not in rows, rows[runner.QUEUE_ERROR]
    return rows


def truth(conn: psycopg.Connection, query: str) -> dict[str, float | None]:
    """The library's own figures: one row of named columns (run in a UTC session by the caller)."""
    cur = conn.execute(query)
    row = cur.fetchone()
    assert row is not None, query
    return {d.name: None if v is None else float(v) for d, v in zip(cur.description or [], row, strict=True)}


@dataclass
class Record:
    """Every comparison of one module, written as JSON for the note's table."""

    preset: str
    upstream: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, zone: str, metric: str, want: float | None, got: Figure | None, verdict: str) -> None:
        self.rows.append({"zone": zone, "metric": metric, "truth": want,
                          "queueops": None if got is None else got.value,
                          "note": "" if got is None else got.note, "verdict": verdict})

    def write(self) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{self.preset}.json"
        path.write_text(json.dumps(asdict(self), indent=1, default=str))
        return path


def verdict(metric: str, want: float | None, got: Figure | None, ages: Iterable[str] = ("oldest_age_s", "oldest_lease_age_s"),
            later: float | None = None) -> str:
    """One metric's verdict (``ok...`` when conformant).

    A count equals the truth exactly unless its note says it is an estimate, which must be within
    10 %; an estimate where the truth is at most the cap is a mismatch (below the cap queueops
    counts) unless its note says no index serves the values (then the table is never walked for
    them: issue 29). A lower bound ('at least ...') must not exceed the truth and must be within
    10 % below it: 'at least 1,000' for 5,250 waiting jobs is a floor, not the figure. An age is
    within ``AGE_SLACK_S``. A metric with a truth and no figure is a mismatch:
    a central metric is never silently absent. ``later``: the truth read again after the
    collection; an exact count between the two reads is right (``ok (moved)``): the shapes keep a
    job becoming due every few seconds, and one may cross ``now()`` between the truth and the
    collection (CI once read 298 scheduled jobs against a truth of 299 read just before).
    """
    if got is None or got.value is None:
        return "absent" if want is not None else "ok"
    if want is None:
        return "unexpected"
    if metric in set(ages):
        return "ok" if abs(got.value - want) <= AGE_SLACK_S else "wrong"
    if got.bound:
        high = max(want, later if later is not None else want)
        return "ok (at least)" if high * (1 - ESTIMATE_TOLERANCE) <= got.value <= high + 0.5 else "wrong"
    if got.estimate:
        within = abs(got.value - want) <= ESTIMATE_TOLERANCE * max(want, 1.0)
        # Below the cap queueops counts, unless no index serves the values (issue 29): it then
        # reports the statistics' estimate, and its note says so.
        counted = want > CAP or "no index serves" in got.note
        return "ok (estimate)" if within and counted else ("estimate below the cap" if within else "wrong")
    if math.isclose(got.value, want, abs_tol=0.5):
        return "ok"
    if later is not None and min(want, later) - 0.5 <= got.value <= max(want, later) + 0.5:
        return "ok (moved)"
    return "wrong"


def check(record: Record, zone: str, want: Mapping[str, float | None], got: Mapping[str, Figure],
          ages: Iterable[str] = ("oldest_age_s", "oldest_lease_age_s"),
          later: Mapping[str, float | None] | None = None) -> list[str]:
    """Compare queueops's figures with the truth (:func:`verdict` per metric), record each; return
    the mismatches (empty: conformant). ``later``: the truth read again after the collection."""
    bad: list[str] = []
    for metric, w in want.items():
        g = got.get(metric)
        v = verdict(metric, w, g, ages, (later or {}).get(metric))
        record.add(zone, metric, w, g, v if v != "ok (moved)" else f"ok (moved: {(later or {})[metric]} after)")
        if not v.startswith("ok"):
            bad.append(f"{zone} {metric}: truth {w}, queueops {None if g is None else g.value} "
                       f"({'' if g is None else g.note}) -> {v}")
    return bad


def utc_truth(connect: Callable[[], psycopg.Connection], query: str) -> dict[str, float | None]:
    """:func:`truth` in a session of its own whose TimeZone is UTC."""
    with connect() as conn:
        conn.execute("SET TimeZone = 'UTC'")
        return truth(conn, query)


def in_every_zone(preset: str, upstream: str, url: str, password: str, queue: str,
                  config_for: Callable[[str], config.Config], truth_of: Callable[[], dict[str, float | None]],
                  left_out: Mapping[str, str] | None = None) -> tuple[Record, dict[str, float | None]]:
    """Issue 29's central comparison, the same in every module: in each server time zone, one
    collection cycle (``config_for(zone)``) against the library's own figures (``truth_of()``, read
    in a UTC session), recorded and printed; fails with every mismatch. ``left_out``: metrics kept
    out of the comparison, each with why (recorded as such). Returns the record and the last truth
    (for a module's assertions on its shape)."""
    record = Record(preset, upstream)
    bad: list[str] = []
    want: dict[str, float | None] = {}
    for zone in ZONES:
        assert session_zone(url, password, zone) == zone
        want = truth_of()
        got = collect(config_for(zone), queue)
        for metric, why in (left_out or {}).items():
            record.add(zone, metric, want.pop(metric), got.get(metric), f"left out: {why}")
        # Only a mismatch reads the truth again: a figure between the two reads was right when read.
        later = truth_of() if any(not verdict(m, w, got.get(m)).startswith("ok") for m, w in want.items()) else None
        bad += check(record, zone, want, got, later=later)
    record.write()
    print(f"\n{preset.upper()} ({upstream})")
    for r in record.rows:
        print(f"  {r['zone']:17} {r['metric']:20} truth {r['truth']!s:>12} queueops {r['queueops']!s:>12} "
              f"{r['verdict']:14} {r['note']}")
    assert not bad, "\n".join(bad)
    return record, want


def truth_ids(connect: Callable[[], psycopg.Connection], query: str) -> list[Any]:
    """The ids the library's own definition selects (one column), read in a UTC session."""
    with connect() as conn:
        conn.execute("SET TimeZone = 'UTC'")
        return sorted(r[0] for r in conn.execute(query).fetchall())


def stuck_list(cfg: config.Config, queue: str) -> list[Any]:
    """The items drill-down's stuck list, read as the console reads it (:func:`queueops.items.read`
    on the target's collect connection, at most items.LIMIT rows), sorted."""
    from queueops import engine, items

    q = cfg.queue(queue)
    target = cfg.target(q.target)
    with engine.connection(target, "collect", cfg.base_dir, application="queueops-conformance") as conn:
        rows = items.read(conn, q, "stuck")
    return sorted(r["item"] for r in rows)


def assert_stuck_list_is_the_count(config_for: Callable[[str], config.Config], queue: str,
                                   want: list[Any], counted: float | None) -> None:
    """Issue: "stuck: 20" and the list behind it must agree. In every server time zone the
    drill-down's stuck list holds exactly ``want``, the ids the library's own stuck definition
    selects (the truth query's stuck_leases, ``counted``), no more, no fewer, each once."""
    from queueops import items

    assert counted is not None and len(want) == counted and 0 < counted < items.LIMIT, (want, counted)
    for zone in ZONES:
        got = stuck_list(config_for(zone), queue)
        assert got == want, (zone, sorted(set(got) ^ set(want)), len(got), len(want))


def assert_waiting_list_is_the_age(config_for: Callable[[str], config.Config], queue: str,
                                   age: float | None) -> list[dict[str, Any]]:
    """Issue: "oldest waiting: 1 h 30 min" and the list behind it must agree. In every server time
    zone the drill-down's oldest-waiting list (read as the console reads it, catalog types first)
    begins with an item of the library's own oldest age (the truth query's oldest_age_s, ``age``,
    within :data:`AGE_SLACK_S`), oldest first. Returns the UTC list."""
    from queueops import engine, items

    assert age is not None and age > 0, age
    first: list[dict[str, Any]] = []
    for zone in ZONES:
        cfg = config_for(zone)
        q = cfg.queue(queue)
        target = cfg.target(q.target)
        with engine.connection(target, "collect", cfg.base_dir, application="queueops-conformance") as conn:
            rows = items.read(conn, q, "waiting")
        ages = [float(r["age_s"]) for r in rows]
        assert rows and abs(ages[0] - age) <= AGE_SLACK_S, (zone, age, rows[:3])
        assert ages == sorted(ages, reverse=True), (zone, ages[:10])
        first = first or rows
    return first


def proposed(cfg: config.Config, schema: str) -> list[tuple[str, str | None]]:
    """Issue 29 item 6: what ``discover`` proposes in ``schema`` (table, preset), read from the
    catalog as the command reads it."""
    from queueops import discovery, engine

    conn = engine.connect(cfg.targets[0], "check", cfg.base_dir)
    try:
        tables = discovery.read_catalog(conn)
    finally:
        conn.close()
    return [(p.table.name, p.preset) for p in discovery.discover(tables, "postgresql") if p.table.schema == schema]


def requeue_preview_keys(cfg: config.Config, queue: str) -> set[Any]:
    """The keys requeue's preview would release (the items it shows; the preview's own cap applies)."""
    plan = actions.plan(cfg, "requeue", queue, {})
    return {r["item"] for r in plan.preview.rows}


def requeue(cfg: config.Config, queue: str) -> actions.Result:
    """Preview then execute requeue, as the CLI's ``act requeue --yes`` does."""
    plan = actions.plan(cfg, "requeue", queue, {})
    return actions.execute(cfg, plan)


# Issue 29 item 5: a fast collector statement reads a number of shared buffers proportional to the
# count cap, never to the table. The bound: the cap's index entries (a few hundred per leaf page),
# the heap pages of the rows it returns, and the planner's catalog reads: 20 pages per cap's worth.
FAST_COLLECTORS = ("depth", "oldest_age_s", "stuck_leases")
BUFFER_BOUND = 20 * CAP // 10  # 2,000 buffers at the 1,000-row cap; a 200k-row table is ~2,000-10,000 pages


@dataclass(frozen=True)
class Reads:
    collector: str
    buffers: int
    relpages: int
    read_by: tuple[str, ...]  # index names (or node types) that read the queue table


def _nodes(plan: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def measured_reads(cfg: config.Config, queue: str, conn: psycopg.Connection,
                   collectors: Iterable[str] = FAST_COLLECTORS) -> list[Reads]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of each statement the collector really renders for ``queue``
    (custom plan; ``conn`` is a session of the test's own). A collector the mapping does not run is
    left out."""
    from collectors import registry
    from queueops import coltypes, engine

    target = cfg.targets[0]
    q = cfg.queue(queue)
    qconn = engine.connect(target, "collect", cfg.base_dir)
    try:
        types = coltypes.read_types(qconn, [q])
        stmts = [(name, runner.build_statement(registry.by_name(name), target, [q], types)) for name in collectors]
    finally:
        qconn.close()
    out = []
    table = q.table or ""
    for name, stmt in stmts:
        if stmt is None:
            continue
        row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + stmt.sql, stmt.params).fetchone()
        assert row is not None
        plan = row[0][0]["Plan"]
        buffers = int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))
        pages = conn.execute("SELECT relpages FROM pg_class WHERE oid = %s::regclass",
                             (f'"{q.schema_ or "public"}"."{table}"',)).fetchone()
        used = tuple(sorted({str(n.get("Index Name") or n["Node Type"]) for n in _nodes(plan)
                             if n.get("Relation Name") == table}))
        out.append(Reads(name, buffers, int(pages[0]) if pages else 0, used))
    return out


def analyze(conn: psycopg.Connection, qualified: str) -> None:
    """ANALYZE a built table as test_depth_production does: every row sampled (statistics target
    1,000), so a 10 % bound tests an estimate's method, not ANALYZE's sampling error; the insert's
    live-row count flushed first (flushed after, n_live_tup would count the rows twice).

    A partitioned table is analyzed as autovacuum leaves it in production: its partitions only.
    Autovacuum never analyzes a partitioned parent, so the parent has no pg_stats rows and its
    reltuples stays -1 unless someone runs ANALYZE on it by hand (pg-boss and PGMQ never do);
    an ANALYZE of the parent here gave the estimates statistics no production table has."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")
    conn.execute("SET default_statistics_target = 1000")
    leaves = [r[0] for r in conn.execute(
        "SELECT p.relid::regclass::text FROM pg_partition_tree(%s::regclass) AS p WHERE p.isleaf AND p.level > 0",
        (qualified,)).fetchall()]
    for relation in leaves or [qualified]:
        conn.execute(f"ANALYZE {relation}")
    conn.execute("RESET default_statistics_target")


def wait_gone(conn: psycopg.Connection, pid: int, timeout_s: float = 30.0) -> None:
    """Wait until backend ``pid`` has left pg_stat_activity (a terminated worker's session, whose
    advisory locks go with it)."""
    import time

    deadline = time.monotonic() + timeout_s
    while conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
        assert time.monotonic() < deadline, f"backend {pid} still there after {timeout_s} s"
        time.sleep(0.05)
