"""`cep run --master spark://...` on a real Spark standalone cluster (a master and a worker on
loopback), as a Spark application of its own: the session fixture's local session holds this
process's JVM, so the CLI runs as a subprocess.

The pyspark wheel ships no sbin/start-master.sh or start-worker.sh, so the master and the worker
are started with `bin/spark-class` (what those scripts run) and stopped by their process groups.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest
from spark_helpers import assert_same, cdrs, chunks, compile_text, prepare, read_jsonl, run_reference

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).parents[2]
BILLING = ROOT / "examples" / "billing.cpl"
SPARK_HOME = Path(pyspark.__file__).parent
SHOWN = "INSERT INTO shown SELECT idcaller, CAST(cost / 7 AS varchar) AS seventh FROM costs;\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Any, timeout: float, procs: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{what}: a Spark daemon exited with {p.returncode}")
        with contextlib.suppress(OSError, ValueError):
            if check():
                return
        time.sleep(0.5)
    raise TimeoutError(f"{what}: not ready after {timeout} s")


def alive_workers(ui_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
        return int(json.load(r).get("aliveworkers", 0))


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    """A Spark master and one worker on loopback, on free ports; yields the master URL."""
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER_HOST": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp_path / "logs"),
        "SPARK_PID_DIR": str(tmp_path / "pids"),
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
        "PYSPARK_PYTHON": sys.executable,
    }
    port, ui, worker_port, worker_ui = free_port(), free_port(), free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    procs: list[subprocess.Popen[bytes]] = []
    logs = tmp_path / "logs"
    logs.mkdir()

    def start(name: str, *args: str) -> None:
        with (logs / f"{name}.log").open("wb") as log:
            procs.append(
                subprocess.Popen(
                    [spark_class, *args],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    try:
        start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        )
        wait_for("master", lambda: alive_workers(ui) >= 0, 60, procs)
        start(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            f"spark://127.0.0.1:{port}",
            "--host",
            "127.0.0.1",
            "--port",
            str(worker_port),
            "--webui-port",
            str(worker_ui),
            "--cores",
            "2",
            "--memory",
            "1g",
            "--work-dir",
            str(tmp_path / "work"),
        )
        wait_for("worker", lambda: alive_workers(ui) >= 1, 60, procs)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in reversed(procs):  # the worker first, then the master; each with its children
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)


def test_billing_on_a_standalone_cluster(standalone: str, tmp_path: Path) -> None:
    inputs = {"cdr1": chunks(cdrs(400, seed=21, mean_gap_s=900), 2), "cdr2": chunks(cdrs(300, seed=22), 2)}
    sources = prepare(tmp_path, inputs)
    out = tmp_path / "out"
    # and a double's text, which the executors write with the project's own function: its jar
    # reaches them from the driver (deployer/spark/functions)
    script = tmp_path / "billing.cpl"
    script.write_text(BILLING.read_text() + SHOWN)
    cmd = [
        str(Path(sys.executable).parent / "cep"),
        "run",
        str(script),
        "--master",
        standalone,
        *[a for s, uri in sources.items() for a in ("--source", f"{s}={uri}")],
        "--sink",
        f"bill=file:{out}",
        "--sink",
        f"costs=file:{out}",
        "--sink",
        f"shown=file:{out}",
        "--checkpoint",
        str(tmp_path / "checkpoint"),
        "--until-idle",
    ]
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "CEP_SPARK_LOG_LEVEL": "ERROR",
    }
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done (spark)" in done.stderr

    graph = compile_text(script.read_text())
    ref = run_reference(graph, tmp_path, sources, ["bill", "costs", "shown"])
    bills = read_jsonl(out, "bill-")
    assert len(bills) >= 20
    assert sorted(bills, key=str) == sorted(ref["bill"], key=str)
    spk = type(ref)(
        "spark", {"bill": bills, "costs": read_jsonl(out, "costs-"), "shown": read_jsonl(out, "shown-")}
    )
    assert_same(ref, spk, "costs", min_rows=300, ordered=True)
    assert_same(ref, spk, "shown", min_rows=300)
