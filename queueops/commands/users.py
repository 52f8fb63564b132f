"""``queueops users add|passwd|remove|list``: the console's local users file (scrypt hashes)."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from queueops import users
from queueops.commands.common import add_config_arg, fail, load_config


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("users", help="manage the console's local users (viewer / operator)",
                       description="Local console accounts, used when OIDC sign-in is not configured. "
                                   "The file is [console] users_file of the config unless --file is given.")
    add_config_arg(p)
    p.add_argument("--file", metavar="PATH", help="users file (default: [console] users_file of the config)")
    us = p.add_subparsers(dest="users_command", metavar="ACTION", required=True)
    a = us.add_parser("add", help="add a user (asks for the password twice)")
    a.add_argument("name")
    a.add_argument("--role", choices=users.ROLES, default="viewer", help="(default viewer)")
    a.add_argument("--password-stdin", action="store_true", help="read the password from one line of stdin")
    a.add_argument("--replace", action="store_true", help="replace an existing user of that name")
    a.set_defaults(func=_add)
    pw = us.add_parser("passwd", help="set a user's password (keeps the role)")
    pw.add_argument("name")
    pw.add_argument("--password-stdin", action="store_true")
    pw.set_defaults(func=_passwd)
    r = us.add_parser("remove", help="remove a user")
    r.add_argument("name")
    r.set_defaults(func=_remove)
    us.add_parser("list", help="list users and roles").set_defaults(func=_list)
    u = us.add_parser("unlock", help="clear a user's failed sign-ins (the console's throttle) and end their "
                                     "console sessions with --sign-out")
    u.add_argument("name")
    u.add_argument("--sign-out", action="store_true", help="also end every console session of the user")
    u.set_defaults(func=_unlock)


def _path(args: argparse.Namespace) -> Path:
    if args.file:
        return Path(args.file)
    cfg = load_config(args)
    if not cfg.console.users_file:
        raise SystemExit(fail("the config has no [console] users_file; pass --file PATH", 2))
    return cfg.path(cfg.console.users_file)


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("password: ")
    if first != getpass.getpass("again: "):
        raise users.UsersError("the two passwords differ")
    return first


def _add(args: argparse.Namespace) -> int:
    path = _path(args)
    try:
        users.check_name(args.name)
        user = users.add(path, args.name, _read_password(args), args.role, replace=args.replace)
    except users.UsersError as exc:
        return fail(str(exc))
    print(f"{user.name} ({user.role}) added to {path}")
    return 0


def _passwd(args: argparse.Namespace) -> int:
    path = _path(args)
    try:
        existing = users.load(path)
        if args.name not in existing:
            return fail(f"no user {args.name!r} in {path}")
        users.add(path, args.name, _read_password(args), existing[args.name].role, replace=True)
    except users.UsersError as exc:
        return fail(str(exc))
    print(f"password of {args.name} changed in {path}")
    return 0


def _remove(args: argparse.Namespace) -> int:
    path = _path(args)
    try:
        removed = users.remove(path, args.name)
    except users.UsersError as exc:
        return fail(str(exc))
    if not removed:
        return fail(f"no user {args.name!r} in {path}")
    print(f"{args.name} removed from {path}")
    return 0


def _list(args: argparse.Namespace) -> int:
    path = _path(args)
    try:
        for u in sorted(users.load(path).values(), key=lambda u: u.name):
            print(f"{u.name}\t{u.role}")
    except users.UsersError as exc:
        return fail(str(exc))
    return 0


def _unlock(args: argparse.Namespace) -> int:
    """The throttle and the sessions live in the config's store (not in the users file)."""
    from datetime import UTC, datetime

    from queueops.store import open_engine, sessions

    cfg = load_config(args)
    store = open_engine(cfg)
    cleared = sessions.clear(store, f"user:{args.name}")
    print(f"{args.name}: " + ("failed sign-ins cleared" if cleared else "no failed sign-ins to clear"))
    if args.sign_out:
        n = sessions.end_user(store, args.name, "ended by queueops users unlock --sign-out", datetime.now(UTC))
        print(f"{args.name}: {n} console session(s) ended")
    return 0
