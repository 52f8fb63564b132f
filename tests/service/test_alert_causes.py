"""Root causes page as the Overview judges them (issue 32, one severity): an old snapshot, a
session holding a queue's table and the head of its waiters give each queue they hold up an alert
at the judge's own levels, and the alert's queue state is judge.queue_state of its firing alerts.
The last test switches the lab's ``snapshot-hold`` fault on in the real workload and feeds the
real collectors' rows to the real AlertManager."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from queueops import causes, judge
from queueops import config as config_mod
from queueops.alerts.evaluate import evaluate
from queueops.alerts.manager import AlertManager
from queueops.alerts.rules import effective_rules
from queueops.rows import SnapshotRow
from queueops.store import open_engine
from tests.collectors.conftest import collect
from tests.lab.conftest import TEST_SETTINGS, start, stop, wait_for, write_test_config

T0 = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
CFG = config_mod.parse({
    "schedule": {"fast_s": 5},  # the hold: one interval, 5 s
    "targets": [{"name": "a", "dialect": "postgresql", "url": "postgresql://u@h:5432/d"}],
    "queues": [{"name": q, "target": "a", "kind": "lease", "table": q, "key": "id", "lease_column": "taken_at"}
               for q in ("jobs", "mail")],
})


def r(queue: str, metric: str, value: float, note: object = "") -> SnapshotRow:
    return SnapshotRow(T0, "a", "d", queue, metric, value, note if isinstance(note, str) else json.dumps(note))


def cycle(snapshot_s: float = 0, head: dict | None = None, waiters: tuple[int, ...] = (),
          holder_s: float | None = None) -> list[SnapshotRow]:
    """One cycle: the target's snapshot and head-blocker rows; 'jobs' with the given waiters and
    table-lock holder, 'mail' quiet."""
    rows = [r("", "oldest_snapshot_age_s", snapshot_s, {"kind": "backend", "pid": 42} if snapshot_s else {}),
            r("", "head_blockers", 1 if head else 0, [head] if head else [])]
    for q in ("jobs", "mail"):
        mine = q == "jobs"
        rows.append(r(q, "depth", 3))
        rows.append(r(q, "lock_waiters", len(waiters) if mine else 0,
                      {"pids": list(waiters)} if mine and waiters else "exact (pg_locks now)"))
        held = mine and holder_s is not None
        rows.append(r(q, "lock_blockers", 1 if held else 0,
                      {"holders": [{"pid": 5, "mode": "ExclusiveLock", "xact_age_s": holder_s}]} if held else "exact"))
    return rows


def firing(cycles: list[tuple[float, list[SnapshotRow]]]) -> dict[tuple[str, str], str]:
    """Run the config's rules over ``[(seconds, rows)]``; the firing alerts at the end, by (rule, queue)."""
    rules = effective_rules(CFG)
    states: dict = {}
    for sec, rows in cycles:
        changes, _ = evaluate(rules, rows, states, T0 + timedelta(seconds=sec))
        for k, v in changes.items():
            if v is None:
                states.pop(k, None)
            else:
                states[k] = v
    return {(k[0], k[2]): s.rule.split(":")[-1] for k, s in states.items() if s.state == "firing"}


def test_the_rules_levels_are_the_judges() -> None:
    levels = causes.levels()
    assert levels["cause:snapshot:warn"][3] == judge.SNAPSHOT_WARN_S
    assert levels["cause:snapshot:crit"][3] == judge.SNAPSHOT_CRIT_S
    assert levels["cause:head_blocker:warn"][3] == judge.BLOCKER_MIN_AGE_S
    assert levels["cause:table_lock:crit"][3] == levels["cause:head_blocker:crit"][3] == judge.LOCK_HOLD_CRIT_S
    names = {r.name for r in effective_rules(CFG) if r.queues == frozenset({"jobs"})}
    assert set(levels) <= names


def test_an_old_snapshot_pages_every_queue_of_its_target_and_resolves_when_released() -> None:
    assert firing([(0, cycle(59)), (5, cycle(64))]) == {}  # under the judge's 60 s
    on = firing([(0, cycle(61)), (5, cycle(66))])  # held for one interval: fires
    assert on == {("cause:snapshot:warn", "jobs"): "warn", ("cause:snapshot:warn", "mail"): "warn"}
    assert judge.snapshot_state(66) == "warn"
    crit = firing([(0, cycle(601)), (5, cycle(606))])
    assert ("cause:snapshot:crit", "jobs") in crit and judge.snapshot_state(606) == "crit"
    gone = firing([(0, cycle(61)), (5, cycle(66)), (10, cycle(0)), (75, cycle(0))])  # 60 s of clearing
    assert gone == {}


def test_a_snapshot_row_naming_no_session_is_not_a_cause() -> None:
    rows = [r("", "oldest_snapshot_age_s", 500, {}), r("jobs", "depth", 1)]
    assert [(x.metric, x.value) for x in causes.cause_rows(rows)] == [(causes.SNAPSHOT, 0.0)]


def test_a_table_lock_is_a_warning_at_once_and_critical_from_the_judges_level() -> None:
    on = firing([(0, cycle(holder_s=1)), (5, cycle(holder_s=6))])
    assert on == {("cause:table_lock:warn", "jobs"): "warn"}  # not 'mail': not its table
    assert judge.blocker_state(6, holds_table=True) == "warn"
    late = firing([(0, cycle(holder_s=61)), (5, cycle(holder_s=66))])
    assert ("cause:table_lock:crit", "jobs") in late and judge.blocker_state(66, holds_table=True) == "crit"


def test_a_head_blocker_counts_for_the_queue_whose_waiters_it_holds_up() -> None:
    head = {"pid": 7, "xact_age_s": 12, "waiters": [9]}
    on = firing([(0, cycle(head=head, waiters=(9,))), (5, cycle(head={**head, "xact_age_s": 17}, waiters=(9,)))])
    assert {k: v for k, v in on.items() if k[0].startswith("cause:")} == {("cause:head_blocker:warn", "jobs"): "warn"}
    assert ("threshold:lock_waiters:warn", "jobs") in on  # the symptom, as before
    young = {"pid": 7, "xact_age_s": 3, "waiters": [9]}
    assert not [k for k in firing([(0, cycle(head=young, waiters=(9,))), (5, cycle(head=young, waiters=(9,)))])
                if k[0].startswith("cause:")]
    assert judge.blocker_state(3, holds_table=False) == "ok"
    # The head that also holds the queue's table is one cause, the table lock's.
    both = {"pid": 5, "xact_age_s": 20, "waiters": [9]}
    rows = causes.cause_rows(cycle(head=both, waiters=(9,), holder_s=20))
    assert {(x.queue, x.metric): x.value for x in rows}[("jobs", causes.HEAD_BLOCKER)] == 0.0


def test_the_transition_carries_the_queue_state_of_the_judge(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite:///{tmp_path / 'store.db'}")
    m = AlertManager(effective_rules(CFG), engine, log_lines=False)
    m.on_cycle(cycle(holder_s=61), T0)
    fired = m.on_cycle(cycle(holder_s=66), T0 + timedelta(seconds=5))
    assert {(t.rule.name, t.queue, t.queue_state) for t in fired} == {
        ("cause:table_lock:warn", "jobs", "crit"), ("cause:table_lock:crit", "jobs", "crit")}
    assert m.queue_state("a", "jobs") == judge.queue_state([], ["warn", "crit"]) == "crit"
    assert m.queue_state("a", "mail") == "ok"
    m.close()
    engine.dispose()


OWN_LEVEL_S = 20.0


def test_snapshot_hold_on_the_lab_fires_the_snapshot_alert(lab, tmp_path: Path) -> None:  # noqa: ANN001
    """The lab's snapshot-hold fault, switched on in the real workload: once its session's
    transaction is past the queues' old-snapshot level, the real collectors' rows fire
    cause:snapshot:warn on every lab queue (the Overview's 'A long transaction holds cleanup
    back'), and nothing else of the kind before that. The level is each queue's own
    (``thresholds.oldest_snapshot_age_s``, 20 s here; the judge's 60 s is the same rule, checked
    without a database in tests/console/test_causes_agree.py), so the test waits 20 s, not 60."""
    from queueops.lab import control

    path = write_test_config(lab, "alert-causes.toml", 3)
    loaded = config_mod.load(path)
    own = config_mod.Threshold(warn=OWN_LEVEL_S)
    cfg = loaded.model_copy(update={"queues": [
        q.model_copy(update={"thresholds": {**q.thresholds, judge.OLD_SNAPSHOT: own}}) for q in loaded.queues]})
    assert {r.value for r in effective_rules(cfg) if r.name == "cause:snapshot:warn"} == {OWN_LEVEL_S}
    run = start(lab, path, TEST_SETTINGS)
    engine = open_engine(f"sqlite:///{tmp_path / 'store.db'}")
    manager = AlertManager(effective_rules(cfg), engine, log_lines=False)
    fired: list = []
    try:
        control.set_fault("snapshot-hold", True, lab.state_dir)

        def snapshot_rows() -> list[SnapshotRow]:
            rows = collect(cfg, "oldest_snapshot", "blocking_chains", "lock_waits", "depth").rows
            fired.extend(manager.on_cycle(rows))
            return rows

        def holder_age() -> float:
            row = next(x for x in snapshot_rows() if x.metric == "oldest_snapshot_age_s")
            note = json.loads(row.note) if row.note.startswith("{") else {}
            return float(row.value or 0) if note.get("application_name") == "queueops-lab-snapshot-hold" else 0.0

        wait_for(lambda: holder_age() > 0, 20, interval=1, what="the snapshot-hold session as the oldest snapshot")
        assert not [t for t in fired if t.rule.name.startswith("cause:snapshot")]  # young: no page yet
        wait_for(lambda: holder_age() >= OWN_LEVEL_S + 6 and
                 {t.queue for t in fired if t.rule.name == "cause:snapshot:warn" and t.state == "firing"}
                 == {q.name for q in cfg.queues}, 120, interval=2, what="cause:snapshot:warn on every lab queue")
        assert all(t.queue_state in ("warn", "crit") for t in fired if t.rule.name == "cause:snapshot:warn")
    finally:
        control.set_fault("snapshot-hold", False, lab.state_dir)
        manager.close()
        engine.dispose()
        stop(run)
        lab.reset()
