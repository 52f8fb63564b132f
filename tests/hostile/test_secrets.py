"""Secrets never leave: a run that used real secrets, then every output grepped for them.

One module-scoped run on the session's lab, through the real command line and the real console
pages, with a config whose every secret is an ``env:`` reference:

* ``lab``: the lab's real password; actions log in as a separate role with a password of its own
  (``actions_url`` / ``actions_password``), allowed to requeue the lease queue but not to update
  the status queue, so one action fails *after* its preview;
* ``down``: a PostgreSQL target on a closed port whose whole URL is a secret (a connection string
  with an embedded password, one character percent-encoded) plus a password reference;
* ``badauth``: the lab's server with a wrong password (authentication fails);
* ``literal``: a password written into the config as it is (the loader accepts it);
* ``typo``: a connection string whose password holds an unencoded ``%``: libpq's error message
  quotes that part of the URL on its own, so masking whole URLs is not enough;
* ``sqlserver``: an unreachable SQL Server through FreeTDS / pyodbc (the ODBC error path).

Commands: ``config check --live``, ``collect --once --json``, the service for a few seconds
(with ``/metrics`` and ``/healthz`` fetched), ``lake export``, ``act`` (one ok, one failed at
execution, one failed at preview), ``audit`` (list and every record in full); then ``audit``,
``lake export`` and the service again with the store's URL (holding a password) a secret
reference to a server that is not there; and the console's settings page (every "Test
connection" clicked) and overview page in Streamlit's AppTest.

Then every stdout and stderr, the service log, the HTTP bodies, the store (every table, and the
SQLite files byte for byte), the lake (every file's bytes and every Parquet value) and the
console's rendered elements are searched for every secret, raw and percent-encoded.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from psycopg import sql

from queueops import sessions
from tests.conftest import ROOT, Lab

TIMEOUT = 180


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Run:
    """Everything the run produced, by where it came from, and the secrets it used."""

    dir: Path
    config: Path
    secrets: dict[str, str]
    outputs: dict[str, str] = field(default_factory=dict)
    results: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def cli(self, name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        if "--config" not in args:
            args = (*args, "--config", str(self.config))
        proc = subprocess.run([sys.executable, "-m", "queueops.cli", *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT, env=env)
        self.results[name] = proc
        self.outputs[f"{name}: stdout"] = proc.stdout
        self.outputs[f"{name}: stderr"] = proc.stderr
        return proc


def _config(lab: Lab, folder: Path, act_role: str, closed_port: int, literal_password: str) -> Path:
    text = lab.config_path.read_text()
    queues = text[text.index("[[queues]]"):].replace("lease_timeout_s = 20", "lease_timeout_s = 3")
    port = lab.info.port
    extra_queues = "".join(f"""
[[queues]]
name = "{t}_lease"
target = "{t}"
kind = "lease"
schema = "lab"
table = "q_lease"
key = "id"
enqueued_at = "created_at"
lease_column = "processing_started_at"
lease_timeout_s = 3
""" for t in ("down", "badauth", "literal", "typo", "sqlserver"))
    path = folder / "secrets.toml"
    path.write_text(f"""
[store]
url = "sqlite:///{folder / 'store.db'}"

[lake]
path = "{folder / 'lake'}"
close_grace_s = 0

[schedule]
fast_s = 1
slow_s = 2

[identity]
user = "secret-tester"
default_role = "operator"

[console]
users_file = "{folder / 'users.toml'}"

[[targets]]
name = "lab"
dialect = "postgresql"
url = "postgresql://queueops@127.0.0.1:{port}/{lab.info.database}"
password = "env:QO_SECRET_LAB_PW"
actions_url = "postgresql://{act_role}@127.0.0.1:{port}/{lab.info.database}"
actions_password = "env:QO_SECRET_ACT_PW"
statement_timeout_ms = 3000
lock_timeout_ms = 500

[[targets]]
name = "down"
dialect = "postgresql"
url = "env:QO_SECRET_DOWN_URL"
password = "env:QO_SECRET_DOWN_PW"
connect_timeout_s = 2

[[targets]]
name = "badauth"
dialect = "postgresql"
url = "postgresql://queueops@127.0.0.1:{port}/{lab.info.database}"
password = "env:QO_SECRET_WRONG_PW"
connect_timeout_s = 2

[[targets]]
name = "literal"
dialect = "postgresql"
url = "postgresql://svc@127.0.0.1:{closed_port}/queueops_literal"
password = "{literal_password}"
connect_timeout_s = 2

[[targets]]
name = "typo"
dialect = "postgresql"
url = "env:QO_SECRET_TYPO_URL"
connect_timeout_s = 2

[[targets]]
name = "sqlserver"
dialect = "mssql"
url = "mssql+pyodbc://sa@127.0.0.1:{closed_port}/master?driver=FreeTDS&TDS_Version=7.4"
password = "env:QO_SECRET_MSSQL_PW"
connect_timeout_s = 2

{queues}
{extra_queues}
""")
    return path


def _seed_stuck_items(lab: Lab) -> None:
    with lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_lease (created_at, processing_started_at) "
                     "SELECT now() - interval '5 min', now() - interval '2 min' FROM generate_series(1, 3)")
        conn.execute("INSERT INTO lab.q_status_meta (status, status_changed_at) "
                     "SELECT 1, now() - interval '2 min' FROM generate_series(1, 2)")


def _fetch(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:  # noqa: S310 - our own local service
            return r.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:  # /healthz answers 503 while targets are down: keep the body
        return exc.read().decode(errors="replace")


def _store_rows(store: Path, where: str = "") -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store, timeout=10) as db:
            return int(db.execute(f"SELECT count(*) FROM collector_status {where}").fetchone()[0])  # noqa: S608
    except sqlite3.Error:
        return 0


def _service(run: Run, env: dict[str, str]) -> None:
    """``queueops collect`` until it stored cycles for every target; /metrics and /healthz meanwhile."""
    port = _free_port()
    log = run.dir / "service.log"
    store = run.dir / "store.db"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "queueops.cli", "collect", "--config", str(run.config),
                                 "--metrics-port", str(port), "--log-level", "DEBUG"],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + TIMEOUT
        # Every target has been tried twice (fast cycles), and the slow collectors ran on the lab.
        while time.monotonic() < deadline and proc.poll() is None:
            if (_store_rows(store, "WHERE target = 'lab' AND collector = 'fragmentation_pct'") >= 1
                    and all(_store_rows(store, f"WHERE target = '{t}' AND collector = 'depth'") >= 2  # noqa: S608
                            for t in ("lab", "down", "badauth", "literal", "typo", "sqlserver"))):
                break
            time.sleep(0.3)
        assert proc.poll() is None, f"the service exited early: {log.read_text()[-2000:]}"
        run.outputs["service: /metrics"] = _fetch(f"http://127.0.0.1:{port}/metrics")
        run.outputs["service: /healthz"] = _fetch(f"http://127.0.0.1:{port}/healthz")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    run.outputs["service: log"] = log.read_text(errors="replace")
    run.results["service"] = subprocess.CompletedProcess(proc.args, proc.returncode, "", "")


def _move_rows_to_the_previous_hour(store: Path) -> None:
    """The run's rows, one hour earlier: a closed hour the exporter writes now (the grace is 0)."""
    with sqlite3.connect(store, timeout=30) as db:
        for table in ("snapshots", "collector_status"):
            rows = db.execute(f"SELECT id, ts FROM {table}").fetchall()  # noqa: S608 - our own table names
            db.executemany(f"UPDATE {table} SET ts = ? WHERE id = ?",  # noqa: S608
                           [((datetime.fromisoformat(ts) - timedelta(hours=1)).isoformat(sep=" "), i)
                            for i, ts in rows])


def _console(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings page with every target's "Test connection" clicked, and the overview page."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("QUEUEOPS_CONFIG", str(run.config))
    st.cache_resource.clear()

    def _page(module: str) -> None:
        import importlib

        importlib.import_module(module).render()

    for module in ("console.views.settings", "console.views.overview"):
        at = AppTest.from_function(_page, args=(module,), default_timeout=TIMEOUT)
        at.session_state["qo_identity"] = {"name": "secret-tester", "role": "operator", "method": "local"}
        at.run()
        if module.endswith("settings"):
            for target in ("lab", "down", "badauth", "literal", "typo", "sqlserver"):
                at.button(key=f"test_{target}").click().run()
                run.outputs[f"console settings after testing {target}"] = _elements(at)
        run.outputs[f"console {module}"] = _elements(at)
        assert not at.exception, [e.value for e in at.exception]
    st.cache_resource.clear()


def _elements(at: object) -> str:
    """Every rendered element's protobuf, as text: whatever reaches the browser."""
    out: list[str] = []

    def walk(node: object) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            out.append(str(proto))
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            for child in children.values():
                walk(child)

    walk(at._tree)  # type: ignore[attr-defined]
    return "\n".join(out)


def _store_dump(store: Path) -> dict[str, str]:
    out = {}
    with sqlite3.connect(store, timeout=30) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for t in tables:
            rows = db.execute(f'SELECT * FROM "{t}"').fetchall()  # noqa: S608 - names from sqlite_master
            out[f"store table {t} ({len(rows)} rows)"] = "\n".join(repr(r) for r in rows)
    for f in sorted(store.parent.glob(store.name + "*")):
        out[f"store file {f.name} (bytes)"] = f.read_bytes().decode("latin-1")
    return out


def _lake_dump(lake: Path) -> dict[str, str]:
    import pyarrow.parquet as pq

    out = {}
    for f in sorted(p for p in lake.rglob("*") if p.is_file()):
        out[f"lake file {f.relative_to(lake)} (bytes)"] = f.read_bytes().decode("latin-1")
        if f.suffix == ".parquet":
            out[f"lake file {f.relative_to(lake)} (values)"] = json.dumps(pq.read_table(f).to_pylist(), default=str)
    return out


@pytest.fixture(scope="module")
def run(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    folder = tmp_path_factory.mktemp("secrets")
    tag = uuid.uuid4().hex[:6]
    act_role = f"qo_secret_actor_{tag}"
    url_password = f"Url-Embedded@Pw-{tag}"  # '@' must be percent-encoded in the URL
    secrets = {
        "lab password": lab.password,
        "actions password": f"Act-Login-Pw-{tag}",
        "down password": f"Down-Target-Pw-{tag}",
        "password inside the down URL": url_password,
        "wrong password": f"Wrong-Auth-Pw-{tag}",
        "mssql password": f"Mssql-Sa-Pw-{tag}",
    }
    closed_port = _free_port()  # nothing listens there
    down_url = (f"postgresql://svc:{urllib.parse.quote(url_password, safe='')}@127.0.0.1:{closed_port}"
                "/queueops_down")
    secrets["down connection string"] = down_url
    # The loader accepts a literal password (README: never do that); it must not show either.
    secrets["literal password"] = f"Literal-Pw-{tag}"
    # A password with a '%' its owner forgot to encode: libpq quotes that part of the URL alone.
    secrets["password inside the typo URL"] = f"Typo%zz-Pw-{tag}"
    secrets["typo connection string"] = (f"postgresql://svc:{secrets['password inside the typo URL']}"
                                         f"@127.0.0.1:{closed_port}/queueops_typo")
    secrets["store password"] = f"Store-Url-Pw-{tag}"
    secrets["store connection string"] = (f"postgresql://qo:{secrets['store password']}@127.0.0.1:{closed_port}"
                                          "/queueops_store")
    env = {**os.environ, "QO_SECRET_LAB_PW": lab.password, "QO_SECRET_ACT_PW": secrets["actions password"],
           "QO_SECRET_DOWN_URL": down_url, "QO_SECRET_DOWN_PW": secrets["down password"],
           "QO_SECRET_WRONG_PW": secrets["wrong password"], "QO_SECRET_MSSQL_PW": secrets["mssql password"],
           "QO_SECRET_TYPO_URL": secrets["typo connection string"]}
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(act_role), sql.Literal(secrets["actions password"])))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA lab TO {}").format(sql.Identifier(act_role)))
        conn.execute(sql.SQL("GRANT SELECT, UPDATE ON lab.q_lease TO {}").format(sql.Identifier(act_role)))
        # May preview a status requeue, may not run it: an action that fails after its preview.
        conn.execute(sql.SQL("GRANT SELECT ON lab.q_status_meta TO {}").format(sql.Identifier(act_role)))
    lab.reset()
    _seed_stuck_items(lab)
    r = Run(folder, _config(lab, folder, act_role, closed_port, secrets["literal password"]), secrets)
    mp = pytest.MonkeyPatch()
    try:
        for k in ("QO_SECRET_LAB_PW", "QO_SECRET_ACT_PW", "QO_SECRET_DOWN_URL", "QO_SECRET_DOWN_PW",
                  "QO_SECRET_WRONG_PW", "QO_SECRET_MSSQL_PW", "QO_SECRET_TYPO_URL"):
            mp.setenv(k, env[k])
        r.cli("config check --live", "config", "check", "--live", env=env)
        r.cli("collect --once", "collect", "--once", "--json", env=env)
        time.sleep(3.5)  # the seeded leases are older than the 3 s lease timeout by now anyway
        r.cli("act requeue lease", "act", "requeue", "--queue", "lease", "--yes", "--json", env=env)
        r.cli("act requeue status", "act", "requeue", "--queue", "status", "--yes", "--json", env=env)
        r.cli("act requeue down_lease", "act", "requeue", "--queue", "down_lease", "--yes", "--json", env=env)
        r.cli("act requeue badauth_lease", "act", "requeue", "--queue", "badauth_lease", "--dry-run", env=env)
        _service(r, env)
        _move_rows_to_the_previous_hour(folder / "store.db")
        r.cli("lake export", "lake", "export", "--json", env=env)
        audit = r.cli("audit", "audit", "--json", env=env)
        for line in audit.stdout.splitlines():
            rec = json.loads(line)
            r.cli(f"audit --id {rec['id']}", "audit", "--id", str(rec["id"]), "--json", env=env)
            r.cli(f"audit --id {rec['id']} (text)", "audit", "--id", str(rec["id"]), env=env)
        # The store itself unreachable, its URL (with a password) a secret reference.
        store_down = folder / "store-down.toml"
        store_down.write_text(re.sub(r'(?m)^url = "sqlite:///.*"$', 'url = "env:QO_SECRET_STORE_URL"',
                                     r.config.read_text(), count=1))
        down_env = {**env, "QO_SECRET_STORE_URL": secrets["store connection string"]}
        for name, args in (("store down: audit", ("audit",)), ("store down: lake export", ("lake", "export")),
                           ("store down: service", ("collect", "--duration", "3", "--collector", "depth"))):
            r.cli(name, *args, "--config", str(store_down), env=down_env)
        _console(r, mp)
        r.outputs.update(_store_dump(folder / "store.db"))
        r.outputs.update(_lake_dump(folder / "lake"))
        yield r
    finally:
        mp.undo()
        lab.reset()
        with lab.connect() as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (act_role,))
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(act_role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(act_role)))


def _forms(secret: str) -> set[str]:
    """The secret as it is, and as it would appear inside a URL."""
    return {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)}


# ---------------------------------------------------------------------------------------------
# The run really used the secrets and really went through the error paths


def test_the_run_used_every_secret_and_every_error_path(run: Run) -> None:
    collect = run.results["collect --once"]
    rows = [json.loads(line) for line in collect.stdout.splitlines()]
    status = {(r["target"], r["collector"]): r for r in rows if "collector" in r}
    # The lab's real password worked (rows with values), the three others failed at connect.
    assert any(r.get("target") == "lab" and r.get("metric") == "depth" for r in rows)
    assert all(status[("lab", c)]["ok"] for c in ("depth", "stuck_leases"))
    for target in ("down", "badauth", "literal", "typo", "sqlserver"):
        assert not status[(target, "depth")]["ok"] and status[(target, "depth")]["error"]
    assert "password authentication failed" in status[("badauth", "depth")]["error"]
    assert "invalid percent-encoded token" in status[("typo", "depth")]["error"]
    assert collect.returncode == 1

    ok = json.loads(run.results["act requeue lease"].stdout.splitlines()[-1])
    assert ok["outcome"] == "ok" and ok["rows_affected"] == 3  # the action login's password worked
    failed = json.loads(run.results["act requeue status"].stdout.splitlines()[-1])
    assert failed["outcome"] == "failed" and "permission denied" in failed["error"]
    assert run.results["act requeue down_lease"].returncode == 1
    assert "preview failed" in run.results["act requeue down_lease"].stderr
    assert run.results["act requeue badauth_lease"].returncode == 1
    assert run.results["config check --live"].returncode != 0  # three targets cannot be checked

    store = run.outputs
    assert any(k.startswith("store table audit_log (2 rows)") for k in store)
    health = json.loads(run.outputs["service: /healthz"])
    assert all(j["last_error"] and j["consecutive_failures"] >= 1
               for j in health["jobs"].values() if j["target"] != "lab")
    assert "queueops" in run.outputs["service: /metrics"]
    export = json.loads(run.results["lake export"].stdout)
    assert export["exported"] and sum(h["status_rows"] for h in export["exported"]) > 0
    assert any(k.endswith("(values)") and '"down"' in v for k, v in run.outputs.items() if k.startswith("lake"))
    assert "Cannot connect" in run.outputs["console settings after testing down"]
    assert "Connected in" in run.outputs["console settings after testing lab"]
    assert "is unreachable" in run.outputs["console console.views.overview"]
    # The store-down legs reached the store's error paths.
    assert "Connection refused" in run.results["store down: audit"].stderr
    assert "lake export failed" in run.results["store down: lake export"].stderr
    assert "not written" in run.results["store down: service"].stderr


# ---------------------------------------------------------------------------------------------
# ... and no secret appears anywhere


@pytest.mark.parametrize("kind", ["stdout", "stderr", "service", "store", "lake", "console"])
def test_no_secret_appears(run: Run, kind: str) -> None:
    sources = {k: v for k, v in run.outputs.items() if k.startswith(kind) or k.endswith(f": {kind}")}
    assert sources, f"nothing of kind {kind!r} was captured"
    leaks = []
    for source, text in sources.items():
        for what, secret in run.secrets.items():
            for form in _forms(secret):
                at = text.find(form)
                if at >= 0:
                    leaks.append(f"{what} in {source}: ...{text[max(0, at - 120):at + len(form) + 40]!r}...")
    assert not leaks, "\n".join(leaks)


def test_error_messages_say_what_failed_without_the_secret(run: Run) -> None:
    """Masking must not destroy the message: the operator still learns what went wrong."""
    stderr = run.results["act requeue down_lease"].stderr
    assert "preview failed" in stderr and "Connection refused" in stderr
    checked = run.results["config check --live"]
    text = checked.stdout + checked.stderr
    assert "badauth" in text and "sqlserver" in text


def test_secret_references_are_shown_as_references(run: Run) -> None:
    settings = run.outputs["console console.views.settings"]
    assert "env:QO_SECRET_LAB_PW" in settings and "env:QO_SECRET_DOWN_URL" in settings


# ---------------------------------------------------------------------------------------------
# Credentials: collectors read with the collector login, in read-only sessions; actions use the
# action login (the role above), so the collector login never needs the right to write.


def _session_user(run: Run, purpose: str) -> str:
    from queueops import config as config_mod
    from queueops import engine, sqlfiles

    cfg = config_mod.load(run.config)
    with engine.connection(cfg.target("lab"), purpose, cfg.base_dir) as conn:  # type: ignore[arg-type]
        return conn.execute(sqlfiles.render("SELECT current_user AS u", "postgresql", {}, {}))[0]["u"]


def test_collectors_log_in_as_the_collector_and_actions_as_the_action_login(run: Run) -> None:
    assert _session_user(run, "collect") == "queueops"
    assert _session_user(run, "action").startswith("qo_secret_actor_")


def test_collector_and_preview_sessions_refuse_to_write(run: Run) -> None:
    from queueops import config as config_mod
    from queueops import engine, sqlfiles
    from queueops.actions.session import open_session

    cfg = config_mod.load(run.config)
    target = cfg.target("lab")
    write = sqlfiles.render("UPDATE lab.q_lease SET attempts = attempts WHERE id < 0", "postgresql", {}, {})
    with engine.connection(target, "collect", cfg.base_dir) as conn:
        conn.execute(sessions.reading(target))
        with pytest.raises(engine.TargetError, match="read-only transaction"):
            conn.execute(write)
    preview = open_session(target, cfg.base_dir, "queueops-test-preview", read_only=True)
    try:
        with pytest.raises(engine.TargetError, match="read-only transaction"):
            preview.run(write)
    finally:
        preview.close()


# ---------------------------------------------------------------------------------------------
# Exposure: everything queueops listens on is bound to the loopback interface unless told otherwise.


def test_listeners_bind_to_localhost_by_default(run: Run, lab: Lab) -> None:
    from queueops.cli import build_parser
    from queueops.commands.serve import streamlit_command

    args = build_parser().parse_args(["collect", "--config", str(run.config), "--metrics-port", "0"])
    assert args.metrics_addr == "127.0.0.1"
    cmd, _ = streamlit_command(str(run.config), 8501)
    assert cmd[cmd.index("--server.address") + 1] == "localhost"
    with lab.connect() as conn:
        assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"
    # The service run above said where its endpoint was.
    assert "metrics on http://127.0.0.1:" in run.outputs["service: log"]
