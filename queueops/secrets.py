"""Secret references and masking.

Config never holds a literal password in examples: a secret is written as ``env:NAME`` (read
from the environment) or ``file:PATH`` (read from a file, relative to the config file). Resolved
secrets are registered here so that :func:`mask` can scrub them from any text we log, show in
the UI, store in the audit log or export.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

_KNOWN_SECRETS: set[str] = set()
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@\s]*)@", re.I)
# A value that is an env:/file: reference names where the secret is, not the secret: it stays, so
# that the hint 'use password = "env:NAME"' survives the masking of the message that carries it.
_KV_PASSWORD = re.compile(r"(?P<key>\b(?:pwd|password)\s*=\s*)(?![\"']?(?:env|file):)(?P<pw>\{[^}]*\}|[^;\s]+)",
                          re.I)


class SecretError(ValueError):
    """A secret reference could not be resolved."""


def is_reference(value: str) -> bool:
    return value.startswith(("env:", "file:"))


def resolve(value: str, base_dir: Path | None = None) -> str:
    """Resolve an ``env:``/``file:`` reference (or return a literal unchanged) and remember it."""
    if value.startswith("env:"):
        name = value[4:]
        if name not in os.environ:
            raise SecretError(f"environment variable {name!r} is not set")
        secret = os.environ[name]
    elif value.startswith("file:"):
        path = file_path(value, base_dir)
        try:
            secret = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SecretError(f"cannot read secret file {str(path)!r}: {exc.strerror}") from None
    else:
        secret = value
        if "://" in value:
            # A literal URL is not a secret (its password, if any, is masked by _URL_PASSWORD);
            # remembering it would mask the URL itself and make the next config load fail.
            _remember_embedded(secret)
            return secret
    remember(secret)
    return secret


def file_path(value: str, base_dir: Path | None = None) -> Path:
    """The file a ``file:`` reference names: relative paths are relative to the config file's
    folder (``base_dir``), not to the current directory -- so a config copied elsewhere without
    its secret file points at a file that is not there, which :func:`check` reports."""
    path = Path(value.removeprefix("file:")).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return path.absolute()


def check(value: str, base_dir: Path | None = None) -> str | None:
    """Why the reference ``value`` cannot be resolved here, naming the resolved file; None if it can.

    Used by ``queueops config check`` without ``--live``: a secret that cannot be read is a
    config problem, found before anything tries to connect. The secret itself is not kept.
    """
    if value.startswith("env:"):
        name = value[4:]
        if not os.environ.get(name):
            return f"environment variable {name!r} is {'empty' if name in os.environ else 'not set'} here"
        return None
    if not value.startswith("file:"):
        return None
    path = file_path(value, base_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return f"cannot read secret file {str(path)!r}: {exc.strerror or exc}"
    except UnicodeDecodeError:
        return f"secret file {str(path)!r} is not UTF-8 text"
    if not text.strip():
        return f"secret file {str(path)!r} is empty"
    return None


def remember(secret: str) -> None:
    if secret and len(secret) >= 4:
        _KNOWN_SECRETS.add(secret)
    _remember_embedded(secret)


def _remember_embedded(text: str) -> None:
    """Remember the password inside a connection string on its own, as written and decoded.

    Drivers quote parts of a bad connection string without its scheme or user (libpq:
    ``invalid percent-encoded token: "<the password>"``), where neither the whole-URL secret nor
    the URL pattern of :func:`mask` would match.
    """
    for pattern in (_URL_PASSWORD, _KV_PASSWORD):
        for m in pattern.finditer(text):
            pw = m["pw"]
            if pw.startswith("{") and pw.endswith("}"):
                pw = pw[1:-1]
            for form in {pw, unquote(pw)}:
                if len(form) >= 4:
                    _KNOWN_SECRETS.add(form)


def has_literal_password(url: str) -> bool:
    """Whether a connection string itself carries a password (URL ``user:pw@`` or ``PWD=``).

    Pattern-only on purpose: the answer must not depend on which secrets this process has
    happened to resolve before (unlike :func:`mask`)."""
    return any(m["pw"] for pattern in (_URL_PASSWORD, _KV_PASSWORD) for m in pattern.finditer(url))


def mask(text: object) -> str:
    """Return ``text`` with passwords in URLs / ODBC strings and every known secret replaced."""
    out = str(text)
    out = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:***@", out)
    out = _KV_PASSWORD.sub(lambda m: f"{m['key']}***", out)
    for secret in sorted(_KNOWN_SECRETS, key=len, reverse=True):
        out = out.replace(secret, "***")
    return out
