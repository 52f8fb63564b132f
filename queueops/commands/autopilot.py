"""``queueops autopilot off|on|status``: the autopilot's global kill switch, and what each policy does.

The switch is kept in the store, so the running collector service obeys it at its next cycle.
Anyone may switch the autopilot off (stopping automation is always safe); only operators may
switch it back on. ``status`` lists each policy, its last evaluation and its last actions.
"""

from __future__ import annotations

import argparse
import json

from queueops.commands.common import add_config_arg, fail, load_config, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("autopilot", help="the autopilot's kill switch (off / on) and its policies' state (status)",
                       description="off: no policy runs or proposes anything until 'on' (kept in the store). "
                                   "status: the switch, each [[autopilot]] policy and its last actions.")
    p.add_argument("verb", choices=("off", "on", "status"))
    add_config_arg(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_autopilot, parser=p)


def status(cfg, store) -> dict:  # noqa: ANN001 - config and store engine
    from queueops.autopilot import state

    return {"switch": state.switch(store), "policies": [
        {"name": p.key, "queue": p.queue, "action": p.action, "when": p.when, "mode": p.mode,
         "max_per_hour": p.max_per_hour, **state.policy_state(store, p.key)} for p in cfg.autopilot]}


def _autopilot(args: argparse.Namespace) -> int:
    from queueops import roles
    from queueops.autopilot import state
    from queueops.store import open_engine
    from queueops.store.db import ensure_schema

    cfg = load_config(args)
    try:
        store = open_engine(cfg)
        ensure_schema(store)
    except Exception as exc:  # noqa: BLE001
        return fail(f"the store cannot be opened: {exc}", 1)
    actor = roles.resolve(cfg)
    if args.verb == "on" and not actor.can_act:
        return fail(f"{actor.user} has the role {actor.role!r}: only operators switch the autopilot on", 3)
    if args.verb in ("off", "on"):
        state.set_switch(store, args.verb == "on", actor.user)
    out = status(cfg, store)
    if args.json:
        print_json(out)
        return 0
    sw = out["switch"]
    print(f"autopilot: {'ON' if sw['enabled'] else 'OFF (kill switch): nothing runs'}"
          + (f" (set by {sw['by']} at {sw['at']})" if sw.get("by") else ""))
    if not out["policies"]:
        print("  no [[autopilot]] policies in the config")
    for p in out["policies"]:
        print(f"  {p['name']}: {p['action']} on {p['queue']} when {p['when']}, mode {p['mode']}, at most "
              f"{p['max_per_hour']}/h; last verdict {p.get('verdict', 'never evaluated')}")
        for entry in p.get("last", [])[:3]:
            print(f"    {json.dumps(entry, default=str)}")
    return 0
