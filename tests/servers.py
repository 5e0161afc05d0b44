"""Real, throwaway PostgreSQL and Redis servers for the test suite (docs/architecture.md, decision 8).

Order of preference for each server:

1. testcontainers, but only when a Docker engine actually answers a ping (a docker *client*
   without an engine is common on CI and dev boxes, and testcontainers would hang or fail late);
2. a private server started from the locally installed binaries, on a free port, in a temp dir;
3. a URL from the environment (``CEP_TEST_POSTGRES_URL`` / ``CEP_TEST_REDIS_URL``);
4. otherwise a ``RuntimeError`` naming what is missing and how to install it.

No test may depend on a server that happens to be running, so route 2 never reuses a system cluster.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

POSTGRES_IMAGE = "postgres:16-alpine"
REDIS_IMAGE = "redis:7-alpine"
POSTGRES_ENV = "CEP_TEST_POSTGRES_URL"
REDIS_ENV = "CEP_TEST_REDIS_URL"

# Durability is pointless for throwaway servers and costs disk syncs. synchronous_commit stays ON on
# purpose: with fsync=off a commit is only a write() into the kernel page cache, which is cheap and
# survives `pg_ctl stop -m immediate`; with synchronous_commit=off a commit acknowledged to the client
# could vanish on restart(), which would make crash/replay tests lie.
PG_SERVER_OPTIONS = "-c fsync=off -c full_page_writes=off -c listen_addresses=127.0.0.1"
# Benchmarks measure writes as a production server does them: every commit reaches the disk.
PG_DURABLE_OPTIONS = "-c listen_addresses=127.0.0.1"


@dataclass(frozen=True)
class ServerHandle:
    """A running server. ``stop`` is idempotent; ``down``/``up`` exist only for local servers."""

    url: str
    how: str  # "testcontainers" | "local-binaries" | "environment"
    stop: Callable[[], None]
    data_dir: Path | None = None
    port: int | None = None
    # Crash the server (pg_ctl stop -m immediate / SIGKILL) and start it again on the same port and
    # data dir. Fault tests use these to take a store away in the middle of a run.
    down: Callable[[], None] | None = None
    up: Callable[[], None] | None = None

    def restart(self) -> None:
        if self.down is None or self.up is None:
            raise RuntimeError(f"a server started via {self.how} cannot be restarted by the tests")
        self.down()
        self.up()


# --------------------------------------------------------------------------------------------------
# helpers


def _free_port() -> int:
    # The port is released before the server binds it, so another process may grab it in between;
    # the start functions retry with a new port when the bind fails.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _docker_answers() -> bool:
    """True only if a Docker engine responds; a docker client alone is not enough."""
    try:
        # testcontainers' own dependency. Imported by name because the repo's docker/ folder (compose
        # files) shadows the untyped package for mypy.
        docker: Any = importlib.import_module("docker")
        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _once(fn: Callable[[], None]) -> Callable[[], None]:
    """Make a stop function idempotent, and run it at interpreter exit as a safety net."""
    done = False

    def wrapper() -> None:
        nonlocal done
        if not done:
            done = True
            fn()

    atexit.register(wrapper)
    return wrapper


def _unavailable(what: str, reasons: list[str], install: str, env: str, example: str) -> RuntimeError:
    return RuntimeError(
        f"No {what} server for the tests: " + "; ".join(reasons) + ".\n"
        f"Fix one of: install the binaries ({install}), start a Docker engine (testcontainers), "
        f"or set {env}={example} to a throwaway server."
    )


# --------------------------------------------------------------------------------------------------
# PostgreSQL


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.parent.name))


def pg_bin_dir() -> Path | None:
    """The directory holding initdb and pg_ctl: from PATH, else the newest /usr/lib/postgresql/*/bin."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        # Resolve symlinks: pg_ctl looks for the `postgres` executable next to its real location.
        found = Path(pg_ctl).resolve().parent
        if (found / "initdb").exists():
            return found
    candidates = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "pg_ctl").exists()]
    candidates = [p for p in candidates if (p / "initdb").exists()]
    return max(candidates, key=_version_key) if candidates else None


def _pg_user() -> str | None:
    """Postgres refuses to run as root, so as root we run initdb/pg_ctl as an unprivileged user.

    `nobody` exists on every Debian/Ubuntu system, needs no useradd, and owns nothing else we care
    about; the temp dir is chowned to it. As non-root we run the binaries as ourselves (None).
    """
    if os.geteuid() != 0:
        return None
    for name in ("nobody", "postgres"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("running as root and neither user 'nobody' nor 'postgres' exists to run Postgres")


def _as_user(user: str | None, cmd: list[str]) -> list[str]:
    if user is None:
        return cmd
    if shutil.which("runuser"):
        return ["runuser", "-u", user, "--", *cmd]
    # su needs an explicit shell: system users such as nobody have nologin as theirs.
    return ["su", "-s", "/bin/sh", user, "-c", shlex.join(cmd)]


class _LocalPostgres:
    """One private cluster: initdb once, then start/stop it on a fixed port."""

    def __init__(self, bin_dir: Path, options: str = PG_SERVER_OPTIONS) -> None:
        self.bin_dir = bin_dir
        self.options = options
        self.user = _pg_user()
        # As root the server user must be able to reach the dir: use /tmp, which everyone can
        # traverse, rather than a TMPDIR that may sit under /root.
        self.base = Path(tempfile.mkdtemp(prefix="cep-pg-", dir="/tmp" if self.user else None))
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
        self.data_dir = self.base / "data"
        self.log = self.base / "server.log"
        self.port = 0

    def _run(self, *args: str, timeout: float = 120) -> None:
        cmd = _as_user(self.user, [str(self.bin_dir / args[0]), *args[1:]])
        # cwd=base: a process that cannot read its cwd (e.g. /root as nobody) makes initdb complain.
        res = subprocess.run(
            cmd, cwd=self.base, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
        if res.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout}{res.stderr}\nserver log:\n{log}"
            )

    def initdb(self) -> None:
        args = ["-D", str(self.data_dir), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]
        self._run("initdb", *args, "--no-locale")  # C collation: deterministic ORDER BY in tests

    def start(self) -> None:
        opts = f"-p {self.port} -k {self.base} {self.options}"
        self._run(
            "pg_ctl", "-D", str(self.data_dir), "-l", str(self.log), "-o", opts, "-w", "-t", "60", "start"
        )

    def start_on_free_port(self, attempts: int = 3) -> None:
        for attempt in range(attempts):
            self.port = _free_port()
            try:
                self.start()
                return
            except RuntimeError:
                if attempt == attempts - 1:  # most likely a lost race for the port: try another one
                    raise

    def kill(self) -> None:
        # -m immediate is a crash as far as Postgres is concerned: recovery replays WAL on start.
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            self.kill()
        shutil.rmtree(self.base, ignore_errors=True)

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/cep"


def _start_local_postgres(bin_dir: Path, options: str = PG_SERVER_OPTIONS) -> ServerHandle:
    pg = _LocalPostgres(bin_dir, options)
    try:
        pg.initdb()
        pg.start_on_free_port()
        with psycopg.connect(pg.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE cep")
    except BaseException:
        pg.destroy()
        raise
    return ServerHandle(
        url=pg.url,
        how="local-binaries",
        stop=_once(pg.destroy),
        data_dir=pg.data_dir,
        port=pg.port,
        down=pg.kill,
        up=pg.start,
    )


def _start_postgres_container() -> ServerHandle:
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:  # testcontainers < 4.13 kept the module at the top level
        from testcontainers.postgres import PostgresContainer

    container: Any = PostgresContainer(
        POSTGRES_IMAGE, username="postgres", password="postgres", dbname="cep", driver=None
    )
    container.start()
    return ServerHandle(url=container.get_connection_url(), how="testcontainers", stop=_once(container.stop))


def start_postgres(durable: bool = False) -> ServerHandle:
    """A throwaway server. `durable`: fsync on, as in production (benchmarks); the tests' servers
    skip disk syncs, which changes nothing they check (see PG_SERVER_OPTIONS)."""
    reasons: list[str] = []
    if _docker_answers():
        try:
            return _start_postgres_container()
        except Exception as exc:
            reasons.append(f"testcontainers failed: {exc!r}")
            warnings.warn(f"Postgres via testcontainers failed, trying local binaries: {exc!r}", stacklevel=2)
    else:
        reasons.append("no Docker engine answers")
    bin_dir = pg_bin_dir()
    if bin_dir is not None:
        try:
            return _start_local_postgres(bin_dir, PG_DURABLE_OPTIONS if durable else PG_SERVER_OPTIONS)
        except Exception as exc:
            reasons.append(f"local binaries in {bin_dir} failed: {exc}")
            warnings.warn(f"Postgres from {bin_dir} failed: {exc}", stacklevel=2)
    else:
        reasons.append("initdb/pg_ctl are neither in PATH nor in /usr/lib/postgresql/*/bin")
    url = os.environ.get(POSTGRES_ENV)
    if url:
        return ServerHandle(url=url, how="environment", stop=lambda: None)
    reasons.append(f"{POSTGRES_ENV} is not set")
    raise _unavailable(
        "PostgreSQL",
        reasons,
        "apt-get install postgresql",
        POSTGRES_ENV,
        "postgresql://user:pass@host:5432/db",
    )


# --------------------------------------------------------------------------------------------------
# Redis


def _redis_pings(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1) as s:
        s.sendall(b"PING\r\n")
        return s.recv(64).startswith(b"+PONG")
    return False


class _LocalRedis:
    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.dir = Path(tempfile.mkdtemp(prefix="cep-redis-"))
        self.log = self.dir / "server.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        # No persistence (--save '' / appendonly no): nothing to clean up, nothing survives down()/up().
        cmd = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        cmd += ["--appendonly", "no", "--dir", str(self.dir), "--daemonize", "no"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:  # exited: typically the port was taken meanwhile
                raise RuntimeError(f"redis-server exited ({self.proc.returncode}):\n{self.log.read_text()}")
            if _redis_pings(self.port):
                return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"redis-server did not answer PING within 15 s:\n{self.log.read_text()}")

    def start_on_free_port(self, attempts: int = 3) -> None:
        for attempt in range(attempts):
            self.port = _free_port()
            try:
                self.start()
                return
            except RuntimeError:
                if attempt == attempts - 1:
                    raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def destroy(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def _redis_binary() -> str | None:
    found = shutil.which("redis-server")
    if found:
        return found
    candidates = ("/usr/bin/redis-server", "/usr/sbin/redis-server")
    return next((p for p in candidates if os.access(p, os.X_OK)), None)


def _start_redis_container() -> ServerHandle:
    try:
        from testcontainers.community.redis import RedisContainer
    except ImportError:  # testcontainers < 4.13
        from testcontainers.redis import RedisContainer

    container: Any = RedisContainer(REDIS_IMAGE)
    container.start()
    host, port = container.get_container_host_ip(), container.get_exposed_port(6379)
    return ServerHandle(url=f"redis://{host}:{port}/0", how="testcontainers", stop=_once(container.stop))


def start_redis() -> ServerHandle:
    reasons: list[str] = []
    if _docker_answers():
        try:
            return _start_redis_container()
        except Exception as exc:
            reasons.append(f"testcontainers failed: {exc!r}")
            warnings.warn(f"Redis via testcontainers failed, trying local binaries: {exc!r}", stacklevel=2)
    else:
        reasons.append("no Docker engine answers")
    binary = _redis_binary()
    if binary is not None:
        rs = _LocalRedis(binary)
        try:
            rs.start_on_free_port()
        except Exception as exc:
            rs.destroy()
            reasons.append(f"{binary} failed: {exc}")
            warnings.warn(f"Redis from {binary} failed: {exc}", stacklevel=2)
        else:
            return ServerHandle(
                url=f"redis://127.0.0.1:{rs.port}/0",
                how="local-binaries",
                stop=_once(rs.destroy),
                data_dir=rs.dir,
                port=rs.port,
                down=rs.kill,
                up=rs.start,
            )
    else:
        reasons.append("redis-server is not in PATH")
    url = os.environ.get(REDIS_ENV)
    if url:
        return ServerHandle(url=url, how="environment", stop=lambda: None)
    reasons.append(f"{REDIS_ENV} is not set")
    raise _unavailable("Redis", reasons, "apt-get install redis-server", REDIS_ENV, "redis://host:6379/0")
