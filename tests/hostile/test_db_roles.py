"""The documented least-privilege logins work, and ``config check --live`` tells what a login lacks.

The lab's queue tables are created in a schema of this module's own (a name that needs quoting),
owned by a NOLOGIN owner role as docs/security.md recommends; the collector and action logins are
created by running ``sql/postgresql/roles/least_privilege.sql`` (the script the docs show) with
psql's variable quoting. Then every collector runs under the collector login and every action
under the action login, on the real server, and must succeed.

The other tests give ``config check --live`` bare logins (a collector without pg_monitor, an
action login without any right) and check that each missing grant is named with what it disables
and a GRANT that fixes it; running those GRANTs must leave nothing to report. And a view mapped as
a queue is refused, by the check and by rebuild's preview.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from queueops import actions, sqlfiles
from queueops import config as config_mod
from tests.conftest import ROOT, Lab

SCRIPT = ROOT / "sql" / "postgresql" / "roles" / "least_privilege.sql"
TABLES = ("q_delete", "q_delete_watermark", "q_status_meta", "q_status_data", "q_lease", "q_due",
          "q_ring_slot", "q_ring_seq")


def psql_statements(text: str, variables: dict[str, str], conn: psycopg.Connection) -> list[str]:
    """The script's statements with psql's ``:"name"`` replaced as psql does (a quoted identifier)."""
    body = "\n".join(line.split("--", 1)[0] for line in text.splitlines())

    def var(m: re.Match[str]) -> str:
        return sql.Identifier(variables[m.group(1)]).as_string(conn)

    body = re.sub(r':"([a-z_]+)"', var, body)
    return [s.strip() for s in body.split(";") if s.strip()]


@dataclass
class Roles:
    lab: Lab
    dir: Path
    schema: str
    owner: str
    collector: str
    action: str
    app: str
    passwords: dict[str, str]
    rebuild_grant: list[str]

    @property
    def env(self) -> dict[str, str]:
        return {"QO_ROLES_COLLECTOR_PW": self.passwords[self.collector],
                "QO_ROLES_ACTION_PW": self.passwords[self.action]}

    def s(self, table: str) -> sql.Composable:
        return sql.Identifier(self.schema, table)

    def run(self, statement: sql.Composable | str, params: tuple = ()) -> list[tuple]:
        with self.lab.connect() as conn:
            cur = conn.execute(statement, params or None)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def config(self, name: str, collector: str | None = None, action: str | None = None,
               extra: str = "") -> Path:
        """The lab's config pointed at this schema, collecting as ``collector`` and acting as ``action``."""
        collector, action = collector or self.collector, action or self.action
        text = self.lab.config_path.read_text()
        queues = re.sub(r'(?m)^schema = "lab"$', f'schema = "{self.schema}"', text[text.index("[[queues]]"):])
        port, db = self.lab.info.port, self.lab.info.database
        path = self.dir / f"{name}.toml"
        path.write_text(f"""
[store]
url = "sqlite:///{self.dir / (name + '-store.db')}"

[identity]
user = "roles-tester"
default_role = "operator"

[[targets]]
name = "lab"
dialect = "postgresql"
url = "postgresql://{collector}@127.0.0.1:{port}/{db}"
password = "env:QO_ROLES_COLLECTOR_PW"
actions_url = "postgresql://{action}@127.0.0.1:{port}/{db}"
actions_password = "env:QO_ROLES_ACTION_PW"
statement_timeout_ms = 10000
lock_timeout_ms = 1000

{queues}
{extra}
""")
        return path

    def cli(self, *args: str, config: Path, env: dict[str, str] | None = None):  # noqa: ANN201
        return self.lab.cli(*args, "--config", str(config), env={**self.env, **(env or {})})


def _lab_tables_ddl(schema: str, conn: psycopg.Connection) -> str:
    """The lab's own schema file, its tables created in ``schema`` instead of ``lab``."""
    text = sqlfiles.load("postgresql", "lab/schema").text
    text = re.sub(r"(?m)^CREATE (SCHEMA|EXTENSION) .*$", "", text)
    return re.sub(r"\blab\.", sql.Identifier(schema).as_string(conn) + ".", text)


@pytest.fixture(scope="module")
def roles(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Roles]:
    tag = uuid.uuid4().hex[:6]
    r = Roles(lab, tmp_path_factory.mktemp("roles"), f"qo roles-{tag}", f"qo_queue_owner_{tag}",
              f"qo_collector_{tag}", f"qo_action_{tag}", f"qo_app_{tag}", {}, [])
    r.passwords = {name: f"Pw-{name}-{uuid.uuid4().hex[:8]}" for name in (r.collector, r.action, r.app)}
    with lab.connect() as conn:
        ident = sql.Identifier
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(ident(r.owner)))
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(ident(r.schema), ident(r.owner)))
        # The queue tables belong to their owner role, as in production (not to a superuser).
        conn.execute(sql.SQL("SET ROLE {}").format(ident(r.owner)))
        conn.execute(_lab_tables_ddl(r.schema, conn))
        for t in ("q_status_meta", "q_status_data"):
            conn.execute(sql.SQL("CREATE TABLE {} (LIKE {})").format(r.s(f"{t}_archive"), r.s(t)))
        conn.execute("RESET ROLE")
        statements = psql_statements(SCRIPT.read_text(), {"collector": r.collector, "action": r.action,
                                                          "owner": r.owner, "schema": r.schema}, conn)
        # The script's last statement is rebuild's (membership in the owner's role): applied by the
        # tests that need it, so that the rest is shown to work without it.
        owner = ident(r.owner).as_string(conn)
        r.rebuild_grant = [s for s in statements if s.startswith(f"GRANT {owner} TO")]
        assert len(r.rebuild_grant) == 1, statements
        for stmt in statements:
            if stmt not in r.rebuild_grant:
                conn.execute(stmt)  # type: ignore[arg-type]
        # archive --mode move, as the script's comment says.
        conn.execute(sql.SQL("GRANT INSERT ON {}, {} TO {}").format(
            r.s("q_status_meta_archive"), r.s("q_status_data_archive"), ident(r.action)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(ident(r.app)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident(r.schema), ident(r.app)))
        conn.execute(sql.SQL("GRANT SELECT, UPDATE ON {} TO {}").format(r.s("q_lease"), ident(r.app)))
        for name, pw in r.passwords.items():
            conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(ident(name), sql.Literal(pw)))
    try:
        yield r
    finally:
        with lab.connect() as conn:
            names = [r.collector, r.action, r.app, f"{r.collector}_bare", f"{r.action}_bare", f"{r.collector}_nostats"]
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY(%s)", (names,))
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(r.schema)))
            for name in [*names, r.owner]:
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                    conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
                    conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _grant_rebuild(r: Roles) -> None:
    for stmt in r.rebuild_grant:
        r.run(stmt)


def _findings(stdout: str, path: Path) -> list[str]:
    return [ln for ln in stdout.splitlines() if re.match(rf"{re.escape(str(path))}: (error|warning): ", ln)]


# ---------------------------------------------------------------------------------------------
# The documented roles: every collector and every action works


def test_every_collector_returns_values_under_the_collector_login(roles: Roles) -> None:
    from collectors import registry, runner

    r = roles
    r.run(sql.SQL("INSERT INTO {} (payload) SELECT 'x' FROM generate_series(1, 50)").format(r.s("q_delete")))
    path = r.config("collect")
    # Another login's open transaction: only pg_read_all_stats shows its start (its age).
    app = psycopg.connect(r.lab.url.replace("queueops@", f"{r.app}@"), password=r.passwords[r.app])
    try:
        app.execute("SELECT txid_current()")
        time.sleep(1.5)
        proc = r.cli("collect", "--once", "--json", config=path)
    finally:
        app.close()
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    status = {s["collector"]: s for s in rows if "collector" in s}
    assert set(status) == {c.name for c in registry.COLLECTORS}
    assert all(s["ok"] for s in status.values()), {c: s["error"] for c, s in status.items() if not s["ok"]}
    assert proc.returncode == 0, proc.stderr
    values = {(m["queue"], m["metric"]): m for m in rows if "metric" in m}
    assert not [k for k, m in values.items() if m["metric"] == runner.QUEUE_ERROR]
    for q in ("delete", "status", "lease", "due", "ring"):
        # pgstattuple's own figures, not the statistics' estimates: pg_stat_scan_tables works.
        assert values[(q, "ghost_records")]["note"] == "pgstattuple_approx"
        assert json.loads(values[(q, "fragmentation_pct")]["note"])["source"] == "pgstatindex"
        assert values[(q, "ghost_records")]["value"] is not None and values[(q, "depth")]["value"] is not None
    assert values[("delete", "depth")]["value"] == 50
    snapshot = values[("", "oldest_snapshot_age_s")]
    assert snapshot["value"] >= 1.0 and json.loads(snapshot["note"])["usename"] == r.app


NOT_VISIBLE = "not visible: the collector login lacks pg_read_all_stats"


def test_rows_that_need_other_sessions_say_so_without_pg_read_all_stats(roles: Roles) -> None:
    """A collector login that may read the tables but is not in pg_monitor sees no other login's
    transaction in pg_stat_activity: another login's open transaction and its table lock read as
    no snapshot and a lock held 0 s. The rows say so in their notes instead of reading as healthy;
    the documented login (pg_monitor) gets the plain notes and the real ages."""
    r = roles
    nostats = f"{r.collector}_nostats"
    ident = sql.Identifier
    r.run(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(ident(nostats), sql.Literal(r.passwords[r.collector])))
    r.run(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident(r.schema), ident(nostats)))
    r.run(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(ident(r.schema), ident(nostats)))
    app = psycopg.connect(r.lab.url.replace("queueops@", f"{r.app}@"), password=r.passwords[r.app])
    try:
        app.execute("SELECT txid_current()")  # an open transaction of another login, with an xid
        app.execute(sql.SQL("LOCK TABLE {} IN SHARE MODE").format(r.s("q_lease")))  # stops the lease queue's dequeues
        time.sleep(1.5)

        def rows(config: Path) -> dict[tuple[str, str], dict]:
            proc = r.cli("collect", "--once", "--json", config=config)
            assert proc.returncode == 0, proc.stderr
            out = [json.loads(line) for line in proc.stdout.splitlines()]
            return {(m["queue"], m["metric"]): m for m in out if "metric" in m}

        hidden = rows(r.config("nostats", collector=nostats))
        seen = rows(r.config("collect"))
    finally:
        app.close()
    def says_so(note: str) -> bool:
        """The note itself, or (a holder still seen: its xid is visible, its start is not) its JSON's not_visible."""
        return note.startswith(NOT_VISIBLE) or (note.startswith("{")
                                                and json.loads(note).get("not_visible", "").startswith(NOT_VISIBLE))

    for metric in ("oldest_snapshot_age_s", "oldest_xmin_age_xids", "head_blockers"):
        assert says_so(hidden[("", metric)]["note"]), (metric, hidden[("", metric)])
    assert hidden[("", "oldest_snapshot_age_s")]["value"] == 0  # the value alone would read healthy
    for metric in ("snapshot_transactions", "blocked_sessions", "blocking_max_wait_s"):
        assert NOT_VISIBLE in hidden[("", metric)]["note"], (metric, hidden[("", metric)])
    lease = json.loads(hidden[("lease", "lock_blockers")]["note"])
    assert lease["not_visible"].startswith(NOT_VISIBLE) and lease["holders"][0]["xact_age_s"] == 0
    assert hidden[("lease", "lock_wait_max_s")]["note"].startswith(NOT_VISIBLE)
    # The documented collector login: the same moment seen whole, with no such note.
    assert not [k for k, m in seen.items() if NOT_VISIBLE in m["note"]]
    assert seen[("", "oldest_snapshot_age_s")]["value"] >= 1.0
    assert json.loads(seen[("", "oldest_snapshot_age_s")]["note"])["usename"] == r.app
    assert json.loads(seen[("lease", "lock_blockers")]["note"])["holders"][0]["xact_age_s"] >= 1.0


def _seed(r: Roles) -> None:
    r.run(sql.SQL("TRUNCATE {}, {}, {}, {}, {} RESTART IDENTITY CASCADE").format(
        r.s("q_lease"), r.s("q_status_meta"), r.s("q_delete"), r.s("q_status_meta_archive"),
        r.s("q_status_data_archive")))
    r.run(sql.SQL("INSERT INTO {} (processing_started_at) SELECT now() - interval '2 hours' "
                  "FROM generate_series(1, 7)").format(r.s("q_lease")))
    # status: 4 processing for two hours (requeue), 10 done two hours ago (archive), each with a payload row
    r.run(sql.SQL("INSERT INTO {} (status, status_changed_at) SELECT CASE WHEN g <= 4 THEN 1 ELSE 2 END, "
                  "now() - interval '2 hours' FROM generate_series(1, 14) AS g").format(r.s("q_status_meta")))
    r.run(sql.SQL("INSERT INTO {} (id, payload) SELECT id, 'p' FROM {}").format(r.s("q_status_data"),
                                                                             r.s("q_status_meta")))
    r.run(sql.SQL("INSERT INTO {} (payload) SELECT 'x' FROM generate_series(1, 5)").format(r.s("q_delete")))
    r.run(sql.SQL("UPDATE {} SET low_key = 4").format(r.s("q_delete_watermark")))  # keys 1-3 stranded


def _act(cfg: config_mod.Config, action: str, queue: str, options: dict | None = None) -> actions.Result:
    plan = actions.plan(cfg, action, queue, options or {})
    return actions.execute(cfg, plan)


def test_every_action_runs_under_the_action_login(roles: Roles, monkeypatch: pytest.MonkeyPatch) -> None:
    r = roles
    for k, v in r.env.items():
        monkeypatch.setenv(k, v)
    _seed(r)
    cfg = config_mod.load(r.config("act"))
    results = {}
    results["requeue lease"] = _act(cfg, "requeue", "lease", {"bump_attempts": True})
    results["requeue status"] = _act(cfg, "requeue", "status", {"bump_attempts": True})
    results["archive delete"] = _act(cfg, "archive", "status", {"older_than_s": 3600, "max_items": 4,
                                                                 "pause_s": 0})
    results["archive move"] = _act(cfg, "archive", "status", {
        "older_than_s": 3600, "mode": "move", "archive_table": "q_status_meta_archive",
        "archive_data_table": "q_status_data_archive", "pause_s": 0})
    results["watermark-reset"] = _act(cfg, "watermark-reset", "delete")
    failed = {k: res.error for k, res in results.items() if res.outcome != "ok"}
    assert not failed, failed
    assert {k: res.rows_affected for k, res in results.items()} == {
        "requeue lease": 7, "requeue status": 4, "archive delete": 4, "archive move": 6, "watermark-reset": 1}
    assert r.run(sql.SQL("SELECT count(*), min(attempts) FROM {} WHERE processing_started_at IS NULL")
                 .format(r.s("q_lease")))[0] == (7, 1)
    assert r.run(sql.SQL("SELECT count(*) FROM {}").format(r.s("q_status_data_archive")))[0][0] == 6
    assert r.run(sql.SQL("SELECT low_key FROM {}").format(r.s("q_delete_watermark")))[0][0] == 1

    # rebuild needs the owner's rights: without the script's last statement it fails ...
    before = _act(cfg, "rebuild", "lease", {"indexes": ["q_lease_pkey"]})
    assert before.outcome == "failed" and "must be owner" in before.error
    # ... with it, REINDEX CONCURRENTLY and VACUUM run (VACUUM of a table it does not own would only warn).
    _grant_rebuild(r)
    rebuilt = _act(cfg, "rebuild", "lease", {"indexes": ["q_lease_pkey"]})
    assert rebuilt.outcome == "ok", rebuilt.error
    assert [row["statement"].split()[0] for row in rebuilt.rows] == ["reindex_concurrently", "vacuum"], rebuilt.rows
    vacuumed = r.run("SELECT last_vacuum FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'q_lease'",
                     (r.schema,))
    assert vacuumed[0][0] is not None

    # terminate: another login's session holding a lock that blocks every write to the lease queue
    app = psycopg.connect(r.lab.url.replace("queueops@", f"{r.app}@"), password=r.passwords[r.app])
    try:
        app.execute(sql.SQL("LOCK TABLE {} IN SHARE MODE").format(r.s("q_lease")))
        pid = app.info.backend_pid
        plan = actions.plan(cfg, "terminate", "lease", {})
        assert plan.preview.rows and plan.preview.rows[0]["session_id"] == pid, plan.preview.to_json()
        ended = actions.execute(cfg, plan)
        assert ended.outcome == "ok", ended.error
        assert ended.rows[0]["ended"] is True
    finally:
        app.close()
    assert not r.run("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,))


def test_the_documented_roles_leave_config_check_live_nothing_to_report(roles: Roles) -> None:
    _grant_rebuild(roles)
    path = roles.config("documented")
    proc = roles.cli("config", "check", "--live", config=path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == f"{path}: ok (0 error(s), 0 warning(s))", proc.stdout
    assert f"collector login {roles.collector!r}, action login {roles.action!r}" in proc.stdout


def test_the_script_is_the_one_the_docs_show() -> None:
    docs = (ROOT / "docs" / "security.md").read_text()
    for line in SCRIPT.read_text().splitlines():
        if line.strip() and not line.startswith("--"):
            assert line in docs, f"docs/security.md does not show this line of {SCRIPT.name}: {line}"


# ---------------------------------------------------------------------------------------------
# config check --live names what each missing grant disables


def test_config_check_live_names_what_each_missing_grant_disables(roles: Roles) -> None:
    r = roles
    collector, action = f"{r.collector}_bare", f"{r.action}_bare"
    ident = sql.Identifier
    # A collector that may read the tables (but not q_due) and is not in pg_monitor; an action login
    # with no right at all.
    r.run(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(ident(collector), sql.Literal(r.passwords[r.collector])))
    r.run(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident(r.schema), ident(collector)))
    r.run(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(ident(r.schema), ident(collector)))
    r.run(sql.SQL("REVOKE SELECT ON {} FROM {}").format(r.s("q_due"), ident(collector)))
    r.run(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(ident(action), sql.Literal(r.passwords[r.action])))
    path = r.config("bare", collector=collector, action=action)
    proc = r.cli("config", "check", "--live", config=path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a queue no collector can read is an error
    found = _findings(proc.stdout, path)
    s = f'"{r.schema}"'
    coll, act = f'"{collector}"', f'"{action}"'
    expected = [
        ("warning", None, f"collector login = '{collector}'", "not a member of pg_monitor",
         "oldest_snapshot_age_s reads 0 s", f'GRANT "pg_monitor" TO {coll}'),
        ("error", "due", "table = 'q_due'", "lacks SELECT on", "depth and oldest_age_s fail on every cycle",
         f'GRANT SELECT ON {s}."q_due" TO {coll}'),
        ("warning", None, f"terminate = '{action}'", "pg_signal_backend", "terminate cannot end a session",
         f'GRANT "pg_signal_backend" TO {act}; GRANT "pg_read_all_stats" TO {act}'),
        ("warning", None, f"rebuild = '{action}'", "pg_stat_scan_tables", "only indexes named with --index",
         f'GRANT "pg_stat_scan_tables" TO {act}'),
        ("warning", "lease", "requeue = 'q_lease'", "USAGE on schema", "requeue fails (permission denied)",
         f'GRANT USAGE ON SCHEMA {s} TO {act}; GRANT SELECT ON {s}."q_lease" TO {act}; '
         f'GRANT UPDATE ("processing_started_at") ON {s}."q_lease" TO {act}'),
        ("warning", "status", "requeue = 'q_status_meta'", "UPDATE of status, status_changed_at",
         "requeue fails", f'GRANT UPDATE ("status", "status_changed_at") ON {s}."q_status_meta" TO {act}'),
        ("warning", "status", "archive = 'q_status_meta'", "DELETE on", "archive fails",
         f'GRANT DELETE ON {s}."q_status_meta" TO {act}; GRANT UPDATE ("status") ON {s}."q_status_meta" TO {act}; '
         f'GRANT SELECT ON {s}."q_status_data" TO {act}; GRANT DELETE ON {s}."q_status_data" TO {act}'),
        ("warning", "delete", "watermark-reset = 'q_delete'", "UPDATE of low_key", "watermark-reset fails",
         f'GRANT UPDATE ("low_key") ON {s}."q_delete_watermark" TO {act}'),
    ] + [("warning", q, f"rebuild = '{t}'", "the owner's rights", "DROP TABLE included",
          f'GRANT "{r.owner}" TO {act}') for q, t in (("delete", "q_delete"), ("status", "q_status_meta"),
                                                       ("lease", "q_lease"), ("due", "q_due"), ("ring", "q_ring_slot"))]
    for severity, queue, field_value, what, disabled, fix in expected:
        where = f"queue {queue!r}: " if queue else ""
        hits = [ln for ln in found if f": {severity}: {where}{field_value}: " in ln and what in ln and disabled in ln]
        assert len(hits) == 1, (severity, queue, field_value, what, disabled, "\n".join(found))
        assert fix in hits[0].split("; fix: ", 1)[1], (fix, hits[0])
    assert len(found) == len(expected), "\n".join(found)
    assert proc.stdout.splitlines()[-1] == f"{path}: errors (1 error(s), {len(expected) - 1} warning(s))"

    # Running every fix leaves nothing to report (the optional attempts column comes up once the
    # requeue grants are in; its fix is run too).
    for _ in range(2):
        for line in _findings(proc.stdout, path):
            for stmt in line.split("; fix: ", 1)[1].split("; "):
                r.run(stmt)
        proc = r.cli("config", "check", "--live", config=path)
    assert proc.stdout.splitlines()[-1] == f"{path}: ok (0 error(s), 0 warning(s))", proc.stdout


PARTED = """
[[queues]]
name = "parted"
target = "lab"
kind = "status"
schema = "{schema}"
table = "parted"
key = "id"
enqueued_at = "enqueued_at"
status_column = "status"
ready_values = [0]
processing_values = [1]
done_values = [2]
"""


def test_partitions_the_collector_may_not_read_hide_their_statistics_and_check_live_says_so(roles: Roles) -> None:
    """pg-boss's job table: SELECT on the parent reads every row, but pg_stats shows a partition's
    statistics only to a login that may read that partition, so every estimate above the cap read
    'at least' with nothing failing. check --live names the partitions and the grants, default
    privileges included (pg-boss creates a partition per queue); with them the estimate is back."""
    r = roles
    ident = sql.Identifier
    with r.lab.connect() as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(ident(r.owner)))
        conn.execute(sql.SQL("CREATE TABLE {} (id bigint NOT NULL, status int NOT NULL, enqueued_at timestamptz "
                             "NOT NULL DEFAULT now(), PRIMARY KEY (status, id)) PARTITION BY LIST (status)")
                     .format(r.s("parted")))
        for part, values in (("parted_open", "0, 1"), ("parted_done", "2")):
            conn.execute(sql.SQL("CREATE TABLE {} PARTITION OF {} FOR VALUES IN (" + values + ")")
                         .format(r.s(part), r.s("parted")))
        conn.execute(sql.SQL("INSERT INTO {} (id, status) SELECT g, CASE WHEN g % 4 = 0 THEN 2 ELSE 0 END "
                             "FROM generate_series(1, 4000) AS g").format(r.s("parted")))
        conn.execute(sql.SQL("ANALYZE {}, {}").format(r.s("parted_open"), r.s("parted_done")))  # as autovacuum does
        conn.execute("RESET ROLE")
    r.run(sql.SQL("GRANT SELECT ON {} TO {}").format(r.s("parted"), ident(r.collector)))  # the parent only
    path = r.config("parted", extra=PARTED.format(schema=r.schema))

    def check() -> list[str]:
        proc = r.cli("config", "check", "--live", config=path)
        return [ln for ln in _findings(proc.stdout, path) if "queue 'parted': table = 'parted'" in ln]

    def depth() -> dict:
        proc = r.cli("collect", "--once", "--json", config=path)
        rows = [json.loads(line) for line in proc.stdout.splitlines()]
        return next(m for m in rows if m.get("queue") == "parted" and m.get("metric") == "depth")

    blind = depth()
    assert blind["value"] == 1000 and blind["note"].startswith("at least"), blind  # 3,000 ready
    found = check()
    assert len(found) == 1 and ": warning: " in found[0], found
    s, coll = f'"{r.schema}"', f'"{r.collector}"'
    assert "may read" in found[0] and "but not 2 of its 2 partitions" in found[0] and "'at least'" in found[0]
    fixes = found[0].split("; fix: ", 1)[1].split("; ")
    assert fixes == [f'GRANT SELECT ON {s}."parted_done" TO {coll}', f'GRANT SELECT ON {s}."parted_open" TO {coll}',
                     f'ALTER DEFAULT PRIVILEGES FOR ROLE "{r.owner}" IN SCHEMA {s} GRANT SELECT ON TABLES TO {coll}']
    for stmt in fixes:
        r.run(stmt)
    assert check() == []
    seen = depth()
    assert seen["note"] == "estimate (pg_stats MCV)" and abs(seen["value"] - 3000) < 150, seen
    # A partition the owner adds later is covered by the default privileges.
    with r.lab.connect() as conn:
        conn.execute(sql.SQL("SET ROLE {}").format(ident(r.owner)))
        conn.execute(sql.SQL("CREATE TABLE {} PARTITION OF {} FOR VALUES IN (3)").format(r.s("parted_failed"),
                                                                                        r.s("parted")))
    assert check() == []


def test_an_action_login_that_cannot_connect_is_an_error(roles: Roles) -> None:
    path = roles.config("noaction", action="qo_nobody_at_all")
    proc = roles.cli("config", "check", "--live", config=path)
    assert proc.returncode == 1
    line = next(ln for ln in _findings(proc.stdout, path) if "actions_url = 'lab'" in ln)
    assert ": error: " in line and "cannot connect with the action login: every action fails" in line


# ---------------------------------------------------------------------------------------------
# A relation that is not a table is refused as a queue


def test_a_view_mapped_as_a_queue_is_an_error_and_rebuild_refuses_it(roles: Roles, lab: Lab) -> None:
    r = roles
    r.run(sql.SQL("CREATE VIEW {} AS SELECT * FROM {}").format(r.s("lease_view"), r.s("q_lease")))
    text = lab.config_path.read_text()
    lease = re.search(r'(?ms)^\[\[queues\]\]\nname = "lease".*?(?=^\[\[|\Z)', text)
    assert lease
    view = (lease.group(0).replace('name = "lease"', 'name = "lease_view"')
            .replace('schema = "lab"', f'schema = "{r.schema}"').replace('table = "q_lease"', 'table = "lease_view"'))
    path = r.dir / "view.toml"
    secret = Path(lab.server.password_file).resolve()
    path.write_text(text[:text.index("[[queues]]")].replace('password = "file:lab.secret"', f'password = "file:{secret}"')
                    + view)
    proc = lab.cli("config", "check", "--live", "--config", str(path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next(ln for ln in _findings(proc.stdout, path) if ": error: queue 'lease_view': table = 'lease_view': " in ln)
    assert "is a view (relkind 'v'), not a table" in line
    with pytest.raises(actions.ActionError, match="is not a table"):
        actions.plan(config_mod.load(path), "rebuild", "lease_view", {"vacuum_only": True})
