"""oldest_age_s on a status table whose status index puts other columns before the enqueue time
(River's and Oban's fetch index: state, queue, priority, scheduled_at, id).

The first cap of ready items in that index's order are the first prefix's (queue, priority): an
older item of another prefix behind them was not read, and the age read as exact (River at 200,000
rows: 1,803 s for 5,403 s). Where the prefix columns are NOT NULL the age is read by a skip read
of the index, exact; where one is nullable (a row comparison with NULL would end the walk early)
the cap read stays and says 'at least'. Both against a direct min() of the ready rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors import runner
from tests.conftest import Lab
from tests.mapping.conftest import oldest_age, target_section
from tests.mapping.test_readiness import _setup, _sql

TASKS = """
CREATE TABLE {s}.tasks (
    id bigserial PRIMARY KEY,
    status text NOT NULL,
    tenant text,
    created_at timestamptz NOT NULL
);
CREATE INDEX tasks_fetch ON {s}.tasks (status, tenant, created_at, id);
INSERT INTO {s}.tasks (status, tenant, created_at)
SELECT 'ready', 'a', now() - interval '1 min' FROM generate_series(1, 1100);
INSERT INTO {s}.tasks (status, tenant, created_at) VALUES ('ready', 'b', now() - interval '20 min'),
    ('running', 'a', now() - interval '2 hours'), ('done', 'a', now() - interval '3 hours');
ANALYZE {s}.tasks;
"""
QUEUE = ('[[queues]]\nname = "tasks"\ntarget = "lab"\nkind = "status"\nschema = "{schema}"\ntable = "tasks"\n'
         'key = "id"\nenqueued_at = "created_at"\nstatus_column = "status"\nready_values = ["ready"]\n'
         'processing_values = ["running"]\ndone_values = ["done"]\n')


def test_an_older_item_of_another_prefix_is_read_or_the_age_says_at_least(lab: Lab, schema: str, write_cfg,  # noqa: ANN001
                                                                           tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _setup(lab, schema, TASKS)
    cfg = write_cfg(target_section(lab) + QUEUE.format(schema=schema))
    truth = _sql(lab, schema, "SELECT extract(epoch FROM now() - min(created_at))::float8 FROM @S.tasks "
                              "WHERE status = 'ready'")[0][0]
    assert 1190 < truth < 1260
    # tenant is nullable: the cap read of tenant 'a' stops at the cap and says so
    value, note = oldest_age(cfg, "tasks")
    assert 55 < value < 120 and note.startswith("at least"), (value, note)
    # NOT NULL: the skip read takes the first item of tenants 'a' and 'b': the 20 min one, exact
    _sql(lab, schema, "ALTER TABLE @S.tasks ALTER COLUMN tenant SET NOT NULL")
    # The service reads the change without a restart once its catalog types are TYPES_TTL_S old.
    assert oldest_age(cfg, "tasks")[1].startswith("at least")  # still the types read before the change
    monkeypatch.setattr(runner, "TYPES_TTL_S", 0.0)
    value, note = oldest_age(cfg, "tasks")
    assert abs(value - truth) < 30 and not note, (value, note)
