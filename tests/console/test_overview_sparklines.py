"""The Overview's sparklines, bucketed by the store, are the values the page drew before.

The Overview used to read every sample of the last hour (``Store.history``) and bucket them in
pandas (``sparkline_series`` below, kept as the reference); it now asks the store for a point per
queue and bucket (``console.data.sparklines``). On the same data, in both store dialects, the two must be equal: the bucket
width, every bucket's maximum, NULL values, other metrics and older rows left out, the console's
own live samples merged in.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

from console.data import Store, bucket_seconds, sparklines
from queueops import config as config_mod
from queueops.store import open_engine
from queueops.store.schema import snapshots
from queueops.store.writer import bulk_insert
from tests.conftest import Lab

NOW = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=7.25)
QUEUES = [("a", "q1"), ("a", "q2"), ("b", "q1")]


def sparkline_series(frames: list[pd.DataFrame], metric: str, since: datetime, bucket: str | None = None,
                     ) -> dict[tuple[str, str], list[float]]:
    """The reference: every raw sample read, bucketed in pandas (max per bucket), oldest first."""
    parts = [f for f in frames if not f.empty]
    if not parts:
        return {}
    df = pd.concat([f[["ts", "target", "queue", "metric", "value"]] for f in parts], ignore_index=True)
    df = df[(df["metric"] == metric) & (df["ts"] >= pd.Timestamp(since)) & df["value"].notna()]
    if df.empty:
        return {}
    if bucket is None:
        bucket = f"{bucket_seconds((df['ts'].max() - df['ts'].min()).total_seconds())}s"
    df = df.assign(bucket=df["ts"].dt.floor(bucket))
    g = df.groupby(["target", "queue", "bucket"], sort=True)["value"].max()
    return {key: [float(v) for v in series.to_numpy()] for key, series in g.groupby(level=[0, 1])}


def test_the_reference_buckets_per_minute_with_the_max() -> None:
    t0 = pd.Timestamp("2026-01-01T10:00:00Z")
    df = pd.DataFrame({"ts": [t0, t0 + pd.Timedelta(seconds=20), t0 + pd.Timedelta(seconds=70)],
                       "target": "t", "queue": "q", "metric": "depth", "value": [1.0, 5.0, 2.0]})
    assert sparkline_series([df], "depth", t0.to_pydatetime(), bucket="1min") == {("t", "q"): [5.0, 2.0]}
    # 70 s of history: 5 s buckets, every sample its own point
    assert sparkline_series([df], "depth", t0.to_pydatetime()) == {("t", "q"): [1.0, 5.0, 2.0]}


def _config(folder: Path, store_url: str) -> config_mod.Config:
    lines = [f'[store]\nurl = "{store_url}"\n']
    for t in ("a", "b"):
        lines.append(f'[[targets]]\nname = "{t}"\ndialect = "postgresql"\nurl = "postgresql://x@127.0.0.1:9/x"\n')
    for t, q in QUEUES:
        lines.append(f'[[queues]]\nname = "{q}{t}"\ntarget = "{t}"\nkind = "delete"\nschema = "s"\ntable = "{q}"\n'
                     'key = "id"\n')
    path = folder / "sparklines.toml"
    path.write_text("\n".join(lines))
    return config_mod.load(path)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    lab: Lab = request.getfixturevalue("lab")
    name = f"qo_spark_{uuid.uuid4().hex[:8]}"
    with lab.connect() as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:  # the lab's server, a database of its own
        yield lab.info.url().replace("@", f":{lab.password}@", 1).rsplit("/", 1)[0] + f"/{name}"
    finally:
        with lab.connect() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _seed(cfg: config_mod.Config, minutes: float, step_s: float) -> None:
    """``minutes`` of depth (and another metric) for every queue, every ``step_s`` seconds, at
    microsecond times, some NULL, plus rows older than the window."""
    rows = []
    start = NOW - timedelta(minutes=minutes)
    n = int(minutes * 60 / step_s)
    for i, (t, q) in enumerate(QUEUES):
        for k in range(-20, n):
            ts = start + timedelta(seconds=k * step_s, microseconds=1234 * (k % 7))
            value = None if k % 11 == 3 else float((k * 37 + i * 101) % 500)
            rows.append({"ts": ts, "target": t, "database": "d", "queue": f"{q}{t}", "metric": "depth",
                         "value": value, "note": ""})
            rows.append({"ts": ts, "target": t, "database": "d", "queue": f"{q}{t}", "metric": "oldest_age_s",
                         "value": 9999.0, "note": ""})
    engine = open_engine(cfg)
    with engine.begin() as conn:
        bulk_insert(conn, snapshots, rows)
    engine.dispose()


def _live(minutes: float) -> pd.DataFrame:
    """The console's own samples: every 5 s of the last ``minutes``, some above the stored values."""
    ts = [NOW - timedelta(seconds=5 * k + 0.5) for k in range(int(minutes * 12))]
    rows = [(t, tgt, f"{q}{tgt}", "depth", float(600 + k % 9) if k % 4 == 0 else 1.0)
            for k, t in enumerate(ts) for tgt, q in QUEUES[:2]]
    df = pd.DataFrame(rows, columns=["ts", "target", "queue", "metric", "value"])
    df["ts"] = pd.to_datetime(df["ts"], utc=True)
    return df


@pytest.mark.parametrize(("minutes", "step_s", "live_minutes"), [
    (90, 15, 10),    # more than the hour: minute buckets
    (20, 15, 3),     # 20 minutes of history: 20 s buckets
    (4, 5, 0),       # 4 minutes, store only: 5 s buckets
    (0, 15, 2),      # nothing stored yet: the console's own samples only
])
def test_store_bucketed_sparklines_equal_the_pandas_ones(tmp_path: Path, store_url: str, minutes: float,
                                                         step_s: float, live_minutes: float) -> None:
    cfg = _config(tmp_path, store_url)
    if minutes:
        _seed(cfg, minutes, step_s)
    else:
        open_engine(cfg).dispose()  # an empty store
    store = Store(cfg)
    since = NOW - timedelta(hours=1)
    live = [_live(live_minutes)] if live_minutes else []
    pairs = [(q.target, q.name) for q in cfg.queues]
    before = sparkline_series([store.history(["depth"], since, targets=["a", "b"]), *live], "depth", since)
    after = sparklines(store, live, "depth", since, pairs)
    assert store.error is None
    assert before and after == before
    store.engine.dispose()


def test_no_history_draws_no_sparkline(tmp_path: Path) -> None:
    cfg = _config(tmp_path, f"sqlite:///{tmp_path / 'store.db'}")
    open_engine(cfg).dispose()
    store = Store(cfg)
    since = NOW - timedelta(hours=1)
    assert sparklines(store, [], "depth", since, [(q.target, q.name) for q in cfg.queues]) == {}


def test_derived_values_are_made_once_per_key_and_bounded(tmp_path: Path) -> None:
    """The overview's cache: the same key (same sample, store row, console samples) gives the value
    made the first time, to every session; a new key makes it again; old keys are dropped."""
    from console.data import LiveSampler

    sampler = LiveSampler(_config(tmp_path, f"sqlite:///{tmp_path / 'store.db'}"))
    made: list[int] = []

    def make(n: int) -> list[int]:
        made.append(n)
        return [n]

    first = sampler.derived(("spark", 1), lambda: make(1))
    assert sampler.derived(("spark", 1), lambda: make(2)) is first and made == [1]
    assert sampler.derived(("spark", 2), lambda: make(3)) == [3] and made == [1, 3]
    for k in range(LiveSampler.DERIVED_ENTRIES):
        sampler.derived(("other", k), lambda: make(0))
    assert sampler.derived(("spark", 1), lambda: make(4)) == [4]  # dropped, made again
