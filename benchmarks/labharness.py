"""What the load and soak runs share: a private lab, a console config on it, child processes.

``benchmarks/overhead.py`` and ``benchmarks/soak.py`` each own a throwaway embedded PostgreSQL
(a temporary state folder, any free port; never ``.queueops/``), run the real workload
(:mod:`queueops.lab.workload`), the real collector service (``queueops collect``) and the real
action layer (:mod:`queueops.actions`) as child processes, and measure them from outside.

Run as a script it is the periodic action loop those runs start::

    python benchmarks/labharness.py actions-loop --config X --every 5 --action requeue:lease

one Python process that imports the action layer once and then plans and executes the actions
round-robin (the CLI would pay a fresh interpreter and imports for every action, a cost an
operator clicking in the console does not cause). One JSON line per action to ``--out``. SIGUSR1
pauses it once the action in progress is done, SIGUSR2 resumes it. And the overhead benchmark's
CPU control (``overhead.py --parts cpu``), a process that spends the service's CPU and does none
of its work::

    python benchmarks/labharness.py cpu-control --url U --password-file F --client-ms 8 --db-ms 13
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


# ---------------------------------------------------------------------------------------------
# The lab


@dataclass
class PrivateLab:
    """A lab of our own: database, schema, lab.toml (``file:`` password) in a temporary folder."""

    base: Path
    state: Path
    url: str
    config_path: Path
    port: int

    @classmethod
    def start(cls, rates: dict[str, float], *, fsync: bool = False, prefix: str = "queueops-bench-") -> PrivateLab:
        from queueops.lab import control

        # The cluster runs as an unprivileged user when we are root: the folder must be traversable.
        base = Path(tempfile.mkdtemp(prefix=prefix))
        base.chmod(0o755)
        state = base / "state"
        info = control.start(state, workload=False, port=None, fast=not fsync, rates=rates)
        port = int(json.loads((state / "server.json").read_text())["port"])
        return cls(base, state, info["url"], Path(info["config"]), port)

    def connect(self):  # noqa: ANN201 - psycopg.Connection
        import psycopg

        return psycopg.connect(self.url, password=(self.state / "lab.secret").read_text().strip(), autocommit=True,
                               application_name="queueops-bench")

    def start_workload(self) -> int:
        from queueops.lab import control

        return control.start_workload(self.state, self.config_path)

    def stop_workload(self) -> None:
        from queueops.lab import control

        control.stop_workload(self.state)

    def set_fault(self, name: str, on: bool) -> None:
        from queueops.lab import control

        control.set_fault(name, on, self.state)

    def stop_database(self) -> None:
        from queueops.lab.pgserver import EmbeddedPostgres

        EmbeddedPostgres(self.state).stop()

    def start_database(self) -> None:
        from queueops.lab.pgserver import EmbeddedPostgres

        EmbeddedPostgres(self.state, port=self.port).start()

    def destroy(self, keep: bool = False) -> None:
        from queueops.lab import control
        from queueops.lab.pgserver import EmbeddedPostgres

        control.stop_workload(self.state)
        with contextlib.suppress(Exception):
            if keep:
                EmbeddedPostgres(self.state).stop()
            else:
                EmbeddedPostgres(self.state).destroy()
        if not keep:
            shutil.rmtree(self.base, ignore_errors=True)

    def db_now(self) -> Any:
        with self.connect() as conn:
            return conn.execute("SELECT clock_timestamp()").fetchone()[0]


def console_config(lab: PrivateLab, path: Path, *, fast_s: float, slow_s: float, lease_timeout_s: float,
                   store: Path, lake: Path, extra: str = "") -> Path:
    """The lab's lab.toml with the console's schedule, short lease timeouts, its own store and lake."""
    text = lab.config_path.read_text()
    text = re.sub(r"(?m)^fast_s = .*$", f"fast_s = {fast_s:g}", text)
    text = re.sub(r"(?m)^slow_s = .*$", f"slow_s = {slow_s:g}", text)
    text = re.sub(r"(?m)^lease_timeout_s = .*$", f"lease_timeout_s = {lease_timeout_s:g}", text)
    text = re.sub(r'(?m)^url = "sqlite:///.*"$', f'url = "sqlite:///{store}"', text, count=1)
    text = re.sub(r'(?m)^path = ".*/lake"$', f'path = "{lake}"', text, count=1)
    text = text.replace('password = "file:lab.secret"', f'password = "file:{lab.state / "lab.secret"}"')
    # The benchmarks measure the collectors, store, exporter and actions; a Spark run started by
    # the service behind their back (lab.toml's after_export) would be noise in every figure.
    text = re.sub(r"(?m)^after_export = true$", "after_export = false", text)
    path.write_text(text + extra)
    return path


# ---------------------------------------------------------------------------------------------
# Child processes


def proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (None once it is gone): a child of ours,
    or a PostgreSQL backend (a process per session)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@dataclass
class Child:
    """A child process we started (its own session), its log, and how to read its CPU and memory."""

    name: str
    proc: subprocess.Popen
    log: Path
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def start(cls, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> Child:
        out = open(log, "ab")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, **(env or {})})
        out.close()
        return cls(name, proc, log)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_s(self) -> float | None:
        """User + system CPU seconds of the process so far (None once it is gone)."""
        return proc_cpu_s(self.pid)

    def rss_kb(self) -> int | None:
        try:
            return int(Path(f"/proc/{self.pid}/statm").read_text().split()[1]) * PAGE_KB
        except (OSError, IndexError, ValueError):
            return None

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM to our own child's group, wait, SIGKILL if it does not go; its exit code."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the child's process group (the service's own children too)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def service(config: Path, log: Path, *extra: str) -> Child:
    """The real collector service, ``queueops collect`` (no ``--once``)."""
    return Child.start("service", [sys.executable, "-m", "queueops.cli", "collect", "--config", str(config),
                                   *extra], log)


def actions_loop(config: Path, log: Path, every_s: float, actions: list[str], out: Path) -> Child:
    argv = [sys.executable, str(Path(__file__).resolve()), "actions-loop", "--config", str(config),
            "--every", str(every_s), "--out", str(out)]
    for a in actions:
        argv += ["--action", a]
    return Child.start("actions", argv, log)


def cpu_control(lab: PrivateLab, log: Path, client_ms: float, db_ms: float, round_trips: int,
                every_s: float = 1.0, nice: int = 0) -> Child:
    """A process that spends the collector service's CPU and does none of its work (``cpu-control``)."""
    argv = [sys.executable, str(Path(__file__).resolve()), "cpu-control", "--url", lab.url,
            "--password-file", str(lab.state / "lab.secret"), "--client-ms", str(client_ms),
            "--db-ms", str(db_ms), "--round-trips", str(round_trips), "--every", str(every_s),
            "--nice", str(nice)]
    return Child.start("cpu", argv, log)


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


# ---------------------------------------------------------------------------------------------
# The action loop (a child process)


def _actions_loop(args: argparse.Namespace) -> int:
    from queueops import actions, roles
    from queueops import config as config_mod

    stop = False
    paused = False

    def _stop(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    def _pause(signum: int, _frame: object) -> None:
        # SIGUSR1 pauses after the action in progress (never inside its transaction), SIGUSR2 resumes.
        nonlocal paused
        paused = signum == signal.SIGUSR1

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGUSR1, _pause)
    signal.signal(signal.SIGUSR2, _pause)
    cfg = config_mod.load(args.config)
    actor = roles.Actor("bench", "operator", "given")
    todo = [a.split(":", 1) for a in args.action]
    i = 0
    with open(args.out, "a", encoding="utf-8") as out:
        while not stop:
            if paused:
                time.sleep(0.1)
                continue
            action, queue = todo[i % len(todo)]
            i += 1
            began = time.monotonic()
            rec: dict[str, Any] = {"t": time.time(), "action": action, "queue": queue}
            try:
                plan = actions.plan(cfg, action, queue)
                res = actions.execute(cfg, plan, actor=actor)
                rec.update(outcome=res.outcome, rows=res.rows_affected, error=res.error)
            except Exception as exc:  # noqa: BLE001 - recorded; the loop goes on
                rec.update(outcome="error", error=f"{type(exc).__name__}: {exc}")
            rec["seconds"] = round(time.monotonic() - began, 3)
            out.write(json.dumps(rec, default=str) + "\n")
            out.flush()
            deadline = began + args.every
            while not stop and time.monotonic() < deadline:
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    return 0


def _spin(seconds: float) -> None:
    """Burn ``seconds`` of this process's CPU (not wall time: preempted time does not count)."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _cpu_control(args: argparse.Namespace) -> int:
    """Every ``--every`` seconds: ``--round-trips`` statements that burn ``--db-ms`` of backend CPU
    between them, with ``--client-ms`` of this process's CPU around them, reading no table.

    The control for the overhead benchmark's question "is the console's cost its CPU on a saturated
    machine, whatever it runs, or what its statements read?": it wakes on the service's cadence and
    spends the service's CPU (both sides measured by the benchmark), and touches no queue. The
    statement is ``count(*)`` over ``generate_series`` (CPU and work memory only); its length is
    steered by the backend's own CPU time from /proc, so the target holds under any load.

    ``--nice N`` lowers the scheduling priority of this process and of its backend (the private
    lab's server runs as this user, so no privilege is needed). At 19 on the saturated machine it
    still got its whole CPU, and cost the same (docs/benchmarks.md, run S).
    """
    import psycopg

    stop = False

    def _stop(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    password = Path(args.password_file).read_text().strip()
    with psycopg.connect(args.url, password=password, autocommit=True,
                         application_name="queueops-collect-cpu-control") as conn:
        pid = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        if args.nice:
            os.setpriority(os.PRIO_PROCESS, 0, args.nice)
            os.setpriority(os.PRIO_PROCESS, pid, args.nice)

        def backend_cpu() -> float:
            return proc_cpu_s(pid) or 0.0

        rows, cpu_per_row = 10_000, 1e-7  # steered from the measured CPU below
        used, done = 0.0, 0
        while not stop:
            began = time.monotonic()
            cpu0 = backend_cpu()
            for _ in range(args.round_trips):
                _spin(args.client_ms / 1000 / args.round_trips)
                conn.execute("SELECT count(*) FROM generate_series(1, %s)", (rows,))
                done += rows
            used += backend_cpu() - cpu0
            if used > 0.2:  # enough ticks (10 ms each) for a steady estimate; older ones decay
                cpu_per_row = used / done
                used, done = used / 2, done // 2
            rows = max(1, int(args.db_ms / 1000 / args.round_trips / cpu_per_row))
            while not stop and time.monotonic() < began + args.every:
                time.sleep(min(0.05, max(0.0, began + args.every - time.monotonic())))
    return 0


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("actions-loop")
    a.add_argument("--config", required=True)
    a.add_argument("--every", type=float, default=5.0)
    a.add_argument("--action", action="append", required=True, metavar="ACTION:QUEUE")
    a.add_argument("--out", required=True)
    c = sub.add_parser("cpu-control")
    c.add_argument("--url", required=True)
    c.add_argument("--password-file", required=True)
    c.add_argument("--client-ms", type=float, required=True)
    c.add_argument("--db-ms", type=float, required=True)
    c.add_argument("--round-trips", type=int, default=8)
    c.add_argument("--every", type=float, default=1.0)
    c.add_argument("--nice", type=int, choices=range(0, 20), default=0, metavar="0..19")
    args = ap.parse_args(argv)
    return _cpu_control(args) if args.cmd == "cpu-control" else _actions_loop(args)


if __name__ == "__main__":
    sys.exit(main())
