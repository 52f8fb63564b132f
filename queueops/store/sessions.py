"""The console's sign-in state in the store: server-side sessions, the sign-in throttle, the sign-in log.

Sessions (``console_sessions``). A successful sign-in creates a random 256-bit id; the browser
gets it in an HttpOnly cookie (:mod:`console.signin`), the store keeps only its SHA-256, the user,
a fingerprint of the user's entry (:func:`queueops.users.fingerprint`), the creation time, the
last time it was seen and an absolute expiry. A session is valid while it has not been ended
(sign-out), has been seen within :data:`IDLE_S` and is younger than :data:`ABSOLUTE_S`. The
caller compares the fingerprint with the users file: a changed password or role, or a removed
user, ends it.

Throttle (``signin_throttle``). Failed sign-ins are counted per key -- ``user:NAME`` and
``addr:ADDRESS`` -- in the store, so neither a reload, a new browser nor a console restart
resets them. Past a key's free failures each further failure locks the key for twice as long as
the previous one (1 s, 2 s, 4 s, ... up to :data:`MAX_LOCK_S`); while either key is locked a
sign-in is refused without checking the password. A success clears the user's key; the address
key is left to decay (a valid account must not wipe the count of guesses made from that address
at other names). A key's count is forgotten after :data:`FORGET_S` without a failure.

Log (``signin_log``). Every attempt -- ``ok``, ``failed`` (unknown user or wrong password: the
log does not say which), ``locked`` (refused by the throttle) -- and every ``signed-out``, with
the user name as typed (only when it is a well-formed name) and the client address; read with
the audit log (``queueops audit --sign-ins``, the console's Audit page).

Only the console writes these tables; nothing here imports Streamlit.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, delete, insert, or_, select, update

from queueops.store.schema import console_sessions, signin_log, signin_throttle
from queueops.store.timeutil import to_utc
from queueops.users import NAME

IDLE_S = 30 * 60          # a session not seen for 30 min is over
ABSOLUTE_S = 12 * 3600    # and none lasts more than 12 h, seen or not
TOUCH_S = 60              # last_seen is written at most once a minute per session
FREE_FAILURES = {"user": 3, "addr": 10}  # failures before the first lock, per kind of key
MAX_LOCK_S = 15 * 60
FORGET_S = 3600
OUTCOMES = ("ok", "failed", "locked", "signed-out")


# ---------------------------------------------------------------------------------------------
# Sessions


@dataclass(frozen=True)
class Session:
    id_hash: str
    user_name: str
    method: str
    fingerprint: str
    address: str
    created_at: datetime
    last_seen: datetime
    expires_at: datetime
    ended_at: datetime | None
    end_reason: str

    def problem(self, now: datetime, idle_s: float = IDLE_S) -> str | None:
        """Why this session can no longer be used (``None`` while it can)."""
        if self.ended_at is not None:
            return f"ended ({self.end_reason or 'signed out'})"
        if now >= self.expires_at:
            return "expired"
        if (now - self.last_seen).total_seconds() > idle_s:
            return "idle"
        return None


def hash_id(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()


def create(engine: Engine, user_name: str, fingerprint: str, now: datetime, *, method: str = "local",
           address: str = "", absolute_s: float = ABSOLUTE_S) -> str:
    """A new session; returns its id (the cookie's value), which the store never holds."""
    session_id = secrets.token_urlsafe(32)
    with engine.begin() as conn:
        conn.execute(insert(console_sessions).values(
            id_hash=hash_id(session_id), user_name=user_name, method=method, fingerprint=fingerprint,
            address=address[:64], created_at=now, last_seen=now, expires_at=now + timedelta(seconds=absolute_s),
            ended_at=None, end_reason=""))
    return session_id


def _session(row: Any) -> Session:
    m = row._mapping
    return Session(m["id_hash"], m["user_name"], m["method"], m["fingerprint"], m["address"],
                   to_utc(m["created_at"]), to_utc(m["last_seen"]), to_utc(m["expires_at"]),
                   to_utc(m["ended_at"]) if m["ended_at"] is not None else None, m["end_reason"])


def get(engine: Engine, session_id: str | None) -> Session | None:
    """The session a cookie value names, whatever its state; ``None`` for an unknown value."""
    if not session_id or len(session_id) > 256:
        return None
    with engine.connect() as conn:
        row = conn.execute(select(console_sessions).where(console_sessions.c.id_hash == hash_id(session_id))).first()
    return _session(row) if row is not None else None


def touch(engine: Engine, session: Session, now: datetime) -> None:
    """Record that the session was used now (written at most every :data:`TOUCH_S`)."""
    if (now - session.last_seen).total_seconds() < TOUCH_S:
        return
    with engine.begin() as conn:
        conn.execute(update(console_sessions).where(and_(console_sessions.c.id_hash == session.id_hash,
                                                         console_sessions.c.ended_at.is_(None)))
                     .values(last_seen=now))


def end(engine: Engine, session_id: str | None, reason: str, now: datetime) -> Session | None:
    """End one session (sign-out, or found invalid); returns it as it was, if it existed and was open."""
    session = get(engine, session_id)
    if session is None or session.ended_at is not None:
        return None
    with engine.begin() as conn:
        conn.execute(update(console_sessions).where(and_(console_sessions.c.id_hash == session.id_hash,
                                                         console_sessions.c.ended_at.is_(None)))
                     .values(ended_at=now, end_reason=reason[:64]))
    return session


def end_user(engine: Engine, user_name: str, reason: str, now: datetime) -> int:
    """End every open session of a user; returns how many."""
    with engine.begin() as conn:
        return int(conn.execute(update(console_sessions).where(and_(
            console_sessions.c.user_name == user_name, console_sessions.c.ended_at.is_(None)))
            .values(ended_at=now, end_reason=reason[:64])).rowcount or 0)


def refingerprint(engine: Engine, user_name: str, old: str, new: str) -> None:
    """The user's entry was rehashed at a higher cost (same password, same role): their open
    sessions stay valid."""
    with engine.begin() as conn:
        conn.execute(update(console_sessions).where(and_(
            console_sessions.c.user_name == user_name, console_sessions.c.fingerprint == old,
            console_sessions.c.ended_at.is_(None))).values(fingerprint=new))


def prune(engine: Engine, now: datetime, keep_s: float = 7 * 86400) -> None:
    """Forget sessions over for ``keep_s`` and throttle keys with nothing left to hold."""
    old = now - timedelta(seconds=keep_s)
    with engine.begin() as conn:
        conn.execute(delete(console_sessions).where(or_(console_sessions.c.expires_at < old,
                                                        console_sessions.c.ended_at < old)))
        conn.execute(delete(signin_throttle).where(and_(
            signin_throttle.c.locked_until < now,
            signin_throttle.c.last_failure < now - timedelta(seconds=FORGET_S))))


# ---------------------------------------------------------------------------------------------
# Throttle


def throttle_keys(user_name: str, address: str) -> list[str]:
    """``user:NAME`` and ``addr:ADDRESS``; a typed name that is no valid user name is throttled all
    the same, under a digest of it (the store keeps no text an attacker chose)."""
    user = user_name if NAME.fullmatch(user_name) else "#" + hashlib.sha256(user_name.encode("utf-8", "replace")
                                                                            ).hexdigest()[:32]
    return [f"user:{user}", f"addr:{address[:64]}"]


def lock_s(kind: str, failures: int) -> float:
    """How long a key of ``kind`` stays locked after its ``failures``-th failure."""
    free = FREE_FAILURES.get(kind, FREE_FAILURES["user"])
    if failures <= free:
        return 0.0
    return float(min(MAX_LOCK_S, 2 ** min(failures - free - 1, 30)))


def locked_for(engine: Engine, keys: list[str], now: datetime) -> float:
    """Seconds until every one of ``keys`` is unlocked (0 when none is locked)."""
    with engine.connect() as conn:
        rows = conn.execute(select(signin_throttle.c.locked_until).where(signin_throttle.c.key.in_(keys))).all()
    return max([0.0] + [(to_utc(r[0]) - now).total_seconds() for r in rows])


def failures(engine: Engine, key: str, now: datetime) -> int:
    with engine.connect() as conn:
        row = conn.execute(select(signin_throttle.c.failures, signin_throttle.c.last_failure)
                           .where(signin_throttle.c.key == key)).first()
    if row is None or (now - to_utc(row[1])).total_seconds() > FORGET_S:
        return 0
    return int(row[0])


def record_failure(engine: Engine, keys: list[str], now: datetime) -> float:
    """Count one failure against each key; returns the longest lock it starts (seconds)."""
    longest = 0.0
    with engine.begin() as conn:
        for key in keys:
            row = conn.execute(select(signin_throttle.c.failures, signin_throttle.c.last_failure)
                               .where(signin_throttle.c.key == key)).first()
            count = 1 if row is None or (now - to_utc(row[1])).total_seconds() > FORGET_S else int(row[0]) + 1
            wait = lock_s(key.split(":", 1)[0], count)
            values = {"failures": count, "last_failure": now, "locked_until": now + timedelta(seconds=wait)}
            if row is None:
                conn.execute(insert(signin_throttle).values(key=key, **values))
            else:
                conn.execute(update(signin_throttle).where(signin_throttle.c.key == key).values(**values))
            longest = max(longest, wait)
    return longest


def clear(engine: Engine, key: str) -> bool:
    """Forget a key's failures (a successful sign-in, or ``queueops users unlock``)."""
    with engine.begin() as conn:
        return bool(conn.execute(delete(signin_throttle).where(signin_throttle.c.key == key)).rowcount)


# ---------------------------------------------------------------------------------------------
# Log


def log(engine: Engine, now: datetime, user_name: str, address: str, outcome: str, detail: str = "") -> None:
    with engine.begin() as conn:
        conn.execute(insert(signin_log).values(ts=now, user_name=user_name[:256], address=address[:64],
                                               outcome=outcome, detail=detail[:1000]))


def read_log(engine: Engine, since: datetime | None = None, user: str | None = None,
             outcomes: list[str] | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """Sign-in log rows, newest first (timestamps UTC)."""
    stmt = select(signin_log).order_by(signin_log.c.ts.desc(), signin_log.c.id.desc()).limit(limit)
    if since is not None:
        stmt = stmt.where(signin_log.c.ts >= since)
    if user:
        stmt = stmt.where(signin_log.c.user_name == user)
    if outcomes:
        stmt = stmt.where(signin_log.c.outcome.in_(outcomes))
    with engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(stmt)]
    for r in rows:
        r["ts"] = to_utc(r["ts"])
    return rows
