"""The collector service with one of five queue tables renamed mid-run (issue 13, acceptance):
the other four keep every metric in every cycle, and the renamed one's rows say why."""

from __future__ import annotations

import signal
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from psycopg import sql
from sqlalchemy import select

from collectors import registry, runner
from queueops.store import open_engine
from queueops.store.schema import collector_status, snapshots
from tests.conftest import Lab, wait_for
from tests.mapping.conftest import lab_copy_sections
from tests.service.conftest import ServiceProcess

HEALTHY = ("delete", "status", "due", "ring")
QUEUE_SCOPED = {c.name: set(c.metrics) for c in registry.COLLECTORS if c.scope == "queue"}


def _utc(ts: datetime) -> datetime:
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts


def test_one_renamed_table_leaves_every_metric_of_the_other_four_in_every_cycle(
        lab: Lab, lab_copy: str, tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'store.db'}"
    config = tmp_path / "svc.toml"
    config.write_text(f'[store]\nurl = "{store_url}"\n\n[lake]\npath = "{tmp_path / "lake"}"\n\n'
                      f"[schedule]\nfast_s = 1\nslow_s = 3\n\n{lab_copy_sections(lab, lab_copy)}\n")
    store = open_engine(store_url)

    def cycles(collector: str) -> list[datetime]:
        try:
            with store.connect() as conn:
                rows = conn.execute(select(collector_status.c.ts).where(collector_status.c.collector == collector)
                                    ).all()
        except Exception:  # noqa: BLE001 - the service creates the store's tables on start
            return []
        return sorted({_utc(r.ts) for r in rows})

    svc = ServiceProcess(config)
    try:
        wait_for(lambda: len(cycles("ghost_records")) >= 2 and len(cycles("depth")) >= 3, 90,
                 what="two slow and three fast cycles before the rename")
        with lab.connect() as conn:
            conn.execute(sql.SQL("ALTER TABLE {} RENAME TO q_lease_renamed").format(
                sql.Identifier(lab_copy, "q_lease")))
        renamed_at = datetime.now(UTC)
        wait_for(lambda: len([t for t in cycles("ghost_records") if t > renamed_at]) >= 2
                 and len([t for t in cycles("depth") if t > renamed_at]) >= 3, 90,
                 what="two slow and three fast cycles after the rename")
        svc.proc.send_signal(signal.SIGTERM)
        assert svc.wait(60) == 0, svc.text()[-3000:]
    finally:
        svc.kill()

    with store.connect() as conn:
        status = conn.execute(select(collector_status)).mappings().all()
        snaps = conn.execute(select(snapshots)).mappings().all()
    by_ts: dict[datetime, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    notes: list[str] = []
    for r in snaps:
        by_ts[_utc(r["ts"])][r["queue"]].add(r["metric"])
        if r["metric"] == runner.QUEUE_ERROR:
            assert r["queue"] == "lease", r
            notes.append(r["note"])
    baseline: dict[tuple[str, str], set[str]] = {}
    checked = 0
    for s in sorted(status, key=lambda s: _utc(s["ts"])):
        c, ts = s["collector"], _utc(s["ts"])
        if c not in QUEUE_SCOPED:
            continue
        assert s["ok"], dict(s)
        for q in HEALTHY:
            have = by_ts[ts][q] & QUEUE_SCOPED[c]
            if ts < renamed_at:
                baseline[(c, q)] = baseline.get((c, q), have) & have
            else:
                assert baseline[(c, q)] <= have, (c, q, ts, baseline[(c, q)] - have)
                checked += 1
        if ts > renamed_at and s["collector"] == "depth":
            # the renamed queue: no depth, an error row naming the engine's reason
            assert "depth" not in by_ts[ts]["lease"]
            assert runner.QUEUE_ERROR in by_ts[ts]["lease"]
    assert baseline[("depth", "delete")] >= {"depth", "rows_total"}
    assert checked >= 3 * len(HEALTHY)
    assert notes and all("does not exist" in n and "q_lease" in n for n in notes), notes[:3]
    # Every collector that ran after the rename still counts as having worked for the target.
    after = [s for s in status if _utc(s["ts"]) > renamed_at]
    assert after and all(s["ok"] for s in after), [dict(s) for s in after if not s["ok"]][:3]
