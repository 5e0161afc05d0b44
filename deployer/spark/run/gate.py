"""The foreachBatch callback a deployment hands to Spark: its writer, until the run stops.

A Python foreachBatch function reaches the JVM as a py4j callback proxy. py4j's Python side keeps the
function in its proxy pool until the JVM's proxy object is collected, and the JVM keeps that proxy
for as long as it keeps the query (its sink holds it). The writer's closure holds the deployment,
and the deployment holds its StreamingQuery and DataFrame objects, whose JVM objects py4j keeps
alive for as long as they live in Python. Each heap thus holds the other's objects, and neither
collector can free them: in a long-lived `cep serve` every deployment it had run stayed in the
driver's heap (its queries, their sessions and their last plans: 7 to 8 MB each; bench/serve_cycles.py).

A Gate is the function Spark is given. `release`, once the queries have stopped, drops its writer
and with it the deployment: what is left in the proxy pool is the empty gate, and the rest is
freed once the deployment is dropped.

It also notes the py4j connections its query called it on, which `release` hands back for the
deployment to hang up (deployer.spark.run.reclaim `hang_up` says why).
"""

from __future__ import annotations

import threading
from typing import Any

from pyspark import SparkContext
from pyspark.sql import DataFrame

from deployer.spark.run.interrupt import Writer, interruptible


class Gate:
    """`writer` (interruptible), unless `stopping` is set or the gate was released: then a batch that
    has not begun writing fails before it touches its DataFrame (lazy: nothing of the batch runs, no
    store is called), is not committed, and is replayed whole on restart."""

    def __init__(self, writer: Writer, stopping: threading.Event) -> None:
        self._writer: Writer | None = interruptible(writer)
        self._stopping = stopping
        self._callers: list[Any] = []  # the py4j connections the query's threads called it on

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        caller = _calling_connection()
        if caller is not None and all(c is not caller for c in self._callers):
            self._callers.append(caller)  # a query started again calls from a thread of its own
        writer = self._writer
        if writer is None or self._stopping.is_set():
            raise RuntimeError(f"batch {batch_id} left to the next run: this one is stopping")
        writer(df, batch_id)

    def release(self) -> list[Any]:
        """Drop the writer: the query is stopped and will call it no more. Returns the py4j
        connections its threads called it on (for `reclaim.hang_up`)."""
        self._writer = None
        callers, self._callers = self._callers, []
        return callers


def _calling_connection() -> Any:
    """The py4j connection from the JVM that the current call came by, if it came by one: the
    callback server serves each in a thread of its own, which it marks as that connection's."""
    gateway = SparkContext._gateway
    client = getattr(gateway, "_gateway_client", None)
    getter = getattr(client, "get_thread_connection", None)  # pinned-thread mode (PySpark's default)
    connection = getter() if getter is not None else None
    if connection is None or getattr(connection, "initiated_from_client", True):
        return None
    return connection
