"""The lab's own dequeues keep a plan whose cost does not grow with the rows already done.

Benchmarks measure the console against the lab workload; a dequeue that flips to a slower plan
mid-run moves the baseline by more than the effect being measured (it did: the status queue fell
from about 540 to 20 claims a second a minute into every overhead run).
"""

from __future__ import annotations

import json

from queueops import sqlfiles
from tests.collectors.plans import scans_of
from tests.conftest import Lab


def test_status_claim_reads_ready_rows_only_however_many_are_done(clean_lab: Lab) -> None:
    """Done rows below the first ready one (the lab's shape: done rows stay, with the lowest keys)
    and statistics that say most rows are ready: the shape in which the planner took the claim's
    key order from the primary key and walked every done row on each claim."""
    stmt = sqlfiles.load("postgresql", "lab/consume").render("status_claim", values={})
    with clean_lab.connect() as conn:
        conn.execute("INSERT INTO lab.q_status_meta (status) SELECT 2 FROM generate_series(1, 2000)")
        conn.execute("INSERT INTO lab.q_status_meta (status) SELECT 0 FROM generate_series(1, 20000)")
        conn.execute("INSERT INTO lab.q_status_data (id, payload) SELECT id, 'x' FROM lab.q_status_meta")
        conn.execute("VACUUM ANALYZE lab.q_status_meta")
        with conn.transaction(force_rollback=True):
            raw = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + stmt.sql, stmt.params).fetchone()[0]
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    scans = scans_of(plan, {"q_status_meta"})
    reads = [n for n in scans if n.get("Index Name") and n["Index Name"] != "q_status_meta_pkey"]
    assert [n["Index Name"] for n in reads] == ["q_status_meta_ready"], scans
    # One ready row taken, none of the 2,000 done ones read on the way.
    assert reads[0]["Actual Rows"] == 1 and reads[0].get("Rows Removed by Filter", 0) == 0, reads[0]
