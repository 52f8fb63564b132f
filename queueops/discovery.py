"""``queueops discover``: find the queue tables on a server from its catalog and statistics.

Reads only catalog views and activity counters (``sql/<dialect>/discover.sql``): never a queue
table's rows. Every table is matched against the library presets (:mod:`queueops.presets`: table
name or pattern, column names and types); the rest are judged by shape (an identity key, status /
lease / due / enqueue-time columns, a ring's slot and sequence tables, a one-row watermark table,
a payload table linked by a foreign key) and activity (inserts and deletes or updates large against
live rows, dead tuples / ghosts). Each proposal carries the kind it guesses, a score and its
evidence; :func:`render_toml` turns proposals into ``[[queues]]`` sections with the evidence as a
comment, so nothing is mapped silently.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Any

from queueops import presets, sqlfiles

ENQUEUED = ("enqueued_at", "created_at", "created", "createdat", "inserted_at", "queued_at", "insertedon",
            "created_on", "createdon", "enqueue_time", "enqueuetime")
STATUS = ("status", "state", "statename", "status_code")
LEASE = re.compile(r"lease|processing_?started|fetched_?at|locked_?at|claimed_?at|picked_?at|leased", re.I)
DUE = re.compile(r"^due|_due$|due_?at|run_?at|^visible|not_?before|available_?at|scheduled_?for", re.I)
ERROR = ("errors", "error", "last_error", "error_message", "exception")
ATTEMPTS = ("attempts", "attempt", "retry_count", "retries", "dequeue_count", "attempt_count", "deliverycount")
REFCOUNT = ("reference_count", "refcount", "ref_count", "references")
TIME_TYPES = ("timestamp", "datetime", "date", "smalldatetime", "datetimeoffset", "datetime2")
INT_TYPES = ("bigint", "integer", "int", "smallint", "tinyint")
READY_WORDS = ("ready", "pending", "queued", "new", "todo", "available", "created", "enqueued", "waiting")
PROCESSING_WORDS = ("processing", "running", "active", "picked", "doing", "in_progress", "executing", "claimed",
                    "started")
DONE_WORDS = ("done", "completed", "complete", "succeeded", "success", "successful", "finished", "processed")


@dataclass
class Column:
    name: str
    data_type: str
    udt: str
    is_enum: bool = False
    identity: bool = False
    labels: list[str] = field(default_factory=list)

    @property
    def is_time(self) -> bool:
        return self.data_type.lower().startswith(TIME_TYPES)

    @property
    def is_int(self) -> bool:
        return self.data_type.lower() in INT_TYPES


@dataclass
class Table:
    schema: str
    name: str
    kind: str = "r"
    reltuples: float = 0
    inserts: float = 0
    updates: float = 0
    deletes: float = 0
    live: float = 0
    dead: float = 0
    columns: dict[str, Column] = field(default_factory=dict)
    indexes: list[tuple[str, list[str], bool, bool]] = field(default_factory=list)  # name, keys, primary, partial
    fks: list[tuple[str, str, str, str]] = field(default_factory=list)  # column, ref schema, ref table, ref column

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"

    def col(self, names: tuple[str, ...], pred: Any = None) -> Column | None:
        for c in self.columns.values():
            if c.name.lower() in names and (pred is None or pred(c)):
                return c
        return None

    @property
    def primary_key(self) -> list[str]:
        return next((keys for _, keys, primary, _ in self.indexes if primary), [])

    def activity(self) -> str:
        return (f"{self.inserts:.0f} inserts, {self.updates:.0f} updates, {self.deletes:.0f} deletes, "
                f"{self.live:.0f} live rows, {self.dead:.0f} dead")


@dataclass
class Proposal:
    """One queue table found: how it would be mapped, how sure discovery is, and why."""

    table: Table
    kind: str
    score: float
    evidence: list[str]
    mapping: dict[str, Any]
    preset: str | None = None

    @property
    def label(self) -> str:
        return f"preset {self.preset}" if self.preset else "hand-rolled"


# -- reading the catalog -------------------------------------------------------------------------------
def read_catalog(conn: Any) -> dict[tuple[str, str], Table]:
    """Every user table of the connection's database, with columns, indexes, keys and activity."""
    sqlf = sqlfiles.load(conn.dialect, "discover")
    tables: dict[tuple[str, str], Table] = {}
    for r in conn.execute(sqlf.render("tables")):
        tables[(r["schema_name"], r["table_name"])] = Table(
            r["schema_name"], r["table_name"], r["relkind"], float(r["reltuples"] or 0), float(r["inserts"] or 0),
            float(r["updates"] or 0), float(r["deletes"] or 0), float(r["live_rows"] or 0), float(r["dead_rows"] or 0))
    for r in conn.execute(sqlf.render("columns")):
        t = tables.get((r["schema_name"], r["table_name"]))
        if t is not None:
            t.columns[r["column_name"]] = Column(r["column_name"], r["data_type"], r["udt_name"], bool(r["is_enum"]),
                                                 bool(r["is_identity"]), list(r.get("enum_labels") or []))
    per_index: dict[tuple[str, str, str], tuple[list[str], bool, bool]] = {}
    for r in conn.execute(sqlf.render("indexes")):
        key = (r["schema_name"], r["table_name"], r["index_name"])
        keys = list(r["key_columns"] or []) if "key_columns" in r else [r["column_name"]]
        prev = per_index.get(key)
        per_index[key] = ((prev[0] if prev else []) + keys, bool(r["is_primary"]), bool(r["is_partial"]))
    for (s, t_name, i_name), (keys, primary, partial) in per_index.items():
        if (s, t_name) in tables:
            tables[(s, t_name)].indexes.append((i_name, keys, primary, partial))
    for r in conn.execute(sqlf.render("foreign_keys")):
        t = tables.get((r["schema_name"], r["table_name"]))
        if t is not None:
            t.fks.append((r["column_name"], r["ref_schema"], r["ref_table"], r["ref_column"]))
    return tables


# -- presets -------------------------------------------------------------------------------------------
def _type_fits(col: Column, expected: str) -> bool:
    exp = expected.lower()
    return (col.data_type.lower().startswith(exp) or col.udt.lower() == exp
            or col.data_type.lower().split(".")[-1] == exp)


def match_preset(t: Table, dialect: str) -> tuple[presets.Preset, list[str]] | None:
    """The preset whose signature this table fits best (every signature column, with its type)."""
    best: tuple[int, presets.Preset, list[str]] | None = None
    fold = str.lower if dialect == "mssql" else str
    for p in presets.all_presets().values():
        sig = p.signature
        if p.engine != dialect:
            continue
        if sig.schema_ and fold(sig.schema_) != fold(t.schema):
            continue
        if sig.table and fold(sig.table) != fold(t.name):
            continue
        if sig.table_like and not fnmatch.fnmatchcase(t.name, sig.table_like.replace("%", "*")):
            continue
        cols = {fold(c): col for c, col in t.columns.items()}
        fits = [c for c, typ in sig.columns.items() if fold(c) in cols and _type_fits(cols[fold(c)], typ)]
        if len(fits) != len(sig.columns):
            continue
        named = bool(sig.table or sig.table_like)
        why = [f"signature of {p.library} {p.versions}: "
               + (f"table {sig.table or sig.table_like}" + (f" in schema {sig.schema_}" if sig.schema_ else "") + ", "
                  if named else "")
               + f"{len(fits)}/{len(sig.columns)} columns with their types ({', '.join(fits)})"]
        rank = len(fits) + (10 if named else 0)
        if best is None or rank > best[0]:
            best = (rank, p, why)
    return (best[1], best[2]) if best else None


def _preset_proposal(t: Table, p: presets.Preset, why: list[str]) -> Proposal:
    mapping = {"preset": p.name, "schema": t.schema, "table": t.name}
    evidence = [*why, f"activity: {t.activity()}", f"rescue: {p.rescue.how}"]
    evidence += [f"not available: {m}: {reason}" for m, reason in p.unavailable.items()]
    return Proposal(t, str(p.queue["kind"]), 100 + _activity_score(t), evidence, mapping, p.name)


# -- hand-rolled tables --------------------------------------------------------------------------------
def _activity_score(t: Table) -> float:
    churn = t.deletes + t.updates
    if t.inserts <= 0:
        return 0
    score = 0.0
    if churn >= 0.5 * t.inserts:
        score += 5
    if t.inserts > 10 * max(t.live, 1):
        score += 5
    if t.dead > t.live:
        score += 2
    return score


def _key(t: Table) -> Column | None:
    ident = next((c for c in t.columns.values() if c.identity), None)
    pk = t.primary_key
    if ident and (not pk or pk == [ident.name] or ident.name in pk):
        return ident
    if len(pk) == 1:
        return t.columns.get(pk[0])
    return ident


def _values_for(col: Column) -> dict[str, list[Any]] | None:
    """Ready / processing / done values of a status column: the enum's labels when it has them, the
    usual 0 / 1 / 2 for an integer column; None when they cannot be guessed."""
    if col.is_enum and col.labels:
        def pick(words: tuple[str, ...]) -> list[Any]:
            return [lab for lab in col.labels if lab.lower() in words]
        ready, processing, done = pick(READY_WORDS), pick(PROCESSING_WORDS), pick(DONE_WORDS)
        if ready and processing:
            return {"ready_values": ready, "processing_values": processing, "done_values": done or [col.labels[-1]]}
        return None
    if col.is_int:
        return {"ready_values": [0], "processing_values": [1], "done_values": [2]}
    return None


def _one_row(t: Table) -> bool:
    return len(t.columns) <= 3 and t.reltuples <= 1 and t.live <= 1 and t.primary_key != []


def judge(t: Table, tables: dict[tuple[str, str], Table]) -> Proposal | None:
    """Guess whether a table that matches no preset is a queue, which kind, and why."""
    siblings = [o for (s, _), o in tables.items() if s == t.schema and o is not t]
    enq = t.col(ENQUEUED, lambda c: c.is_time)
    key = _key(t)
    evidence: list[str] = []
    mapping: dict[str, Any] = {"schema": t.schema, "table": t.name}
    # ring: slots with a reference count, and a one-row sequence table with push / pop columns
    refc = t.col(REFCOUNT, lambda c: c.is_int)
    if refc and t.primary_key:
        seq = next((o for o in siblings if _one_row(o)
                    and any("push" in c.lower() for c in o.columns) and any("pop" in c.lower() for c in o.columns)), None)
        if seq:
            push = next(c for c in seq.columns if "push" in c.lower())
            pop = next(c for c in seq.columns if "pop" in c.lower())
            capacity = int(max(t.reltuples, t.live))
            if capacity > 0:
                mapping.update(key=t.primary_key[0], sequence_table=seq.name, push_column=push, pop_column=pop,
                               refcount_column=refc.name, capacity=capacity)
                if enq:
                    mapping["enqueued_at"] = enq.name
                evidence = [f"preallocated slots ({capacity} rows, key {t.primary_key[0]}) with a reference count "
                            f"{refc.name}", f"one-row sequence table {seq.name} ({push}, {pop})"]
                return Proposal(t, "ring", 60 + _activity_score(t), evidence + [f"activity: {t.activity()}"], mapping)
    if key is None:
        return None
    mapping["key"] = key.name
    evidence.append(f"key {key.name} ({key.data_type}{', identity' if key.identity else ''})")
    if enq:
        mapping["enqueued_at"] = enq.name
        evidence.append(f"enqueue time {enq.name} ({enq.data_type})")
    status = t.col(STATUS)
    lease = next((c for c in t.columns.values() if c.is_time and LEASE.search(c.name)), None)
    due = next((c for c in t.columns.values() if c.is_time and DUE.search(c.name)), None)
    attempts = t.col(ATTEMPTS, lambda c: c.is_int)
    kind: str | None = None
    score = 20.0
    if status and (values := _values_for(status)):
        kind = "status"
        mapping.update(status_column=status.name, **values)
        changed = next((c for c in t.columns.values() if c.is_time and re.search(r"status_?changed|updated|changed_?at",
                                                                                c.name, re.I)), None)
        if changed:
            mapping["status_changed_at"] = changed.name
        guessed = "the enum's labels" if status.is_enum else "guessed: the usual 0 / 1 / 2, check them"
        evidence.append(f"status column {status.name} ({status.data_type}): ready {values['ready_values']}, "
                        f"processing {values['processing_values']}, done {values['done_values']} ({guessed})")
        data = next(((o, fk_col) for o in siblings for fk_col, rs, rt, _ in o.fks
                     if rs == t.schema and rt == t.name and fk_col in o.primary_key), None)
        if data:
            mapping.update(data_table=data[0].name, data_key=data[1])
            evidence.append(f"payload table {data[0].name} linked by foreign key {data[1]}")
    elif lease:
        kind = "lease"
        mapping["lease_column"] = lease.name
        evidence.append(f"lease column {lease.name} ({lease.data_type})")
        if err := t.col(ERROR):
            mapping["error_column"] = err.name
            evidence.append(f"error column {err.name}")
    elif due:
        kind = "due"
        mapping["due_column"] = due.name
        evidence.append(f"due-time column {due.name} ({due.data_type})")
    elif enq and key.identity and (re.search(r"queue|^q_|jobs?$|messages?$|outbox|inbox", t.name, re.I)
                                   or _activity_score(t) >= 5):
        kind = "delete"
        evidence.append("identity key and enqueue time, no status / lease / due column: items leave by DELETE")
    if kind is None:
        return None
    if attempts:
        mapping["attempts_column"] = attempts.name
    for name, keys, _, partial in t.indexes:
        lead = {"status": mapping.get("status_column"), "lease": mapping.get("lease_column"),
                "due": mapping.get("due_column"), "delete": key.name}.get(kind)
        if lead and keys and keys[0] == lead:
            score += 10
            evidence.append(f"dequeue-order index {name} ({', '.join(keys)}{', partial' if partial else ''})")
            break
    if re.search(r"queue|^q_|jobs?$|messages?$", t.name, re.I):
        score += 10
        evidence.append(f"name {t.name} reads like a queue")
    # a one-row watermark table named after this one
    wm = next((o for o in siblings if _one_row(o) and o.name.startswith(t.name) and "watermark" in o.name.lower()),
              None)
    if wm:
        col = next((c.name for c in wm.columns.values() if c.is_int and c.name not in wm.primary_key), None)
        if col:
            mapping["watermark"] = {"table": wm.name, "column": col}
            evidence.append(f"watermark table {wm.name}.{col}")
    score += _activity_score(t)
    evidence.append(f"activity: {t.activity()}")
    return Proposal(t, kind, score, evidence, mapping)


def _side_tables(proposals: list[Proposal], tables: dict[tuple[str, str], Table]) -> set[tuple[str, str]]:
    """Tables that belong to a proposal (payload, sequence, watermark) or to a matched library."""
    out: set[tuple[str, str]] = set()
    for p in proposals:
        m = p.mapping
        for f in ("data_table", "sequence_table"):
            if m.get(f):
                out.add((p.table.schema, m[f]))
        if m.get("watermark"):
            out.add((p.table.schema, m["watermark"]["table"]))
        if p.preset:
            for pattern in presets.get(p.preset).signature.companions:
                out |= {k for k, t in tables.items() if fnmatch.fnmatchcase(t.qualified.lower(), pattern.lower())}
    return out


def discover(tables: dict[tuple[str, str], Table], dialect: str) -> list[Proposal]:
    """Every queue table found, best first: preset matches, then hand-rolled tables by score."""
    found: list[Proposal] = []
    for t in tables.values():
        if hit := match_preset(t, dialect):
            found.append(_preset_proposal(t, *hit))
    skip = _side_tables(found, tables) | {(p.table.schema, p.table.name) for p in found}
    hand = [p for t in tables.values() if (t.schema, t.name) not in skip and (p := judge(t, tables))]
    side = _side_tables(hand, tables)
    hand = [p for p in hand if (p.table.schema, p.table.name) not in side]
    found += hand
    return sorted(found, key=lambda p: (-p.score, p.table.qualified))


def unconfigured(found: list[Proposal], configured: list[Any], dialect: str) -> list[Proposal]:
    """The proposals whose table no configured queue (of that target) maps yet."""
    default = "dbo" if dialect == "mssql" else "public"
    mapped = {(q.schema_ or default, q.table) for q in configured}
    return [p for p in found if (p.table.schema, p.table.name) not in mapped]


# -- output --------------------------------------------------------------------------------------------
def queue_name(p: Proposal, taken: set[str]) -> str:
    base = p.preset if p.preset and p.preset not in ("pgmq", "nservicebus", "rebus") else \
        f"{p.table.schema}_{p.table.name}"
    base = re.sub(r"[^A-Za-z0-9_]", "_", base).lower()[:60]
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_toml(proposals: list[Proposal], target: str, taken: set[str] | None = None) -> str:
    """``[[queues]]`` sections for the proposals, each under a comment with its evidence."""
    taken = set(taken or ())
    out = []
    for p in proposals:
        name = queue_name(p, taken)
        lines = [f"# discovered: {p.table.qualified}: {p.kind} ({p.label}), score {p.score:g}"]
        lines += [f"#   {e}" for e in p.evidence]
        lines += ["[[queues]]", f"name = {_toml_value(name)}", f"target = {_toml_value(target)}"]
        if not p.preset:
            lines.append(f"kind = {_toml_value(p.kind)}")
        lines += [f"{k} = {_toml_value(v)}" for k, v in p.mapping.items()]
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"
