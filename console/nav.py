"""The console's pages, in one place, so pages can link to each other (st.switch_page).

The pages' render functions are given by the entry point (console/app.py): this module imports no
view, so a view that links to another page (the Overview opening a queue) imports it without a
circle.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

# url_path -> (title, icon), in menu order; the first is the default page.
PAGES = {
    "overview": ("Overview", ":material/dashboard:"),
    "queue": ("Queue detail", ":material/stacked_line_chart:"),
    "alerts": ("Alerts", ":material/notifications:"),
    "audit": ("Audit", ":material/history:"),
    "trends": ("Trends", ":material/trending_up:"),
    "settings": ("Settings", ":material/settings:"),
}
_built: dict[str, st.Page] = {}


def build(renders: dict[str, Callable[[], None]]) -> list[st.Page]:
    """The pages in menu order, each drawn by ``renders[url_path]``; kept for :func:`open_queue`."""
    missing = sorted(set(PAGES) - set(renders))
    if missing:
        raise ValueError(f"no render function for the console page(s) {', '.join(missing)}")
    pages = [st.Page(renders[path], title=title, icon=icon, url_path=path, default=i == 0)
             for i, (path, (title, icon)) in enumerate(PAGES.items())]
    _built.update(zip(PAGES, pages, strict=True))
    return pages


def open_queue(name: str, **params: str) -> None:
    """The queue's page; ``end=PID`` opens that session's End session preview there."""
    page = _built.get("queue")
    if page is None:  # a page run on its own (AppTest of one view): there is no navigation to switch in
        raise RuntimeError("the console's pages are not built: the app (console/app.py) builds them")
    st.switch_page(page, query_params={"queue": name, **params})
