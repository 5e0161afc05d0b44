"""The fresh Python processes of a query start, forked from the session's zygote
(deployer/spark/run/worker_path/cep_zygote.py): the protocol between a requester and the zygote on
their own, then a real query start in the tests' session."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deployer.spark.run.stop import child_processes
from deployer.spark.run.worker_path import cep_zygote

WORKER_PATH = Path(cep_zygote.__file__).parent
ROOT = WORKER_PATH.parents[3]

# A process that forks the zygote (as the daemon does) and lives until its standard input closes.
_PARENT = """
import faulthandler, signal, sys, time
import cep_zygote
faulthandler.register(signal.SIGUSR1)  # the zygote's Python stack, should a test wait for it in vain
cep_zygote.PRELOADED = ("zygote_test.module",)  # as the zygote imports Spark's runners ahead
cep_zygote.start()
print("started", flush=True)
sys.stdin.read()
"""

# What a process Spark starts does first (sitecustomize): ask the zygote to run its module instead.
_REQUESTER = """
import faulthandler, signal, sys, cep_request
faulthandler.register(signal.SIGUSR1)  # its Python stack, should a test wait for it in vain
cep_request.delegate(sys.argv[1], sys.argv[2], sys.argv[3:])
print("not delegated", flush=True)
sys.exit(99)
"""

# The module the zygote's child runs: what it was given, then an exit code, or a wait for a signal.
_MODULE = """
import os, sys, time
if __name__ == "__main__":
    print("pid", os.getpid(), "cwd", os.getcwd(), "args", sys.argv[1:], "env", os.environ.get("ZYGOTE_TEST"), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    if sys.argv[1] == "wait":
        time.sleep(60)
    sys.exit(int(sys.argv[1]) if sys.argv[1].isdigit() else 0)
"""


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], int]]:
    """A zygote on a socket in `tmp_path/uds`, the environment its requesters run with, its pid."""
    uds = tmp_path / "uds"
    uds.mkdir()
    package = tmp_path / "zygote_test"  # a module of a package, as Spark's runners are
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "module.py").write_text(_MODULE)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join([str(WORKER_PATH), str(tmp_path), str(ROOT)]),
        "PYTHON_WORKER_FACTORY_SOCK_DIR": str(uds),
        "ZYGOTE_TEST": "from the requester",
    }
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT], env={**env, "ZYGOTE_TEST": "the zygote's own"},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert parent.stdout is not None and parent.stdout.readline().strip() == "started"
    path = str(uds / cep_zygote.SOCKET_NAME)
    deadline = time.monotonic() + 30
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert os.path.exists(path)
    (zygote_pid,) = child_processes(parent.pid)
    yield path, env, zygote_pid
    assert parent.stdin is not None
    parent.stdin.close()
    parent.wait(10)
    deadline = time.monotonic() + 10  # the zygote ends with the process it was forked from
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(path)


def _request(path: str, env: dict[str, str], cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _REQUESTER, path, "zygote_test.module", *args],
        env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_the_child_runs_the_module_as_the_requester_and_its_status_is_the_requesters(
    zygote: tuple[str, dict[str, str], int], tmp_path: Path
) -> None:
    path, env, _ = zygote
    work = tmp_path / "work"
    work.mkdir()
    requester = _request(path, env, work, "3", "a b")
    out, err = requester.communicate(timeout=30)
    assert requester.returncode == 3, (out, err)
    words = out.split()
    assert words[0] == "pid" and int(words[1]) != requester.pid  # a process of its own...
    assert f"cwd {work} args ['3', 'a b'] env from the requester" in out  # ...as the requester
    assert "to stderr" in err and "not delegated" not in out
    assert "RuntimeWarning" not in err  # run as __main__ although the zygote had imported it


_ARCHIVES = """
import sys
if __name__ == "__main__":
    opened = [p for p in sys.path if p.endswith("extra.zip") and p in sys.path_importer_cache]
    import extra_module
    print("opened", len(opened), "value", extra_module.VALUE, flush=True)
"""


def test_the_archives_on_a_requesters_path_are_opened_in_the_zygote_once(
    zygote: tuple[str, dict[str, str], int], tmp_path: Path
) -> None:
    """An archive on the requester's path that the zygote's own path lacks (Spark's jar and zips):
    the child finds its importer made, its directory read once in the zygote rather than in every
    child that imports a module not imported yet."""
    path, env, _ = zygote
    archive = tmp_path / "extra.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("extra_module.py", "VALUE = 7\n")
    (tmp_path / "zygote_test" / "archives.py").write_text(_ARCHIVES)
    env = {**env, "PYTHONPATH": os.pathsep.join([env["PYTHONPATH"], str(archive)])}
    for _ in range(2):
        requester = subprocess.Popen(
            [sys.executable, "-c", _REQUESTER, path, "zygote_test.archives"],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        out, err = requester.communicate(timeout=30)
        assert requester.returncode == 0, (out, err)
        assert out.split() == ["opened", "1", "value", "7"], (out, err)


def test_a_signal_to_the_requester_reaches_the_child(
    zygote: tuple[str, dict[str, str], int], tmp_path: Path
) -> None:
    # Spark stops a worker with SIGTERM to the process it started: the child must stop with it.
    path, env, _ = zygote
    requester, child = _waiting(path, env, tmp_path)
    requester.send_signal(signal.SIGTERM)
    _ended(requester, zygote[2], child)
    assert requester.returncode == -signal.SIGTERM or requester.returncode == 128 + signal.SIGTERM
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{child}").exists()


def test_a_signal_the_requester_ignores_the_child_ignores(
    zygote: tuple[str, dict[str, str], int], tmp_path: Path
) -> None:
    # The JVM starts its processes with SIGINT ignored, in the driver's process group: a terminal's
    # Ctrl-C reaches them all, and is the driver's to handle (a graceful stop). A child that took
    # it (a source's planner) failed the query the driver was stopping.
    path, env, zygote_pid = zygote
    requester = subprocess.Popen(
        [sys.executable, "-c", _REQUESTER, path, "zygote_test.module", "wait"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    assert requester.stdout is not None
    child = int(requester.stdout.readline().split()[1])
    assert _ignored(child) & (1 << (signal.SIGINT - 1)), _state(child)
    for pid in (requester.pid, child):  # as a Ctrl-C to the group does
        os.kill(pid, signal.SIGINT)
    time.sleep(0.5)
    assert requester.poll() is None and child_processes(zygote_pid) == [child], _state(child)
    requester.send_signal(signal.SIGTERM)  # what it does not ignore still reaches the child
    _ended(requester, zygote_pid, child)
    requester.communicate(timeout=10)
    deadline = time.monotonic() + 10
    while child_processes(zygote_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_processes(zygote_pid) == []


def test_a_ctrl_c_the_requester_takes_ends_the_child(
    zygote: tuple[str, dict[str, str], int], tmp_path: Path
) -> None:
    path, env, zygote_pid = zygote
    requester, child = _waiting(path, env, tmp_path)
    assert not _ignored(child) & (1 << (signal.SIGINT - 1)), _state(child)
    requester.send_signal(signal.SIGINT)
    _ended(requester, zygote_pid, child)
    _, err = requester.communicate(timeout=10)
    assert requester.returncode != 0 and "KeyboardInterrupt" in err, err


def _ignored(pid: int) -> int:
    """The mask of the signals process `pid` ignores (/proc's SigIgn)."""
    (line,) = (ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("SigIgn:"))
    return int(line.split()[1], 16)


def test_a_requester_killed_outright_leaves_no_child_running(
    zygote: tuple[str, dict[str, str], int], tmp_path: Path
) -> None:
    # A requester killed by a signal it cannot pass on (SIGKILL) closes its connection as it dies:
    # the zygote kills its child, which nothing else would stop, and goes on serving.
    path, env, zygote_pid = zygote
    requester, child = _waiting(path, env, tmp_path)
    assert child_processes(zygote_pid) == [child]
    requester.kill()
    requester.wait(30)  # (its output pipes stay open as long as the child runs)
    deadline = time.monotonic() + 10
    while child_processes(zygote_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_processes(zygote_pid) == [], "the child of a killed requester is left running"
    again = _request(path, env, tmp_path, "4")
    out, err = again.communicate(timeout=30)
    assert again.returncode == 4 and "not delegated" not in out, (out, err)


def _waiting(path: str, env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen[str], int]:
    """A requester whose child runs the module until a signal ends it, and the child's pid (the
    word after "pid" in the first line the child prints)."""
    requester = _request(path, env, cwd, "wait")
    assert requester.stdout is not None
    return requester, int(requester.stdout.readline().split()[1])


def _ended(requester: subprocess.Popen[str], zygote_pid: int, child: int, timeout_s: float = 30) -> None:
    """Wait for `requester` to end; if it does not, fail with where it and the zygote are (their
    Python stacks through faulthandler, their states from /proc) and whether the child still runs."""
    try:
        requester.wait(timeout_s)
        return
    except subprocess.TimeoutExpired:
        pass
    states = {
        name: _state(pid)
        for name, pid in (("requester", requester.pid), ("zygote", zygote_pid), ("child", child))
    }
    for pid in (requester.pid, zygote_pid):  # the zygote's stack goes to this test's captured stderr
        os.kill(pid, signal.SIGUSR1)
    time.sleep(1)
    requester.kill()
    _, err = requester.communicate(timeout=10)
    pytest.fail(f"the requester did not end within {timeout_s} s: {states}; its stderr:\n{err}")


def _state(pid: int) -> str:
    """A process's state, signal masks and kernel wait channel, from /proc ("gone" if it ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return "gone"
    keys = ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
    return " ".join([*(line for line in status if line.split(":")[0] in keys), f"wchan: {wchan}"])


def test_a_signal_at_any_moment_of_the_request_leaves_no_child_running(
    zygote: tuple[str, dict[str, str], int], tmp_path: Path
) -> None:
    # Spark may stop a worker the moment it started: before the request is sent, before the child's
    # pid is known, or after. Whenever the signal comes, no child is left behind.
    path, env, zygote_pid = zygote
    for delay in (0.0, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2):
        requester = _request(path, env, tmp_path, "wait")
        time.sleep(delay)
        requester.send_signal(signal.SIGTERM)
        requester.communicate(timeout=30)
        deadline = time.monotonic() + 10
        while child_processes(zygote_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child_processes(zygote_pid) == [], f"a child left running after a signal at {delay} s"


def test_without_a_zygote_the_process_starts_as_it_always_did(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join([str(WORKER_PATH), str(ROOT)])}
    got = subprocess.run(
        [sys.executable, "-c", _REQUESTER, str(tmp_path / "none.sock"), "zygote_test.module"],
        env=env, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert got.returncode == 99 and "not delegated" in got.stdout


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.mark.spark
def test_the_sessions_python_processes_start_through_cep_python(spark: Any) -> None:
    """A local session's Python processes are started through worker_path/cep_python, which took
    Spark's archives off their PYTHONPATH (sitecustomize put them back, last)."""

    def seen(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # pickled by value
        for _ in batches:
            pass
        archives = os.environ.get("PAASCEP_SPARK_ARCHIVES", "")
        last = sys.path[-len(archives.split(os.pathsep)) :] if archives else []
        yield pa.RecordBatch.from_pylist([{"archives": archives, "last": os.pathsep.join(last)}])

    (row,) = spark.range(1, numPartitions=1).mapInArrow(seen, "archives string, last string").collect()
    assert "pyspark.zip" in row.archives and ".jar" in row.archives
    assert row.last == row.archives  # the archives at the end of the worker's path, in their order


@pytest.mark.spark
def test_a_query_start_forks_its_sources_runner_from_the_zygote(spark: Any, tmp_path: Path) -> None:
    from deployer.spark.run.deployment import SparkDeployment
    from tests.spark.spark_helpers import at, compile_text, prepare

    # A Python task first, so that the session's daemon, and so its zygote, exist; then the socket.
    def same(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:  # pickled by value
        yield from batches

    spark.range(1, numPartitions=1).mapInArrow(same, "id long").collect()
    directory = spark.sparkContext.getConf().get("spark.python.unix.domain.socket.dir")
    socket_file = Path(directory, cep_zygote.SOCKET_NAME)
    deadline = time.monotonic() + 60
    while not socket_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert socket_file.exists()

    graph = compile_text(
        """
        CREATE STREAMSCHEMA calls WITH n integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 SECOND;
        INSERT INTO doubled SELECT n * 2 AS m, ts FROM calls;
        """
    )
    sources = prepare(tmp_path, {"calls": [[{"n": i, "ts": at(i)} for i in range(20)]]})
    jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    source_runner = (b"python_streaming_source_runner",)
    before = set(child_processes(jvm, source_runner))
    deployment = SparkDeployment(
        spark, graph, sources, {"doubled": f"file:{tmp_path / 'out'}"}, str(tmp_path / "checkpoint"),
        dead_letter=f"file:{tmp_path / 'dead'}", until_idle=False,
    )  # fmt: skip
    stop = threading.Event()
    runner = threading.Thread(target=deployment.run, kwargs={"out": io.StringIO(), "stop": stop})
    runner.start()
    try:
        deadline = time.monotonic() + 120
        started: list[int] = []
        while not started and time.monotonic() < deadline:
            started = [p for p in child_processes(jvm, source_runner) if p not in before]
            time.sleep(0.1)
        assert started, "no source runner started"
        # The process Spark started imported nothing of PySpark: it only waits for its child.
        assert all(_rss_mb(pid) < 40 for pid in started), [_rss_mb(pid) for pid in started]
        while not list((tmp_path / "out").glob("**/*.json*")) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert list((tmp_path / "out").glob("**/*.json*")), "the query wrote nothing"
    finally:
        stop.set()
        runner.join(120)
    assert not runner.is_alive()
