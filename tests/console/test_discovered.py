"""Settings lists the queue tables found on a target that no configured queue maps yet (AppTest,
real lab database): a hand-rolled status queue made for this test is shown with its evidence and
the TOML to add, and the lab's five configured queues are not."""

from __future__ import annotations

import tomllib

from tests.console.conftest import ConsoleEnv, page


def test_settings_lists_unconfigured_queues_with_their_toml(env: ConsoleEnv) -> None:
    with env.lab.connect() as conn:
        conn.execute("DROP SCHEMA IF EXISTS disc_test CASCADE")
        conn.execute("CREATE SCHEMA disc_test")
        conn.execute("CREATE TABLE disc_test.job_queue (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                     "status smallint NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now(), "
                     "updated_at timestamptz NOT NULL DEFAULT now(), body text)")
        conn.execute("CREATE INDEX ON disc_test.job_queue (status, id)")
    try:
        at = page("console.views.settings")
        assert not at.exception
        at.button(key="discover_lab").click().run()
        assert not at.exception
        labels = [e.label for e in at.expander]
        found = [label for label in labels if label.startswith("lab: ")]
        assert any("disc_test.job_queue · status · hand-rolled" in label for label in found), labels
        assert not any(f"lab.{t} " in label for t in ("q_delete", "q_status_meta", "q_lease", "q_due", "q_ring_slot")
                       for label in found), "configured queues are not listed"
        toml = next(c.value for c in at.code if 'table = "job_queue"' in c.value)
        q = tomllib.loads(toml)["queues"][0]
        assert (q["kind"], q["schema"], q["status_column"], q["status_changed_at"]) == (
            "status", "disc_test", "status", "updated_at")
        assert "# discovered: disc_test.job_queue" in toml
    finally:
        with env.lab.connect() as conn:
            conn.execute("DROP SCHEMA IF EXISTS disc_test CASCADE")
