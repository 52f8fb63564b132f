"""How long ``queueops discover`` takes on a database of many tables: its catalogue read and its
judging, against the floor (the bare list of the same tables) and stop 44's tables read, side by
side in one run on one throw-away embedded PostgreSQL.

    python benchmarks/discover_catalog.py [--tables 1500] [--partitioned 50] [--repeat 3]

Builds ``--tables`` plain tables (a primary key and a text column, the shape of most application
tables) and ``--partitioned`` partitioned ones of two partitions each, then times, median of
``--repeat``:

- ``read_ms``: :func:`queueops.discovery.read_catalog` (every block of sql/postgresql/discover.sql,
  on discover's own reading session: lock and statement timeouts);
- ``judge_ms``: :func:`queueops.discovery.survey` of what was read (Python only);
- ``floor_ms``: one SELECT of the same tables' names and reltuples from pg_class (the least any
  discovery reads);
- ``before_tables_ms``: the tables block as it was before stop 45, which joined the activity view
  on ``relid = oid OR relid IN (children)``: quadratic in the tables. Run with
  ``--before-timeout-s`` (default 5, discover's default statement timeout): ``null`` and
  ``before_timed_out`` when it did not finish, which is what ``queueops discover`` then printed.

Prints one JSON object. Figures and what they mean are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg  # noqa: E402

from benchmarks.collect_cycle import throwaway_server  # noqa: E402
from queueops import config as config_mod  # noqa: E402
from queueops import discovery, engine, sqlfiles  # noqa: E402

FLOOR = """SELECT n.nspname, c.relname, c.reltuples FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname NOT IN ('pg_catalog', 'information_schema')"""

# The tables block as it was before stop 45 (2c57b6c) differed from today's in its join alone: kept
# here as that join, put back into today's block, only to be compared.
JOIN_NOW = """LEFT JOIN LATERAL unnest({{tree.relations(c.oid)}}) AS r (rel) ON true
LEFT JOIN pg_stat_user_tables AS s ON s.relid = r.rel"""
JOIN_BEFORE = """LEFT JOIN pg_stat_user_tables AS s
       ON s.relid = c.oid OR s.relid IN (SELECT i.inhrelid FROM pg_inherits AS i WHERE i.inhparent = c.oid)"""


def before_tables() -> str:
    """Today's tables block of sql/postgresql/discover.sql with stop 44's join."""
    text = (Path(__file__).resolve().parents[1] / "sql" / "postgresql" / "discover.sql").read_text()
    block = sqlfiles._split_blocks(text)["tables"]
    assert JOIN_NOW in block, "discover.sql's tables block changed: update JOIN_NOW"
    return sqlfiles.render(block.replace(JOIN_NOW, JOIN_BEFORE), "postgresql", {}, {}).sql


BUILD = """DO $$BEGIN
  FOR i IN 1..%(tables)s LOOP
    EXECUTE format('CREATE TABLE app.t%%s (id bigint PRIMARY KEY, note text)', i);
  END LOOP;
  FOR i IN 1..%(partitioned)s LOOP
    EXECUTE format('CREATE TABLE app.p%%s (id bigint NOT NULL, k int NOT NULL) PARTITION BY RANGE (k)', i);
    EXECUTE format('CREATE TABLE app.p%%s_a PARTITION OF app.p%%s FOR VALUES FROM (0) TO (10)', i, i);
    EXECUTE format('CREATE TABLE app.p%%s_b PARTITION OF app.p%%s FOR VALUES FROM (10) TO (20)', i, i);
  END LOOP;
END$$"""


def _median_ms(run: Any, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = run()
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 1), out


def bench(tables: int, partitioned: int, repeat: int, before_timeout_s: float) -> dict[str, Any]:
    with throwaway_server() as (url, password), tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        with psycopg.connect(url, password=password, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA app")
            conn.execute(BUILD % {"tables": int(tables), "partitioned": int(partitioned)})
            conn.execute("ANALYZE")
        build_s = time.perf_counter() - t0
        secret = Path(tmp) / "secret"
        secret.write_text(password)
        cfg = config_mod.parse({"targets": [{"name": "bench", "dialect": "postgresql", "url": url,
                                             "password": f"file:{secret}"}]})
        target = cfg.targets[0]
        with engine.connection(target, "collect", cfg.base_dir, application="queueops discover") as conn:
            read_ms, read = _median_ms(lambda: discovery.read_catalog(conn), repeat)
        judge_ms, found = _median_ms(lambda: discovery.survey(read, "postgresql"), repeat)
        with psycopg.connect(url, password=password, autocommit=True) as conn:
            floor_ms, floor_rows = _median_ms(lambda: conn.execute(FLOOR).fetchall(), repeat)
            conn.execute(f"SET statement_timeout = '{int(before_timeout_s * 1000)}ms'")
            try:
                before_ms, before_rows = _median_ms(lambda: conn.execute(before_tables()).fetchall(), 1)
                timed_out = False
            except psycopg.errors.QueryCanceled:
                before_ms, before_rows, timed_out = None, None, True
        assert len(read) == len(floor_rows) == tables + partitioned, (len(read), len(floor_rows))
        assert before_rows is None or len(before_rows) == len(read)
        return {"tables": tables, "partitioned": partitioned, "repeat": repeat, "build_s": round(build_s, 1),
                "tables_read": len(read), "proposed": sum(1 for f in found if f.proposed),
                "read_ms": read_ms, "judge_ms": judge_ms, "discover_ms": round(read_ms + judge_ms, 1),
                "floor_ms": floor_ms, "read_over_floor": round(read_ms / floor_ms, 1) if floor_ms else None,
                "before_tables_ms": before_ms, "before_timeout_s": before_timeout_s, "before_timed_out": timed_out,
                "load_average": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=1500, help="plain tables (default 1500)")
    ap.add_argument("--partitioned", type=int, default=50, help="partitioned tables of 2 partitions (default 50)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure, median (default 3)")
    ap.add_argument("--before-timeout-s", type=float, default=5.0,
                    help="statement timeout of the before-stop-45 tables read (default 5: discover's default)")
    args = ap.parse_args(argv)
    print(json.dumps(bench(args.tables, args.partitioned, args.repeat, args.before_timeout_s), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
