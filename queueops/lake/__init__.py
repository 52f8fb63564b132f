"""The Parquet lake: closed hours of the store, partitioned ``date=YYYY-MM-DD/hour=HH``.

:mod:`~queueops.lake.fs` resolves the lake path to a pyarrow filesystem and swaps a partition in
atomically; :mod:`~queueops.lake.export` decides which hours to write and writes them.
"""

from queueops.lake.export import ExportResult, export_hours, lake_for

__all__ = ["ExportResult", "export_hours", "lake_for"]
