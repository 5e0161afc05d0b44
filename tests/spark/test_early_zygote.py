"""The zygote a local session's driver starts before its JVM (worker_path/cep_zygote.py `spawn` and
`early`): up before the first Python processes the JVM starts, the
daemons included; one per socket directory; only for the same Python; gone with its driver or its
directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from deployer.spark.run.stop import child_processes
from deployer.spark.run.worker_path import cep_zygote

WORKER_PATH = Path(cep_zygote.__file__).parent
ROOT = WORKER_PATH.parents[3]

# A driver: it starts the zygote as a session does before its JVM, then lives until its input closes.
_DRIVER = """
import sys
from pathlib import Path
from deployer.spark.run.worker_path.cep_zygote import spawn
spawn(sys.argv[1], Path(sys.argv[2]))
print("started", flush=True)
sys.stdin.read()
"""

# A process the JVM would start: it asks the zygote to run its module (as another Python, if told).
_REQUESTER = """
import sys, cep_request
if sys.argv[3] == "another python":
    cep_request._interpreter = lambda: ["/another/python", 0]
cep_request.delegate(sys.argv[1], sys.argv[2], [])
print("not delegated", flush=True)
"""

_MODULE = """
import os
if __name__ == "__main__":
    print("ran in", os.getpid(), "child of", os.getppid(), flush=True)
"""


def _wait_for(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return check()


def _driver(tmp_path: Path, uds: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    package = tmp_path / "early_test"
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "module.py").write_text(_MODULE)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join([str(WORKER_PATH), str(tmp_path), str(ROOT)]),
        "PYSPARK_PYTHON": sys.executable,
        "PYTHON_WORKER_FACTORY_SOCK_DIR": str(uds),
    }
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(uds), str(tmp_path / "log")],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert driver.stdout is not None and driver.stdout.readline().strip() == "started"
    return driver, env


def _ask(env: dict[str, str], uds: Path, python: str = "the same python") -> str:
    got = subprocess.run(
        [sys.executable, "-c", _REQUESTER, str(uds / cep_zygote.SOCKET_NAME), "early_test.module", python],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return got.stdout


def test_the_early_zygote_forks_for_the_same_python_only_and_ends_with_its_driver(tmp_path: Path) -> None:
    uds = tmp_path / "uds"
    uds.mkdir()
    driver, env = _driver(tmp_path, uds)
    socket_file = uds / cep_zygote.SOCKET_NAME
    try:
        assert _wait_for(socket_file.exists, 120), (tmp_path / "log").read_text()
        (zygote,) = child_processes(driver.pid)
        out = _ask(env, uds)
        assert "ran in" in out and f"child of {zygote}" in out and "not delegated" not in out
        # another Python (another environment or version) starts as Spark started it
        assert _ask(env, uds, "another python").strip() == "not delegated"
        # the daemon, forked from it, starts no zygote of its own: the directory has one
        assert not cep_zygote._locked(str(socket_file))
    finally:
        assert driver.stdin is not None
        driver.stdin.close()
        driver.wait(30)
    assert _wait_for(lambda: not socket_file.exists(), 30), "the zygote outlived its driver"


def test_the_early_zygote_ends_when_its_directory_goes(tmp_path: Path) -> None:
    uds = tmp_path / "uds"
    uds.mkdir()
    driver, _ = _driver(tmp_path, uds)
    try:
        assert _wait_for((uds / cep_zygote.SOCKET_NAME).exists, 120), (tmp_path / "log").read_text()
        (zygote,) = child_processes(driver.pid)
        shutil.rmtree(uds)  # as the session's directory is removed at its end
        assert _wait_for(lambda: not Path(f"/proc/{zygote}").exists() or _zombie(zygote), 30)
    finally:
        assert driver.stdin is not None
        driver.stdin.close()
        driver.wait(30)


def test_the_early_zygote_ends_with_a_driver_killed_while_it_imports(tmp_path: Path) -> None:
    """A driver killed (SIGKILL, an out-of-memory kill) in the second or two the zygote spends
    importing, before it serves: the zygote ends too, its directory left in place (what a killed
    driver leaves). It found its driver as its parent once its imports were done, then init's,
    and lived on."""
    uds = tmp_path / "uds"
    uds.mkdir()
    driver, _ = _driver(tmp_path, uds)
    try:
        (zygote,) = child_processes(driver.pid)
        assert not (uds / cep_zygote.SOCKET_NAME).exists()  # still importing
    finally:
        driver.kill()
        driver.wait(30)
    gone = _wait_for(lambda: not Path(f"/proc/{zygote}").exists() or _zombie(zygote), 60)
    if not gone:
        os.kill(zygote, 9)
    assert gone, "the zygote outlived its killed driver"
    assert uds.is_dir()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# A session made as `cep run` makes it, less its warm-up: the zygote's socket is waited for, then
# the executor's daemon is started by a Python task and the driver's runners' daemon by the first
# read of a Python data source; the JVM's Python children are listed with their resident memory.
_SESSION = """
import json, os, sys, time
from pathlib import Path
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader
from deployer.spark.run.session import CONTEXT_CONF, SESSION_CONF, launch_jvm, python_worker_conf
from deployer.spark.run.stop import child_processes

class Tiny(DataSource):
    @classmethod
    def name(cls):
        return "tiny"
    def schema(self):
        return "n int"
    def reader(self, schema):
        return TinyReader()

class TinyReader(DataSourceReader):
    def read(self, partition):
        yield (1,)

def same(batches):
    yield from batches

conf = {**SESSION_CONF, **python_worker_conf("local[1]"), "spark.master": "local[1]",
        "spark.ui.enabled": "false", "spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
launch_jvm({**conf, **CONTEXT_CONF}, Path(sys.argv[1]))
builder = SparkSession.builder
for k, v in conf.items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()
sock = Path(conf["spark.python.unix.domain.socket.dir"], "cep-zygote.sock")
deadline = time.monotonic() + 120
while not sock.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
spark.range(1, numPartitions=1).mapInArrow(same, "id long").collect()
spark.dataSource.register(Tiny)
assert spark.read.format("tiny").load().collect()[0][0] == 1
jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
def rss(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0
found = {}
for pid in child_processes(jvm, (b"cep_daemon", b"pyspark.daemon")):
    name = "cep_daemon" if b"cep_daemon" in Path(f"/proc/{pid}/cmdline").read_bytes() else "pyspark.daemon"
    found[name] = rss(pid)
print(json.dumps({"socket": sock.exists(), "daemons": found}), flush=True)
spark.stop()
"""


@pytest.mark.spark
def test_the_daemons_of_a_session_are_forked_from_its_early_zygote(tmp_path: Path) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "CEP_DATA_DIR": str(tmp_path)}
    env.pop("PYTHONPATH", None)
    got = subprocess.run(
        [sys.executable, "-c", _SESSION, str(tmp_path / "spark.log")],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr[-3000:]
    report = json.loads(got.stdout.strip().splitlines()[-1])
    assert report["socket"], "the zygote never came up"
    daemons = report["daemons"]
    # Both daemons were started, and each process Spark started only waits for its child, which the
    # zygote forked with its modules imported: a cold daemon imports PySpark first (over 40 MB).
    assert set(daemons) == {"cep_daemon", "pyspark.daemon"}, daemons
    assert all(mb < 40 for mb in daemons.values()), daemons
