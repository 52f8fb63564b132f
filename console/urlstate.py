"""A page's choices kept in the URL (``?window=6h``, ``?period=7d``): a link, a bookmark or a reload
shows what the sender saw. :func:`seed` sets a widget's value from the URL before the widget is
drawn (only when the session holds no value of its own yet); :func:`keep` writes it back."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st


def slug(option: str) -> str:
    """``"24 h"`` is ``24h`` in the URL."""
    return option.replace(" ", "")


def seed(key: str, param: str, options: Sequence[str], default: str) -> None:
    """``st.session_state[key]`` from ``?param=`` (by slug; an unknown value gives ``default``)."""
    if st.session_state.get(key) in options:
        return
    by_slug = {slug(o): o for o in options}
    st.session_state[key] = by_slug.get(str(st.query_params.get(param, "")), default)


def keep(param: str, option: str | None, default: str | None = None) -> None:
    """Write the choice to the URL (removed when it is the default and none was there)."""
    if option is None or (option == default and param not in st.query_params):
        return
    st.query_params[param] = slug(option)
