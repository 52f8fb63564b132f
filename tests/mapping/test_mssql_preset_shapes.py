"""Every statement of every SQL Server preset, rendered by ``queueops sql`` from examples/mssql/ and
read against the library's upstream DDL (tests/mapping/upstream_ddl.py, pinned by version and
commit): the columns each collector statement filters and orders by, the index that serves it
(the DDL's indexes judged by :mod:`queueops.indexadvice`, the logic ``config check --live`` applies
to the catalog), its hints and its isolation (issue 33).

What this cannot tell: the plan SQL Server really chooses (statistics, parameter sniffing), the
row counts, the locks really taken. Those need a real server: tests/mssql.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from collectors import registry, runner
from queueops import config as config_mod
from queueops import indexadvice, sessions, sqlfiles
from queueops.commands import sql as sqlcmd
from tests.mapping.upstream_ddl import BY_PRESET, Upstream

logging.getLogger("sqlglot").setLevel(logging.ERROR)
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "mssql").glob("*.toml"))


def _name(e: exp.Expression) -> str:
    return e.name if isinstance(e, (exp.Column, exp.Identifier)) else e.this.name


def indexes_from_ddl(up: Upstream, table: str) -> list[indexadvice.Index]:
    """The indexes of ``table`` (its bare name) in the upstream DDL, as the catalog would list them:
    the primary key (clustered unless NONCLUSTERED), then every CREATE INDEX with its filter written
    as SQL Server stores filter_definition (``([c] IS NOT NULL)``)."""
    out: list[indexadvice.Index] = []
    for st in sqlglot.parse(up.ddl, read="tsql", error_level=sqlglot.ErrorLevel.RAISE):
        assert isinstance(st, exp.Create)
        if st.args.get("kind") == "TABLE" and st.this.this.name == table:
            for col in st.this.expressions:
                if isinstance(col, exp.ColumnDef) and col.find(exp.PrimaryKeyColumnConstraint):
                    out.append(indexadvice.Index(f"PK_{table}", (col.name,)))
                if isinstance(col, exp.Constraint) and col.find(exp.PrimaryKeyColumnConstraint):
                    keys = col.find(exp.ClusteredColumnConstraint)  # PRIMARY KEY CLUSTERED (...)
                    out.append(indexadvice.Index(col.name, tuple(_name(o.this) for o in keys.this)))
        elif "INDEX" in str(st.args.get("kind")) and st.this.args["table"].name == table:
            params = st.this.args["params"]
            where = params.args.get("where")
            filt = None
            if where is not None:
                parts = []
                for cond in where.this.flatten() if isinstance(where.this, exp.And) else [where.this]:
                    neg = isinstance(cond, exp.Not)
                    col = (cond.this if neg else cond).this
                    parts.append(f"([{col.name}] IS {'NOT ' if neg else ''}NULL)")
                filt = " AND ".join(parts)
            out.append(indexadvice.Index(st.this.name, tuple(_name(c.this) for c in params.args["columns"]), filt))
    return out


def queue_selects(stmt: sqlfiles.Statement, table: str) -> list[exp.Select]:
    """Every SELECT of the statement that reads the queue table itself."""
    trees = sqlglot.parse(stmt.sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
    return [s for t in trees for s in t.find_all(exp.Select)
            if (f := s.args.get("from_") or s.args.get("from")) is not None and isinstance(f.this, exp.Table) and f.this.name == table]


def shape(sel: exp.Select) -> dict[str, object]:
    where = sel.args.get("where")
    order = sel.args.get("order")
    table = (sel.args.get("from_") or sel.args["from"]).this
    return {
        "filters": sorted({c.name for c in where.find_all(exp.Column)}) if where else [],
        "orders": [_name(o.this) for o in order.expressions] if order else [],
        "hints": [h.sql("tsql") for h in table.args.get("hints") or []],
        "top": sel.args.get("limit") is not None,
    }


def load(path: Path) -> config_mod.Config:
    return config_mod.load(path)


def test_every_example_renders_every_statement_and_each_parses_as_tsql() -> None:
    """Acceptance of issue 33: ``queueops sql --config examples/mssql/<preset>.toml`` renders every
    statement of every SQL Server preset (collectors, catalog reads, actions), each parses with
    sqlglot's tsql dialect and binds exactly its parameters."""
    assert {p.stem for p in EXAMPLES} == set(BY_PRESET)
    for path in EXAMPLES:
        cfg = load(path)
        rows = sqlcmd.render_all(cfg)
        names = {(r.group, r.name) for r in rows if r.sql}
        for c in ("depth", "lock_waits", "ghost_records", "fragmentation_pct", "blocking_chains", "oldest_snapshot"):
            assert ("collector", c) in names, (path.name, c)
        assert ("action", "rebuild") in names and ("action", "terminate") in names
        for r in rows:
            if not r.sql:
                assert r.note, r
                continue
            text = r.sql.replace("KILL <session_id>", "KILL 1")  # an observed literal, shown by name
            trees = sqlglot.parse(text, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
            commands = [t for t in trees if isinstance(t, exp.Command)]
            assert all(str(t.this).upper() == "ALTER" for t in commands), (path.name, r.block)
            if not commands:
                assert sum(len(list(t.find_all(exp.Placeholder))) for t in trees) == len(r.params), (path.name, r.block)
            # Observed values are named placeholders, never a made-up value.
            for p in r.params:
                if isinstance(p, sqlcmd.Observed):
                    assert p.startswith("<") and p.endswith(">")


# preset -> the upstream table the example's first queue maps (a table per queue: the DDL's name).
DDL_TABLE = {"hangfire": "JobQueue", "masstransit": "MessageDelivery", "nservicebus": "Sales", "rebus": "orders",
             "simple_queue": "SimpleQueue"}

# (preset, collector) -> what each SELECT on the queue table filters and orders by (one entry per
# SELECT, in statement order), and the index that serves the statement per indexadvice (None: no
# index serves it, 'config check --live' warns and prints the CREATE INDEX; '-': the statement
# needs no particular index, a count bounded by the cap along any index).
SHAPES: dict[tuple[str, str], tuple[list[tuple[list[str], list[str]]], str | None]] = {
    # Item 2: one queue's rows (Queue = N'...') of JobQueue, the oldest free item along the
    # clustered key (Queue, Id) -- before: ORDER BY [Id] over every queue, a scan and sort.
    ("hangfire", "depth"): ([(["FetchedAt", "Queue"], []), (["Queue"], [])], "PK_HangFire_JobQueue"),
    ("hangfire", "oldest_age_s"): ([(["FetchedAt", "Queue"], ["Id"])], "PK_HangFire_JobQueue"),
    # No FetchedAt index since schema 6 dropped IX_HangFire_JobQueue_QueueAndFetchedAt: the queue's
    # range of the clustered key is read (a seek on Queue), the leased rows filtered on the way.
    ("hangfire", "stuck_leases"): ([(["FetchedAt", "Queue"], ["FetchedAt"]), (["FetchedAt", "Queue"], [])], None),
    # Item 1: one QueueId, EnqueueTime <= now, and (oldest) DeliveryCount < MaxDeliveryCount, as
    # FetchMessages reads. IX_MessageDelivery_Fetch seeks the QueueId but orders by Priority before
    # EnqueueTime: the oldest due delivery is found by a Top-1 sort of that queue's due rows.
    ("masstransit", "depth"): ([(["EnqueueTime", "QueueId"], []), (["QueueId"], [])], None),
    ("masstransit", "oldest_age_s"): ([(["DeliveryCount", "EnqueueTime", "MaxDeliveryCount", "QueueId"],
                                        ["EnqueueTime"])], None),
    # Item 11: an expired message is not waiting (Expires NULL or ahead); a count bounded by the cap.
    ("nservicebus", "depth"): ([(["Expires"], [])], "-"),
    # Item 5: due on visible (a deferred message is not ready, no negative age) and not expired.
    ("rebus", "depth"): ([(["expiration", "visible"], []), (["expiration"], [])], None),
    ("rebus", "oldest_age_s"): ([(["expiration", "visible"], ["visible"])], None),
    ("simple_queue", "depth"): ([(["ProcessingStartedAt"], []), ([], [])], "-"),
    ("simple_queue", "oldest_age_s"): ([(["ProcessingStartedAt"], ["CreatedAt", "Id"])], "IX_SIMPLEQUEUE_POP"),
    ("simple_queue", "stuck_leases"): ([(["Errors", "ProcessingStartedAt"], ["ProcessingStartedAt"]),
                                        (["Errors", "ProcessingStartedAt"], [])], None),
}


@pytest.mark.parametrize(("preset", "collector"), sorted(SHAPES), ids=[f"{p}:{c}" for p, c in sorted(SHAPES)])
def test_statement_shape_against_the_upstream_ddl(preset: str, collector: str) -> None:
    cfg = load(ROOT / "examples" / "mssql" / f"{preset}.toml")
    q = cfg.queues[0]
    (stmt,) = runner.build_statements(registry.by_name(collector), cfg.targets[0], [q])
    selects = [shape(s) for s in queue_selects(stmt, q.table)]
    want, index = SHAPES[(preset, collector)]
    assert [(s["filters"], s["orders"]) for s in selects] == want
    # Hints and isolation: no table hint at all (no NOLOCK, no READPAST: the collectors' session is
    # READ UNCOMMITTED with SET LOCK_TIMEOUT, see test_collector_session_isolation), always TOP.
    assert all(s["hints"] == [] and s["top"] for s in selects)
    need = indexadvice.needed(collector, q)
    ddl_indexes = indexes_from_ddl(BY_PRESET[preset], DDL_TABLE[preset])
    assert ddl_indexes, preset
    if index == "-":
        assert need is None
        return
    assert need is not None
    served = indexadvice.serving(need, ddl_indexes)
    assert (served.name if served else None) == index
    if served is None:  # the advice names the partition column first and builds online
        fix = indexadvice.create_index(q, need, "mssql", online=True)
        assert fix.endswith("WITH (ONLINE = ON)")
        if q.partition is not None:
            assert f"([{q.partition.column}], [{need.columns[0]}]" in fix
        sqlglot.parse_one(fix, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)


def test_collector_session_isolation_and_lock_timeout() -> None:
    """Every collector statement runs in a session that sets LOCK_TIMEOUT (error 1222 instead of a
    wait) and DEADLOCK_PRIORITY LOW; the isolation level is READ UNCOMMITTED, set by the engine as
    the ODBC attribute (queueops.engine): no statement sets another level or a lock hint."""
    from queueops import engine

    cfg = load(EXAMPLES[0])
    setup = sessions.reading(cfg.targets[0]).sql
    assert "SET LOCK_TIMEOUT 1000" in setup and "SET DEADLOCK_PRIORITY LOW" in setup
    assert "READ_UNCOMMITTED" in Path(engine.__file__).read_text() or "READ UNCOMMITTED" in Path(engine.__file__).read_text()
    for path in EXAMPLES:
        for r in sqlcmd.render_all(load(path), actions=[]):
            if r.group != "collector":
                continue  # catalog reads: requeue's lease_ahead reads WITH (NOLOCK), as its preview
            text = r.sql.upper()
            assert "ISOLATION LEVEL" not in text and "NOLOCK" not in text, (path.name, r.block)


def test_preset_signatures_match_the_upstream_column_types() -> None:
    """Item 1: MassTransit's EnqueueTime is datetime2 upstream (since 2024-01), not datetimeoffset:
    discover never recognised a real MassTransit database. Every SQL Server preset's signature column
    types are the upstream DDL's."""
    from queueops import presets

    for name, up in BY_PRESET.items():
        sig = presets.get(name).signature.columns
        types: dict[str, str] = {}
        for st in sqlglot.parse(up.ddl, read="tsql"):
            if st.args.get("kind") == "TABLE" and st.this.this.name == DDL_TABLE[name]:
                types = {c.name: c.args["kind"].sql("tsql").split("(")[0].lower() for c in st.this.expressions
                         if isinstance(c, exp.ColumnDef)}
        aliases = {"integer": "int"}
        for col, typ in sig.items():
            assert aliases.get(types.get(col, ""), types.get(col)) == typ, (name, col, typ, types.get(col))


def test_discover_recognises_the_upstream_tables_and_writes_a_config_that_loads(tmp_path: Path) -> None:
    """Item 1: discovery matches a real MassTransit MessageDelivery (EnqueueTime datetime2); a preset
    whose table holds many queues is written commented out, naming the partition it needs, so the
    written config still loads (and the other presets' sections are live)."""
    from queueops import discovery

    written = []
    for preset, up in BY_PRESET.items():
        for st in sqlglot.parse(up.ddl, read="tsql"):
            if st.args.get("kind") == "TABLE" and st.this.this.name == DDL_TABLE[preset]:
                schema = st.this.this.db
                cols = {c.name: discovery.Column(c.name, c.args["kind"].sql("tsql").split("(")[0].lower(),
                                                 c.args["kind"].sql("tsql").split("(")[0].lower())
                        for c in st.this.expressions if isinstance(c, exp.ColumnDef)}
                table = discovery.Table(schema, DDL_TABLE[preset], columns=cols)
                hit = discovery.match_preset(table, "mssql")
                assert hit is not None and hit[0].name == preset, (preset, hit and hit[0].name)
                written.append(discovery._preset_proposal(table, *hit))  # noqa: SLF001
    text = discovery.render_toml(written, "sql")
    assert "#   needs partition: MessageDelivery holds every queue" in text
    assert '# preset = "masstransit"' in text and '\npreset = "simple_queue"' in text
    path = tmp_path / "q.toml"
    path.write_text('[[targets]]\nname = "sql"\ndialect = "mssql"\nurl = "mssql+pyodbc://u@h/db?driver=x"\n\n' + text)
    cfg = config_mod.load(path)
    assert sorted(q.preset for q in cfg.queues) == ["nservicebus", "rebus", "simple_queue"]


def test_the_sql_command_filters_and_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from queueops import cli

    path = str(ROOT / "examples" / "mssql" / "masstransit.toml")
    assert cli.main(["sql", "--config", path, "--queue", "orders", "--action", "terminate", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["queue"] for r in rows} == {"orders"} and {r["group"] for r in rows} == {"action"}
    kill = next(r for r in rows if r["block"] == "actions/terminate:kill")
    assert "KILL <session_id>" in kill["sql"]
    assert kill["params"] == ["<session_id of the previewed root cause>", "<login_time of that session, as the preview read it>"]
    assert cli.main(["sql", "--config", path, "--collector", "depth"]) == 0
    text = capsys.readouterr().out
    assert text.count("collector depth (depth)") == 3 and "[QueueId] = 2" in text and "action" not in text
    assert cli.main(["sql", "--config", path, "--queue", "nope"]) == 2


def test_joined_renders_the_collectors_as_the_service_sends_them() -> None:
    for path in EXAMPLES:
        cfg = load(path)
        rows = [r for r in sqlcmd.render_all(cfg, joined=True) if r.group == "collector" and r.block.endswith("(joined)")]
        assert rows
        for r in rows:
            trees = sqlglot.parse(r.sql, read="tsql", error_level=sqlglot.ErrorLevel.RAISE)
            assert sum(len(list(t.find_all(exp.Placeholder))) for t in trees) == len(r.params), (path.name, r.block)
