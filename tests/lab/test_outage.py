"""The lab workload's outage log (queueops.lab.runtime.Outage), without a database: "reachable
again" is said once every worker that wants the database has it back, including when one worker
lost its connection and then stopped wanting one (its fault switched off during the outage: it
stayed 'down' for ever, and tests/lab/test_ledger.py timed out waiting for the line)."""

from __future__ import annotations

import logging

import pytest

from queueops.lab.runtime import Counters, Outage

BACK = "database reachable again"


def test_an_idle_worker_does_not_hold_the_outage_open(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    outage = Outage(Counters())
    outage.lost("consumer", "server closed the connection")
    outage.lost("dead-consumer", "server closed the connection")
    outage.back("consumer", reconnect=True)
    assert BACK not in caplog.text  # the fault's worker is still down
    outage.idle("dead-consumer")  # its fault was switched off: it wants no connection any more
    assert caplog.text.count(BACK) == 1


def test_an_idle_worker_alone_does_not_claim_the_database_is_back(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    outage = Outage(Counters())
    outage.lost("dead-consumer", "server closed the connection")
    outage.idle("dead-consumer")
    assert BACK not in caplog.text  # no worker has reached the database since it went away
    outage.back("producer", reconnect=False)
    assert caplog.text.count(BACK) == 1
