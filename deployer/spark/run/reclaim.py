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
  down the connections the deployment's gates (deployer.spark.run.gate) were called on.
- **Its queries, plans and DataFrames.** py4j frees a JVM object when Python frees its proxy, and a
  stopped deployment is a cycle of Python objects (closures that hold it), which only the cyclic
  collector frees, maybe long after: `cep serve` runs it when it undeploys (`collect`), not every
  stop (a `cep run` ends its process; a full collection costs 0.1 to 0.3 s).
"""

from __future__ import annotations

import contextlib
import gc
import socket
from collections.abc import Iterable
from typing import Any

_MONITOR = "Idle Worker Monitor for"


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
            field = factory.getClass().getDeclaredField("useDaemon")
            field.setAccessible(True)
            if not field.getBoolean(factory):
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


def hang_up(connections: Iterable[Any]) -> None:
    """Shut down the sockets of py4j `connections` whose calling threads have ended: the thread that
    serves each then sees the end and closes its side (a thread that calls again opens a new one)."""
    for connection in connections:
        if connection.socket is not None:
            with contextlib.suppress(OSError):
                connection.socket.shutdown(socket.SHUT_RDWR)


def collect() -> None:
    """Free the stopped deployments Python still has, and so their JVM objects (see the module)."""
    gc.collect()
