"""A queue mapped through a library preset: the queue page says which metrics are not available for
that library and why, instead of leaving a blank (AppTest, real lab database, a table shaped like
pgqueuer's in a schema of the test's own)."""

from __future__ import annotations

import pytest

from tests.console.conftest import ConsoleEnv, page, texts
from tests.mapping.shapes import PGQUEUER


def test_queue_page_names_what_the_library_cannot_give(env: ConsoleEnv, tmp_path, monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    with env.lab.connect() as conn:
        conn.execute("DROP SCHEMA IF EXISTS preset_console CASCADE")
        conn.execute("CREATE SCHEMA preset_console")
        conn.execute(PGQUEUER.format(s="preset_console"))
    try:
        cfg = tmp_path / "queueops.toml"
        cfg.write_text(env.config_path.read_text() + '\n[[queues]]\nname = "jobs"\ntarget = "lab"\n'
                       'preset = "pgqueuer"\nschema = "preset_console"\n')
        monkeypatch.setenv("QUEUEOPS_CONFIG", str(cfg))
        at = page("console.views.queue_detail", queue="jobs")
        assert not at.exception
        shown = texts(at)
        assert "not available for this library (pgqueuer)" in shown
        assert "pgqueuer_log" in shown
    finally:
        with env.lab.connect() as conn:
            conn.execute("DROP SCHEMA IF EXISTS preset_console CASCADE")
