"""The console's local users file: names, roles and scrypt password hashes, in TOML.

Used when Streamlit's OIDC sign-in is not configured. Passwords are never stored: each user has
a random 16-byte salt and ``hashlib.scrypt(password, salt, n, r, p)``; the cost parameters are
stored per user so they can be raised later without invalidating old entries. Verification is
constant-time, and an unknown name costs the same scrypt as a known one (no user enumeration by
timing).

New hashes use N = 2^17, r = 8, p = 1 (OWASP's scrypt minimum; ~0.37 s and 128 MiB of memory per
hash on the 2-core test machine). An entry of a lower cost (files written before, N = 2^14) is
rehashed at the new cost by the console on the user's next successful sign-in (:func:`rehash`:
the file is rewritten atomically, 0600). Tests that create many users pass a lower ``n``.

:func:`fingerprint` is what a console session remembers of its user (a digest of the hash and the
role): a changed password or role, or a removed user, no longer matches it.

File shape::

    [users.alice]
    role = "operator"
    salt = "9f2c..."          # hex
    hash = "51be..."          # hex, scrypt output
    n = 131072
    r = 8
    p = 1
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Role = Literal["viewer", "operator"]
ROLES: tuple[Role, ...] = ("viewer", "operator")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")
N, R, P, DKLEN = 2 ** 17, 8, 1, 32
MIN_PASSWORD = 8

# The demo's documented accounts (README "Console"): created only in a lab's state folder.
DEMO_USERS: tuple[tuple[str, str, Role], ...] = (
    ("operator", "queueops-operator", "operator"),
    ("viewer", "queueops-viewer", "viewer"),
)


class UsersError(ValueError):
    """The users file is missing, unreadable or malformed; the message names file and field."""


@dataclass(frozen=True)
class User:
    name: str
    role: Role
    salt: bytes
    hash: bytes
    n: int = N
    r: int = R
    p: int = P


def hash_password(password: str, salt: bytes, n: int = N, r: int = R, p: int = P) -> bytes:
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=DKLEN,
                          maxmem=256 * r * n + 1024 * 1024)


def make_user(name: str, password: str, role: str, *, n: int = N) -> User:
    """A new entry; ``n`` (scrypt's cost) below :data:`N` only for tests that create many users."""
    check_name(name)
    if role not in ROLES:
        raise UsersError(f"role {role!r} is not one of {', '.join(ROLES)}")
    if len(password) < MIN_PASSWORD:
        raise UsersError(f"password too short: at least {MIN_PASSWORD} characters")
    salt = os.urandom(16)
    return User(name, role, salt, hash_password(password, salt, n), n)  # type: ignore[arg-type]


def needs_rehash(user: User) -> bool:
    """The entry's hash is cheaper than what new hashes cost now (a dearer one is kept)."""
    return user.n < N or user.r < R


def fingerprint(user: User) -> str:
    """A digest of the entry's hash, cost and role: what a session keeps to notice a changed
    password, a changed role or a removed user. Reveals nothing the hash would not."""
    body = b"|".join([b"queueops-session-v1", user.name.encode(), user.role.encode(), user.salt, user.hash,
                      str((user.n, user.r, user.p)).encode()])
    return hashlib.sha256(body).hexdigest()


def check_name(name: str) -> None:
    if not NAME.fullmatch(name):
        raise UsersError(f"user name {name!r} must be 1-64 characters of letters, digits, '.', '_', '@', '-'")


_DUMMY_SALT = b"queueops-dummy-s"


def verify(users: dict[str, User], name: str, password: str) -> User | None:
    """The user when ``password`` matches, else ``None``; same cost whether the name exists or not."""
    user = users.get(name)
    if user is None:
        hash_password(password, _DUMMY_SALT)
        return None
    got = hash_password(password, user.salt, user.n, user.r, user.p)
    return user if hmac.compare_digest(got, user.hash) else None


def load(path: str | os.PathLike[str]) -> dict[str, User]:
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsersError(f"{p}: users file not found; create a user with "
                         f"'queueops users add NAME --role operator --file {p}'") from None
    except OSError as exc:
        raise UsersError(f"{p}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsersError(f"{p}: not valid TOML: {exc}") from None
    table = raw.get("users", {})
    if not isinstance(table, dict):
        raise UsersError(f"{p}: users must be a table ([users.NAME])")
    out: dict[str, User] = {}
    for name, entry in table.items():
        where = f"{p}: users.{name}"
        try:
            check_name(name)
            if not isinstance(entry, dict):
                raise UsersError("must be a table")
            role = entry.get("role")
            if role not in ROLES:
                raise UsersError(f"role = {role!r}: must be one of {', '.join(ROLES)}")
            user = User(name, role, bytes.fromhex(str(entry["salt"])), bytes.fromhex(str(entry["hash"])),
                        int(entry.get("n", N)), int(entry.get("r", R)), int(entry.get("p", P)))
        except KeyError as exc:
            raise UsersError(f"{where}.{exc.args[0]}: is required") from None
        except (ValueError, TypeError) as exc:
            raise UsersError(f"{where}: {exc}") from None
        out[name] = user
    return out


def dump(users: dict[str, User]) -> str:
    lines = ["# queueops console users: scrypt hashes, never passwords. Edit with 'queueops users'.", ""]
    for name in sorted(users):
        u = users[name]
        check_name(name)
        lines += [f'[users."{name}"]', f'role = "{u.role}"', f'salt = "{u.salt.hex()}"',
                  f'hash = "{u.hash.hex()}"', f"n = {u.n}", f"r = {u.r}", f"p = {u.p}", ""]
    return "\n".join(lines)


def save(path: str | os.PathLike[str], users: dict[str, User]) -> None:
    """Write atomically (temp file + rename), readable by its owner only."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".users-", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(dump(users))
        os.chmod(tmp, 0o600)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_or_empty(path: str | os.PathLike[str]) -> dict[str, User]:
    return load(path) if Path(path).exists() else {}


def add(path: str | os.PathLike[str], name: str, password: str, role: str, *, replace: bool = False,
        n: int = N) -> User:
    users = load_or_empty(path)
    if name in users and not replace:
        raise UsersError(f"user {name!r} already exists in {path}; use 'queueops users passwd' or --replace")
    user = make_user(name, password, role, n=n)
    users[name] = user
    save(path, users)
    return user


def rehash(path: str | os.PathLike[str], user: User, password: str) -> User:
    """Replace ``user``'s entry (just verified with ``password``) by one at today's cost.

    The file is read again and rewritten only if the entry is still the one verified (an edit made
    meanwhile -- a new password, another role, a removal -- wins); written atomically, 0600.
    Returns the entry now in the file (``user`` itself when nothing was rewritten).
    """
    if not needs_rehash(user):
        return user
    table = load(path)
    if table.get(user.name) != user:
        return user
    salt = os.urandom(16)
    new = User(user.name, user.role, salt, hash_password(password, salt))
    table[user.name] = new
    save(path, table)
    return new


def remove(path: str | os.PathLike[str], name: str) -> bool:
    users = load(path)
    if users.pop(name, None) is None:
        return False
    save(path, users)
    return True


def ensure_demo_users(path: str | os.PathLike[str]) -> bool:
    """Create the demo's documented accounts when the file does not exist yet (never overwrites)."""
    p = Path(path)
    if p.exists():
        return False
    save(p, {name: make_user(name, pw, role) for name, pw, role in DEMO_USERS})
    return True

