"""The pipeline on a real Spark standalone cluster, not only in local mode (issue 34, goal 2).

A master and two workers are started from the pyspark wheel's own jars (``bin/spark-class``, no
download), bound to 127.0.0.1 on free ports, each worker with 1 core and 512 MB so that the cluster
fits on a 2-core machine. ``queueops pipeline run --master spark://127.0.0.1:PORT`` then runs the
job there (the driver in the command's process, one executor JVM per worker), and its gold tables
are compared value by value with a local-mode run of the same lake (the gold reference lake, which
exercises every rule). The master and the workers (with their executors, in the same process
groups) are always stopped; their logs stay in the test's temporary folder and their tails are
printed when the test fails. docs/pipeline.md ("On a cluster") gives the same commands by hand.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import ROOT
from tests.pipeline import gold_reference as ref
from tests.pipeline.conftest import TABLES, table

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

WORKERS = 2
WORKER_CORES = 1
WORKER_MEMORY = "512m"  # the executor's heap is as large, so one executor fits a worker exactly
START_TIMEOUT_S = 180
RUN_TIMEOUT_S = 600
# Floats computed by sums may differ in their last bits with the order partial aggregates are
# merged in (forecasts' fits did, by one unit in the last place), and times computed from them by a
# microsecond; nothing else may differ.
REL_TOL = 1e-9
ABS_TOL = 1e-12


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on loopback (held together while chosen, so no duplicates)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


@dataclass
class Cluster:
    """A running standalone cluster: its master URL, processes and log files."""

    base: Path
    url: str = ""
    ui_port: int = 0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYSPARK_GATEWAY", "PYSPARK_SUBMIT", "SPARK_"))}
        (self.base / "conf").mkdir(exist_ok=True)  # no spark-defaults.conf from anywhere else
        env.update({
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(self.base / "conf"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(self.base / "local"),  # executors' shuffle and spill files
            "SPARK_DAEMON_MEMORY": "256m",  # the master's and workers' own heaps
            # No REST submission server (it would listen on 6066): the test submits as a client.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            # The executors inherit the workers' environment: this Python and the project, should
            # anything start a Python worker (the pipeline has no Python UDFs: it does not).
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        })
        return env

    def start(self, name: str, cls: str, *args: str) -> subprocess.Popen[bytes]:
        log = self.base / f"{name}.log"
        self.logs.append(log)
        with log.open("wb") as fh:
            proc = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), cls, *args], stdout=fh,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env(),
                                    cwd=self.base, start_new_session=True)  # its own process group
        self.procs.append(proc)
        return proc

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as resp:
                return int(json.load(resp).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def wait(self, what: str, probe: Any, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not probe():
            dead = [p.args[1] for p in self.procs if p.poll() is not None]
            if dead:
                raise AssertionError(f"{what}: {dead} exited")
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not within {timeout:.0f} s")
            time.sleep(0.5)

    def executor_logs(self) -> list[Path]:
        return sorted((self.base / "work").glob("w*/app-*/*/stderr"))

    def report(self) -> str:
        parts = [f"--- {p} (last 40 lines)\n{tail(p)}" for p in [*self.logs, *self.executor_logs()]]
        return "\n".join(parts)

    def stop(self) -> None:
        """Workers first (their executors are in their process groups), then the master: TERM,
        then KILL what is left after 15 s."""
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in reversed(self.procs):
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # An executor (the worker's child, in its group) may take a moment to die after the KILL.
        deadline = time.monotonic() + 15
        while any(group_members(p.pid) for p in self.procs) and time.monotonic() < deadline:
            time.sleep(0.2)


@contextlib.contextmanager
def standalone_cluster(base: Path) -> Iterator[Cluster]:
    """A master and :data:`WORKERS` workers on 127.0.0.1, stopped however the block ends."""
    base.mkdir(parents=True, exist_ok=True)
    master_port, ui_port, *worker_ports = free_ports(2 + 2 * WORKERS)
    cluster = Cluster(base, url=f"spark://127.0.0.1:{master_port}", ui_port=ui_port)
    try:
        cluster.start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                      "--port", str(master_port), "--webui-port", str(ui_port))
        cluster.wait("the master's port", lambda: _accepts(master_port))
        for i in range(WORKERS):
            port, ui = worker_ports[2 * i], worker_ports[2 * i + 1]
            cluster.start(f"worker{i + 1}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                          "--port", str(port), "--webui-port", str(ui), "--cores", str(WORKER_CORES),
                          "--memory", WORKER_MEMORY, "--work-dir", str(base / "work" / f"w{i + 1}"), cluster.url)
        cluster.wait(f"{WORKERS} workers registered", lambda: cluster.alive_workers() == WORKERS)
        yield cluster
    except BaseException:
        print(cluster.report())
        raise
    finally:
        cluster.stop()


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _stat(proc: Path) -> list[str]:
    """A /proc/<pid>/stat's fields after the command name: state, ppid, pgrp, ..."""
    return (proc / "stat").read_text().rsplit(")", 1)[1].split()


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group."""
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            if proc.name.isdigit() and int(_stat(proc)[2]) == pgid and _stat(proc)[0] != "Z":
                found.append(int(proc.name))
    return found


def listening_sockets(pgids: list[int]) -> list[tuple[int, str, int]]:
    """(pid, address, port) of every TCP socket listening in these process groups (/proc)."""
    inodes: dict[str, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if int(_stat(proc)[2]) not in pgids:
                continue
            for fd in (proc / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    inodes[link[8:-1]] = int(proc.name)
        except (OSError, IndexError, ValueError):
            continue
    found = []
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                addr, port = cols[1].split(":")
                found.append((inodes[cols[9]], _address(addr), int(port, 16)))
    return found


def _address(hexaddr: str) -> str:
    if len(hexaddr) == 8:
        return socket.inet_ntop(socket.AF_INET, bytes.fromhex(hexaddr)[::-1])
    raw = b"".join(bytes.fromhex(hexaddr[i:i + 8])[::-1] for i in range(0, 32, 8))
    return socket.inet_ntop(socket.AF_INET6, raw)


def _loopback(addr: str) -> bool:
    return addr.startswith("127.") or addr in ("::1", "::ffff:127.0.0.1") or addr.startswith("::ffff:127.")


def run_watched(cmd: list[str], env: dict[str, str], cwd: Path,
                watch: list[int]) -> tuple[int, str, str, set[tuple[int, str, int]]]:
    """Run ``cmd`` in its own process group (killed on timeout); its exit code, standard output and
    error, and every TCP socket that group (the command and its driver JVM) or the ``watch`` groups
    (the daemons, with the executors they start) listened on meanwhile."""
    out, err = cwd / "run.out", cwd / "run.err"
    seen: set[tuple[int, str, int]] = set()
    with out.open("wb") as fo, err.open("wb") as fe:
        proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                start_new_session=True)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        try:
            while proc.poll() is None:
                if time.monotonic() > deadline:
                    raise AssertionError(f"the pipeline run took more than {RUN_TIMEOUT_S} s")
                seen.update(listening_sockets([proc.pid, *watch]))
                time.sleep(0.5)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, out.read_text(), err.read_text(), seen


def same(a: Any, b: Any) -> bool:
    """Equal; floats (also inside a finding's JSON evidence) within :data:`REL_TOL`."""
    if isinstance(a, str) and isinstance(b, str) and a.startswith("{") and b.startswith("{") and a != b:
        try:
            return same(json.loads(a), json.loads(b))
        except ValueError:
            return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if _missing(a) or _missing(b):
        return _missing(a) and _missing(b)
    if isinstance(a, pd.Timestamp) and isinstance(b, pd.Timestamp):
        # A time computed from a fit (a forecast's threshold crossing) rounds to microseconds.
        return abs(a - b) <= pd.Timedelta(milliseconds=1)
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(
            a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return bool(a == b)


def _missing(v: Any) -> bool:
    return v is None or v is pd.NaT or (isinstance(v, float) and math.isnan(v))


def differences(local: Path, cluster: Path) -> list[str]:
    """Every gold table of both runs, row by row and column by column (rows in the same order:
    sorted by their key columns, never by a float)."""
    problems = []
    for name in TABLES:
        a, b = table(local, name), table(cluster, name)
        if list(a.columns) != list(b.columns) or len(a) != len(b):
            problems.append(f"{name}: {len(a)} rows {list(a.columns)} locally, {len(b)} rows {list(b.columns)}")
            continue
        keys = [c for c in a.columns if a[c].dtype != float and c not in ("evidence", "quantiles")]
        a = a.sort_values(keys, kind="stable").reset_index(drop=True)
        b = b.sort_values(keys, kind="stable").reset_index(drop=True)
        for c in a.columns:
            bad = [i for i, (x, y) in enumerate(zip(a[c], b[c], strict=True)) if not same(x, y)]
            if bad:
                i = bad[0]
                problems.append(f"{name}.{c}: {len(bad)} row(s) differ, e.g. row {i} "
                                f"({', '.join(f'{k}={a[k][i]}' for k in keys[:6])}): {a[c][i]!r} != {b[c][i]!r}")
    return problems


def test_the_job_on_a_standalone_cluster_equals_local_mode(spark: Any, tmp_path: Path) -> None:
    from pipeline.run import run

    started = time.monotonic()
    lake, local_out, cluster_out = tmp_path / "lake", tmp_path / "gold-local", tmp_path / "gold-cluster"
    ref.build_lake(lake)  # every rule's input, counters with restarts and gaps, nulls: 6 hours
    t = time.monotonic()
    local = run(spark, str(lake), str(local_out), full=True)
    local_s = time.monotonic() - t
    assert len(local["findings"]) > 10

    t = time.monotonic()
    with standalone_cluster(tmp_path / "cluster") as cluster:
        up_s = time.monotonic() - t
        daemons = [p.pid for p in cluster.procs]
        # The command's own environment: no SPARK_LOCAL_IP, no PYSPARK_PYTHON (the pipeline sets
        # both for a master on loopback, pipeline.spark.loopback_master).
        env = {k: v for k, v in cluster.env().items() if k not in ("SPARK_LOCAL_IP", "PYSPARK_PYTHON")}
        env["QUEUEOPS_CONFIG"] = str(tmp_path / "absent.toml")
        t = time.monotonic()
        code, out, err, run_sockets = run_watched(
            [sys.executable, "-m", "queueops.cli", "pipeline", "run", "--lake", str(lake), "--out",
             str(cluster_out), "--master", cluster.url, "--conf", f"spark.executor.memory={WORKER_MEMORY}",
             "--json"], env, tmp_path, daemons)
        run_s = time.monotonic() - t
        assert code == 0, err[-3000:]
        summary = json.loads(out.strip().splitlines()[-1])
        # The driver (the command's JVM) and the executors listened on loopback only.
        assert {pid for pid, _a, _p in run_sockets} - set(daemons), run_sockets  # not only the daemons
        assert all(_loopback(addr) for _pid, addr, _port in run_sockets), run_sockets
        # The job ran on the cluster: the master registered the application, and an executor on
        # each worker ran tasks.
        assert "Registering app queueops-pipeline" in (tmp_path / "cluster" / "master.log").read_text()
        ran = {p.parents[2].name for p in cluster.executor_logs() if "Finished task" in p.read_text()}
        assert ran == {f"w{i + 1}" for i in range(WORKERS)}, cluster.report()
        # Nothing of the cluster listens beyond loopback; the master only on its two chosen ports.
        sockets = listening_sockets(daemons)
        assert sockets and all(_loopback(addr) for _pid, addr, _port in sockets), sockets
        assert {port for pid, _a, port in sockets if pid == daemons[0]} == {int(cluster.url.rsplit(":", 1)[1]),
                                                                            cluster.ui_port}
    # Stopped: no process left in the master's or a worker's group (executors included).
    assert not [pid for pgid in daemons for pid in group_members(pgid)]

    for key in ("recomputed_hours", "read_hours", "as_of", "forecasts"):
        assert summary[key] == local[key], key
    assert summary["findings"] == local["findings"]
    problems = differences(local_out, cluster_out)
    assert not problems, "\n".join(problems)
    print(f"\nlocal-mode job {local['wall_s']:.1f} s ({local_s:.1f} s); cluster up in {up_s:.1f} s; "
          f"cluster run {run_s:.1f} s (job {summary['wall_s']:.1f} s); test {time.monotonic() - started:.1f} s")
