"""The schema-only PostgreSQL presets against tables shaped as their libraries create them: the
mapping passes ``config check --live`` (columns, types, enum labels), every collector statement the
preset renders runs, and the live check's EXPLAIN verdicts (seek or scan, with the fix) are printed
so docs/presets.md can say which statements need an index the library does not create."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import sql

from queueops import presets
from tests.conftest import Lab
from tests.presets.shapes import SHAPES


@pytest.fixture()
def schema(lab: Lab) -> Iterator[str]:
    name = f"preset_{uuid.uuid4().hex[:8]}"
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    yield name
    with lab.connect() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_schema_only_preset_checks_live(lab: Lab, schema: str, tmp_path: Path, name: str) -> None:
    assert presets.get(name).engine == "postgresql"
    with lab.connect() as conn:
        conn.execute(SHAPES[name].format(s=f'"{schema}"'))
    secret = Path(lab.server.password_file).resolve()
    table = '\ntable = "q_orders"' if name == "pgmq" else ""
    cfg = tmp_path / "queueops.toml"
    cfg.write_text(f'[[targets]]\nname = "lab"\ndialect = "postgresql"\nurl = "{lab.url}"\n'
                   f'password = "file:{secret}"\n\n[[queues]]\nname = "{name}"\ntarget = "lab"\n'
                   f'preset = "{name}"\nschema = "{schema}"{table}\n')
    check = lab.cli("config", "check", "--live", "--config", str(cfg))
    out = check.stdout + check.stderr
    verdicts = [line.split(": ", 1)[1] for line in out.splitlines() if ": warning: " in line or ": error: " in line]
    print(f"\nPRESET {name}: exit {check.returncode}; " + (" | ".join(verdicts) or "ok"))
    assert check.returncode == 0, out
    assert not re.search(r": error: ", out), out
    collect = lab.cli("collect", "--once", "--json", "--config", str(cfg))
    assert collect.returncode == 0, collect.stderr
    assert '"metric":"depth"' in collect.stdout.replace(" ", ""), collect.stdout
