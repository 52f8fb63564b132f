"""Fill the lab's queue tables with realistic volumes fast (INSERT ... SELECT generate_series).

Used by the EXPLAIN tests (a plan on an empty table proves nothing) and by hand.
"""

from __future__ import annotations

from typing import Any

SEED = [
    # delete: every row is ready; FIFO by identity key.
    "INSERT INTO lab.q_delete (enqueued_at, payload) "
    "SELECT now() - make_interval(secs => %(n)s - g), '' FROM generate_series(1, %(n)s) AS g",
    # status: 10 % ready, 1 % processing, 88 % done, 1 % failed.
    "INSERT INTO lab.q_status_meta (status, enqueued_at, status_changed_at) "
    "SELECT CASE WHEN g %% 100 < 10 THEN 0 WHEN g %% 100 = 10 THEN 1 WHEN g %% 100 = 11 THEN 3 ELSE 2 END, "
    "now() - make_interval(secs => %(n)s - g), now() - make_interval(secs => (%(n)s - g) / 2) "
    "FROM generate_series(1, %(n)s) AS g",
    # lease: 90 % ready, 10 % leased (a few of them long ago).
    "INSERT INTO lab.q_lease (created_at, processing_started_at) "
    "SELECT now() - make_interval(secs => %(n)s - g), "
    "CASE WHEN g %% 10 = 0 THEN now() - make_interval(secs => (g %% 1000) / 100.0) END "
    "FROM generate_series(1, %(n)s) AS g",
    # due: half overdue, half in the future.
    "INSERT INTO lab.q_due (due_at) SELECT now() + make_interval(secs => g - %(n)s / 2) "
    "FROM generate_series(1, %(n)s) AS g",
]


def seed(conn: Any, n: int) -> None:
    """Insert ``n`` rows into each table-backed lab queue, then VACUUM ANALYZE them."""
    for stmt in SEED:
        conn.execute(stmt, {"n": n})
    # Send this session's pending insert counts now: flushed after VACUUM (which sets the live-row
    # counter outright) they would be added a second time.
    conn.execute("SELECT pg_stat_force_next_flush()")
    for table in ("q_delete", "q_status_meta", "q_lease", "q_due", "q_ring_slot"):
        conn.execute(f"VACUUM ANALYZE lab.{table}")
