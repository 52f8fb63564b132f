"""Which collectors exist, their cadence, and what they apply to (from the metric catalog).

A collector is one SQL file per dialect, ``sql/<dialect>/<name>.sql``, and a ``[collectors.<name>]``
table in ``sql/metrics.toml``; ``Collector.name`` is the file name. ``cadence`` is ``fast``
(cheap: index seeks, bounded counts, statistics and lock views; every few seconds) or ``slow``
(reads pages: ghosts, fragmentation; minutes). The scheduler reads it from here.

``scope`` is ``queue`` (a block per queue kind, all queues of a target joined into one statement
with UNION ALL, or one ``all`` block that takes every queue of the target as bound lists) or
``target`` (one statement per target: root causes, server counters; rows have ``queue = ''``).

``metrics`` lists what the collector may emit (kind- and dialect-dependent; see docs/metrics.md):
the metric catalog's entries that name the collector (``sql/metrics.toml``, :mod:`queueops.catalog`).
Metrics of kind ``counter`` are running totals stored raw; :mod:`collectors.counters` turns them
into ``*_per_s`` rates by delta.
"""

from __future__ import annotations

from queueops import catalog

# A collector is the catalog's entry (sql/metrics.toml, ``[collectors.<name>]``) with the metrics
# whose entries name it. A new collector is a SQL file per dialect and catalog entries.
Collector = catalog.CollectorEntry
COLLECTORS: tuple[Collector, ...] = tuple(catalog.collectors().values())

FAST: tuple[Collector, ...] = tuple(c for c in COLLECTORS if c.cadence == "fast")
SLOW: tuple[Collector, ...] = tuple(c for c in COLLECTORS if c.cadence == "slow")


def by_name(name: str) -> Collector:
    for c in COLLECTORS:
        if c.name == name:
            return c
    known = ", ".join(c.name for c in COLLECTORS)
    raise KeyError(f"unknown collector {name!r} (known: {known})")


def by_cadence(cadence: str) -> tuple[Collector, ...]:
    """The collectors the scheduler runs on the ``fast`` or ``slow`` interval."""
    if cadence not in ("fast", "slow"):
        raise ValueError(f"cadence must be 'fast' or 'slow', not {cadence!r}")
    return FAST if cadence == "fast" else SLOW
