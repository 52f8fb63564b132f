"""Run a private PostgreSQL server: the machine's binaries, or the ``pgserver`` wheel's.

PostgreSQL refuses to run as root, so when we are root the cluster belongs to an unprivileged
system user (``queueops``, created on first use) and every server command runs as that user.
The server listens on 127.0.0.1 only, with scram-sha-256 passwords; its data directory lives
under the state directory. ``start`` is idempotent: a running cluster is reused.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import secrets as pysecrets
import shutil
import socket
import stat
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

RUN_AS = "queueops"
SUPERUSER = "queueops"


class LabError(RuntimeError):
    """The embedded server could not be set up; the message says what to install or fix."""


def find_bindir() -> Path:
    """Locate initdb/pg_ctl: $QUEUEOPS_PG_BINDIR, PATH, Debian's layout, then the pgserver wheel."""
    candidates: list[Path] = []
    if os.environ.get("QUEUEOPS_PG_BINDIR"):
        candidates.append(Path(os.environ["QUEUEOPS_PG_BINDIR"]))
    found = shutil.which("pg_ctl")
    if found:
        candidates.append(Path(os.path.realpath(found)).parent)
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    with contextlib.suppress(ImportError):
        import pgserver  # type: ignore[import-not-found]

        candidates.append(Path(pgserver.__file__).parent / "pginstall" / "bin")
    for c in candidates:
        if (c / "initdb").exists() and (c / "pg_ctl").exists():
            return c
    raise LabError("no PostgreSQL server binaries found (initdb, pg_ctl). Install them with "
                   "'apt-get install postgresql postgresql-contrib' (make setup does this), "
                   "'pip install pgserver', or set QUEUEOPS_PG_BINDIR.")


def _ensure_os_user() -> pwd.struct_passwd | None:
    """When root, return the unprivileged account that will own the cluster (creating it)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(RUN_AS)
    except KeyError:
        pass
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", RUN_AS],
                   check=True, capture_output=True)
    return pwd.getpwnam(RUN_AS)


def _traversable(path: Path) -> bool:
    """Whether every ancestor of ``path`` lets 'others' through (the server runs as another user)."""
    for parent in [path, *path.parents]:
        if parent.exists() and not (parent.stat().st_mode & stat.S_IXOTH):
            return False
    return True


def free_port(preferred: int | None = None) -> int:
    for port in ([preferred] if preferred else []) + [0]:
        with socket.socket() as s:
            # Like PostgreSQL's own listener: a restart may reuse its port while old client
            # connections linger in TIME_WAIT (otherwise a restart moves the lab to a new port).
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise LabError("no free TCP port on 127.0.0.1")


@dataclass
class ServerInfo:
    datadir: str
    port: int
    password_file: str
    database: str = "queueops_lab"

    def url(self) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{self.database}"


class EmbeddedPostgres:
    """One private cluster under ``state_dir`` (``pg/`` holds the data, ``server.json`` the port)."""

    def __init__(self, state_dir: Path, *, port: int | None = None, fast: bool = False,
                 database: str = "queueops_lab"):
        self.state_dir = Path(state_dir).resolve()
        self.preferred_port = port
        self.fast = fast  # fsync off: for throwaway test clusters only
        self.database = database
        self.info_file = self.state_dir / "server.json"
        self.password_file = self.state_dir / "lab.secret"

    # -- layout -----------------------------------------------------------------------------
    @property
    def datadir(self) -> Path:
        info = self._read_info()
        if info:
            return Path(info.datadir)
        local = self.state_dir / "pg"
        if os.geteuid() != 0 or _traversable(self.state_dir):
            return local
        # The unprivileged owner cannot reach a folder under a private parent: keep data in /var/tmp.
        return Path("/var/tmp") / f"queueops-pg-{abs(hash(str(self.state_dir))) % 10**10}"

    def _read_info(self) -> ServerInfo | None:
        try:
            return ServerInfo(**json.loads(self.info_file.read_text()))
        except (OSError, ValueError, TypeError):
            return None

    # -- commands ---------------------------------------------------------------------------
    def _run(self, args: list[str], *, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        user = _ensure_os_user()
        kwargs: dict[str, object] = {}
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C.UTF-8"
        if user is not None:
            kwargs = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
            env["HOME"] = "/tmp"
        proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout,
                              cwd="/", **kwargs)  # type: ignore[arg-type]
        if check and proc.returncode != 0:
            raise LabError(f"{Path(args[0]).name} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-2000:]}")
        return proc

    def _chown(self, path: Path) -> None:
        user = _ensure_os_user()
        if user is None:
            return
        for root, dirs, files in os.walk(path):
            os.chown(root, user.pw_uid, user.pw_gid)
            for f in dirs + files:
                os.chown(os.path.join(root, f), user.pw_uid, user.pw_gid)

    def running(self) -> bool:
        datadir = self.datadir
        if not (datadir / "PG_VERSION").exists():
            return False
        return self._run([str(find_bindir() / "pg_ctl"), "status", "-D", str(datadir)], check=False).returncode == 0

    def start(self) -> ServerInfo:
        """Initialise (first time) and start the cluster; return how to reach it. Idempotent."""
        bindir = find_bindir()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        info = self._read_info()
        if info and self.running():
            return info
        datadir = self.datadir
        if not self.password_file.exists():
            self.password_file.write_text(pysecrets.token_urlsafe(18) + "\n")
            self.password_file.chmod(0o600)
        if not (datadir / "PG_VERSION").exists():
            self._initdb(bindir, datadir)
        port = free_port(info.port if info else self.preferred_port)
        info = ServerInfo(str(datadir), port, str(self.password_file), self.database)
        opts = ["-c listen_addresses=127.0.0.1", f"-c port={port}", f"-c unix_socket_directories={datadir}",
                "-c max_connections=200", "-c autovacuum_naptime=10s", "-c log_lock_waits=on",
                "-c shared_preload_libraries=''", "-c track_io_timing=on"]
        if self.fast:
            opts += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run([str(bindir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(datadir),
                   "-l", str(datadir / "server.log"), "-o", " ".join(opts)])
        self.info_file.write_text(json.dumps(asdict(info), indent=2))
        self._wait_ready(info)
        self._ensure_database(info)
        return info

    def _initdb(self, bindir: Path, datadir: Path) -> None:
        datadir.mkdir(parents=True, exist_ok=True)
        datadir.chmod(0o700)
        pwfile = datadir.parent / f".pwfile-{os.getpid()}"
        pwfile.write_text(self.password_file.read_text())
        self._chown(datadir)
        self._chown(pwfile)
        try:
            self._run([str(bindir / "initdb"), "-D", str(datadir), "-U", SUPERUSER, "-E", "UTF8",
                       "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256",
                       f"--pwfile={pwfile}", "--no-instructions"])
        finally:
            pwfile.unlink(missing_ok=True)

    def _wait_ready(self, info: ServerInfo, timeout: float = 30) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(host="127.0.0.1", port=info.port, user=SUPERUSER, dbname="postgres",
                                     password=self.password(), connect_timeout=3):
                    return
            except psycopg.OperationalError as exc:
                last = exc
                time.sleep(0.2)
        raise LabError(f"PostgreSQL did not accept connections within {timeout:.0f}s: {last}")

    def _ensure_database(self, info: ServerInfo) -> None:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=info.port, user=SUPERUSER, dbname="postgres",
                             password=self.password(), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (info.database,)).fetchone()
            if not exists:
                from psycopg import sql

                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(info.database)))

    def password(self) -> str:
        return self.password_file.read_text().strip()

    def stop(self, mode: str = "fast") -> bool:
        """Stop the cluster; returns False when it was not running."""
        if not self.running():
            return False
        self._run([str(find_bindir() / "pg_ctl"), "stop", "-w", "-t", "60", "-m", mode, "-D", str(self.datadir)])
        return True

    def kill(self) -> None:
        """Stop immediately (crash-like), for fault tests."""
        self.stop(mode="immediate")

    def destroy(self) -> None:
        """Stop and remove the cluster and its state."""
        with contextlib.suppress(LabError):
            self.stop(mode="immediate")
        shutil.rmtree(self.datadir, ignore_errors=True)
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def status(self) -> dict[str, object]:
        info = self._read_info()
        return {"running": self.running(), "datadir": str(self.datadir),
                "port": info.port if info else None, "url": info.url() if info else None}
