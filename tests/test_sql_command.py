"""``queueops sql`` renders every action of a status queue, archive included, in both dialects.

Its archive statements name the archive table the operator gives with ``--archive-table``; the
placeholder shown for it must itself pass the identifier rules (a name holding ``--`` is refused),
or the whole render failed for every status queue of a config.
"""

from __future__ import annotations

import re

import pytest

from queueops import config as config_mod
from queueops.commands import sql as sqlcmd

URL = {"postgresql": "postgresql://u@h/db", "mssql": "mssql+pyodbc://u@h/db?driver=FreeTDS"}
_LITERAL_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*")


@pytest.mark.parametrize("dialect", ["postgresql", "mssql"])
def test_archive_of_a_status_queue_renders_with_its_placeholder_tables(dialect: str) -> None:
    cfg = config_mod.parse({
        "targets": [{"name": "t", "dialect": dialect, "url": URL[dialect]}],
        "queues": [{"name": "jobs", "target": "t", "kind": "status", "table": "jobs", "key": "id",
                    "enqueued_at": "created", "status_column": "status", "ready_values": ["todo"],
                    "processing_values": ["doing"], "done_values": ["done"], "data_table": "payload",
                    "data_key": "id"}],
    })
    rows = [r for r in sqlcmd.render_all(cfg, actions=["archive"]) if r.sql]
    copies = [r.sql for r in rows if r.block in ("actions/archive:copy", "actions/archive:copy_data")]
    assert len(copies) == 2, [r.block for r in rows]
    assert all("<archive-table>" in s or "<archive-data-table>" in s for s in copies)
    for r in rows:
        code = _LITERAL_OR_COMMENT.sub("", r.sql)
        placeholders = code.count("%s") if dialect == "postgresql" else code.count("?")
        assert placeholders == len(r.params), (r.block, placeholders, len(r.params))
