"""Metrics of tables shaped like Hangfire's, the seeds' SimpleQueue, NServiceBus's and Rebus's,
asserted against direct counts; a lease queue's failed items (lease and error set) are neither
stuck nor requeued (issue 13, "What was seen" 7d, on PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

from psycopg import sql

from collectors import registry, runner
from queueops import actions
from queueops import config as config_mod
from tests.conftest import Lab
from tests.mapping.conftest import target_section
from tests.mapping.shapes import HANGFIRE, NSERVICEBUS, REBUS, SIMPLE_QUEUE, queues_toml
from tests.mapping.test_types import only

QUEUE_COLLECTORS = [c for c in registry.COLLECTORS if c.scope == "queue"]
NAMES = ("hangfire", "hangfire_jobqueue", "simple_queue", "nservicebus", "rebus")


def fill(lab: Lab, schema: str) -> dict[str, float]:
    """Create the shapes with items in every state; return the direct counts."""
    s = sql.Identifier(schema)
    with lab.connect() as conn:
        for ddl in (HANGFIRE, SIMPLE_QUEUE, NSERVICEBUS, REBUS):
            conn.execute(ddl.format(s=s.as_string(conn)))
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute(sql.SQL('INSERT INTO {}."Job" ("StateName", "CreatedAt") SELECT (ARRAY[\'Enqueued\', '
                             "'Processing', 'Succeeded', 'Deleted', 'Scheduled'])[1 + g % 5], "
                             "(now() - make_interval(secs => (51 - g) * 10))::timestamp FROM generate_series(1, 50) AS g")
                     .format(s))
        conn.execute(sql.SQL('INSERT INTO {}."JobQueue" ("JobId", "Queue", "FetchedAt") SELECT g, '
                             "(ARRAY['default', 'critical'])[1 + g % 2], CASE g % 3 WHEN 0 THEN NULL "
                             "WHEN 1 THEN (now() - interval '10 minutes')::timestamp ELSE now()::timestamp END "
                             "FROM generate_series(1, 30) AS g").format(s))
        # SimpleQueue: free, leased recently, leased long ago (stuck), and failed (leased long ago + Errors).
        conn.execute(sql.SQL('INSERT INTO {}."SimpleQueue" ("Id", "CreatedAt", "ProcessingStartedAt", "Errors") '
                             "SELECT gen_random_uuid(), (now() - make_interval(secs => 41 - g))::timestamp, "
                             "CASE g % 4 WHEN 0 THEN NULL WHEN 1 THEN now()::timestamp "
                             "ELSE (now() - interval '1 hour')::timestamp END, "
                             "CASE WHEN g % 4 = 3 THEN 'boom' END FROM generate_series(1, 40) AS g").format(s))
        conn.execute(sql.SQL('INSERT INTO {}."Orders" ("Id", "Recoverable", "Headers") '
                             "SELECT gen_random_uuid(), true, '{{}}' FROM generate_series(1, 12)").format(s))
        conn.execute(sql.SQL('INSERT INTO {}."Messages" (recipient, priority, expiration, visible, headers, body) '
                             "SELECT 'q', g % 3, now() + interval '1 day', now() - make_interval(secs => 100 + g), "
                             "'\\x00', '\\x00' FROM generate_series(1, 9) AS g").format(s))

        def one(query: str) -> float:
            return float(conn.execute(sql.SQL(query).format(s)).fetchone()[0])

        return {
            "hangfire.depth": one('SELECT count(*) FROM {}."Job" WHERE "StateName" = \'Enqueued\''),
            "hangfire.count_processing": one('SELECT count(*) FROM {}."Job" WHERE "StateName" = \'Processing\''),
            "hangfire.count_done": one('SELECT count(*) FROM {}."Job" WHERE "StateName" IN (\'Succeeded\', '
                                       "'Deleted')"),
            "hangfire.oldest_age_s": one('SELECT extract(epoch FROM now() - min("CreatedAt")::timestamptz) '
                                         'FROM {}."Job" WHERE "StateName" = \'Enqueued\''),
            "hangfire_jobqueue.depth": one('SELECT count(*) FROM {}."JobQueue" WHERE "FetchedAt" IS NULL'),
            "hangfire_jobqueue.stuck_leases": one('SELECT count(*) FROM {}."JobQueue" '
                                                  "WHERE \"FetchedAt\" < (now() - interval '60 seconds')::timestamp"),
            "simple_queue.depth": one('SELECT count(*) FROM {}."SimpleQueue" WHERE "ProcessingStartedAt" IS NULL'),
            "simple_queue.stuck_leases": one(
                'SELECT count(*) FROM {}."SimpleQueue" WHERE "ProcessingStartedAt" < '
                "(now() - interval '60 seconds')::timestamp AND \"Errors\" IS NULL"),
            "simple_queue.failed": one('SELECT count(*) FROM {}."SimpleQueue" WHERE "Errors" IS NOT NULL '
                                       'AND "ProcessingStartedAt" IS NOT NULL'),
            "nservicebus.depth": one('SELECT count(*) FROM {}."Orders"'),
            "rebus.depth": one('SELECT count(*) FROM {}."Messages"'),
            "rebus.oldest_age_s": one('SELECT extract(epoch FROM now() - min(visible)) FROM {}."Messages"'),
        }


def test_metrics_of_real_shapes_match_direct_counts_and_failed_items_are_never_requeued(
        lab: Lab, schema: str, tmp_path: Path) -> None:
    direct = fill(lab, schema)
    assert direct["simple_queue.failed"] > 0 and direct["simple_queue.stuck_leases"] > 0
    path = tmp_path / "shapes.toml"
    path.write_text(f'[store]\nurl = "sqlite:///{tmp_path}/store.db"\n\n[identity]\ndefault_role = "operator"\n\n'
                    + target_section(lab) + only(queues_toml(schema), *NAMES))
    cfg = config_mod.load(path)
    result = runner.run_collectors(cfg, cfg.targets[0], QUEUE_COLLECTORS)
    assert all(s.ok and not s.error for s in result.status), [(s.collector, s.error) for s in result.status]
    got = {f"{r.queue}.{r.metric}": r.value for r in result.rows if r.queue}
    for key, value in direct.items():
        if key.endswith("oldest_age_s"):
            assert abs(got[key] - value) < 30, key  # both read now(); a loaded machine may be slow
        elif key != "simple_queue.failed":
            assert got[key] == value, (key, got.get(key), value)
    # No enqueue-time column: no oldest_age_s at all (config check --live says why), never a wrong one.
    assert "nservicebus.oldest_age_s" not in got and "hangfire_jobqueue.oldest_age_s" not in got
    assert not [r for r in result.rows if r.metric == runner.QUEUE_ERROR]

    plan = actions.plan(cfg, "requeue", "simple_queue", {"batch_size": 5, "pause_s": 0})
    assert plan.preview.row_count == direct["simple_queue.stuck_leases"]
    assert '"Errors" IS NULL' in plan.preview.steps[0].statement.sql
    r = actions.execute(cfg, plan)
    assert (r.outcome, r.rows_affected) == ("ok", direct["simple_queue.stuck_leases"])
    with lab.connect() as conn:
        failed_left = conn.execute(sql.SQL('SELECT count(*) FROM {}."SimpleQueue" WHERE "Errors" IS NOT NULL '
                                           'AND "ProcessingStartedAt" IS NOT NULL').format(sql.Identifier(schema))
                                   ).fetchone()[0]
    assert failed_left == direct["simple_queue.failed"]  # failed items keep their lease: never released
    after = runner.run_collectors(cfg, cfg.targets[0], [registry.by_name("stuck_leases")])
    assert {r.queue: r.value for r in after.rows if r.metric == "stuck_leases"}["simple_queue"] == 0


def test_order_heap_finds_the_oldest_item_by_enqueue_time_not_by_key(lab: Lab, schema: str, write_cfg) -> None:  # noqa: ANN001
    """``order`` drives the SQL: with GUID keys the lowest key is any item; ``heap`` reads enqueued_at."""
    s = sql.Identifier(schema)
    with lab.connect() as conn:
        conn.execute(SIMPLE_QUEUE.format(s=s.as_string(conn)))
        conn.execute(sql.SQL('INSERT INTO {}."SimpleQueue" ("Id", "CreatedAt") SELECT gen_random_uuid(), '
                             "(now() - make_interval(secs => g * 60))::timestamp FROM generate_series(1, 20) AS g")
                     .format(s))
        conn.execute("SET TIME ZONE 'UTC'")
        oldest = conn.execute(sql.SQL('SELECT extract(epoch FROM now() - min("CreatedAt")::timestamptz) '
                                      'FROM {}."SimpleQueue"').format(s)).fetchone()[0]
        lowest_key = conn.execute(sql.SQL('SELECT extract(epoch FROM now() - "CreatedAt"::timestamptz) '
                                          'FROM {}."SimpleQueue" ORDER BY "Id" LIMIT 1').format(s)).fetchone()[0]
    body = target_section(lab)
    for order in ("fifo", "heap"):
        body += (f'\n[[queues]]\nname = "{order}"\ntarget = "lab"\nkind = "delete"\nschema = "{schema}"\n'
                 f'table = "SimpleQueue"\nkey = "Id"\nenqueued_at = "CreatedAt"\norder = "{order}"\n')
    cfg = write_cfg(body)
    result = runner.run_collectors(cfg, cfg.targets[0], [registry.by_name("oldest_age_s")])
    age = {r.queue: r.value for r in result.rows if r.metric == "oldest_age_s"}
    assert abs(age["heap"] - float(oldest)) < 30
    assert abs(age["fifo"] - float(lowest_key)) < 30  # fifo trusts the key order, as documented
