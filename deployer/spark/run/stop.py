"""A quiet and quick stop of a session this process started (`cep run`'s, before its summary)."""

from __future__ import annotations

import contextlib
import os
import signal
import socketserver
import threading
import time
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession


def stop_session(spark: SparkSession, wait: float = 5.0) -> None:
    """Stop a session this process started, its Python workers first.

    Spark stops its local Python workers by closing their sockets, then signals their daemon; a
    worker that notices its closed socket first prints a BrokenPipeError traceback on its way out
    (pyspark/daemon.py), on the run's standard error, after its last line. Signalled first (SIGTERM),
    the daemon ends its process group's workers with SIGHUP, which they take quietly. Only the
    daemons this driver's JVM started are signalled (a cluster's run on other machines' executors)."""
    try:
        jvm = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    except Exception:  # no JVM left to ask: nothing of ours to signal
        jvm = None
    daemons = python_daemons(jvm) if jvm is not None else []
    for pid in daemons:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while daemons and time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in daemons):
        time.sleep(0.02)
    server = _accumulator_server(spark.sparkContext)
    spark.stop()
    if server is not None:  # its loop ends within a second, or with this process
        threading.Thread(target=server.shutdown, name="cep-accumulator-server-end", daemon=True).start()


def _accumulator_server(sc: SparkContext) -> socketserver.BaseServer | None:
    """PySpark's accumulator server, taken from `sc` so that `SparkContext.stop` does not wait for
    it, and asked to end. The connection the JVM keeps to it is served by a loop that looks at the
    request to end once a second, and `stop` waits for that look: 0.2 to 1 s of every run's stop
    (cProfile of `cep run`'s stop, ad hoc). The caller shuts the server down after the context."""
    server = getattr(sc, "_accumulatorServer", None)
    if server is None:
        return None
    sc._accumulatorServer = None  # type: ignore[assignment]
    server.server_shutdown = True
    return server


# The daemons' command lines: PySpark's own (the driver's Python runners) and the executor's
# (worker_path/cep_daemon.py), as `python -m <module>`.
_DAEMONS = (b"pyspark.daemon", b"cep_daemon")


def python_daemons(parent: int) -> list[int]:
    """The Python daemons whose parent is `parent` (Linux /proc; none elsewhere)."""
    return child_processes(parent, _DAEMONS)


def child_processes(parent: int, marks: tuple[bytes, ...] | None = None) -> list[int]:
    """The processes whose parent is `parent` and, given `marks`, whose command line holds one."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == parent and (
                marks is None or any(m in (entry / "cmdline").read_bytes() for m in marks)
            ):
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
    return found
