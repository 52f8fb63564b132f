"""The pgqueuer worker the real-library test runs (``python -m tests.libraries.apps.pgqueuer_app``,
pgqueuer's own PgQueuer.run loop): one entrypoint that records its job id
(``job.id``) and holds until the test opens the gate."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

import psycopg
from pgqueuer import PgQueuer
from pgqueuer.db import PsycopgDriver
from pgqueuer.models import Job

from tests.libraries.apps import runs


async def main() -> PgQueuer:
    """Build the worker: pgqueuer's own PgQueuer on a psycopg async connection."""
    conn = await psycopg.AsyncConnection.connect(os.environ["QO_LIB_DSN"], autocommit=True)
    pgq = PgQueuer(PsycopgDriver(conn))

    @pgq.entrypoint("record")
    async def record(job: Job) -> None:
        await asyncio.to_thread(runs.record_and_wait, "pgqueuer", str(job.id))

    return pgq


async def work() -> None:
    """pgqueuer's own run loop (PgQueuer.run: QueueManager + heartbeats), two jobs at a time. Run
    through the API rather than ``pgq run``: pgqueuer 1.6.0's CLI fails in setup_fancy_logger
    (``'str' object has no attribute 'name'``) before it starts."""
    pgq = await main()
    await pgq.run(dequeue_timeout=timedelta(seconds=1), batch_size=1, max_concurrent_tasks=2)


if __name__ == "__main__":
    asyncio.run(work())
