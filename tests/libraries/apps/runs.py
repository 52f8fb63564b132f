"""What every real-library test task does: record that it started (with the library's own job id and
the worker's pid), hold until the test opens the gate, then record that it ended.

The records live in ``public.qo_runs`` on the library's own database, written on a connection of
their own and committed at once, so they survive a SIGKILL of the worker and tell exactly how often
each job ran: a job that started twice was re-run (the library's at-least-once rescue); a job that
ended twice would be a double execution.
"""

from __future__ import annotations

import os
import time

import psycopg

DDL = """
CREATE TABLE IF NOT EXISTS public.qo_runs (
    id bigserial PRIMARY KEY, library text NOT NULL, job_id text NOT NULL, pid int NOT NULL,
    phase text NOT NULL CHECK (phase IN ('start', 'end')), at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS public.qo_gate (library text PRIMARY KEY, open boolean NOT NULL);
"""


def record_and_wait(library: str, job_id: str) -> None:
    """Record the start, wait for the gate (polling, so a SIGKILL leaves the job mid-run), record the end."""
    with psycopg.connect(os.environ["QO_LIB_DSN"], autocommit=True) as conn:
        conn.execute("INSERT INTO public.qo_runs (library, job_id, pid, phase) VALUES (%s, %s, %s, 'start')",
                     (library, job_id, os.getpid()))
        while True:
            row = conn.execute("SELECT open FROM public.qo_gate WHERE library = %s", (library,)).fetchone()
            if row and row[0]:
                break
            time.sleep(0.1)
        conn.execute("INSERT INTO public.qo_runs (library, job_id, pid, phase) VALUES (%s, %s, %s, 'end')",
                     (library, job_id, os.getpid()))
