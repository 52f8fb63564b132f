"""The console's pages, in one place, so pages can link to each other (st.switch_page)."""

from __future__ import annotations

import streamlit as st


def overview() -> st.Page:
    from console.views import overview as v

    return st.Page(v.render, title="Overview", icon=":material/dashboard:", url_path="overview", default=True)


def queue() -> st.Page:
    from console.views import queue_detail as v

    return st.Page(v.render, title="Queue detail", icon=":material/stacked_line_chart:", url_path="queue")


def audit() -> st.Page:
    from console.views import audit as v

    return st.Page(v.render, title="Audit", icon=":material/history:", url_path="audit")


def trends() -> st.Page:
    from console.views import trends as v

    return st.Page(v.render, title="Trends", icon=":material/trending_up:", url_path="trends")


def alerts() -> st.Page:
    from console.views import alerts as v

    return st.Page(v.render, title="Alerts", icon=":material/notifications:", url_path="alerts")


def settings() -> st.Page:
    from console.views import settings as v

    return st.Page(v.render, title="Settings", icon=":material/settings:", url_path="settings")


def all_pages() -> list[st.Page]:
    return [overview(), queue(), alerts(), audit(), trends(), settings()]


def open_queue(name: str, **params: str) -> None:
    """The queue's page; ``end=PID`` opens that session's End session preview there."""
    st.switch_page(queue(), query_params={"queue": name, **params})
