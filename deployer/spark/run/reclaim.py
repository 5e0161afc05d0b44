"""What a stopped deployment leaves in a long-lived Spark application, given back.

`cep serve` runs every deployment in one Spark application; measured over deploy, run and undeploy
cycles (bench/serve_cycles.py), each deployment of examples/daily_bill.cpl left behind:

- **8 threads and 2 sessions.** A Python streaming source and every transformWithStateInPandas
  start a Python runner on the driver for each query (Spark 4.x `StreamingPythonRunner`). Each runner
  makes a PythonWorkerFactory of its own, whose constructor starts an "Idle Worker Monitor" thread
  that loops forever: nothing ends it, not even the factory's `stop()`. The thread inherits the query
  thread's active SparkSession (an InheritableThreadLocal), so it also keeps the query's cloned
  session. `stop_idle_monitors` stops the monitor threads of the factories that run no daemon: such
  a thread has nothing to do (it only ends a daemon's idle workers), whichever query, running or
  stopped, its factory serves.
- **A Python thread and a socket per query.** Each JVM thread that calls Python (a query's stream
  execution thread, calling its foreachBatch) opens a py4j connection of its own, whose Python side
  py4j serves in a thread of its own for as long as the socket is open. The query's thread ends
  with the query and nothing closed its connection: a long-lived session kept one Python thread
  and one socket per query it had ever started (40 more threads after 40 more cycles, counted with
  `gc.get_objects()` over cycles of bench/serve_cycles.py's deployment, ad hoc). `hang_up` shuts
  down the connections the deployment's gates (deployer.spark.run.gate) were called on. The JVM
  keeps its half in its callback client's pool, which a connection leaves only when its own thread
  calls again: `close_idle_callbacks` runs py4j's own cleanup of that pool.
- **Its queries, plans and DataFrames.** py4j frees a JVM object when Python frees its proxy, and a
  stopped deployment is a cycle of Python objects (closures that hold it), which only the cyclic
  collector frees, maybe long after: `cep serve` runs it when it undeploys (`collect`), not every
  stop (a `cep run` ends its process; a full collection costs 0.1 to 0.3 s).
- **Three open files per driver-side runner.** Each runner's worker is started by Spark's
  `PythonWorkerFactory.createSimpleWorker`, which waits for the worker to connect back with a
  `Selector` it registers its listening socket in, and never closes (Spark 4.3.0, read off its
  bytecode). The JDK releases a closed channel's socket only when its key leaves the selector, which
  an abandoned selector never does, and nothing closes an unreachable selector: each runner left its
  epoll instance, the eventfd that wakes it and the listening socket open in the JVM, 12 open files
  per deployment of examples/daily_bill.cpl (traced with `strace` over cycles of
  bench/serve_cycles.py: every one bound by a query's stream thread, where the runners start).
  `close_abandoned_selectors` finds them in the JVM's `/proc` entries and closes them.
- **A listener per stateful query.** A query runs its micro-batches in a session of its own (Spark's
  clone of the one that started it), and its stateful operators ask that session for its streaming
  query manager, whose making registers the manager's listener bus on the application's listener
  bus, where nothing removes it: one more listener, called with every streaming event of every
  query, for each stateful query ever started (107 in the serve bench's JVM after some 60 cycles,
  `jcmd GC.class_histogram`). No query is started from such a session, and nothing registers a
  listener with its manager: `drop_stream_buses` removes the stopped queries' ones.
- **An Arrow allocator per Python source.** Each query's Python streaming source starts a runner on
  the driver that makes a child of Arrow's root allocator to read its worker's answers, and its
  `stop` never closes it (Spark 4.3.0, `PythonStreamingSourceRunner`, read off its bytecode): one
  more child allocator, empty, per source per query started. `close_source_allocators` closes the
  stopped queries' ones.
- **Three loggers per state store.** Spark's RocksDB state store, its provider and its file manager
  each log under a name of their own that holds the store's id and the query's run id, taken
  through SLF4J, whose log4j binding keeps every logger it was ever asked for by name (log4j's own
  registry holds them weakly): 18 more per deployment of bench/serve_cycles.py's script, never
  dropped (`jcmd GC.class_histogram` over 200 cycles, 2026-12-04). `forget_store_loggers` takes the
  stopped queries' ones out of the binding's registry; a store still loaded keeps logging through
  the logger it holds.
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError

from deployer.spark.run.session import UDS_DIR

_MONITOR = "Idle Worker Monitor for"
_LISTENING = "00010000"  # /proc/net/unix's flags of a listening socket (__SO_ACCEPTCON)


def stop_idle_monitors(spark: Any) -> int:
    """Stop the monitor threads of PythonWorkerFactories that run no daemon; how many it stopped.
    `Thread.stop` is the only way to end a thread that loops without checking for interruption
    (an interrupt would end it with an InterruptedException printed to the log); it is safe here,
    where the thread holds nothing another thread needs."""
    jvm = spark.sparkContext._jvm
    threads = jvm.java.lang.Thread.getAllStackTraces().keySet().toArray()
    stopped = []
    for i in _monitor_candidates(jvm, threads):
        thread = threads[i]
        if not str(thread.getName()).startswith(_MONITOR):
            continue
        with contextlib.suppress(Exception):  # another Spark's factory, or a JVM without Thread.stop
            factory = thread.getClass().getField("$outer").get(thread)
            if not jvm_field(factory, "useDaemon"):
                thread.stop()
                stopped.append(thread)
    for thread in stopped:  # `stop` only asks: gone once this returns
        thread.join(1000)
    return len(stopped)


def _monitor_candidates(jvm: Any, threads: Any) -> range | list[int]:
    """The positions in `threads` (a Java array) of the threads that may be monitors, from their
    descriptions read in one round trip to the JVM (`Thread[name,priority,group]`, with `#id,` first
    from Java 19), where asking each thread its name took one per thread: a deployment's stop made
    ~400 round trips here, in a JVM of ~130 threads. Every position when the descriptions cannot be
    told apart (a name holding the separator)."""
    described = str(jvm.java.util.Arrays.toString(threads))
    if _MONITOR not in described:
        return []
    parts = described[1:-1].split(", Thread[")
    n = len(threads)
    if len(parts) != n:
        return range(n)
    return [i for i, part in enumerate(parts) if _MONITOR in part]


def give_back(spark: Any, callers: Iterable[Any], queries: Iterable[Any]) -> None:
    """What a deployment's stop gives back (see the module), once its queries have stopped: the
    py4j connections its queries' threads called it on (`callers`, both halves), the runners'
    monitor threads and the files their workers' starts left open, and of its `queries` (pyspark
    StreamingQuery objects, all ended) the listener buses of their own sessions, the Arrow
    allocators of their Python sources and the loggers of their state stores."""
    hang_up(callers)
    close_idle_callbacks(spark)
    stop_idle_monitors(spark)
    close_abandoned_selectors(spark)
    queries = list(queries)
    drop_stream_buses(spark, queries)
    close_source_allocators(queries)
    forget_store_loggers(spark, queries)


def drop_stream_buses(spark: Any, queries: Iterable[Any]) -> int:
    """Remove from the application's listener bus the streaming listener bus of each of `queries`'
    own session (see the module); how many. Read through private fields, so that a session or a
    manager never made is not made now (Spark 4.3: `SessionState.streamingQueryManager`, a lazy
    value, and `StreamingQueryManager.listenerBus`); a Spark without them keeps its buses."""
    live = spark.sparkContext._jsc.sc().listenerBus()
    dropped = 0
    for q in queries:
        with contextlib.suppress(Py4JError):
            state = jvm_field(q._jsq.streamingQuery().sparkSessionForStream(), "sessionState")
            manager = None if state is None else jvm_field(state, "streamingQueryManager")
            if manager is not None:
                live.removeListener(jvm_field(manager, "listenerBus"))
                dropped += 1
    return dropped


def close_source_allocators(queries: Iterable[Any]) -> int:
    """Close the Arrow allocator the runner of each Python source of the stopped `queries` made (see
    the module); how many. A source of another kind has no runner; an allocator that still holds
    memory refuses to close and is left as it was (none was seen to)."""
    closed = 0
    for q in queries:
        try:
            sources = q._jsq.streamingQuery().sources()  # null until its plan was made
        except Py4JError:
            continue
        for i in range(0 if sources is None else sources.length()):
            with contextlib.suppress(Py4JError):
                runner = jvm_field(sources.apply(i), "runner")
                if runner is not None:
                    jvm_field(runner, "allocator").close()
                    closed += 1
    return closed


_STORE_RUN = "queryRunId="  # in the name of a state store's logger, before the query's run id


def store_loggers(spark: Any) -> list[tuple[Any, str]]:
    """The loggers SLF4J's log4j binding keeps that are named after a query's state store (see the
    module): each as the binding's map that holds it and its name; none with a binding of another
    kind. One round trip for all the names of a map."""
    found: list[tuple[Any, str]] = []
    with contextlib.suppress(Py4JError):  # not log4j's binding: no `getLoggersInContext`
        jvm = spark.sparkContext._jvm
        factory = jvm.org.slf4j.LoggerFactory.getILoggerFactory()
        for context in factory.getLoggerContexts().toArray():
            loggers = factory.getLoggersInContext(context)  # the registry's own map
            names = str(jvm.java.lang.String.join("\n", loggers.keySet())).split("\n")
            found += [(loggers, name) for name in names if _STORE_RUN in name]
    return found


def forget_store_loggers(spark: Any, queries: Iterable[Any]) -> int:
    """Take the loggers named after the state stores of the stopped `queries` (by their run ids)
    out of the registry of SLF4J's log4j binding (see the module); how many."""
    runs = [f"{_STORE_RUN}{q.runId}" for q in queries]
    gone = [(loggers, name) for loggers, name in store_loggers(spark) if any(r in name for r in runs)]
    for loggers, name in gone:
        with contextlib.suppress(Py4JError):
            loggers.remove(name)
    return len(gone)


def jvm_field(obj: Any, name: str) -> Any:
    """The value of the field `name` of the JVM object `obj` or of a class it extends, private or
    not, static or not (None for null; a boolean, number or string as Python's)."""
    cls = obj.getClass()
    while True:
        try:
            field = cls.getDeclaredField(name)
            break
        except Py4JError:  # NoSuchFieldException: a class it extends may declare it
            cls = cls.getSuperclass()
            if cls is None:
                raise
    field.setAccessible(True)
    return field.get(obj)


def hang_up(connections: Iterable[Any]) -> None:
    """Shut down the sockets of py4j `connections` whose calling threads have ended: the thread that
    serves each then sees the end and closes its side (a thread that calls again opens a new one)."""
    for connection in connections:
        if connection.socket is not None:
            with contextlib.suppress(OSError):
                connection.socket.shutdown(socket.SHUT_RDWR)


def close_idle_callbacks(spark: Any) -> None:
    """Close the JVM's pooled connections to Python that no thread used since the last cleanup:
    py4j's `CallbackClient.periodicCleanup`, which its pinned-thread client never schedules, run
    twice (the first marks every pooled connection unused). A connection in use is out of the pool
    and untouched; a live thread whose idle connection was closed opens a new one when it calls
    Python again (py4j's `PythonClient.getConnection`), and the ended threads' connections, one per
    query ever started, are closed for good."""
    with contextlib.suppress(Py4JError):  # a py4j without that client: they stay, as before
        client = spark.sparkContext._gateway.java_gateway_server.getCallbackClient()
        client.periodicCleanup()
        client.periodicCleanup()


def collect() -> None:
    """Free the stopped deployments Python still has, and so their JVM objects (see the module)."""
    gc.collect()


def close_abandoned_selectors(spark: Any) -> int:
    """Close what the selectors of the JVM's finished `createSimpleWorker` calls hold (see the
    module); how many selectors. Only with the workers' sockets in a directory of their own (a local
    master's, deployer.spark.run.session `python_worker_conf`): there a socket's file is deleted
    after its channel was closed, which tells a finished call's socket from one still waiting for
    its worker. Each file is closed in the JVM by its number (`IOUtil.newFD`, in a package Spark's
    launcher opens): no object of the JVM's refers to these, so none will close them again."""
    directory = spark.conf.get(UDS_DIR, None)
    if not directory:
        return 0
    jvm = spark.sparkContext._jvm
    try:
        found = abandoned_selectors(jvm_proc(spark), directory)
    except OSError:  # no /proc: not Linux
        return 0
    try:
        for fd in found:
            jvm.java.io.FileInputStream(jvm.sun.nio.ch.IOUtil.newFD(fd)).close()
    except Py4JError:  # a JVM that keeps sun.nio.ch closed (not started by Spark's launcher)
        return 0
    return len(found) // 3


def abandoned_selectors(proc: Path, directory: str) -> list[int]:
    """The open files of the process at `proc` (its /proc entry) that abandoned selectors hold, three
    each: an epoll instance whose only two registered files are an eventfd (the JDK's wake-up) and
    a listening socket bound under `directory` whose file is gone (its channel closed), both too."""
    links = fd_links(proc)
    gone = closed_listeners(proc / "net" / "unix", directory)
    found: list[int] = []
    for fd, link in links.items():
        if link != "anon_inode:[eventpoll]":
            continue
        try:
            info = (proc / "fdinfo" / str(fd)).read_text()
        except OSError:
            continue
        targets = [int(line.split()[1]) for line in info.splitlines() if line.startswith("tfd:")]
        kinds = sorted(links.get(t, "") for t in targets)
        if len(targets) == 2 and kinds[0] == "anon_inode:[eventfd]" and kinds[1] in gone:
            found += [fd, *targets]
    return found


def jvm_proc(spark: Any) -> Path:
    """The /proc entry of the JVM of `spark` (its driver, on this machine)."""
    return Path(f"/proc/{spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()}")


def fd_links(proc: Path) -> dict[int, str]:
    """The open files of the process at `proc`, by number: what each fd's link names (a path,
    `socket:[inode]`, `anon_inode:[eventpoll]`, ...)."""
    links: dict[int, str] = {}
    for entry in (proc / "fd").iterdir():
        with contextlib.suppress(OSError):  # closed meanwhile
            links[int(entry.name)] = os.readlink(entry)
    return links


def closed_listeners(table: Path, directory: str) -> set[str]:
    """The listening Unix sockets of `table` (a /proc/net/unix) bound under `directory` whose file is
    gone, as /proc's fd links name them (`socket:[inode]`)."""
    under = directory.rstrip("/") + "/"
    found = set()
    for line in table.read_text().splitlines()[1:]:
        cols = line.split()  # Num RefCount Protocol Flags Type St Inode Path
        if (
            len(cols) == 8
            and cols[3] == _LISTENING
            and cols[7].startswith(under)
            and not os.path.exists(cols[7])
        ):
            found.add(f"socket:[{cols[6]}]")
    return found
