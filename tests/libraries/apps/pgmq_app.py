"""The PGMQ consumer the real-library test runs (``python -m tests.libraries.apps.pgmq_app QUEUE VT_S``).

PGMQ has no worker of its own: a consumer is the loop its documentation gives, read with a
visibility timeout, handle, delete. This one is written with PGMQ's official Python client
(pgmq-py): ``read(queue, vt, qty=2)`` takes two messages at a time (PGMQ's ``pgmq.read``), each
is handled in a thread of its own by :func:`runs.record_and_wait` (its ``msg_id`` recorded, held
until the test opens the gate), then both are deleted (``pgmq.delete``). A message whose consumer
dies before the delete is visible again ``VT_S`` seconds after its read: PGMQ's own rescue.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from pgmq import SyncPGMQueue
from psycopg_pool import ConnectionPool

from tests.libraries.apps import runs


def work(queue_name: str, vt_s: int) -> None:
    """Read two, handle both, delete both; poll every 100 ms while the queue shows nothing."""
    # The DSN carries no password: libpq reads PGPASSWORD (tests/libraries/conftest.LibServer.env).
    pool = ConnectionPool(os.environ["QO_LIB_DSN"], min_size=1, max_size=2, open=True)
    queue = SyncPGMQueue(pool=pool, init_extension=False)
    while True:
        messages = queue.read(queue_name, vt=vt_s, qty=2) or []
        if not messages:
            time.sleep(0.1)
            continue
        handlers = [threading.Thread(target=runs.record_and_wait, args=("pgmq", str(m.msg_id))) for m in messages]
        for h in handlers:
            h.start()
        for h in handlers:
            h.join()
        queue.delete_batch(queue_name, [m.msg_id for m in messages])


if __name__ == "__main__":
    work(sys.argv[1], int(sys.argv[2]))
