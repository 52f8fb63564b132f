"""Fixtures for the action tests: queue tables of their own on the session's real lab PostgreSQL.

The tables live in a schema whose name needs quoting (a space and a non-ASCII letter), so every
test also proves that names from config are quoted everywhere. The lab's own tables (and its
workload, when a test starts it) are left to the workload-based tests.
"""

from __future__ import annotations

import contextlib
import re
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from queueops import config as config_mod

SCHEMA = "qa äct"  # needs quoting in every statement
Q = '"qa äct"'
# Test SQL names the tables by token; the token cursor below substitutes them (plain strings, no
# SQL built by formatting).
TOKENS = {
    "@lease": '"qa äct"."lease q"', "@meta_arch": '"qa äct".status_meta_archive',
    "@data_arch": '"qa äct".status_data_archive', "@meta": '"qa äct".status_meta', "@data": '"qa äct".status_data',
    "@del": '"qa äct".del_q', "@wm": '"qa äct".del_q_wm', "@churn": '"qa äct".churn_q', "@S": '"qa äct"',
}
CHURN_NAME = TOKENS["@churn"]


def T(text: str) -> str:  # noqa: N802 - reads like a tag
    """Replace the table tokens of a test statement (longest first: @meta_arch before @meta)."""
    for token in sorted(TOKENS, key=len, reverse=True):
        text = text.replace(token, TOKENS[token])
    return text


class TokenCursor(psycopg.Cursor):
    def execute(self, query, params=None, **kw):  # noqa: ANN001, ANN201, ANN003
        return super().execute(T(query) if isinstance(query, str) else query, params, **kw)


DDL = """
DROP SCHEMA IF EXISTS @S CASCADE;
CREATE SCHEMA @S;
CREATE TABLE @S."lease q" (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    processing_started_at timestamptz,
    attempts int NOT NULL DEFAULT 0,
    errors text,
    payload text NOT NULL DEFAULT ''
);
CREATE INDEX lease_q_pop ON @S."lease q" (created_at, id) WHERE processing_started_at IS NULL;
CREATE INDEX lease_q_leased ON @S."lease q" (processing_started_at) WHERE processing_started_at IS NOT NULL;
CREATE TABLE @S.status_meta (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status smallint NOT NULL DEFAULT 0,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    status_changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts int NOT NULL DEFAULT 0
);
CREATE INDEX status_meta_status ON @S.status_meta (status, id);
CREATE TABLE @S.status_data (
    id bigint PRIMARY KEY REFERENCES @S.status_meta (id) ON DELETE CASCADE,
    payload text NOT NULL
);
CREATE TABLE @S.status_meta_archive (LIKE @S.status_meta);
CREATE TABLE @S.status_data_archive (LIKE @S.status_data);
CREATE TABLE @S.status_bad_archive (id bigint, status text);
CREATE TABLE @S.del_q (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    payload char(200) NOT NULL DEFAULT ''
);
CREATE TABLE @S.del_q_wm (id int PRIMARY KEY CHECK (id = 1), low_key bigint NOT NULL);
INSERT INTO @S.del_q_wm VALUES (1, 0);
-- No autovacuum here: the rebuild tests decide when dead tuples are cleaned.
CREATE TABLE @S.churn_q (
    id bigint PRIMARY KEY,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    payload text NOT NULL DEFAULT ''
) WITH (autovacuum_enabled = off);
CREATE INDEX churn_q_enq ON @S.churn_q (enqueued_at, id);
"""

QUEUES = f"""
[[queues]]
name = "lease"
target = "lab"
kind = "lease"
schema = "{SCHEMA}"
table = "lease q"
key = "id"
enqueued_at = "created_at"
lease_column = "processing_started_at"
error_column = "errors"
attempts_column = "attempts"
lease_timeout_s = 30

[[queues]]
name = "status"
target = "lab"
kind = "status"
schema = "{SCHEMA}"
table = "status_meta"
data_table = "status_data"
data_key = "id"
key = "id"
enqueued_at = "enqueued_at"
status_column = "status"
status_changed_at = "status_changed_at"
attempts_column = "attempts"
ready_values = [0]
processing_values = [1]
done_values = [2]
lease_timeout_s = 30

[[queues]]
name = "delete"
target = "lab"
kind = "delete"
schema = "{SCHEMA}"
table = "del_q"
key = "id"
enqueued_at = "enqueued_at"
watermark = {{ table = "del_q_wm", column = "low_key", buffer = 0 }}

[[queues]]
name = "churn"
target = "lab"
kind = "delete"
schema = "{SCHEMA}"
table = "churn_q"
key = "id"
enqueued_at = "enqueued_at"
"""


# A partitioned queue table (pg-boss's job table, PGMQ's partitioned queues): created by the tests
# that use it, as "qa äct".parted_q with its partitions.
PARTED = """
[[queues]]
name = "parted"
target = "lab"
kind = "delete"
schema = "qa äct"
table = "parted_q"
key = "id"
enqueued_at = "enqueued_at"
"""


def _target_block(lab_toml: str) -> str:
    m = re.search(r"^\[\[targets\]\].*?(?=^\[\[|\Z)", lab_toml, re.S | re.M)
    assert m, "lab.toml has no [[targets]]"
    return m.group(0)


@dataclass
class ActLab:
    lab: object
    dir: Path
    configs: dict[str, Path] = field(default_factory=dict)

    def connect(self, **kw: object) -> psycopg.Connection:
        """A connection to the lab whose statements may name tables by token (@lease, @meta, ...)."""
        kw.setdefault("cursor_factory", TokenCursor)
        return self.lab.connect(**kw)  # type: ignore[attr-defined]

    def sql(self, text: str, params: tuple | None = None) -> list[tuple]:
        with self.connect() as conn:
            cur = conn.execute(text, params)
            return cur.fetchall() if cur.description else []

    def write_config(self, name: str, identity: str = 'default_role = "operator"', extra: str = "",
                     lock_timeout_ms: int | None = None) -> Path:
        """A config next to lab.toml (so file:lab.secret resolves) with its own store."""
        lab_toml = Path(self.lab.config_path).read_text()  # type: ignore[attr-defined]
        target = _target_block(lab_toml)
        if lock_timeout_ms is not None:
            target = re.sub(r"lock_timeout_ms = \d+", f"lock_timeout_ms = {lock_timeout_ms}", target)
        text = textwrap.dedent(f"""\
            [store]
            url = "sqlite:///{self.dir}/{name}-store.db"

            [identity]
            {identity}

            """) + target + "\n" + QUEUES + extra
        path = Path(self.lab.config_path).parent / f"actions-{name}.toml"  # type: ignore[attr-defined]
        path.write_text(text)
        self.configs[name] = path
        return path

    def config(self, name: str = "operator") -> config_mod.Config:
        return config_mod.load(self.configs[name])

    def cli(self, *args: str, config: str = "operator", **kw: object):  # noqa: ANN201
        return self.lab.cli(*args, "--config", str(self.configs[config]), **kw)  # type: ignore[attr-defined]

    def reset(self) -> None:
        with self.connect() as conn:
            conn.execute("TRUNCATE @lease, @meta, @data, @meta_arch, @data_arch, @del, @churn RESTART IDENTITY CASCADE")
            conn.execute("UPDATE @wm SET low_key = 0")


@pytest.fixture(scope="session")
def act_lab(lab) -> Iterator[ActLab]:  # noqa: ANN001
    with lab.connect(cursor_factory=TokenCursor) as conn:
        conn.execute(DDL)
    d = Path(lab.config_path).parent / "actions-tests"
    d.mkdir(exist_ok=True)
    al = ActLab(lab, d)
    al.write_config("operator", 'user = "olga"\nroles = { olga = "operator", vera = "viewer" }\ndefault_role = "viewer"')
    al.write_config("viewer", 'user = "vera"\nroles = { olga = "operator", vera = "viewer" }\ndefault_role = "viewer"')
    yield al
    with lab.connect(cursor_factory=TokenCursor) as conn:
        conn.execute("DROP SCHEMA IF EXISTS @S CASCADE")


@pytest.fixture()
def acts(act_lab: ActLab) -> ActLab:
    act_lab.reset()
    return act_lab


# ---------------------------------------------------------------------------------------------
# Live dequeuers: real sessions doing what a queue's consumers do, with the target's lock timeout.


@dataclass
class Dequeuers:
    """Threads dequeuing in a loop; they record every dequeue time and every error (a lock timeout
    error would mean an action blocked them longer than the lock timeout)."""

    errors: list[str] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    taken: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)
    lock = threading.Lock()

    def start(self, connect: Callable[[], psycopg.Connection], statement: str, n: int = 2,
              lock_timeout_ms: int = 500, produce: str | None = None) -> None:
        def loop() -> None:
            try:
                conn = connect()
                conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{lock_timeout_ms}ms",))
                while not self.stop.is_set():
                    try:
                        if produce:
                            conn.execute(produce)
                        row = conn.execute(statement).fetchone()
                        now = time.monotonic()
                        with self.lock:
                            self.times.append(now)
                            if row:
                                self.taken.append(row[0])
                    except psycopg.Error as exc:
                        with self.lock:
                            self.errors.append(f"{type(exc).__name__}: {exc}")
                    time.sleep(0.002)
                conn.close()
            except Exception as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(f"{type(exc).__name__}: {exc}")

        for _ in range(n):
            t = threading.Thread(target=loop, daemon=True)
            t.start()
            self.threads.append(t)

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(10)

    def longest_gap(self, start: float, end: float) -> float:
        """Longest time without any completed dequeue inside [start, end]."""
        ts = sorted([start, *[t for t in self.times if start <= t <= end], end])
        return max((b - a for a, b in zip(ts, ts[1:], strict=False)), default=0.0)


@contextlib.contextmanager
def snapshot_held(acts: ActLab) -> Iterator[None]:
    """An open REPEATABLE READ transaction holding a snapshot (and no queue table lock) for the
    body: what makes REINDEX CONCURRENTLY wait until its lock timeout."""
    ready, release = threading.Event(), threading.Event()

    def hold() -> None:
        with acts.connect(autocommit=False) as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            conn.execute("SELECT count(*) FROM pg_class")  # takes the snapshot, locks no queue table
            ready.set()
            release.wait(60)
            conn.rollback()

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert ready.wait(10), "the snapshot holder did not start"
        yield
    finally:
        release.set()
        t.join()
