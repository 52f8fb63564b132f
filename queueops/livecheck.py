"""``config check --live``: do the configured tables and columns exist on the target?

Only catalog lookups run, with the table name bound as a value: a hostile name can at worst
fail to be found.
"""

from __future__ import annotations

from queueops import engine, sqlfiles
from queueops.config import Config, Queue
from queueops.identifiers import quote_table


def _tables_and_columns(q: Queue) -> list[tuple[str | None, str, list[tuple[str, str]]]]:
    cols = [(f, getattr(q, f)) for f in ("key", "enqueued_at", "status_column", "status_changed_at",
                                         "lease_column", "error_column", "attempts_column", "due_column",
                                         "refcount_column") if getattr(q, f)]
    out: list[tuple[str | None, str, list[tuple[str, str]]]] = [(q.schema_, q.table, cols)]
    if q.sequence_table:
        out.append((q.schema_, q.sequence_table, [("push_column", q.push_column or ""),
                                                  ("pop_column", q.pop_column or "")]))
    if q.data_table:
        out.append((q.schema_, q.data_table, []))
    if q.watermark:
        out.append((q.watermark.schema_ or q.schema_, q.watermark.table, [("watermark.column", q.watermark.column)]))
    return out


def check_live(cfg: Config) -> list[str]:
    """Return one message per missing table or column (or unreachable target)."""
    problems: list[str] = []
    for target in cfg.targets:
        try:
            conn = engine.connect(target, "check", cfg.base_dir)
        except engine.TargetError as exc:
            problems.append(f"{cfg.source}: target {target.name!r}: cannot connect: {exc}")
            continue
        sqlf = sqlfiles.load(target.dialect, "catalog_columns")
        try:
            for q in cfg.queues_of(target.name):
                for schema, table, cols in _tables_and_columns(q):
                    name = quote_table(schema, table, target.dialect)
                    found = {r["column_name"] for r in conn.execute(sqlf.render(values={"qualified_table": name}))}
                    if not found:
                        problems.append(f"{cfg.source}: queue {q.name!r}: table {name} does not exist on "
                                        f"target {target.name!r}")
                        continue
                    for field, col in cols:
                        if col not in found:
                            problems.append(f"{cfg.source}: queue {q.name!r}: {field} = {col!r}: no such column "
                                            f"in {name}")
        finally:
            conn.close()
    return problems
