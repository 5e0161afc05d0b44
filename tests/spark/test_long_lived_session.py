"""A long-lived session keeps nothing of a deployment once it has stopped (`cep serve` runs every
deployment in one Spark application; bench/serve_cycles.py measures its heap over many cycles).

Before: the writer each query hands to foreachBatch held the deployment, py4j's proxy pool held the
writer for as long as the JVM held the query, and the JVM held the query for as long as Python held
its proxy, so no deployment was ever freed (deployer.spark.run.gate); and every driver-side Python
runner left a thread that never ends, holding its query's session, and three open files in the JVM
(deployer.spark.run.reclaim).
"""

from __future__ import annotations

import io
import threading
import time
import weakref
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import T0, compile_text, iso, prepare

from deployer.spark.run.deployment import SparkDeployment
from deployer.spark.run.reclaim import (
    _MONITOR,
    _monitor_candidates,
    abandoned_selectors,
    close_abandoned_selectors,
    close_idle_callbacks,
    closed_listeners,
    collect,
    fd_links,
    jvm_proc,
    stop_idle_monitors,
)
from deployer.spark.run.session import UDS_DIR

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA calls WITH idcaller integer, cost integer, ts timestamp TIMESTAMP BY ts;
INSERT INTO per_caller SELECT idcaller, sum(cost) AS total FROM calls
  WINDOW TIME SIZE 10 SECONDS GROUP BY idcaller;
"""


def _events() -> list[dict[str, Any]]:
    return [{"idcaller": k % 3, "cost": k, "ts": iso(T0 + timedelta(seconds=4 * k))} for k in range(12)]


def _run_one(spark: Any, tmp: Path, k: int) -> weakref.ref[SparkDeployment]:
    graph = compile_text(SCRIPT)
    sources = prepare(tmp / str(k), {"calls": [_events()]})
    d = SparkDeployment(
        spark,
        graph,
        sources,
        {"per_caller": f"file:{tmp / str(k) / 'out'}"},
        str(tmp / str(k) / "ck"),
        dead_letter=f"file:{tmp / str(k) / 'dead'}",
        until_idle=True,
    )
    stats = d.run(out=io.StringIO())
    assert stats.rows_out > 0  # it ran
    return weakref.ref(d)


def _monitors(spark: Any) -> int:
    """The factories' monitor threads that run no daemon: the ones nothing ever ends."""
    jvm = spark.sparkContext._jvm
    n = 0
    for t in jvm.java.lang.Thread.getAllStackTraces().keySet().toArray():
        if str(t.getName()).startswith("Idle Worker Monitor for") and t.isAlive():
            factory = t.getClass().getField("$outer").get(t)
            field = factory.getClass().getDeclaredField("useDaemon")
            field.setAccessible(True)
            n += 0 if field.getBoolean(factory) else 1
    return n


def _serving_threads() -> int:
    """Python threads serving a connection the JVM opened to py4j's callback server."""
    return sum(
        1
        for t in threading.enumerate()
        if type(getattr(getattr(t, "_target", None), "__self__", None)).__name__ == "ClientServerConnection"
    )


def _settled(count: Callable[[], int], at_most: int) -> int:
    """`count()` once it is at most `at_most`, or after 10 s (a hung-up connection's thread ends
    on its own, a moment later)."""
    deadline = time.monotonic() + 10
    while (n := count()) > at_most and time.monotonic() < deadline:
        time.sleep(0.05)
    return n


def test_a_stopped_deployment_is_freed_and_leaves_no_thread(spark: Any, tmp_path: Path) -> None:
    serving = _serving_threads()
    first = _run_one(spark, tmp_path, 1)
    second = _run_one(spark, tmp_path, 2)
    # Each query's thread called its foreachBatch through a connection of its own, whose serving
    # thread in Python ended once the deployment stopped (deployer.spark.run.gate).
    assert _settled(_serving_threads, serving) <= serving
    collect()  # as cep serve does when it undeploys
    # Nothing holds a stopped deployment: not py4j's proxy pool through its queries' writers.
    assert first() is None
    assert second() is None
    # Its Python source and window started driver-side runners, whose monitor threads are gone.
    assert _monitors(spark) == 0
    assert stop_idle_monitors(spark) == 0


def _stream_buses(spark: Any) -> int:
    """The streaming query managers' listener buses registered on the application's listener bus."""
    live = spark.sparkContext._jsc.sc().listenerBus()
    return sum(1 for x in live.listeners() if x.getClass().getSimpleName() == "StreamingQueryListenerBus")


def test_a_stopped_deployment_leaves_no_listener_on_the_applications_bus(spark: Any, tmp_path: Path) -> None:
    """Each stateful query's own session registered its manager's listener bus on the application's,
    where it stayed for the life of the application (deployer.spark.run.reclaim); the stop of its
    deployment removes it. The session's own manager (and bus) is made before counting: its first
    query start makes it, and it stays."""
    assert spark.streams is not None
    before = _stream_buses(spark)
    for k in range(2):
        _run_one(spark, tmp_path, k)  # a window: a stateful query
    assert _stream_buses(spark) <= before


def _arrow_children(spark: Any) -> int:
    """The child allocators of Arrow's root allocator in the JVM."""
    return int(
        spark.sparkContext._jvm.org.apache.spark.sql.util.ArrowUtils.rootAllocator()
        .getChildAllocators()
        .size()
    )


def test_a_stopped_deployment_leaves_no_arrow_allocator(spark: Any, tmp_path: Path) -> None:
    """Each query's Python source made a child of Arrow's root allocator that its stop never closed
    (deployer.spark.run.reclaim); its deployment's stop closes it."""
    before = _arrow_children(spark)
    for k in range(2):
        _run_one(spark, tmp_path, k)  # one query reading one Python source
    assert _arrow_children(spark) <= before


def _store_loggers(spark: Any) -> int:
    """The loggers SLF4J's log4j binding keeps that are named after a query's state store. Read here,
    not with reclaim.store_loggers: were that to find none, the stop would drop none and the count
    would still be 0."""
    jvm = spark.sparkContext._jvm
    factory = jvm.org.slf4j.LoggerFactory.getILoggerFactory()
    names: list[str] = []
    for context in factory.getLoggerContexts().toArray():
        names += str(jvm.java.lang.String.join("\n", factory.getLoggersInContext(context).keySet())).split(
            "\n"
        )
    return sum("queryRunId=" in name for name in names)


def test_a_stopped_deployment_leaves_no_logger_of_its_state_stores(spark: Any, tmp_path: Path) -> None:
    """Spark's RocksDB state store takes three loggers per store, named after the store and the
    query's run, which SLF4J's binding kept for the life of the application (deployer.spark.run.reclaim);
    the stop of its deployment drops them. Its window's stores made some while it ran."""
    before = _store_loggers(spark)
    for k in range(2):
        _run_one(spark, tmp_path, k)  # a window: a stateful query, its stores in this JVM
    assert _store_loggers(spark) <= before


def _jvm_sockets_in_close_wait(proc: Path) -> int:
    """How many of the JVM's TCP sockets wait for it to close them (their peer has: `CLOSE_WAIT`)."""
    held = set(fd_links(proc).values())
    n = 0
    for table in ("tcp", "tcp6"):
        for line in (proc / "net" / table).read_text().splitlines()[1:]:
            cols = line.split()  # sl local remote st ... inode (the 10th)
            n += cols[3] == "08" and f"socket:[{cols[9]}]" in held
    return n


def test_a_stopped_deployment_leaves_no_open_file_in_the_jvm(spark: Any, tmp_path: Path) -> None:
    """Each driver-side runner's worker start left a selector open in the JVM with the listening
    socket it waited on (three files), and each query's thread a py4j connection; its deployment's
    stop closes them."""
    directory = spark.conf.get(UDS_DIR)
    proc = jvm_proc(spark)
    assert directory  # the tests' session is a local master's, with the workers' sockets there
    close_abandoned_selectors(spark)  # any an earlier test in this session left
    close_idle_callbacks(spark)
    waiting = _jvm_sockets_in_close_wait(proc)
    for k in range(3):
        _run_one(spark, tmp_path, k)
    # Without the stop's close, the three deployments left three selectors (one each, as counted
    # here); none is left now: not the epoll instances, not the sockets they waited on.
    assert abandoned_selectors(proc, directory) == []
    # held by the JVM: a listening socket whose file is gone (its channel closed)
    assert set(fd_links(proc).values()) & closed_listeners(proc / "net" / "unix", directory) == set()
    # Each query's thread called its foreachBatch on a py4j connection of its own, whose Python
    # half the stop shut down: the JVM's half, in its callback client's pool, is closed too, where
    # it waited in CLOSE_WAIT for the life of the session (deployer.spark.run.reclaim).
    assert _jvm_sockets_in_close_wait(proc) <= waiting


def test_a_selector_is_taken_only_with_a_closed_listening_socket_and_its_wakeup(tmp_path: Path) -> None:
    """`abandoned_selectors` reads a /proc entry (made up here): it takes an epoll instance only
    when its two registered files are an eventfd and a listening socket under the directory whose
    file is gone; a socket whose file is there is a worker's start still waiting."""
    sockets = tmp_path / "uds"
    sockets.mkdir()
    (sockets / ".waiting.sock").touch()
    proc = tmp_path / "proc"
    for sub in ("fd", "fdinfo", "net"):
        (proc / sub).mkdir(parents=True)
    unix = ["Num RefCount Protocol Flags Type St Inode Path"]
    for inode, flags, name in [
        (101, "00010000", ".gone.sock"),  # listening, its file deleted: a finished start
        (102, "00010000", ".waiting.sock"),  # listening, its file there
        (103, "00000000", ".gone2.sock"),  # a connected socket
        (104, "00010000", ".other.sock"),  # listening, gone, but elsewhere
    ]:
        where = tmp_path / "elsewhere" if inode == 104 else sockets
        unix.append(f"0000: 00000002 00000000 {flags} 0001 01 {inode} {where / name}")
    (proc / "net" / "unix").write_text("\n".join(unix) + "\n")
    links = {3: "anon_inode:[eventfd]", 11: "socket:[101]", 12: "socket:[102]", 13: "socket:[103]"}
    links |= {14: "socket:[104]", 5: "anon_inode:[eventfd]", 6: "anon_inode:[eventfd]"}
    epolls = {20: [3, 11], 21: [5, 12], 22: [6, 13], 23: [6, 14], 24: [3, 11, 12], 25: [11, 12]}
    for fd, link in links.items() | {e: "anon_inode:[eventpoll]" for e in epolls}.items():
        (proc / "fd" / str(fd)).symlink_to(link)
    for fd, targets in epolls.items():
        lines = ["pos:\t0", "flags:\t02000002", "mnt_id:\t15", "ino:\t1057"]
        lines += [f"tfd: {t:>8} events:       19 data: {t:16x}  pos:0 ino:1 sdev:8" for t in targets]
        (proc / "fdinfo" / str(fd)).write_text("\n".join(lines) + "\n")
    assert abandoned_selectors(proc, str(sockets)) == [20, 3, 11]


def test_monitors_are_told_from_every_thread_description_of_the_jvm(spark: Any) -> None:
    """`stop_idle_monitors` reads every thread's description in one round trip and looks only at
    the monitors it names, by their position; a thread name that holds the descriptions' separator
    makes the positions unsure, and then every thread is looked at, as before."""
    jvm = spark.sparkContext._jvm
    stop_idle_monitors(spark)  # any an earlier test in this session left
    timers = [jvm.java.util.Timer(f"{_MONITOR} nothing", True)]  # a thread of that name, not a monitor
    try:
        threads = jvm.java.lang.Thread.getAllStackTraces().keySet().toArray()
        names = [str(t.getName()) for t in threads]
        found = list(_monitor_candidates(jvm, threads))
        assert found and found == [i for i, name in enumerate(names) if name.startswith(_MONITOR)]
        assert stop_idle_monitors(spark) == 0  # the look-alike has no factory: left alone

        timers.append(jvm.java.util.Timer("an odd, Thread[name", True))
        threads = jvm.java.lang.Thread.getAllStackTraces().keySet().toArray()
        assert _monitor_candidates(jvm, threads) == range(len(threads))
    finally:
        for timer in timers:
            timer.cancel()
