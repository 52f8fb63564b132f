"""``config check --live``: the whole truth about each queue's mapping, checked on the servers.

Per queue: do its tables and columns exist, what are their real types (and do the configured
values and roles fit them: :mod:`queueops.coltypes`), which metrics this mapping can and cannot
produce and why, and whether each frequent statement seeks or scans -- PostgreSQL by ``EXPLAIN``
of the statement the collector really renders (with sequential scans disabled, so only a missing
index leaves a scan or a sort), SQL Server from ``sys.indexes`` / ``sys.index_columns`` (key
order and filtered indexes included, :mod:`queueops.indexadvice`). A scan comes with the exact
``CREATE INDEX`` that fixes it (never on a view).

PostgreSQL targets also get their logins' privileges checked (:mod:`queueops.privileges`): the
collector login's (``pg_monitor``, ``SELECT`` on every table a collector reads) and the action
login's (what each action that applies to each queue writes, the owner's rights for rebuild,
``pg_signal_backend`` for terminate), each missing grant named with what it disables and the
``GRANT`` that fixes it. A queue whose relation is not a table (a view, a materialized view, a
foreign table) is an error on either engine.

Only catalog lookups, ``EXPLAIN`` and, for the frequent statements, ``EXPLAIN (ANALYZE, BUFFERS)``
of the collector's own read-only statement (what every cycle runs anyway) run, with names bound as
values: nothing is written. Every finding is one line ``FILE: SEVERITY: queue 'Q': FIELD = VALUE: REASON; fix:
FIX``; the file gets one verdict, ``ok``, ``warnings`` or ``errors``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from queueops import (
    coltypes,
    engine,
    indexadvice,
    mapping,
    presets,
    privileges,
    readiness,
    secrets,
    sessions,
    sqlfiles,
)
from queueops.config import Config, Queue, Target
from queueops.finding import Finding

# The frequent (fast) statements that read the queue table itself.
SEEK_CHECKED = ("depth", "oldest_age_s", "stuck_leases", "watermark_drift")


@dataclass
class LiveReport:
    source: str
    findings: list[Finding] = field(default_factory=list)
    details: list[str] = field(default_factory=list)  # per queue: columns, types, metrics

    @property
    def verdict(self) -> str:
        if any(f.severity == "error" for f in self.findings):
            return "errors"
        return "warnings" if self.findings else "ok"

    def lines(self) -> Iterator[str]:
        yield from self.details
        for f in self.findings:
            yield f.line(self.source)
        errors = sum(f.severity == "error" for f in self.findings)
        warnings = len(self.findings) - errors
        yield f"{self.source}: {self.verdict} ({errors} error(s), {warnings} warning(s))"


def _tables(q: Queue) -> list[tuple[str, str | None, str]]:
    """``(role, schema, table)`` of every table the queue maps."""
    out: list[tuple[str, str | None, str]] = [("table", q.schema_, q.table)]
    if q.sequence_table:
        out.append(("sequence_table", q.schema_, q.sequence_table))
    if q.data_table:
        out.append(("data_table", q.schema_, q.data_table))
    if q.watermark:
        out.append(("watermark.table", q.watermark.schema_ or q.schema_, q.watermark.table))
    if q.times_from:
        out.append(("times_from.table", q.times_from.schema_ or q.schema_, q.times_from.table))
    return out


def uncollected_thresholds(target: Target, q: Queue) -> list[tuple[str, str, str]]:
    """``(metric, why, fix)`` for each of the queue's own thresholds on a metric that no collector
    reads for its mapping (:func:`collectors.runner.uncollected`): the level never judges anything
    and its alert never fires. Needs no connection: ``config check`` tells it too."""
    from collectors import runner

    return [(metric, f"no collector reads {metric} for this queue's mapping ({', '.join(names)}: no block "
                     "applies to it), so this level never judges anything and its alert never fires",
             f"remove the threshold, or map the columns {names[0]} reads for a {q.kind} queue "
             "(docs/metrics.md, 'Columns and indexes each metric needs')")
            for metric, names in runner.uncollected(target, q, q.thresholds).items()]


def coverage(q: Queue, target: Target) -> list[Finding]:
    """Metrics this mapping cannot produce, and why (a silent hole is worse than a warning)."""
    out = [Finding("warning", q.name, f"thresholds.{metric}", "", why, fix)
           for metric, why, fix in uncollected_thresholds(target, q)]
    if not q.enqueued_at and not q.times_from and q.kind in ("delete", "status", "lease", "ring"):
        out.append(Finding("warning", q.name, "enqueued_at", "", "no enqueue-time column: oldest_age_s is not "
                           "collected, so its thresholds never fire", "map enqueued_at to the column that holds "
                           "when an item was enqueued"))
    if q.kind == "status" and not q.status_changed_at and not q.times_from:
        out.append(Finding("warning", q.name, "status_changed_at", "", "no status-change time: stuck_leases and "
                           "oldest_lease_age_s are not collected and requeue cannot run",
                           "map status_changed_at to the column set when the status changes"))
    elif q.kind == "status" and not q.status_changed_at:
        out.append(Finding("warning", q.name, "status_changed_at", "", "the status-change time is read from "
                           f"times_from ({q.times_from.table if q.times_from else ''}): stuck_leases is collected, "
                           "but requeue cannot run (it must reset a time on the row itself)",
                           "use the library's own rescue, or map a status-change column of the row"))
    timeout = presets.timeout_warning(q.preset, q.lease_timeout_s)
    if timeout:
        out.append(Finding("warning", q.name, "lease_timeout_s", f"{q.lease_timeout_s:g}", timeout,
                           "raise it above the library's limit, or remove the override"))
    if q.kind == "lease" and q.error_column and not q.error_at and q.max_attempts is not None:
        out.append(Finding("warning", q.name, "error_at", "", f"error_column {q.error_column!r} without error_at: "
                           "an item whose lease and error are both set counts as failed, so a job retried with its "
                           "last error kept (and leased again) is never a stuck lease and never requeued",
                           "map error_at to the column set when the error is written (max_attempts says the library "
                           "retries; most keep the last error while a retry runs)"))
    if q.kind == "lease" and not q.error_column:
        out.append(Finding("warning", q.name, "error_column", "", "no error column: an item that failed and kept "
                           "its lease counts as a stuck lease", "map error_column if failed items stay leased"))
    return out


def _requeue_offer(conn: engine.Connection, q: Queue, report: LiveReport) -> list[Finding]:
    """Whether ``act requeue`` can be offered on ``q`` (a details line), and the findings behind a
    no: what decides readiness that the mapping does not describe (:mod:`queueops.readiness`)."""
    # The refusals of queueops.actions.requeue.check that need no database (livecheck may not
    # import the actions layer): a preset's word, a kind without leases, no status-change time.
    rule, why = presets.get(q.preset).action_rule("requeue") if q.preset else ("allow", "")
    if rule == "refuse" or q.kind not in ("lease", "status") or (q.kind == "status" and not q.status_changed_at):
        why = (f"preset {q.preset!r}: {why}" if rule == "refuse"
               else f"a {q.kind} queue has no lease to release" if q.kind not in ("lease", "status")
               else "no status_changed_at column on the row")
        report.details.append(f"  queue {q.name!r}: requeue not offered: {why}")
        return []
    verdict = readiness.requeue_verdict(q, readiness.read(conn.execute, q, conn.dialect))
    out = [Finding("warning", q.name, fld, value, reason, fix) for fld, value, reason, fix in verdict.warnings]
    if verdict.refusal:
        report.details.append(f"  queue {q.name!r}: requeue not offered: {verdict.refusal}")
        out.append(Finding("warning", q.name, verdict.field, verdict.value,
                           f"requeue cannot be offered: {verdict.refusal}", verdict.fix))
    else:
        sets = readiness_release(q, conn.dialect)
        report.details.append(f"  queue {q.name!r}: requeue can be offered" + (f" (it sets {sets})" if sets else ""))
    return out


def readiness_release(q: Queue, dialect: str) -> str:
    """What requeue writes on ``q`` when its mapping follows readiness ('' for the plain release)."""
    return mapping.compile_queue(q, dialect).names.get("release_set", "")


def _describe(q: Queue, types: dict[tuple[str, str], coltypes.ColumnType], dialect: str) -> str:
    parts = []
    for fld, schema, table, column in coltypes.mapped_columns(q):
        t = types.get((coltypes.qualified(schema, table, dialect), column))
        kind = "?" if t is None else t.type_text + (f" enum: {', '.join(t.labels)}" if t.labels else "")
        parts.append(f"{fld} = {column} ({kind})")
    schema_note = "" if q.schema_ else f", schema not set: resolved as {'public' if dialect == 'postgresql' else 'dbo'}"
    return (f"  queue {q.name!r} ({q.kind} on {coltypes.qualified(q.schema_, q.table, dialect)}{schema_note}): "
            + ", ".join(parts))


def _columns(conn: engine.Connection, qualified: str) -> set[str]:
    stmt = sqlfiles.load(conn.dialect, "catalog_columns").render(values={"qualified_table": qualified})
    return {r["column_name"] for r in conn.execute(stmt)}


def _existence(conn: engine.Connection, q: Queue) -> list[Finding]:
    found_cols: dict[tuple[str | None, str], set[str]] = {}
    out = []
    for role, schema, table in _tables(q):
        name = coltypes.qualified(schema, table, conn.dialect)
        cols = _columns(conn, name)
        found_cols[(schema, table)] = cols
        if not cols:
            out.append(Finding("error", q.name, role, table, f"table {name} does not exist on target {q.target!r} "
                               "(or this login may not read it)", "fix the name, or grant SELECT"))
    for fld, schema, table, column in coltypes.mapped_columns(q):
        cols = found_cols.get((schema, table))
        if cols and column not in cols:
            out.append(Finding("error", q.name, fld, column,
                               f"no such column in {coltypes.qualified(schema, table, conn.dialect)}"
                               f"{_preset_versions(q)}", f"one of: {', '.join(sorted(cols))}"))
    if not out:
        out += _later_version(q, found_cols.get((q.schema_, q.table), set()))
    return out


def _later_version(q: Queue, cols: set[str]) -> list[Finding]:
    """A warning when the table has every signature column of another preset of the same library
    that reads more of them (pg-boss 12's heartbeat_on and blocked for a queue mapped ``pgboss11``):
    the library was upgraded under a config that still names the old version, whose figures are
    silently wrong (a blocked job counted ready, a silent heartbeat never stuck), not missing."""
    if not q.preset or not cols:
        return []
    try:
        p = presets.get(q.preset)
    except KeyError:
        return []
    mine = set(p.signature.columns)
    out = []
    for o in presets.all_presets().values():
        theirs = set(o.signature.columns)
        if (o.library != p.library or o.engine != p.engine or o.signature.table != p.signature.table
                or not theirs > mine or not theirs <= cols):
            continue
        more = ", ".join(c for c in o.signature.columns if c not in mine)
        out.append(Finding("warning", q.name, "preset", q.preset,
                           f"preset {q.preset!r} maps {p.library} {p.versions}, but this table has the columns of "
                           f"{o.library} {o.versions} (preset {o.name!r}): {more}, which {q.preset!r} does not "
                           "read, so its figures leave out what that version does with them",
                           f"preset = {o.name!r}, if the library was upgraded"))
    return out


def _preset_versions(q: Queue) -> str:
    """For a queue mapped by a preset, the library versions that preset describes: a column its
    library renamed in another major version (pg-boss 11's ``expire_seconds`` for 10's
    ``expire_in``) then reads as a version mismatch, not as a typo in the operator's config."""
    if not q.preset:
        return ""
    try:
        p = presets.get(q.preset)
    except KeyError:
        return ""
    others = [f"{o.library} {o.versions}: preset {o.name!r}" for o in presets.all_presets().values()
              if o.library == p.library and o.name != p.name]
    return (f" (preset {q.preset!r} maps {p.library} {p.versions}; is this table another version's?"
            + (f" {'; '.join(others)}" if others else "") + ")")


# A queue is a table: PostgreSQL's relkind r (a table) or p (a partitioned table); SQL Server's
# catalog_types reports r or v.
TABLE_KINDS = ("r", "p")
RELKIND_NAMES = {"v": "a view", "m": "a materialized view", "f": "a foreign table", "c": "a composite type",
                 "S": "a sequence", "i": "an index", "I": "a partitioned index", "t": "a TOAST table"}


def _relkind(q: Queue, types: dict[tuple[str, str], coltypes.ColumnType], dialect: str) -> str | None:
    table = coltypes.qualified(q.schema_, q.table, dialect)
    return next((t.relkind for (tbl, _), t in types.items() if tbl == table), None)


def _not_a_table(q: Queue, types: dict[tuple[str, str], coltypes.ColumnType], dialect: str) -> list[Finding]:
    relkind = _relkind(q, types, dialect)
    if relkind is None or relkind in TABLE_KINDS:
        return []
    what = RELKIND_NAMES.get(relkind, f"relkind {relkind!r}")
    name = coltypes.qualified(q.schema_, q.table, dialect)
    return [Finding("error", q.name, "table", q.table,
                    f"{name} is {what} (relkind {relkind!r}), not a table: a queue must be a table (relkind 'r' "
                    "or 'p'): ghost_records and fragmentation_pct read a table's own pages and indexes, rebuild "
                    "refuses anything else and the other actions would write through it",
                    "map the queue to the table it reads")]


def _pg_privileges(cfg: Config, target: Target, conn: engine.Connection, queues: list[Queue],
                   report: LiveReport) -> set[str]:
    """Both logins' privileges (findings and a details line); returns the queues whose tables the
    collector login cannot read (their other checks are skipped: every statement would fail)."""
    collector = privileges.read(conn, queues)
    report.findings += privileges.collector_missing(collector, queues)
    separate = bool(target.actions_url or target.actions_password)
    action: privileges.Login | None = collector
    if separate:
        try:
            aconn = engine.connect(target, "action", cfg.base_dir, application="queueops-check-action")
        except engine.TargetError as exc:
            action = None
            report.findings.append(Finding("error", None, "actions_url", target.name,
                                           f"cannot connect with the action login: every action fails: {exc}",
                                           "fix actions_url / actions_password"))
        else:
            try:
                action = privileges.read(aconn, queues)
            finally:
                aconn.close()
    if action is not None:
        report.findings += privileges.action_missing(action, queues, separate=separate)
    acting = "the same login" if not separate else _who(action) if action is not None else "cannot connect"
    report.details.append(f"  target {target.name!r}: collector login {_who(collector)}, action login {acting}")
    return {q.name for q in queues if privileges.collector_blocked(collector, q)}


def _who(login: privileges.Login) -> str:
    return f"{login.name!r}" + (" (a superuser: every grant is implied, and it can write)" if login.superuser else "")


def _pg_seeks(conn: engine.Connection, target: Target, q: Queue,
              types: dict[tuple[str, str], coltypes.ColumnType]) -> list[Finding]:
    """EXPLAIN each frequent statement with sequential scans disabled: a scan or a sort of the
    queue table that remains means no index can serve it."""
    from collectors import registry, runner

    table = coltypes.qualified(q.schema_, q.table, "postgresql")
    out = []
    relkind = next((t.relkind for (tbl, _), t in types.items() if tbl == table), "r")
    for name in SEEK_CHECKED:
        stmt = runner.build_statement(registry.by_name(name), target, [q], types)
        if stmt is None:
            continue
        try:
            rows = conn.execute(sqlfiles.Statement("EXPLAIN (VERBOSE, FORMAT JSON) " + stmt.sql, stmt.params))
        except engine.TargetError as exc:
            out.append(Finding("error", q.name, name, q.table, f"the collector's statement fails: {exc}"))
            continue
        plan = rows[0]["QUERY PLAN"][0]["Plan"]
        view = relkind == "v"
        why = _pg_scan(plan, None if view else q.schema_ or "public", None if view else q.table)
        if not why:
            try:
                buffers, how = _pg_measured(conn, stmt)
            except engine.TargetError as exc:
                buffers, how = -1, f"did not finish: {exc}"
            if buffers < 0 or buffers > read_bound():
                why = (f"one run read {buffers:,} shared buffers, over the bound of {read_bound():,} for the "
                       f"{runner.COUNT_CAP:,}-row cap: the read grows with the table ({how})" if buffers >= 0
                       else f"one run {how}")
        if why:
            need = indexadvice.needed(name, q)
            fix = ("it is a view: create the index on its base table" if relkind == "v"
                   else indexadvice.create_index(q, need, "postgresql", partitioned=relkind == "p") if need else "")
            out.append(Finding("warning", q.name, name, q.table, f"scans instead of seeking ({why})", fix))
    return out


def read_bound() -> int:
    """Shared buffers a frequent statement may read (issue 29, item 5): proportional to the count
    cap, never to the table (the cap's index entries, the heap pages of the rows it returns, the
    catalog reads): 20 pages per hundred rows of the cap, 2,000 at the 1,000-row cap."""
    from collectors import runner

    return 2 * runner.COUNT_CAP


def _pg_measured(conn: engine.Connection, stmt: sqlfiles.Statement) -> tuple[int, str]:
    """(shared buffers, what read the most) of one run of ``stmt`` as the collector runs it:
    ``EXPLAIN (ANALYZE, BUFFERS)`` with the planner's own choices (sequential and bitmap scans
    allowed again for this one statement). A plan's shape does not show a walk of a whole index
    that filters away all but a few rows under a LIMIT (procrastinate's and pgqueuer's status
    counts through the primary key: 18,000 and 27,000 buffers at 200,000 rows, no Sort); the
    buffers it read do."""
    conn.execute(sqlfiles.Statement("RESET enable_seqscan"))
    conn.execute(sqlfiles.Statement("RESET enable_bitmapscan"))
    try:
        rows = conn.execute(sqlfiles.Statement("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + stmt.sql, stmt.params))
    finally:
        conn.execute(sqlfiles.Statement("SET enable_seqscan = off"))
        conn.execute(sqlfiles.Statement("SET enable_bitmapscan = off"))
    plan = rows[0]["QUERY PLAN"][0]["Plan"]

    def own(n: dict[str, Any]) -> int:
        kids = sum(int(c.get("Shared Hit Blocks", 0)) + int(c.get("Shared Read Blocks", 0)) for c in n.get("Plans", []))
        return int(n.get("Shared Hit Blocks", 0)) + int(n.get("Shared Read Blocks", 0)) - kids

    reader = max((n for n in _nodes(plan) if "Relation Name" in n), key=own, default=None)
    how = "" if reader is None else " ".join(
        str(x) for x in (reader["Node Type"], reader.get("Index Name") and f"of {reader['Index Name']}",
                         f"on {reader['Relation Name']}") if x)
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0)), how


def _pg_stuck_served(conn: engine.Connection, q: Queue) -> list[Finding]:
    """Whether stuck_leases can be counted on a lease queue (issue 29): the collector's own prelude
    decides it (an index leading with the lease column); without one, on a table past the
    small-table limit, the collector reports no value ("not counted"), and this says so with the
    index that fixes it. A status queue's stuck items are always counted (without an index that
    serves them, by reading the table: the seek check names it, with the index)."""
    from collectors import runner

    if q.kind != "lease" or not q.lease_column:
        return []
    sqlf = sqlfiles.load("postgresql", "stuck_leases")
    c = runner.compiled(q, "postgresql")
    values = {**runner.target_lists([c]), "cap": runner.COUNT_CAP, "small_pages": runner.SMALL_TABLE_PAGES}
    stmt = sqlf.render("prelude", {}, values) + sqlf.render("served", {}, c.values)
    rows = conn.execute(stmt)
    if not rows:
        return []
    r = rows[0]
    if r["lease_indexed"] or r["small"] or r["is_view"]:
        return []  # a view is refused as a queue (an error of its own, _not_a_table)
    need = indexadvice.needed("stuck_leases", q)
    fix = indexadvice.create_index(q, need, "postgresql") if need else ""
    return [Finding("warning", q.name, "stuck_leases", q.table,
                    f"not counted: no index leads with the lease column, and the table has {r['pages']} pages "
                    f"(over {runner.SMALL_TABLE_PAGES}, the collector does not read it whole): stuck_leases and "
                    "oldest_lease_age_s have no value", fix)]


def _pg_ready_index(q: Queue, types: dict[tuple[str, str], coltypes.ColumnType]) -> list[Finding]:
    """closed_when_true: above the cap, depth's estimate of the waiting rows is the library's
    partial index on exactly them (pg-boss 12's job_i11), as the catalog types find it on every
    partition (mapping.CompiledQueue.ready_index). Without one it takes every flagged row off the
    ready share, too low by the flagged rows in other statuses (pg-boss's cancelled flow
    children): say so, with the index to create."""
    if not coltypes.reads_ready_index(q):
        return []
    from collectors import runner

    c = runner.compiled(q, "postgresql", types)
    if c.status is None or c.ready_index is not None:
        return []
    return [Finding("warning", q.name, "closed_when_true", ", ".join(q.closed_when_true),
                    "no partial index on exactly the waiting rows (the ready values, no flag set) on every "
                    "partition: above the cap depth's estimate takes every flagged row off the ready share, "
                    "too low by the flagged rows in other statuses",
                    indexadvice.create_index(q, indexadvice.ready_rows(q), "postgresql",
                                             partitioned=c.status.relkind == "p"))]


def _pg_age_lower_bound(q: Queue, types: dict[tuple[str, str], coltypes.ColumnType]) -> list[Finding]:
    """oldest_age_s read through the library's partial index on the ready values (issue 29): bounded,
    but a lower bound ('at least') once more than the cap are ready; say so, with the index that
    makes it exact and as cheap."""
    from collectors import runner

    c = runner.compiled(q, "postgresql", types)
    via = c.age_partials
    if not via:
        return []
    need = indexadvice.needed("oldest_age_s", q)
    partitioned = c.status is not None and c.status.relkind == "p"
    return [Finding("warning", q.name, "oldest_age_s", q.table,
                    f"no index orders the ready items by {q.runnable_at} after the status: the age is read "
                    f"through the library's partial index {', '.join(via)}, at most the cap of items, "
                    "'at least' when more are ready",
                    indexadvice.create_index(q, need, "postgresql", partitioned=partitioned) if need else "")]


def _nodes(plan: dict[str, Any], skip: Callable[[dict[str, Any]], bool] | None = None) -> Iterator[dict[str, Any]]:
    """Every node of ``plan``; the subtree of a node for which ``skip`` is true is left out."""
    if skip is not None and skip(plan):
        return
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child, skip)


def _small_gate(n: dict[str, Any]) -> bool:
    """A node that runs its subtree only while the queue table is under the small-table limit."""
    from collectors import runner

    # EXPLAIN prints the prelude's pages as a parameter ($41) or by name (c.pages).
    gate = str(n.get("One-Time Filter", ""))
    return re.fullmatch(rf"\((\$\d+|\w+\.pages) < {int(runner.SMALL_TABLE_PAGES)}\)", gate) is not None


def _is(n: dict[str, Any], schema: str | None, table: str | None) -> bool:
    """Whether plan node ``n`` reads ``schema.table`` (any relation when ``table`` is None: a view's)."""
    return "Relation Name" in n and (table is None or (n["Relation Name"] == table
                                                         and n.get("Schema", schema) == schema))


def _unbounded_reads(plan: dict[str, Any], schema: str | None, table: str | None) -> bool:
    """Whether ``plan`` reads a whole index of the table and filters rows away (no index condition).

    A whole read of a partial index with no filter reads exactly the rows wanted (the lab's lease
    index ``WHERE processing_started_at IS NULL``): that is a seek in all but name."""
    return any(_is(n, schema, table) and n.get("Node Type") in ("Index Scan", "Index Only Scan")
               and "Index Cond" not in n and "Filter" in n for n in _nodes(plan))


def _pg_scan(plan: dict[str, Any], schema: str | None, table: str | None) -> str:
    """Why the plan scans the queue table ('' when every read of it is a seek or an ordered,
    LIMIT-bounded index read). ``table`` None: any relation (a view is inlined into its tables).
    A read that runs only on a small table (a One-Time Filter on the table's pages under the
    small-table limit: depth's count of a status value no index serves) is bounded by that limit:
    not a scan of the table (issue 29)."""
    for n in _nodes(plan, skip=_small_gate):
        if n.get("Node Type") == "Seq Scan" and _is(n, schema, table):
            return "a sequential scan of the table"
        if n.get("Node Type") == "Sort" and any(_unbounded_reads(c, schema, table) for c in n.get("Plans", [])):
            return "reads a whole index of the table, filters and sorts it: no index delivers the rows in order"
    return ""


def _mssql_server(cfg: Config, target: Target, conn: engine.Connection, queues: list[Queue],
                  report: LiveReport) -> dict[str, Any]:
    """Issue 33, items 7 and 8: the server's version, edition, compatibility level and both logins'
    permissions (sql/mssql/server_check.sql), each missing one named with what it disables. Returns
    the collector login's server row (its edition decides the index advice's ONLINE = ON)."""
    from queueops import mssqlcheck

    sqlf = sqlfiles.load("mssql", "server_check")

    def read(c: engine.Connection, action: bool) -> dict[str, Any]:
        server = c.execute(sqlf.render("server"))[0]
        report.details.append(mssqlcheck.describe(target.name, server, "action" if action else "collector"))
        checks = mssqlcheck.server_checks(server, action=action)
        for q in queues:
            table = coltypes.qualified(q.schema_, q.table, "mssql")
            rights = c.execute(sqlf.render("table", {}, {"qualified_table": table}))[0]
            checks += mssqlcheck.table_checks(q, rights, server, action=action, table=table)
        report.findings.extend(checks)
        return server

    server = read(conn, False)
    report.findings.extend(mssqlcheck.version_checks(server))
    if target.actions_url or target.actions_password:
        try:
            aconn = engine.connect(target, "action", cfg.base_dir, application="queueops-check-action")
        except engine.TargetError as exc:
            report.findings.append(Finding("error", None, "actions_url", target.name,
                                           f"cannot connect with the action login: every action fails: {exc}",
                                           "fix actions_url / actions_password"))
        else:
            try:
                read(aconn, True)
            finally:
                aconn.close()
    else:
        # One login for both: what the actions need is checked on it too (a grant already named for
        # the collectors is not named twice).
        told = {f.fix for f in report.findings}
        checks = mssqlcheck.server_checks(server, action=True)
        for q in queues:
            table = coltypes.qualified(q.schema_, q.table, "mssql")
            rights = conn.execute(sqlf.render("table", {}, {"qualified_table": table}))[0]
            checks += mssqlcheck.table_checks(q, rights, server, action=True, table=table)
        report.findings.extend(k for k in checks if k.fix not in told)
    return server


def _mssql_seeks(conn: engine.Connection, q: Queue,
                 types: dict[tuple[str, str], coltypes.ColumnType], online: bool | None = None) -> list[Finding]:
    table = coltypes.qualified(q.schema_, q.table, "mssql")
    rows = conn.execute(sqlfiles.load("mssql", "catalog_indexes").render(values={"qualified_table": table}))
    indexes = indexadvice.indexes_from_rows(rows)
    relkind = next((t.relkind for (tbl, _), t in types.items() if tbl == table), "r")
    out = []
    for name in SEEK_CHECKED:
        need = indexadvice.needed(name, q)
        if need is None or indexadvice.served(need, indexes):
            continue
        fix = ("it is a view: create the index on its base table" if relkind == "v"
               else indexadvice.create_index(q, need, "mssql", online))
        out.append(Finding("warning", q.name, name, q.table, f"no index leads with {need.columns[0]!r}"
                           + (f" for {need.where}" if need.where else "") + ": the statement scans", fix))
    return out


def report_live(cfg: Config) -> LiveReport:
    """Check every queue of every target; never raises for a database problem."""
    report = LiveReport(cfg.source or "<config>")
    for target in cfg.targets:
        queues = cfg.queues_of(target.name)
        try:
            conn = engine.connect(target, "check", cfg.base_dir)
        except engine.TargetError as exc:
            report.findings.append(Finding("error", None, "target", target.name, f"cannot connect: {exc}"))
            continue
        try:
            # The collectors' session: a table held by a lock (a migration) ends its reads at the
            # target's lock timeout, as a finding, instead of holding the check (and the console's
            # Settings page) for as long as the lock is held.
            conn.execute(sessions.reading(target))
            if target.dialect == "postgresql":
                # Only a missing index can then leave a scan or a sort in a plan (queue tables are
                # often empty or small when checked, and the planner would rightly scan those).
                conn.execute(sqlfiles.Statement("SET enable_seqscan = off"))
                conn.execute(sqlfiles.Statement("SET enable_bitmapscan = off"))
            blocked = _pg_privileges(cfg, target, conn, queues, report) if target.dialect == "postgresql" else set()
            online: bool | None = None
            if target.dialect == "mssql":
                from queueops import mssqlcheck

                online = mssqlcheck.online_index(_mssql_server(cfg, target, conn, queues, report))
            # A table held by a lock costs its own queue's types only (its checks then fail alone).
            types, _ = coltypes.read_types_apart(conn, [q for q in queues if q.name not in blocked])
            for q in queues:
                report.details.append(_describe(q, types, target.dialect))
                if q.name in blocked:
                    continue  # the privilege findings say why; every statement of this queue would fail
                try:
                    report.findings += _check_queue(conn, target, q, types, online, report)
                except engine.TargetError as exc:
                    # One queue's table held by a lock (a migration) or unreadable: that queue's
                    # error, the other queues still checked.
                    why = " (a lock is held on its table: the target's lock_timeout_ms ended the read)" \
                        if exc.timeout else ""
                    report.findings.append(Finding("error", q.name, "table", q.table, f"check failed{why}: {exc}"))
        except engine.TargetError as exc:
            report.findings.append(Finding("error", None, "target", target.name, f"check failed: {exc}"))
        finally:
            conn.close()
    return report


def _check_queue(conn: engine.Connection, target: Target, q: Queue, types: mapping.Types, online: bool | None,
                 report: LiveReport) -> list[Finding]:
    """One queue's findings: its table and columns, types, coverage, requeue, and the plans of its
    reads. A statement that fails raises TargetError: the caller makes it this queue's error."""
    missing = _existence(conn, q)
    if missing:
        return missing
    out = list(_not_a_table(q, types, target.dialect))
    problems = coltypes.problems(q, types, target.dialect)
    out += [Finding(p.severity, q.name, p.field, p.value, p.message, p.fix) for p in problems]
    out += coverage(q, target)
    out += _requeue_offer(conn, q, report)
    if q.kind != "ring" and not problems:
        seeks = (_pg_seeks(conn, target, q, types) if target.dialect == "postgresql"
                 else _mssql_seeks(conn, q, types, online))
        out += seeks
        if target.dialect == "postgresql":
            out += _pg_stuck_served(conn, q)
            out += _pg_ready_index(q, types)
            if not any(f.field == "oldest_age_s" for f in seeks):
                out += _pg_age_lower_bound(q, types)
    return out


def check_live(cfg: Config) -> list[str]:
    """One line per error (missing tables and columns, types that cannot work, unreachable targets)."""
    report = report_live(cfg)
    return [f.line(report.source) for f in report.findings if f.severity == "error"]


def print_live(cfg: Config) -> int:
    """``config check --live``: every line on stdout (one stream), the verdict last; exit 1 on errors."""
    report = report_live(cfg)
    for line in report.lines():
        print(secrets.mask(line))
    return 1 if report.verdict == "errors" else 0
