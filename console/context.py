"""What every page needs: the config, the shared live sampler, the store, and who is signed in --
and the one way a page runs an action (:meth:`Ctx.execute`, with the role in force at that moment).

The config comes from :mod:`console.configfile` (one cache keyed by the file's path and modification
time, shared with the sign-in endpoint); the sampler and store are ``st.cache_resource`` objects
under the same key: every browser session shares one sampler (so the database sees one collection
per cache period however many dashboards are open), and editing the config reloads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from console import configfile
from console.auth import Identity, actor_now, after_action, current
from console.data import LiveSampler, Store
from queueops import actions, secrets
from queueops import config as config_mod


@dataclass
class Ctx:
    cfg: config_mod.Config
    sampler: LiveSampler
    store: Store
    identity: Identity
    tz: str | None

    @property
    def can_act(self) -> bool:
        return self.identity.can_act

    def execute(self, plan: actions.Plan, progress: actions.ProgressCallback | None = None) -> actions.Result:
        """Run a confirmed plan as the signed-in user, with the role read again now (the users
        file, or the config for OIDC users): a user demoted or removed since the page loaded is
        refused and audited with the role in force, and the page shows that role from then on."""
        actor = actor_now(self.cfg, self.identity)
        result = actions.execute(self.cfg, plan, actor=actor, progress=progress)
        after_action(self.identity, actor)
        return result


def config_path() -> Path:
    return configfile.config_path()


@st.cache_resource(show_spinner=False, max_entries=4)
def _resources(path: str, mtime: float, _cfg: config_mod.Config) -> tuple[LiveSampler, Store]:
    """The sampler and store of one version of the config file (``_cfg`` is that version, read
    through :mod:`console.configfile`; Streamlit keys the cache by path and mtime only)."""
    return LiveSampler(_cfg), Store(_cfg)


def _current() -> tuple[configfile.Key, config_mod.Config]:
    """The config, or an error on the page (file, field, value) and a stopped script."""
    try:
        return configfile.current()
    except config_mod.ConfigError as exc:
        st.error("The configuration cannot be loaded:\n\n" + "\n\n".join(
            f"`{secrets.mask(line)}`" for line in str(exc).splitlines()))
        st.stop()
        raise  # unreachable: st.stop() raises


def load_config() -> config_mod.Config:
    return _current()[1]


def get() -> Ctx:
    (path, mtime), cfg = _current()
    sampler, store = _resources(path, mtime, cfg)
    ident = current()
    if ident is None:  # pages are only reachable after the sign-in gate in app.py
        st.stop()
    tz = None
    try:
        tz = st.context.timezone
    except Exception:  # noqa: BLE001 - no browser (AppTest): UTC
        tz = None
    return Ctx(cfg, sampler, store, ident, tz)
