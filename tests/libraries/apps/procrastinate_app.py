"""The procrastinate app the real-library test runs with procrastinate's own CLI
(``procrastinate --app=tests.libraries.apps.procrastinate_app.app worker``): one task that records its
job id (``context.job.id``) and holds until the test opens the gate."""

from __future__ import annotations

import os

import procrastinate

from tests.libraries.apps import runs

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=os.environ.get("QO_LIB_DSN", "")))


@app.task(name="record", queue="qo", pass_context=True)
def record(context: procrastinate.JobContext, n: int) -> None:
    """Record this job's own id, hold until the gate opens."""
    assert context.job is not None
    runs.record_and_wait("procrastinate", str(context.job.id))
