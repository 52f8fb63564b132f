"""A queue mapped through a library preset: the queue page says which metrics are not available for
that library and why, instead of leaving a blank (AppTest, real lab database, a table shaped like
a PGMQ queue's in a schema of the test's own)."""

from __future__ import annotations

import pytest

from tests.console.conftest import ConsoleEnv, page, texts


def test_queue_page_names_what_the_library_cannot_give(env: ConsoleEnv, tmp_path, monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    with env.lab.connect() as conn:
        conn.execute("DROP SCHEMA IF EXISTS preset_console CASCADE")
        conn.execute("CREATE SCHEMA preset_console")
        conn.execute("CREATE TABLE preset_console.q_jobs (msg_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                     "read_ct integer NOT NULL DEFAULT 0, enqueued_at timestamptz NOT NULL DEFAULT now(), "
                     "vt timestamptz NOT NULL, message jsonb)")
    try:
        cfg = tmp_path / "queueops.toml"
        cfg.write_text(env.config_path.read_text() + '\n[[queues]]\nname = "jobs"\ntarget = "lab"\n'
                       'preset = "pgmq"\nschema = "preset_console"\ntable = "q_jobs"\n')
        monkeypatch.setenv("QUEUEOPS_CONFIG", str(cfg))
        at = page("console.views.queue_detail", queue="jobs")
        assert not at.exception
        shown = texts(at)
        assert "not available for this library (PGMQ)" in shown
        assert "a read message is invisible until vt; there is no lease to be stuck" in shown
    finally:
        with env.lab.connect() as conn:
            conn.execute("DROP SCHEMA IF EXISTS preset_console CASCADE")
