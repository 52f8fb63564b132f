"""What ``queueops serve`` runs: the console (app.py) on Streamlit's server, plus the sign-in routes.

``streamlit run console/server.py`` finds ``app`` below (an ``st.App``) and serves app.py through
it, with every ``--server.*`` flag as usual. The routes are :mod:`console.signin`'s: the local
sign-in page and the endpoint that sets the HttpOnly session cookie (a Streamlit script cannot
set one). Started as plain ``streamlit run console/app.py`` the console has no such route, and its
sign-in gate says to use ``queueops serve``.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402

from console import signin  # noqa: E402

signin.ROUTES_INSTALLED = True
app = st.App("app.py", routes=signin.routes())
