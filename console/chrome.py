"""The top of every page: its title, and who is signed in (with sign-out) on the right."""

from __future__ import annotations

import streamlit as st

from console import auth
from console.context import Ctx


def title(ctx: Ctx, text: str, caption: str | None = None) -> None:
    left, right = st.columns([5, 1.3], vertical_alignment="bottom")
    with left:
        st.title(text, anchor=False)
    with right:
        _identity(ctx.identity)
    if caption:
        st.caption(caption)


def _identity(ident: auth.Identity) -> None:
    role = "can act" if ident.can_act else "read-only"
    if ident.method == "anonymous":
        st.caption(f":material/visibility: not signed in · {role}")
        return
    with st.popover(f"{ident.name} · {ident.role}", icon=":material/person:", width="stretch"):
        st.caption(f"Signed in with {'OIDC' if ident.method == 'oidc' else 'the local users file'}; {role}.")
        if st.button("Sign out", key="signout", icon=":material/logout:"):
            auth.sign_out()
            st.rerun()
