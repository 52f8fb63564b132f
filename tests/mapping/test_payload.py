"""Payload tables are joined through their declared link column (issue 13, "What was seen" 5).

Mapped on Hangfire's Job / State tables, archive used to delete ``State WHERE Id IN (job ids)``:
State.Id is the state row's own id, so other jobs' history went. With ``data_key = "JobId"`` it
deletes exactly the archived jobs' State rows; without ``data_key`` the config is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg import sql

from queueops import actions
from queueops import config as config_mod
from tests.conftest import Lab
from tests.mapping.conftest import target_section
from tests.mapping.shapes import HANGFIRE, queues_toml
from tests.mapping.test_types import only


def test_archive_on_hangfire_tables_deletes_only_the_archived_jobs_state_rows(lab: Lab, schema: str,
                                                                             tmp_path: Path) -> None:
    with lab.connect() as conn:
        conn.execute(HANGFIRE.format(s=sql.Identifier(schema).as_string(conn)))
        s = sql.Identifier(schema)
        # Jobs 1-5 still processing, 6-10 succeeded two hours ago.
        conn.execute(sql.SQL('INSERT INTO {}."Job" ("Id", "StateName", "CreatedAt") '
                             "SELECT g, CASE WHEN g <= 5 THEN 'Processing' ELSE 'Succeeded' END, "
                             "now() - interval '2 hours' FROM generate_series(1, 10) AS g").format(s))
        # The archived jobs' states are written first, so State.Id 6-10 belong to the live jobs 1-5.
        conn.execute(sql.SQL('INSERT INTO {}."State" ("JobId", "Name", "CreatedAt") '
                             "SELECT 5 + g, 'Succeeded', now() FROM generate_series(1, 5) AS g").format(s))
        conn.execute(sql.SQL('INSERT INTO {}."State" ("JobId", "Name", "CreatedAt") '
                             "SELECT g, 'Processing', now() FROM generate_series(1, 5) AS g").format(s))
        # State.Id 1-5 belong to jobs 6-10 and State.Id 6-10 to jobs 1-5: keyed on "Id", the old
        # archive deleted the live jobs' states.
        assert conn.execute(sql.SQL('SELECT array_agg("JobId" ORDER BY "Id") FROM {}."State"').format(s)
                            ).fetchone()[0] == [6, 7, 8, 9, 10, 1, 2, 3, 4, 5]
    cfg_path = tmp_path / "hangfire.toml"
    cfg_path.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/store.db"\n\n[identity]\ndefault_role = "operator"\n\n'
                        + target_section(lab) + only(queues_toml(schema), "hangfire"))
    cfg = config_mod.load(cfg_path)
    plan = actions.plan(cfg, "archive", "hangfire", {"older_than_s": 3600, "batch_size": 3, "pause_s": 0})
    assert plan.preview.row_count == 5
    delete_state = next(st for st in plan.preview.steps if st.label == "delete payload rows")
    assert f'DELETE FROM "{schema}"."State" WHERE "JobId" IN' in delete_state.statement.sql  # noqa: S608
    result = actions.execute(cfg, plan)
    assert (result.outcome, result.rows_affected) == ("ok", 5)
    with lab.connect() as conn:
        s = sql.Identifier(schema)
        jobs = conn.execute(sql.SQL('SELECT array_agg("Id" ORDER BY "Id") FROM {}."Job"').format(s)).fetchone()[0]
        states = conn.execute(sql.SQL('SELECT array_agg("JobId" ORDER BY "JobId") FROM {}."State"').format(s)
                              ).fetchone()[0]
    assert jobs == [1, 2, 3, 4, 5]
    assert states == [1, 2, 3, 4, 5]  # every live job keeps its state row


def test_a_payload_table_without_data_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "q.toml"
    path.write_text('[[targets]]\nname = "t"\ndialect = "postgresql"\nurl = "postgresql://u@h/db"\n\n'
                    '[[queues]]\nname = "hangfire"\ntarget = "t"\nkind = "status"\ntable = "Job"\nkey = "Id"\n'
                    'status_column = "StateName"\ndata_table = "State"\n')
    with pytest.raises(config_mod.ConfigError) as err:
        config_mod.load(path)
    assert "needs data_key" in str(err.value) and "State" in str(err.value)
