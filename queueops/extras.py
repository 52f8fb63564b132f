"""Optional parts of the install and the clear error when one is missing.

A collector-only install (``pip install queueops``) runs the service, the CLI, the actions and the
exporter; the console needs the ``console`` extra (Streamlit) and the Spark pipeline the
``pipeline`` extra (PySpark). A command that needs a missing extra stops with the pip command that
adds it instead of an ImportError from deep inside. ``make`` installs every extra.
"""

from __future__ import annotations

import importlib.util

# extra -> the distributions' import names it brings
EXTRAS: dict[str, tuple[str, ...]] = {
    "console": ("streamlit",),
    "pipeline": ("pyspark",),
}


class MissingExtra(RuntimeError):
    """A command needs an optional part that is not installed; the message says how to add it."""


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (found without importing them)."""
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def require(extra: str, what: str) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` is installed."""
    gone = missing(extra)
    if gone:
        raise MissingExtra(f"{what} needs the {extra!r} extra, which is not installed (missing: {', '.join(gone)}): "
                           f"pip install 'queueops[{extra}]'")
