"""Config validation: every problem named with file, field and value; nothing touches a database."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from queueops import config as config_mod
from queueops.identifiers import identifier_problem, quote_ident
from tests.conftest import ROOT

BAD = """
[[targets]]
name = "prod"
dialect = "postgresql"
url = "postgresql://monitor@127.0.0.1:{port}/app"
password = "env:QUEUEOPS_TEST_PW"

[[queues]]
name = "jobs"
target = "prod"
kind = "stack"
table = "jobs"
key = "id"

[[queues]]
name = "leases"
target = "prod"
kind = "lease"
table = "leases"
lease_column = "taken_at"

[[queues]]
name = "evil"
target = "prod"
kind = "delete"
table = '"; DROP TABLE x; --'
key = "id"
"""


class _Listener:
    """A TCP listener that records whether anything connected (proves 'nothing was executed')."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(5)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop = True
        self.thread.join(2)
        self.sock.close()


def test_config_check_names_every_problem_and_touches_nothing(tmp_path: Path, lab) -> None:  # noqa: ANN001
    listener = _Listener()
    try:
        path = tmp_path / "bad.toml"
        path.write_text(BAD.format(port=listener.port))
        proc = lab.cli("config", "check", "--config", str(path))
        time.sleep(0.3)
    finally:
        listener.close()
    assert proc.returncode != 0
    err = proc.stderr
    assert str(path) in err
    assert "queues[0](name='jobs').kind = 'stack'" in err
    assert "queues[1](name='leases').key = (missing): is required" in err
    assert "queues[2](name='evil').table = '\"; DROP TABLE x; --'" in err
    assert "not a safe identifier" in err
    assert listener.connections == 0, "config check must not connect anywhere"


def test_good_lab_config_passes(lab) -> None:  # noqa: ANN001
    proc = lab.cli("config", "check", "--config", str(lab.config_path))
    assert proc.returncode == 0, proc.stderr
    assert "5 queues" in proc.stdout


def test_live_check_reports_unknown_table_and_column(lab, tmp_path: Path) -> None:  # noqa: ANN001
    text = lab.config_path.read_text().replace('table = "q_due"', 'table = "q_nope"').replace(
        'lease_column = "processing_started_at"', 'lease_column = "leased_at"')
    path = lab.config_path.parent / "live-bad.toml"
    path.write_text(text)
    proc = lab.cli("config", "check", "--live", "--config", str(path))
    assert proc.returncode == 1
    # One stream: every finding and the verdict on stdout (issue 13).
    assert '"lab"."q_nope" does not exist' in proc.stdout
    assert "lease_column = 'leased_at': no such column" in proc.stdout
    assert proc.stdout.splitlines()[-1].startswith(f"{path}: errors (")
    ok = lab.cli("config", "check", "--live", "--config", str(lab.config_path))
    assert ok.returncode == 0, ok.stderr


def test_missing_file_and_bad_toml_are_named(tmp_path: Path) -> None:
    with pytest.raises(config_mod.ConfigError, match="nope.toml: \\(file\\)"):
        config_mod.load(tmp_path / "nope.toml")
    bad = tmp_path / "syntax.toml"
    bad.write_text("[[targets]\nname=")
    with pytest.raises(config_mod.ConfigError, match="not valid TOML"):
        config_mod.load(bad)


def test_literal_password_in_url_is_refused_and_masked(tmp_path: Path) -> None:
    path = tmp_path / "pw.toml"
    path.write_text('[[targets]]\nname="a"\ndialect="postgresql"\nurl="postgresql://u:hunter22@h/db"\n')
    with pytest.raises(config_mod.ConfigError) as info:
        config_mod.load(path)
    assert "hunter22" not in str(info.value)
    assert "literal password" in str(info.value)


def test_the_literal_password_check_does_not_depend_on_secrets_seen_before(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret resolved earlier in the process (here the user name "queue") used to make any URL
    containing it look like one with a literal password."""
    from queueops import secrets

    monkeypatch.setattr(secrets, "_KNOWN_SECRETS", set(secrets._KNOWN_SECRETS))  # this test's own
    secrets.remember("queue")
    path = tmp_path / "ok.toml"
    path.write_text('[[targets]]\nname="a"\ndialect="postgresql"\nurl="postgresql://queue@h/queue"\n'
                    'password="file:pw"\n')
    assert config_mod.load(path).targets[0].url == "postgresql://queue@h/queue"
    assert secrets.has_literal_password("Driver=x;Server=h;PWD={a;b}") and not secrets.has_literal_password(
        "Driver=x;Server=h;UID=u")


@pytest.mark.parametrize("name", ['a"b', "a]b", "a;b", "a--b", "a/*b", "ｔａｂｌｅ", "x" * 64, "", " a", "a\x00b"])
def test_hostile_identifiers_are_refused(name: str) -> None:
    assert identifier_problem(name, "postgresql") is not None


def test_quoting_is_always_applied() -> None:
    assert quote_ident("jobs", "postgresql") == '"jobs"'
    assert quote_ident("Jobs", "mssql") == "[Jobs]"
    assert quote_ident("order", "postgresql") == '"order"'


def test_example_config_is_valid() -> None:
    cfg = config_mod.load(ROOT / "examples" / "queueops.toml")
    assert {t.dialect for t in cfg.targets} == {"postgresql", "mssql"}


@pytest.mark.parametrize("value", ["25:99", "7:00", "07:60", "noon"])
def test_a_bad_daily_report_time_names_the_file_field_and_value(tmp_path: Path, value: str) -> None:
    path = tmp_path / "report.toml"
    path.write_text(f'[report]\ndaily_at = "{value}"\n[[targets]]\nname="a"\ndialect="postgresql"\n'
                    'url="postgresql://u@h/d"\n')
    with pytest.raises(config_mod.ConfigError) as info:
        config_mod.load(path)
    assert str(path) in str(info.value) and "report.daily_at" in str(info.value) and value in str(info.value)
    path.write_text(path.read_text().replace(value, "06:30"))
    assert config_mod.load(path).report.daily_at == "06:30"
