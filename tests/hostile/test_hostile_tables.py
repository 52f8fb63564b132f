"""A queue whose table and column names are legal but hostile-looking still works, exactly.

Names containing placeholder syntax of every layer (psycopg's %s, our :name and {fragment}) and
spaces must reach PostgreSQL as one quoted identifier each and be collected correctly.
"""

from __future__ import annotations

import json

from psycopg import sql

from collectors import registry, runner
from queueops import config as config_mod

TABLE = "jobs %s :queue {table} é"
KEY = "id %(x)s"
WHEN = "at :cap"


def test_collectors_on_a_table_with_hostile_legal_names(lab) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS lab.{}").format(sql.Identifier(TABLE)))
        conn.execute(sql.SQL("CREATE TABLE lab.{} ({} bigint PRIMARY KEY, {} timestamptz NOT NULL)").format(
            sql.Identifier(TABLE), sql.Identifier(KEY), sql.Identifier(WHEN)))
        conn.execute(sql.SQL("INSERT INTO lab.{} SELECT g, now() - interval '1 minute' FROM generate_series(1, 3) g")
                     .format(sql.Identifier(TABLE)))
    raw = {
        "targets": [{"name": "lab", "dialect": "postgresql", "url": lab.url, "password": lab.password}],
        "queues": [{"name": "hostile", "target": "lab", "kind": "delete", "schema": "lab", "table": TABLE,
                    "key": KEY, "enqueued_at": WHEN}],
    }
    cfg = config_mod.parse(raw)
    result = runner.run_once(cfg, [registry.by_name("depth"), registry.by_name("oldest_age_s")])
    assert all(s.ok for s in result.status), [s.error for s in result.status]
    values = {r.metric: r.value for r in result.rows if r.queue == "hostile"}
    assert values["depth"] == 3
    assert 55 <= values["oldest_age_s"] < 300
    assert json.dumps([r.to_json() for r in result.rows])  # rows serialise as they are


def test_percent_in_sql_without_bound_values_reaches_postgres_intact(lab) -> None:  # noqa: ANN001
    """A rendered statement with '%' and no parameters must not arrive as '%%'."""
    from queueops import engine, sqlfiles

    cfg = lab.config()
    stmt = sqlfiles.render("SELECT 7 % 3 AS r, '50%' AS s", "postgresql", {}, {})
    with engine.connection(cfg.targets[0], "check", cfg.base_dir) as conn:
        assert conn.execute(stmt) == [{"r": 1, "s": "50%"}]
