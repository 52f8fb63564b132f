"""Which SQL Server sessions read without shared locks (engine.reads_uncommitted), decided by the
connection's purpose. It was decided by the application name's suffix: the console's drill-down
('queueops-console'), discovery and the live check read at READ COMMITTED and waited on a dequeuer's
exclusive locks (tests/mssql/test_mssql_lab.py holds one against the drill-down on a real server)."""

from __future__ import annotations

import typing

from queueops import engine


def test_every_reading_purpose_reads_uncommitted_and_an_action_does_not() -> None:
    purposes = typing.get_args(engine.Purpose)
    assert set(purposes) == {"collect", "action", "check"}
    assert {p: engine.reads_uncommitted(p) for p in purposes} == {"collect": True, "check": True, "action": False}
