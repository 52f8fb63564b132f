"""Types from the catalog (issue 13, "What was seen" 1 and 2): enum status columns are compared as
enums (metrics right, index still used), and columns whose real type cannot work are refused at
collection with the field, the value and the real type, instead of failing the statement."""

from __future__ import annotations

from psycopg import sql

from collectors import registry, runner
from queueops import coltypes, engine, indexadvice
from queueops.config import Config
from tests.collectors.plans import nodes
from tests.conftest import Lab
from tests.mapping.conftest import target_section
from tests.mapping.shapes import PGQUEUER, PROCRASTINATE, queues_toml

QUEUE_COLLECTORS = [c for c in registry.COLLECTORS if c.scope == "queue"]


def create(lab: Lab, schema: str, *ddl: str) -> None:
    with lab.connect() as conn:
        for text in ddl:
            conn.execute(text.format(s=sql.Identifier(schema).as_string(conn)))


def only(cfg_text: str, *names: str) -> str:
    """The ``[[queues]]`` sections of ``cfg_text`` whose name is in ``names``."""
    parts = cfg_text.split("[[queues]]")
    return "".join("[[queues]]" + p for p in parts[1:] if any(f'name = "{n}"\n' in p for n in names))


def values(result: runner.CycleResult, queue: str) -> dict[str, float | None]:
    return {r.metric: r.value for r in result.rows if r.queue == queue}


def test_enum_status_queues_are_counted_against_direct_counts(lab: Lab, schema: str, write_cfg) -> None:  # noqa: ANN001
    create(lab, schema, PROCRASTINATE, PGQUEUER)
    with lab.connect() as conn:
        s = sql.Identifier(schema)
        conn.execute(sql.SQL("INSERT INTO {}.procrastinate_jobs (queue_name, task_name, status) "
                             "SELECT 'default', 't', (ARRAY['todo', 'todo', 'doing', 'succeeded', 'failed', "
                             "'aborted', 'cancelled'])[1 + g % 7]::{}.procrastinate_job_status "
                             "FROM generate_series(1, 70) AS g").format(s, s))
        conn.execute(sql.SQL("INSERT INTO {}.pgqueuer (priority, status, entrypoint, updated) "
                             "SELECT 0, (ARRAY['queued', 'picked', 'successful'])[1 + g % 3]::{}.pgqueuer_status, 'e', "
                             "now() - CASE WHEN g % 2 = 0 THEN interval '1 hour' ELSE interval '0' END "
                             "FROM generate_series(1, 30) AS g").format(s, s))
        direct = {
            "todo": conn.execute(sql.SQL("SELECT count(*) FROM {}.procrastinate_jobs WHERE status = 'todo'")
                                 .format(s)).fetchone()[0],
            "doing": conn.execute(sql.SQL("SELECT count(*) FROM {}.procrastinate_jobs WHERE status = 'doing'")
                                  .format(s)).fetchone()[0],
            "done": conn.execute(sql.SQL("SELECT count(*) FROM {}.procrastinate_jobs WHERE status IN "
                                         "('succeeded', 'failed', 'cancelled', 'aborted')").format(s)).fetchone()[0],
            "queued": conn.execute(sql.SQL("SELECT count(*) FROM {}.pgqueuer WHERE status = 'queued'")
                                   .format(s)).fetchone()[0],
            "stuck": conn.execute(sql.SQL("SELECT count(*) FROM {}.pgqueuer WHERE status = 'picked' "
                                          "AND updated < now() - interval '60 seconds'").format(s)).fetchone()[0],
        }
    assert direct["stuck"] > 0 and direct["todo"] > 0
    cfg: Config = write_cfg(target_section(lab) + only(queues_toml(schema), "procrastinate", "pgqueuer"))
    result = runner.run_collectors(cfg, cfg.targets[0], QUEUE_COLLECTORS)
    assert all(s.ok and not s.error for s in result.status), [s.error for s in result.status if s.error]
    p = values(result, "procrastinate")
    assert p["depth"] == direct["todo"]
    assert p["count_processing"] == direct["doing"]
    assert p["count_done"] == direct["done"]
    assert p["rows_total"] == 70
    q = values(result, "pgqueuer")
    assert q["depth"] == direct["queued"]
    assert q["stuck_leases"] == direct["stuck"]
    assert q["oldest_age_s"] is not None


def test_depth_on_an_enum_status_seeks_the_status_index(lab: Lab, schema: str, write_cfg) -> None:  # noqa: ANN001
    create(lab, schema, PROCRASTINATE)
    with lab.connect() as conn:
        s = sql.Identifier(schema)
        conn.execute(sql.SQL("INSERT INTO {}.procrastinate_jobs (queue_name, task_name, status) "
                             "SELECT 'default', 't', CASE WHEN g % 100 = 0 THEN 'todo' ELSE 'succeeded' END"
                             "::{}.procrastinate_job_status FROM generate_series(1, 50000) AS g").format(s, s))
    cfg: Config = write_cfg(target_section(lab) + only(queues_toml(schema), "procrastinate"))
    target = cfg.targets[0]
    # The index 'config check --live' recommends for this queue's depth (the shape has none).
    need = indexadvice.needed("depth", cfg.queues[0])
    assert need is not None
    with lab.connect() as conn:
        conn.execute(indexadvice.create_index(cfg.queues[0], need, "postgresql"))
        conn.execute(sql.SQL("ANALYZE {}.procrastinate_jobs").format(sql.Identifier(schema)))
    with engine.connection(target, "collect", cfg.base_dir) as conn:
        types = coltypes.read_types(conn, cfg.queues)
        status = coltypes.type_of(cfg.queues[0], "status_column", types, "postgresql")
        assert status is not None and status.category == "enum" and "todo" in status.labels
        stmt = runner.build_statement(registry.by_name("depth"), target, cfg.queues, types)
        assert stmt is not None
        # each status value a constant of the enum (issue 29: a status index leads with the column,
        # so its values are read in one status-ordered read of it)
        assert f"'todo'::\"{schema}\".\"procrastinate_job_status\"" in stmt.sql
        cur = conn.raw.cursor()
        cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + stmt.sql, stmt.params)
        plan = cur.fetchone()[0][0]["Plan"]
    scans = [n for n in nodes(plan) if n.get("Relation Name") == "procrastinate_jobs"]
    assert scans, plan
    # The values are constants, read with their statistics: a value they put under the cap ('todo',
    # 1 %) may be read whole through the status index by a bitmap (its rows only).
    assert all(n["Node Type"] in ("Index Scan", "Index Only Scan")
               or n["Node Type"] == "Bitmap Heap Scan" and n["Actual Rows"] < runner.COUNT_CAP for n in scans), \
        [(n["Node Type"], n.get("Index Name"), n.get("Actual Rows")) for n in scans]
    assert any(n.get("Index Name", "").startswith("procrastinate_jobs_status") for n in scans), scans


def test_wrong_types_are_refused_at_collection_with_field_value_and_real_type(lab: Lab, schema: str,
                                                                              write_cfg) -> None:  # noqa: ANN001
    with lab.connect() as conn:
        s = sql.Identifier(schema)
        conn.execute(sql.SQL("CREATE TABLE {}.int_time (id bigint PRIMARY KEY, enqueued_at bigint NOT NULL)").format(s))
        conn.execute(sql.SQL("INSERT INTO {}.int_time SELECT g, g FROM generate_series(1, 5) AS g").format(s))
        conn.execute(sql.SQL("CREATE TABLE {}.guid_q (id uuid PRIMARY KEY, enqueued_at timestamptz NOT NULL)")
                     .format(s))
        conn.execute(sql.SQL("CREATE TABLE {}.guid_wm (low uuid)").format(s))
        conn.execute(sql.SQL("INSERT INTO {}.guid_q SELECT gen_random_uuid(), now() FROM generate_series(1, 3)")
                     .format(s))
    body = target_section(lab) + f"""
[[queues]]
name = "int_time"
target = "lab"
kind = "delete"
schema = "{schema}"
table = "int_time"
key = "id"
enqueued_at = "enqueued_at"

[[queues]]
name = "guid_wm"
target = "lab"
kind = "delete"
schema = "{schema}"
table = "guid_q"
key = "id"
enqueued_at = "enqueued_at"
watermark = {{ table = "guid_wm", column = "low" }}
"""
    cfg: Config = write_cfg(body)
    result = runner.run_collectors(cfg, cfg.targets[0], QUEUE_COLLECTORS)
    # Before: oldest_age_s failed for the whole target (timestamptz - bigint), watermark_drift too.
    assert all(s.ok and not s.error for s in result.status), [(s.collector, s.error) for s in result.status]
    a, b = values(result, "int_time"), values(result, "guid_wm")
    assert a["depth"] == 5 and "oldest_age_s" not in a
    assert b["depth"] == 3 and b["oldest_age_s"] is not None and "watermark_drift" not in b
    notes: dict[str, str] = {}
    for r in result.rows:
        if r.metric == runner.QUEUE_ERROR:
            notes[r.queue] = notes.get(r.queue, "") + r.note + "\n"
    assert "enqueued_at = 'enqueued_at'" in notes["int_time"] and "bigint" in notes["int_time"]
    assert "not a timestamp type" in notes["int_time"] and "oldest_age_s" in notes["int_time"]
    assert "key = 'id': is uuid: a watermark needs an integer key" in notes["guid_wm"]
    assert "watermark.column = 'low': is uuid" in notes["guid_wm"]


def test_watermark_reset_refuses_a_guid_watermark_instead_of_crashing(lab: Lab, schema: str, tmp_path) -> None:  # noqa: ANN001
    """Before: watermark-reset called int() on the key (ValueError); now a clear refusal."""
    import uuid as uuid_mod

    import pytest

    from queueops import actions
    from queueops import config as config_mod

    s = sql.Identifier(schema)
    with lab.connect() as conn:
        conn.execute(sql.SQL("CREATE TABLE {}.guid_q (id uuid PRIMARY KEY, enqueued_at timestamptz NOT NULL)")
                     .format(s))
        conn.execute(sql.SQL("CREATE TABLE {}.guid_wm (low uuid)").format(s))
        conn.execute(sql.SQL("INSERT INTO {}.guid_wm VALUES (%s)").format(s), (uuid_mod.uuid4(),))
        conn.execute(sql.SQL("INSERT INTO {}.guid_q SELECT gen_random_uuid(), now() FROM generate_series(1, 3)")
                     .format(s))
    path = tmp_path / "wm.toml"
    path.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/store.db"\n\n[identity]\ndefault_role = "operator"\n\n'
                    + target_section(lab) + f'\n[[queues]]\nname = "guid_wm"\ntarget = "lab"\nkind = "delete"\n'
                    f'schema = "{schema}"\ntable = "guid_q"\nkey = "id"\nenqueued_at = "enqueued_at"\n'
                    'watermark = { table = "guid_wm", column = "low" }\n')
    with pytest.raises(actions.ActionError, match="a watermark needs an integer key"):
        actions.plan(config_mod.load(path), "watermark-reset", "guid_wm", {})
