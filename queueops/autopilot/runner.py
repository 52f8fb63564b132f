"""The autopilot inside the collector service: after each cycle, each policy of that target is
judged by :func:`queueops.autopilot.policy.decide` and, when it fires, its action goes through the
same action layer as a person's -- ``actions.plan`` (preview), ``actions.execute`` (role, guards,
audit) -- as user ``autopilot``, with the policy named in the audited preview.

Actions run on one worker thread of their own, so a collection cycle never waits for one; a
policy whose action is still running is not fired again. ``propose`` mode sends the preview and
the command to run to the alert webhook (and the log) instead of running it. The rate limit
counts the last hour's runs from the audit log (act) or the proposals kept in the store
(propose), so a restart does not reset it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine

from queueops import actions, roles, secrets
from queueops.actions import audit
from queueops.autopilot import state
from queueops.autopilot.policy import AutopilotPolicy, decide, step
from queueops.config import Config
from queueops.rows import SnapshotRow, utcnow

log = logging.getLogger("queueops.autopilot")
KEEP_LAST = 10


def command_for(policy: AutopilotPolicy) -> str:
    """The CLI command a person would run for this policy's action."""
    flags = []
    for key, value in sorted(policy.options.items()):
        flag = "--" + key.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value not in (False, None):
            flags.append(f"{flag} {value}")
    return " ".join(["queueops act", policy.action, "--queue", policy.queue, *flags, "--yes"])


def metric_value(policy: AutopilotPolicy, target: str, rows: list[SnapshotRow]) -> float | None:
    """The policy's metric in this cycle: the queue's row, else the target-wide row; None if absent."""
    metric = policy.condition.metric
    found = [r for r in rows if r.metric == metric and r.target == target and r.queue in (policy.queue, "")]
    found.sort(key=lambda r: r.queue != policy.queue)
    return found[0].value if found else None


class Autopilot:
    def __init__(self, cfg: Config, store: Engine):
        self.cfg = cfg
        self.store = store
        self.policies = [p for p in cfg.autopilot if p.mode != "off"]
        self._streak: dict[str, int] = {}
        self._busy: set[str] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="queueops-autopilot")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def runs_last_hour(self, p: AutopilotPolicy, st: dict[str, Any]) -> int:
        if p.mode == "propose":
            return len(state.recent(st.get("proposals", [])))
        since = utcnow() - timedelta(hours=1)
        done = audit.entries(self.store, queue=p.queue, action=p.action, user=state.AUTOPILOT_USER, since=since,
                             outcome=["running", "ok", "failed", "interrupted"], limit=10_000)
        return sum(1 for r in done if f'"policy":"{p.key}"' in (r.get("preview") or ""))

    def on_cycle(self, target: str, rows: list[SnapshotRow]) -> None:
        """Judge every policy of ``target`` after one collection cycle (never raises)."""
        for p in self.policies:
            if self.cfg.queue(p.queue).target != target:
                continue
            try:
                self._judge(p, target, rows)
            except Exception as exc:  # noqa: BLE001 - the autopilot must never break the service
                log.warning("autopilot policy %s: %s", p.key, secrets.mask(f"{type(exc).__name__}: {exc}"))

    def _judge(self, p: AutopilotPolicy, target: str, rows: list[SnapshotRow]) -> None:
        cond = p.condition
        if not any(r.metric == cond.metric for r in rows):
            return  # a cycle of another cadence (or a failed one): not a sample, the last verdict stands
        value = metric_value(p, target, rows)
        with self._lock:
            streak = step(cond, self._streak.get(p.key, 0), value)
            self._streak[p.key] = streak
            busy = p.key in self._busy
        st = state.policy_state(self.store, p.key)
        enabled = bool(state.switch(self.store)["enabled"])
        runs = self.runs_last_hour(p, st) if streak >= cond.samples and enabled else 0
        verdict = decide(cond, streak, mode=p.mode, enabled=enabled, runs_last_hour=runs,
                         max_per_hour=p.max_per_hour, sampled=value is not None)
        if busy and verdict in ("act", "propose"):
            verdict = "waiting"  # its previous action is still running
        st.update(mode=p.mode, when=p.when, streak=streak, value=value, verdict=verdict, evaluated_at=utcnow().isoformat(),
                  runs_last_hour=runs, max_per_hour=p.max_per_hour)
        state.put_policy_state(self.store, p.key, st)
        if verdict not in ("act", "propose"):
            return
        with self._lock:
            self._streak[p.key] = 0  # the next firing needs N fresh samples
            self._busy.add(p.key)
        self._pool.submit(self._fire, p, verdict)

    def _fire(self, p: AutopilotPolicy, verdict: str) -> None:
        entry: dict[str, Any] = {"at": utcnow().isoformat(), "mode": verdict}
        try:
            plan = actions.plan(self.cfg, p.action, p.queue, dict(p.options))
            plan.preview.details["autopilot"] = {"policy": p.key, "when": p.when, "mode": p.mode}
            entry["summary"] = plan.preview.summary
            if verdict == "propose":
                self._propose(p, plan)
                entry["outcome"] = "proposed"
            elif plan.nothing_to_do:
                entry["outcome"] = "nothing to do"
            else:
                actor = roles.Actor(state.AUTOPILOT_USER, "operator", f"autopilot:{p.key}")
                result = actions.execute(self.cfg, plan, actor=actor)
                entry.update(outcome=result.outcome, rows=result.rows_affected, audit_id=result.audit_id,
                             error=result.error)
                log.warning("autopilot policy %s ran %s on %s: %s, %s row(s) (audit #%s)", p.key, p.action,
                            p.queue, result.outcome, result.rows_affected, result.audit_id)
        except Exception as exc:  # noqa: BLE001 - recorded in the policy's state
            entry.update(outcome="failed", error=secrets.mask(f"{type(exc).__name__}: {exc}"))
            log.warning("autopilot policy %s could not run %s: %s", p.key, p.action, entry["error"])
        finally:
            with contextlib.suppress(Exception):
                st = state.policy_state(self.store, p.key)
                st["last"] = ([entry] + list(st.get("last", [])))[:KEEP_LAST]
                if verdict == "propose" and entry.get("outcome") == "proposed":
                    st["proposals"] = state.recent([entry["at"], *st.get("proposals", [])])
                state.put_policy_state(self.store, p.key, st)
            with self._lock:
                self._busy.discard(p.key)

    def _propose(self, p: AutopilotPolicy, plan: actions.Plan) -> None:
        from queueops.alerts.notify import post_json

        body = {"id": f"autopilot|{p.key}|{utcnow().isoformat()}", "alert": f"autopilot:{p.key}",
                "state": "proposed", "queue": p.queue, "action": p.action, "condition": p.when,
                "command": command_for(p), "preview": plan.preview.to_json()}
        log.warning("autopilot policy %s proposes: %s (%s)", p.key, body["command"], plan.preview.summary)
        url = self.cfg.alerts.webhook_url
        if url:
            post_json(secrets.resolve(url, self.cfg.base_dir) if secrets.is_reference(url) else url, body,
                      self.cfg.alerts.webhook_timeout_s)
