"""The one place where the pipeline creates its SparkSession.

Everything that makes Spark behave on a laptop, a CI box or a cluster is decided here, once:

* **local mode by default** (``local[*]``), **or whatever ``spark-submit`` chose**: when the job
  runs under ``spark-submit`` the master, memory and jars come from the command line and this
  module does not override them;
* **loopback only in local mode**, and with a standalone master on this machine's loopback
  (``spark://127.0.0.1:7077``, :func:`loopback_master`: its workers are on this machine too):
  ``SPARK_LOCAL_IP``, driver host and bind address 127.0.0.1, so Spark neither reverse-resolves
  the machine's name nor listens on every interface; any other master gets no loopback binding
  (its executors must reach the driver);
* **no web UI**, our own progress bar instead of the console one (:mod:`pipeline.progress`);
* **quiet logs**: ``pipeline/log4j2.properties`` (level error) is handed to the driver JVM;
* **UTC** session time zone, **TIMESTAMP_MICROS** Parquet output (INT96 comes back to pandas as
  naive nanoseconds), few shuffle partitions, dynamic partition overwrite (an incremental run
  replaces only the partitions it recomputed);
* **bounded driver memory** (1 GB by default): the pipeline streams the lake through it;
* **a light JVM for small runs** (``small=True``: the hourly incremental run reads two lake
  hours): the client compiler only and the serial collector, no adaptive query execution, and
  lake files split into pieces of :data:`SMALL_RUN_SPLIT_BYTES` (the exporter writes 50,000-row
  row groups) so that one hour's rows are aggregated on every core, not in one task. Most of such
  a run's CPU was the JIT's optimizing compiler and the parallel collector warming up for work
  that never comes, and AQE's one job per shuffle stage (docs/benchmarks.md); a large run keeps
  the optimizing compiler, whose code it needs, and AQE, with the throughput collector
  (``-XX:+UseParallelGC``) instead of G1. The CLI also maps a class-data-sharing
  archive into a small run's JVM (``jvm_options``, see :mod:`pipeline.classcache`);
* **no ``--packages`` and no Maven**: only the jars inside the pyspark wheel are ever used.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG4J = Path(__file__).resolve().parent / "log4j2.properties"
DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "1g"
DEFAULT_SHUFFLE_PARTITIONS = 4
# Groups an object aggregation holds in a hash map per task before it sorts (see session_conf).
OBJECT_AGG_GROUPS = 32_768
# JVM options of a small run's driver (local launch only): C1 only (no C2 compilations, which cost
# more CPU than they save in a run of seconds) and the serial collector (no GC worker threads).
SMALL_RUN_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# JVM options of a larger run's driver (local launch only): the throughput collector instead of G1.
# A batch job has no pauses to keep short, and G1's barriers and concurrent threads cost CPU on
# every allocation-heavy task: on 10M rows the job and Spark's floor alike were ~13 % faster
# (docs/benchmarks.md), in the same bounded heap.
LARGE_RUN_JVM_OPTIONS = "-XX:+UseParallelGC"
# A small run's largest file split: an hour of 100 queues is about 2 MB in five row groups.
SMALL_RUN_SPLIT_BYTES = 512 * 1024


def under_spark_submit() -> bool:
    """True when ``spark-submit`` launched this Python process (it then owns the JVM and its conf)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def launches_local_jvm(master: str | None) -> bool:
    """Whether :func:`get_session` with this master starts a local-mode driver JVM itself (not
    ``spark-submit``): only then do the JVM options of this module apply."""
    if under_spark_submit():
        return False
    return (master or DEFAULT_MASTER).startswith("local")


_LOOPBACK_HOSTS = {"localhost", "::1"}


def loopback_master(master: str | None) -> bool:
    """Whether ``master`` is a standalone master (``spark://host:port[,host:port]``) whose every
    host is this machine's loopback: its workers, hence the executors, run on this machine."""
    if not master or not master.startswith("spark://"):
        return False
    hosts = [urlsplit(f"//{hp.strip()}").hostname for hp in master.removeprefix("spark://").split(",")]
    return all(h and (h in _LOOPBACK_HOSTS or h.startswith("127.")) for h in hosts)


def session_conf(*, local: bool = True, launch: bool = True, driver_memory: str = DEFAULT_DRIVER_MEMORY,
                 shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS, small: bool = False,
                 jvm_options: str = "", extra: dict[str, str] | None = None,
                 loopback: bool | None = None) -> dict[str, str]:
    """The Spark settings of the pipeline (a plain dict, so it can be tested and documented).

    ``launch``: this process starts the driver JVM (not ``spark-submit``), so driver memory and
    the log4j file apply; ``local``: local mode; ``loopback`` (default: ``local``): the driver binds
    to loopback only (local mode, or a :func:`loopback_master`); ``small``: the
    run reads a few lake hours, so a launched local JVM gets :data:`SMALL_RUN_JVM_OPTIONS` and
    adaptive execution is off (a larger run's gets :data:`LARGE_RUN_JVM_OPTIONS`); ``jvm_options``:
    more options for a launched local JVM (the class-data-sharing archive).
    """
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(int(shuffle_partitions)),
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.adaptive.enabled": "true",
        # The 5-minute aggregation keeps each window's values (a list: an object aggregate). Past
        # this many groups a task stops hashing and sorts its remaining rows by group instead, which
        # cost 8-11 s of the rollups step's 38-45 s of task CPU at 10M rows (docs/benchmarks.md) at
        # Spark's default of 128. Two hours per task (rollups.hour_tasks) are 24,000 groups for 1,000
        # series; the cap keeps a task's resident buffers (each group's values, as objects) bounded
        # when its hours hold more series than that: it then sorts, as before.
        "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": str(OBJECT_AGG_GROUPS),
        # Partition values in gold paths are written zero-padded (hour=05): keep them strings.
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    }
    if launch:
        conf.update({
            "spark.driver.memory": driver_memory,
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}"
                                             + (f" {SMALL_RUN_JVM_OPTIONS if small else LARGE_RUN_JVM_OPTIONS}"
                                                if local else "")
                                             + (f" {jvm_options}" if jvm_options and local else ""),
        })
    if local if loopback is None else loopback:
        conf.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    if local:
        # The driver lists the gold partitions it reads itself: above 32 paths Spark would start a
        # listing job (one task per folder), seconds for a day of hours.
        conf["spark.sql.sources.parallelPartitionDiscovery.threshold"] = "100000"
    if small:
        # Adaptive execution re-plans after every shuffle, one Spark job per stage: for a few hours
        # of rows there is nothing to coalesce or split, only that fixed cost (35 jobs instead of 7).
        conf["spark.sql.adaptive.enabled"] = "false"
        conf["spark.sql.files.maxPartitionBytes"] = str(SMALL_RUN_SPLIT_BYTES)
    conf.update(extra or {})
    return conf


def get_session(master: str | None = None, *, app_name: str = "queueops-pipeline",
                driver_memory: str = DEFAULT_DRIVER_MEMORY,
                shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS, small: bool = False,
                jvm_options: str = "", extra: dict[str, str] | None = None) -> SparkSession:
    """Create (or return the active) SparkSession configured for the pipeline.

    ``master=None`` means: whatever ``spark-submit`` was given, else ``local[*]``. ``small``: see
    :func:`session_conf` (only applies when this call starts the JVM), as ``jvm_options``.
    """
    from pyspark.sql import SparkSession

    submitted = under_spark_submit()
    if master is None and not submitted:
        master = DEFAULT_MASTER
    loopback = not submitted and master is not None and (master.startswith("local") or loopback_master(master))
    if loopback:
        # Must be in the environment before the JVM starts: Spark reads it at launch. A loopback
        # master's executors run on this machine, so they can run this Python too.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Under spark-submit the JVM already runs with the launcher's master, memory, host and JVM
    # options: only session-level settings are added then.
    local = launches_local_jvm(master)
    conf = session_conf(local=local, launch=not submitted, driver_memory=driver_memory,
                        shuffle_partitions=shuffle_partitions, small=small, jvm_options=jvm_options, extra=extra,
                        loopback=loopback)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():
        # pyspark warns about pandas 3 support at import/start; it is noise for our use.
        warnings.simplefilter("ignore", FutureWarning)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
