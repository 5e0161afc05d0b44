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
"""

from __future__ import annotations

import threading

from pyspark.sql import DataFrame

from deployer.spark.run.interrupt import Writer, interruptible


class Gate:
    """`writer` (interruptible), unless `stopping` is set or the gate was released: then a batch that
    has not begun writing fails before it touches its DataFrame (lazy: nothing of the batch runs, no
    store is called), is not committed, and is replayed whole on restart."""

    def __init__(self, writer: Writer, stopping: threading.Event) -> None:
        self._writer: Writer | None = interruptible(writer)
        self._stopping = stopping

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        writer = self._writer
        if writer is None or self._stopping.is_set():
            raise RuntimeError(f"batch {batch_id} left to the next run: this one is stopping")
        writer(df, batch_id)

    def release(self) -> None:
        """Drop the writer: the query is stopped and will call it no more."""
        self._writer = None
