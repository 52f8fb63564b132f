"""What each PostgreSQL login of a target may do, and what a missing grant disables.

``config check --live`` reads a login's rights with ``sql/postgresql/privileges.sql`` (catalog
functions only: a login learns what it lacks, never an error) and compares them with what this
config needs of it:

* the **collector login**: ``USAGE`` on each schema and ``SELECT`` on every table a collector reads
  (the queue table, the ring's sequence table, the watermark table, ``times_from``'s table; not the
  payload table); ``pg_read_all_stats`` and ``pg_stat_scan_tables`` (both in ``pg_monitor``);
* the **action login**: per queue, what each action that applies to it writes (requeue, archive,
  watermark-reset), the owner's rights for rebuild (``MAINTAIN`` on PostgreSQL 17+), and for
  terminate ``pg_signal_backend`` and ``pg_read_all_stats``.

Each missing grant becomes one :class:`~queueops.finding.Finding` that names what it disables and the exact
statements that grant it, rendered from ``sql/postgresql/roles/grants.sql`` with every name quoted.
A collector that would fail on every cycle is an error; anything else (an action that cannot run,
a metric that is an estimate or blind to other logins' sessions) is a warning. docs/security.md
(sections 5 and 6) documents the roles; ``sql/postgresql/roles/least_privilege.sql`` creates them
for the lab's queues.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from queueops import engine, presets, sqlfiles
from queueops.config import Queue
from queueops.finding import Finding
from queueops.fragments import DEFAULT_SCHEMA
from queueops.identifiers import quote_ident, quote_table

DIALECT = "postgresql"
# The first release with the MAINTAIN privilege (and pg_maintain): REINDEX / VACUUM without ownership.
MAINTAIN_SINCE = 170000


@dataclass(frozen=True)
class Relation:
    """A login's rights on one table (``update``: the columns asked about that it may UPDATE)."""

    schema: str
    table: str
    schema_exists: bool
    schema_usage: bool
    exists: bool
    relkind: str | None
    owner: str | None
    owner_superuser: bool
    select: bool
    insert: bool
    delete: bool
    owner_rights: bool
    maintain: bool
    update: frozenset[str] = frozenset()
    partitions: int = 0  # a partitioned table's partitions; 0 for any other table
    unread: tuple[tuple[str, str], ...] = ()  # (schema, name) of the partitions this login may not SELECT

    @property
    def qualified(self) -> str:
        return quote_table(self.schema, self.table, DIALECT)


@dataclass(frozen=True)
class Login:
    """One login of a target as the server sees it, with its rights on the tables asked about."""

    name: str
    superuser: bool
    read_all_stats: bool
    stat_scan_tables: bool
    signal_backend: bool
    server_version: int
    pgstattuple: bool
    relations: dict[tuple[str, str], Relation] = field(default_factory=dict)

    def on(self, schema: str | None, table: str) -> Relation | None:
        return self.relations.get((schema or DEFAULT_SCHEMA[DIALECT], table))


# ---------------------------------------------------------------------------------------------
# Reading a login's rights


def _table_of(schema: str | None, table: str) -> tuple[str, str]:
    return (schema or DEFAULT_SCHEMA[DIALECT], table)


def collector_tables(q: Queue) -> list[tuple[str, str, str]]:
    """``(field, schema, table)`` of every table a collector of ``q`` reads (not the payload table)."""
    out = [("table", *_table_of(q.schema_, q.table))]
    if q.sequence_table:
        out.append(("sequence_table", *_table_of(q.schema_, q.sequence_table)))
    if q.watermark:
        out.append(("watermark.table", *_table_of(q.watermark.schema_ or q.schema_, q.watermark.table)))
    if q.times_from:
        out.append(("times_from.table", *_table_of(q.times_from.schema_ or q.schema_, q.times_from.table)))
    return out


def _asked(queues: Iterable[Queue]) -> list[tuple[str, str, str | None]]:
    """Every ``(schema, table, column)`` whose rights matter: each table once with no column, then
    each column an action updates."""
    tables: list[tuple[str, str]] = []
    columns: list[tuple[str, str, str]] = []
    for q in queues:
        tables += [(s, t) for _, s, t in collector_tables(q)]
        if q.data_table:
            tables.append(_table_of(q.schema_, q.data_table))
        for need in _action_needs(q):
            for (s, t), cols in [*need.update.items(), *need.optional_update.items()]:
                columns += [(s, t, c) for c in cols]
    seen = list(dict.fromkeys(tables))
    return [(s, t, None) for s, t in seen] + [(s, t, c) for s, t, c in dict.fromkeys(columns)]


def read(conn: engine.Connection, queues: Sequence[Queue]) -> Login:
    """The rights of ``conn``'s login on every table ``queues`` map (PostgreSQL)."""
    sqlf = sqlfiles.load(DIALECT, "privileges")
    who = conn.execute(sqlf.render("login"))[0]
    asked = _asked(queues)
    relations: dict[tuple[str, str], Relation] = {}
    if asked:
        rows = conn.execute(sqlf.render("relations", {}, {
            "schemas": [s for s, _, _ in asked], "tables": [t for _, t, _ in asked],
            "columns": [c for _, _, c in asked]}))
        updatable: dict[tuple[str, str], set[str]] = {}
        for r in rows:
            key = (r["schema_name"], r["table_name"])
            if r["column_name"] is not None:
                if r["column_update"]:
                    updatable.setdefault(key, set()).add(r["column_name"])
                continue
            relations[key] = _relation(r)
        for key, cols in updatable.items():
            if key in relations:
                relations[key] = replace(relations[key], update=frozenset(cols))
    return Login(who["login"], bool(who["superuser"]), bool(who["read_all_stats"]), bool(who["stat_scan_tables"]),
                 bool(who["signal_backend"]), int(who["server_version"]), bool(who["pgstattuple"]), relations)


def _relation(r: dict[str, Any]) -> Relation:
    return Relation(r["schema_name"], r["table_name"], bool(r["schema_exists"]), bool(r["schema_usage"]),
                    bool(r["table_exists"]), r["relkind"], r["owner"], bool(r["owner_superuser"]),
                    bool(r["can_select"]), bool(r["can_insert"]), bool(r["can_delete"]), bool(r["owner_rights"]),
                    bool(r["maintain"]), partitions=int(r["partitions"] or 0),
                    unread=tuple(zip(r["unread_schemas"] or (), r["unread_tables"] or (), strict=True)))


# ---------------------------------------------------------------------------------------------
# The fixes: statements of sql/postgresql/roles/grants.sql, every name quoted


def _quoted(name: str) -> str:
    """A role name read from the server, quoted; a name that cannot be quoted safely is shown as a
    placeholder (the statement is then for a human to complete)."""
    try:
        return quote_ident(name, DIALECT)
    except ValueError:
        return "<the login (its name cannot be quoted safely)>"


def grant(block: str, login: str, *, schema: str | None = None, table: tuple[str, str] | None = None,
          columns: Iterable[str] = (), role: str | None = None) -> str:
    """One statement of ``sql/postgresql/roles/grants.sql``, as the operator would type it."""
    frags = {"login": _quoted(login)}
    if schema is not None:
        frags["schema"] = quote_ident(schema, DIALECT)
    if table is not None:
        frags["table"] = quote_table(table[0], table[1], DIALECT)
    cols = list(columns)
    if cols:
        frags["columns"] = ", ".join(quote_ident(c, DIALECT) for c in cols)
    if role is not None:
        frags["role"] = _quoted(role)
    sql = sqlfiles.load(DIALECT, "roles/grants").render(block, frags).sql
    return sql.replace("%%", "%")  # shown, not run: as the server would receive it


# ---------------------------------------------------------------------------------------------
# What the collector login needs


def _reading_collectors(q: Queue, fld: str) -> str:
    """The collectors that read table ``fld`` of ``q`` (what fails without SELECT on it)."""
    if fld == "watermark.table":
        return "watermark_drift"
    if fld == "sequence_table":
        return "depth, oldest_age_s and ring_occupancy"
    names = ["depth", "oldest_age_s"]
    if q.kind in ("lease", "status"):
        names.append("stuck_leases")
    if q.watermark and fld == "table":
        names.append("watermark_drift")
    if q.kind == "ring":
        names.append("ring_occupancy")
    return ", ".join(names[:-1]) + " and " + names[-1]


def _table_grants(login: Login, rel: Relation, privileges: Sequence[str], update: Sequence[str] = ()
                  ) -> tuple[list[str], list[str]]:
    """(what is missing, the statements that grant it) for ``privileges`` (select / delete) and
    UPDATE of ``update`` on ``rel``, plus USAGE on its schema."""
    missing, fixes = [], []
    if not rel.schema_usage:
        missing.append(f"USAGE on schema {rel.schema}")
        fixes.append(grant("usage", login.name, schema=rel.schema))
    for p in privileges:
        if not getattr(rel, p):
            missing.append(f"{p.upper()} on {rel.qualified}")
            fixes.append(grant(p, login.name, table=(rel.schema, rel.table)))
    cols = [c for c in update if c not in rel.update]
    if cols:
        missing.append(f"UPDATE of {', '.join(cols)} on {rel.qualified}")
        fixes.append(grant("update", login.name, table=(rel.schema, rel.table), columns=cols))
    return missing, fixes


def collector_missing(login: Login, queues: Sequence[Queue]) -> list[Finding]:
    """What the collector login lacks, per queue and for the target (errors: a collector fails on
    every cycle; warnings: figures that are estimates or blind to other logins' sessions)."""
    out = []
    who = f"the collector login {login.name!r}"
    stats, scan = login.read_all_stats, login.stat_scan_tables or not login.pgstattuple
    blind = ("other logins' sessions show no state, query or transaction start: oldest_snapshot_age_s reads 0 s "
             "for their transactions (the old-snapshot alert never fires) and blocking_chains sees none of their "
             "lock waits (blocked_sessions 0, no head blocker)")
    estimates = ("ghost_records, dead_tuple_pct, fragmentation_pct, page_density_pct and table_bloat_pct are "
                 "estimates from the statistics instead of pgstattuple's page reads")
    if not stats and not scan:
        out.append(Finding("warning", None, "collector login", login.name,
                           f"{who} is not a member of pg_monitor: {blind}; {estimates}",
                           grant("member", login.name, role="pg_monitor")))
    elif not stats:
        out.append(Finding("warning", None, "collector login", login.name,
                           f"{who} is not a member of pg_read_all_stats (pg_monitor): {blind}",
                           grant("member", login.name, role="pg_read_all_stats")))
    elif not scan:
        out.append(Finding("warning", None, "collector login", login.name,
                           f"{who} is not a member of pg_stat_scan_tables (pg_monitor): {estimates}",
                           grant("member", login.name, role="pg_stat_scan_tables")))
    for q in queues:
        for fld, schema, table in collector_tables(q):
            rel = login.on(schema, table)
            if rel is None or not rel.exists:
                continue  # a missing table is the existence check's finding
            missing, fixes = _table_grants(login, rel, ("select",))
            if missing:
                out.append(Finding("error", q.name, fld, table,
                                   f"{who} lacks {' and '.join(missing)}: {_reading_collectors(q, fld)} fail on "
                                   "every cycle (permission denied)", "; ".join(fixes)))
            elif rel.unread:
                out.append(_unread_partitions(login, q, fld, rel))
    return out


# Past this many partitions to grant, the fix grants the schema's tables instead of naming each.
NAMED_PARTITIONS = 5


def _unread_partitions(login: Login, q: Queue, fld: str, rel: Relation) -> Finding:
    """A partitioned table whose rows the login reads through the parent but whose partitions it
    may not SELECT: PostgreSQL shows a partition's statistics (pg_stats) only to a login that may
    read that partition, and the estimates above the count cap are made from them. Nothing fails,
    which is why it needs saying: the figures silently stop being estimates."""
    who = f"the collector login {login.name!r}"
    n, names = len(rel.unread), ", ".join(quote_table(s, t, DIALECT) for s, t in rel.unread[:NAMED_PARTITIONS])
    schemas = sorted({s for s, _ in rel.unread})
    if n <= NAMED_PARTITIONS:
        fixes = [grant("select", login.name, table=p) for p in rel.unread]
    else:
        fixes = [grant("select_all", login.name, schema=s) for s in schemas]
    if rel.owner:
        fixes += [grant("default_select", login.name, schema=s, role=rel.owner) for s in schemas]
    return Finding("warning", q.name, fld, rel.table,
                   f"{who} may read {rel.qualified} but not {n} of its {rel.partitions} partitions "
                   f"({names}{', ...' if n > NAMED_PARTITIONS else ''}): PostgreSQL shows a partition's statistics "
                   "only to a login that may read it, so above the count cap depth and the status counts read "
                   "'at least' instead of an estimate (table_bloat_pct has none); a partition the library creates "
                   "later needs the grant too, which the default privileges give", "; ".join(fixes))


def collector_blocked(login: Login, q: Queue) -> bool:
    """Whether the collector login cannot read one of the tables of ``q`` (its statements fail)."""
    for _, schema, table in collector_tables(q):
        rel = login.on(schema, table)
        if rel is not None and rel.exists and not (rel.schema_usage and rel.select):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# What the action login needs


@dataclass(frozen=True)
class _Need:
    """What one action writes on one queue: table-wide privileges and columns to UPDATE, per table."""

    action: str
    what: str  # how the action uses the grants, for the reason text
    privileges: dict[tuple[str, str], tuple[str, ...]]
    update: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    optional_update: dict[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)
    optional_what: str = ""


def _requeue_applies(q: Queue) -> bool:
    if q.kind not in ("lease", "status") or (q.kind == "status" and not q.status_changed_at):
        return False
    if q.preset:
        try:
            return presets.get(q.preset).action_rule("requeue")[0] != "refuse"
        except KeyError:
            return True
    return True


def _action_needs(q: Queue) -> list[_Need]:
    """The table rights of each action that applies to ``q`` (rebuild and terminate are separate)."""
    table = _table_of(q.schema_, q.table)
    needs = []
    attempts = (q.attempts_column,) if q.attempts_column else ()
    if _requeue_applies(q):
        cols = (q.lease_column,) if q.kind == "lease" else (q.status_column, q.status_changed_at)
        needs.append(_Need("requeue", "releases stuck items (SELECT ... FOR UPDATE, UPDATE)",
                           {table: ("select",)}, {table: tuple(c for c in cols if c)},
                           {table: attempts} if attempts else {}, "requeue --bump-attempts"))
    if q.kind == "status" and (q.status_changed_at or q.enqueued_at) and q.status_column:
        privileges = {table: ("select", "delete")}
        if q.data_table:
            privileges[_table_of(q.schema_, q.data_table)] = ("select", "delete")
        needs.append(_Need("archive", "picks finished items (FOR UPDATE: UPDATE of a column) and deletes them "
                           "with their payload rows", privileges, {table: (q.status_column,)}))
    if q.watermark and q.kind != "ring":
        wm = _table_of(q.watermark.schema_ or q.schema_, q.watermark.table)
        needs.append(_Need("watermark-reset", "reads the lowest pending key and moves the watermark",
                           {table: ("select",), wm: ("select",)}, {wm: (q.watermark.column,)}))
    return needs


def _need_missing(login: Login, need: _Need, update: dict[tuple[str, str], tuple[str, ...]]
                  ) -> tuple[list[str], list[str]]:
    missing: list[str] = []
    fixes: list[str] = []
    for key in dict.fromkeys([*need.privileges, *update]):
        rel = login.relations.get(key)
        if rel is None or not rel.exists:
            continue
        m, f = _table_grants(login, rel, need.privileges.get(key, ()), update.get(key, ()))
        missing += [x for x in m if x not in missing]
        fixes += [x for x in f if x not in fixes]
    return missing, fixes


def _rebuild_fix(login: Login, rel: Relation) -> str:
    table = (rel.schema, rel.table)
    if login.server_version >= MAINTAIN_SINCE:
        return grant("maintain", login.name, table=table)
    if rel.owner_superuser or rel.owner is None:
        return (grant("owner", login.name, table=table, role="queue_owner") + " (queue_owner: a NOLOGIN role of "
                "your own); " + grant("member", login.name, role="queue_owner"))
    return grant("member", login.name, role=rel.owner)


def action_missing(login: Login, queues: Sequence[Queue], *, separate: bool) -> list[Finding]:
    """What the action login lacks for each action that applies to ``queues`` (warnings: the action
    fails with permission denied). ``separate``: the target has a login of its own for actions."""
    who = f"the action login {login.name!r}" if separate else f"the action login (the collector login {login.name!r})"
    out = []
    terminate, terminate_fix = [], []
    if not login.signal_backend:
        terminate.append("pg_signal_backend (pg_terminate_backend / pg_cancel_backend of another login's session)")
        terminate_fix.append(grant("member", login.name, role="pg_signal_backend"))
    if not login.read_all_stats:
        terminate.append("pg_read_all_stats (other logins' sessions show no start or transaction, so none can be "
                         "matched and every one is refused)")
        terminate_fix.append(grant("member", login.name, role="pg_read_all_stats"))
    if terminate:
        out.append(Finding("warning", None, "terminate", login.name,
                           f"{who} is not a member of {' nor of '.join(terminate)}: terminate cannot end a session",
                           "; ".join(terminate_fix)))
    if login.pgstattuple and not login.stat_scan_tables:
        out.append(Finding("warning", None, "rebuild", login.name,
                           f"{who} is not a member of pg_stat_scan_tables: rebuild's preview cannot read index bloat "
                           "(pgstatindex), so it rebuilds only indexes named with --index",
                           grant("member", login.name, role="pg_stat_scan_tables")))
    for q in queues:
        for need in _action_needs(q):
            missing, fixes = _need_missing(login, need, need.update)
            if missing:
                out.append(Finding("warning", q.name, need.action, q.table,
                                   f"{who} lacks {' and '.join(missing)}: {need.action} fails (permission denied); "
                                   f"it {need.what}", "; ".join(fixes)))
            elif need.optional_update:
                missing, fixes = _need_missing(login, need, need.optional_update)
                if missing:
                    out.append(Finding("warning", q.name, need.action, q.table,
                                       f"{who} lacks {' and '.join(missing)}: {need.optional_what} fails "
                                       "(permission denied)", "; ".join(fixes)))
        rel = login.on(q.schema_, q.table)
        if rel is not None and rel.exists and not (rel.owner_rights or rel.maintain):
            since = ("the owner's rights or MAINTAIN" if login.server_version >= MAINTAIN_SINCE
                     else "the owner's rights (PostgreSQL 16 and older; MAINTAIN from 17)")
            tradeoff = ("" if login.server_version >= MAINTAIN_SINCE else
                        ": membership in the owner's role also lets the login do anything the owner may, DROP "
                        "TABLE included (docs/security.md section 5)")
            out.append(Finding("warning", q.name, "rebuild", q.table,
                               f"{who} lacks {since} on {rel.qualified} (owner {rel.owner!r}): rebuild fails (REINDEX: "
                               f"must be owner; VACUUM skips the table){tradeoff}", _rebuild_fix(login, rel)))
    return out
