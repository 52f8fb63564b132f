"""Fixtures for the mapping tests: queue tables of real shapes in schemas of their own on the
session's embedded PostgreSQL (never the lab's own tables, which other suites use), and configs
that point queueops at them."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from psycopg import sql

from queueops import config as config_mod
from tests.conftest import Lab

LAB_TABLES = ("q_delete", "q_delete_watermark", "q_status_meta", "q_status_data", "q_lease", "q_due",
              "q_ring_slot", "q_ring_seq")


def target_section(lab: Lab, name: str = "lab") -> str:
    """A ``[[targets]]`` section for the lab's server, password as an absolute ``file:`` reference."""
    secret = Path(lab.server.password_file).resolve()
    return (f'[[targets]]\nname = "{name}"\ndialect = "postgresql"\nurl = "{lab.url}"\n'
            f'password = "file:{secret}"\nstatement_timeout_ms = 5000\nlock_timeout_ms = 1000\n')


def lab_copy_sections(lab: Lab, schema: str) -> str:
    """The lab config's targets and five queues, pointed at ``schema`` instead of ``lab``."""
    text = lab.config_path.read_text()
    body = text[text.index("[[targets]]"):]
    secret = Path(lab.server.password_file).resolve()
    body = body.replace('password = "file:lab.secret"', f'password = "file:{secret}"')
    return re.sub(r'^schema = "lab"$', f'schema = "{schema}"', body, flags=re.M)


@pytest.fixture()
def schema(lab: Lab) -> Iterator[str]:
    """A fresh, empty schema of this test's own; dropped afterwards."""
    name = f"map_{uuid.uuid4().hex[:8]}"
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    yield name
    with lab.connect() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture()
def lab_copy(lab: Lab, schema: str) -> str:
    """The five lab queue tables (and their side tables) copied into ``schema`` with a few items each."""
    with lab.connect() as conn:
        for t in LAB_TABLES:
            conn.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(
                sql.Identifier(schema, t), sql.Identifier("lab", t)))
        for t in ("q_delete_watermark", "q_ring_slot", "q_ring_seq"):
            conn.execute(sql.SQL("INSERT INTO {} SELECT * FROM {}").format(
                sql.Identifier(schema, t), sql.Identifier("lab", t)))
        s = sql.Identifier(schema)
        conn.execute(sql.SQL("UPDATE {}.q_delete_watermark SET low_key = 0").format(s))
        conn.execute(sql.SQL("INSERT INTO {}.q_delete (payload) SELECT 'x' FROM generate_series(1, 5)").format(s))
        conn.execute(sql.SQL("INSERT INTO {}.q_status_meta (status) SELECT g % 3 FROM generate_series(1, 9) AS g")
                     .format(s))
        conn.execute(sql.SQL("INSERT INTO {}.q_lease (processing_started_at) "
                             "SELECT CASE WHEN g % 2 = 0 THEN now() END FROM generate_series(1, 6) AS g").format(s))
        conn.execute(sql.SQL("INSERT INTO {}.q_due (due_at) SELECT now() - interval '1 minute' "
                             "FROM generate_series(1, 4)").format(s))
        conn.execute(sql.SQL("ANALYZE {}.q_status_meta").format(s))
    return schema


@pytest.fixture()
def write_cfg(tmp_path: Path) -> Callable[[str], config_mod.Config]:
    """Write a config body to a file of this test and load it."""
    def write(body: str, name: str = "queueops.toml") -> config_mod.Config:
        path = tmp_path / name
        path.write_text(body)
        return config_mod.load(path)
    return write


def oldest_age(cfg: config_mod.Config, queue: str) -> tuple[float, str]:
    """``queue``'s oldest_age_s (value, note) from one run of its collector, which must succeed."""
    from collectors import registry, runner

    result = runner.run_once(cfg, [registry.by_name("oldest_age_s")])
    assert all(st.ok for st in result.status), [st.error for st in result.status]
    (row,) = [r for r in result.rows if r.queue == queue and r.metric == "oldest_age_s"]
    assert row.value is not None
    return row.value, row.note
