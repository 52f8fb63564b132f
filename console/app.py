"""queueops console: the Streamlit entry point (sign-in, navigation, then the chosen page).

Run with ``queueops serve`` (or ``streamlit run console/app.py`` with ``QUEUEOPS_CONFIG`` set).
Pages live in :mod:`console.views`; data access in :mod:`console.data`; judgement in
:mod:`console.health` and :mod:`console.findings` (pure functions); the plotly style in
:mod:`console.style`.
"""

from __future__ import annotations

import sys
from pathlib import Path

# `streamlit run console/app.py` puts console/ on sys.path, not the project: make `console.*` importable.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402

from console import auth, context, nav  # noqa: E402
from console.views import alerts, audit, overview, queue_detail, settings, trends  # noqa: E402

st.set_page_config(page_title="queueops", page_icon=":material/monitor_heart:", layout="wide")
# Less empty space under the top navigation: more queues above the fold.
st.html("<style>[data-testid='stMainBlockContainer']{padding-top:3.6rem;padding-bottom:2rem}</style>")


def main() -> None:
    cfg = context.load_config()
    auth.gate(cfg)
    pages = nav.build({"overview": overview.render, "queue": queue_detail.render, "alerts": alerts.render,
                       "audit": audit.render, "trends": trends.render, "settings": settings.render})
    st.navigation(pages, position="top").run()


main()
