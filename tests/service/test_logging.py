"""The service's log: secrets masked in messages and in tracebacks; APScheduler's per-run skip
warnings (counted by the service instead) kept out."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from queueops import secrets
from queueops.service.app import setup_logging


@pytest.fixture()
def service_log() -> Iterator[io.StringIO]:
    """The service's own log set-up, writing to a buffer; the root logger restored afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    setup_logging("INFO")
    buf = io.StringIO()
    root.handlers[0].setStream(buf)  # type: ignore[attr-defined]
    yield buf
    root.handlers[:], root.level = saved


def test_a_secret_in_a_traceback_is_masked(service_log: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_KNOWN_SECRETS", set())
    secrets.remember("s3cr3t-Passw0rd")
    try:
        raise RuntimeError("connect failed for postgresql://app:s3cr3t-Passw0rd@db/queue")
    except RuntimeError:
        logging.getLogger("queueops.service").exception("cycle failed for %s", "s3cr3t-Passw0rd")
    err = service_log.getvalue()
    assert "Traceback" in err and "RuntimeError: connect failed for postgresql://app:***@db/queue" in err, err
    assert "s3cr3t-Passw0rd" not in err, err


def test_apscheduler_skip_warnings_are_dropped_other_warnings_kept(service_log: io.StringIO) -> None:
    aps = logging.getLogger("apscheduler.scheduler")
    aps.warning('Execution of job "collect:a:depth" skipped: maximum number of running instances reached (1)')
    aps.warning('Run time of job "collect:a:depth" was missed by 0:00:03')
    aps.warning("something else went wrong")
    err = service_log.getvalue()
    assert "skipped" not in err and "missed" not in err
    assert "something else went wrong" in err
