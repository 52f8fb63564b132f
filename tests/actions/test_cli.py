"""`queueops act` and `queueops audit` through the real command line (a subprocess for the
end-to-end paths; ``queueops.cli.main`` in-process where only the parsing and output are at stake)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from queueops import secrets
from queueops.actions import audit
from queueops.cli import main
from queueops.commands.audit import parse_since
from queueops.store import open_engine
from tests.actions.conftest import SCHEMA


def _stuck(acts, n: int = 250) -> None:  # noqa: ANN001
    acts.sql("INSERT INTO @lease (processing_started_at) SELECT now() - interval '1 minute' "
             "FROM generate_series(1, %s)", (n,))


def _main(acts, capsys, *args: str, config: str = "operator") -> tuple[int, str, str]:  # noqa: ANN001
    rc = main([*args, "--config", str(acts.configs[config])])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _released(acts) -> int:  # noqa: ANN001
    return acts.sql("SELECT count(*) FROM @lease WHERE processing_started_at IS NULL")[0][0]


def test_dry_run_json_is_one_object_with_sql_params_rows(acts) -> None:  # noqa: ANN001
    _stuck(acts)
    out = acts.cli("act", "requeue", "--queue", "lease", "--dry-run", "--json", "--batch-size", "100")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1
    obj = json.loads(lines[0])
    assert obj["phase"] == "preview" and obj["row_count"] == 250 and len(obj["rows"]) == 100
    assert "SKIP LOCKED" in obj["sql"] and obj["params"][1] == 100
    assert {"item", "observed", "lease_age_s"} <= set(obj["rows"][0])
    assert _released(acts) == 0  # a preview changes nothing


def test_no_confirmation_no_action(acts, capsys) -> None:  # noqa: ANN001
    _stuck(acts)
    rc, out, err = _main(acts, capsys, "act", "requeue", "--queue", "lease")  # stdin is not a terminal
    assert rc == 2 and "--yes" in err
    assert "release 250 lease(s)" in out  # the preview was shown
    assert _released(acts) == 0
    assert not [r for r in audit.entries(open_engine(acts.config()), limit=500) if r["outcome"] == "running"]


def test_yes_runs_with_a_progress_bar_and_a_result(acts, capsys) -> None:  # noqa: ANN001
    _stuck(acts)
    rc, out, err = _main(acts, capsys, "act", "requeue", "--queue", "lease", "--yes", "--batch-size", "100")
    assert rc == 0, err
    assert "ok: 250 row(s)" in out
    assert "batches [" in err and "3/3" in err  # the bar on stderr, not stdout
    assert "batches [" not in out
    assert _released(acts) == 250
    rc, out, _ = _main(acts, capsys, "act", "requeue", "--queue", "lease", "--yes", "--json")
    result = json.loads(out.strip().splitlines()[-1])
    assert result["phase"] == "result" and result["outcome"] == "ok" and result["rows_affected"] == 0
    assert {"sql", "params", "rows", "preview"} <= set(result)


def test_viewer_is_refused_and_audited(acts, capsys) -> None:  # noqa: ANN001
    _stuck(acts)
    assert _main(acts, capsys, "act", "requeue", "--queue", "lease", "--dry-run", config="viewer")[0] == 0  # viewers see
    out = acts.cli("act", "requeue", "--queue", "lease", "--yes", config="viewer")
    assert out.returncode == 3
    assert "vera has the role 'viewer': only operators run actions" in out.stderr
    assert _released(acts) == 0
    _, listed, _ = _main(acts, capsys, "audit", "--json", "--outcome", "refused", "--user", "vera", config="viewer")
    rec = json.loads(listed.splitlines()[0])
    assert rec["outcome"] == "refused" and rec["role"] == "viewer" and rec["action"] == "requeue"
    full = json.loads(_main(acts, capsys, "audit", "--json", "--id", str(rec["id"]), config="viewer")[1])
    assert "SKIP LOCKED" in full["command"] and full["preview"]["row_count"] == 250


EVERY_ACTION = [("requeue", "lease", ()), ("requeue", "status", ()), ("archive", "status", ("--older-than-s", "0")),
                ("watermark-reset", "delete", ()), ("rebuild", "churn", ("--min-pages", "0", "--allow-offline"))]


def _fingerprint(acts) -> tuple:  # noqa: ANN001 - everything any action could change
    return acts.sql(
        "SELECT (SELECT count(*) FROM @lease WHERE processing_started_at IS NULL), "
        "(SELECT count(*) FILTER (WHERE status = 1) FROM @meta), (SELECT count(*) FROM @meta_arch), "
        "(SELECT low_key FROM @wm), (SELECT count(*) FROM @churn), "
        "(SELECT array_agg(relfilenode ORDER BY relname) FROM pg_class "
        " WHERE relnamespace = %s::regnamespace AND relkind = 'i')", (f'"{SCHEMA}"',))[0]


def test_a_viewer_is_refused_every_action_and_nothing_changes(acts) -> None:  # noqa: ANN001
    _stuck(acts, 40)
    acts.sql("INSERT INTO @meta (status, status_changed_at) SELECT s, now() - interval '2 days' "
             "FROM generate_series(1, 30), unnest(array[1, 2]) AS s")
    acts.sql("INSERT INTO @del (payload) SELECT 'x' FROM generate_series(1, 50)")
    acts.sql("INSERT INTO @churn (id) SELECT g FROM generate_series(1, 3000) AS g")
    acts.sql("DELETE FROM @churn WHERE id % 10 <> 0")
    before = _fingerprint(acts)
    started = datetime.now(UTC)
    for action, queue, extra in EVERY_ACTION:
        out = acts.cli("act", action, "--queue", queue, "--yes", *extra, config="viewer")
        assert out.returncode == 3, (action, out.stdout, out.stderr)
        assert "only operators run actions" in out.stderr, (action, out.stderr)
    assert _fingerprint(acts) == before
    refused = audit.entries(open_engine(acts.config("viewer")), user="vera", since=started, limit=50)
    assert sorted((r["action"], r["queue"]) for r in refused) == sorted((a, q) for a, q, _ in EVERY_ACTION)
    assert {r["outcome"] for r in refused} == {"refused"}


def test_bad_requests_are_clear_errors(acts, capsys) -> None:  # noqa: ANN001
    rc, _, err = _main(acts, capsys, "act", "requeue", "--queue", "lease", "--older-than-s", "5", "--dry-run")
    assert rc == 2 and "--older-than-s does not apply to requeue (only to archive)" in err
    rc, _, err = _main(acts, capsys, "act", "archive", "--queue", "lease", "--dry-run")
    assert rc == 2 and "archive applies to status queues" in err
    rc, _, err = _main(acts, capsys, "act", "requeue", "--queue", "missing", "--dry-run")
    assert rc == 2 and "no queue named 'missing'" in err
    rc, _, err = _main(acts, capsys, "act", "rebuild", "--queue", "churn", "--dry-run", "--reorganize-pct", "50")
    assert rc == 2 and "must not exceed --rebuild-pct" in err


def test_audit_filters_and_masking(acts, capsys) -> None:  # noqa: ANN001
    _stuck(acts, 10)
    assert _main(acts, capsys, "act", "requeue", "--queue", "lease", "--yes")[0] == 0
    # A watermark above pending items: the reset has something to do (one with nothing to do runs
    # nothing and leaves no audit record).
    acts.sql("INSERT INTO @del (payload) SELECT 'x' FROM generate_series(1, 5)")
    acts.sql("UPDATE @wm SET low_key = (SELECT max(id) + 1 FROM @del)")
    assert _main(acts, capsys, "act", "watermark-reset", "--queue", "delete", "--yes")[0] == 0
    rc, out, _ = _main(acts, capsys, "audit", "--json", "--action", "watermark-reset", "--since", "10m")
    recs = [json.loads(line) for line in out.splitlines()]
    assert rc == 0 and recs and all(r["action"] == "watermark-reset" and r["queue"] == "delete" for r in recs)
    rc, out, _ = _main(acts, capsys, "audit", "--queue", "lease", "--limit", "1")
    assert rc == 0 and "requeue" in out and "olga" in out and "operator" in out
    assert _main(acts, capsys, "audit", "--since", "yesterday-ish")[0] == 2
    # Errors are stored masked: a secret the process knows never reaches the audit log.
    cfg = acts.config()
    store = open_engine(cfg)
    secrets.remember("s3cret-pw-for-test")
    from queueops import actions, roles

    rid = audit.begin(store, roles.resolve(cfg), actions.plan(cfg, "requeue", "lease"))
    audit.finish(store, rid, "failed", 0, "login failed for postgresql://olga:s3cret-pw-for-test@db/x")
    rec = audit.entry(store, rid)
    assert "s3cret-pw-for-test" not in rec["error"] and "***" in rec["error"]


def test_parse_since() -> None:
    now = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)
    assert parse_since("30m", now) == now - timedelta(minutes=30)
    assert parse_since("7d", now) == now - timedelta(days=7)
    assert parse_since("2026-01-01T00:00:00", now) == datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_since(None) is None
