"""``queueops lab``: the embedded PostgreSQL with every queue kind, a workload and fault switches."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from queueops.commands.common import fail
from queueops.lab import control
from queueops.lab.pgserver import LabError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="run the embedded PostgreSQL lab (queues, workload, faults)",
                       description="A real PostgreSQL run by queueops itself, with one queue table per kind, "
                                   "producers and consumers, and faults you can switch on and off.")
    p.add_argument("--state-dir", default=str(control.DEFAULT_STATE), metavar="DIR",
                   help="where the lab keeps its data and lab.toml (default: .queueops)")
    lab_sub = p.add_subparsers(dest="lab_command", metavar="ACTION", required=True)

    s = lab_sub.add_parser("start", help="start the database and the workload (idempotent)")
    s.add_argument("--no-workload", action="store_true", help="start only the database and the queues")
    s.add_argument("--port", type=int, default=5544, help="preferred port on 127.0.0.1 (default 5544; "
                   "another free port is used when taken)")
    s.add_argument("--rate", action="append", default=[], metavar="NAME=VALUE",
                   help="workload setting, e.g. produce_per_s=50 or consumers=2 (repeatable)")
    s.set_defaults(func=_start)

    lab_sub.add_parser("stop", help="stop the workload and the database").set_defaults(func=_stop)
    lab_sub.add_parser("status", help="show whether the lab runs, where, and which faults are on") \
        .set_defaults(func=_status)

    f = lab_sub.add_parser("fault", help="list faults, or switch one: lab fault NAME on|off",
                           description="Faults: " + ", ".join(control.FAULTS))
    f.add_argument("name", nargs="?", choices=control.FAULTS)
    f.add_argument("state", nargs="?", choices=("on", "off"))
    f.set_defaults(func=_fault)


def _rates(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise LabError(f"--rate expects NAME=VALUE, got {item!r}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise LabError(f"--rate {name}: {value!r} is not a number") from None
    return out


def _start(args: argparse.Namespace) -> int:
    try:
        info = control.start(Path(args.state_dir), workload=not args.no_workload, port=args.port,
                             rates=_rates(args.rate))
    except LabError as exc:
        return fail(str(exc))
    print(f"lab database: {info['url']}")
    print(f"lab config:   {info['config']}")
    if info["workload_pid"]:
        print(f"workload:     running (pid {info['workload_pid']})")
    return 0


def _stop(args: argparse.Namespace) -> int:
    out = control.stop(Path(args.state_dir))
    print("workload stopped" if out["workload_stopped"] else "workload was not running")
    print("database stopped" if out["database_stopped"] else "database was not running")
    return 0


def _status(args: argparse.Namespace) -> int:
    try:
        print(json.dumps(control.status(Path(args.state_dir)), indent=2))
    except LabError as exc:
        return fail(str(exc))
    return 0


def _fault(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    try:
        if args.name and args.state:
            states = control.set_fault(args.name, args.state == "on", state_dir)
        elif args.name:
            return fail("say 'on' or 'off': queueops lab fault NAME on|off", 2)
        else:
            states = control.faults(state_dir)
    except LabError as exc:
        return fail(str(exc))
    except Exception as exc:  # noqa: BLE001 - most likely the lab is not running
        return fail(f"cannot reach the lab database ({exc}); run 'queueops lab start' first")
    for name, on in states.items():
        print(f"{name:16} {'on' if on else 'off'}")
    return 0
