"""Spark sinks for `cep run --engine spark`: JSON-lines files and the console.

Sinks write the same JSON lines as the local engine; a file sink writes one file per micro-batch named
by the batch id, so a replayed batch overwrites its own file instead of doubling it. Each batch is
written in the reference executor's order (event time, then arrival). Every sink's rows come to the
driver to be written, so its writer returns how many it wrote: the run's and each micro-batch's
count of rows out, with no Spark metric of its own (deployer.spark.run.shared).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame

from deployer.connectors.files import file_dir
from deployer.connectors.records import event_json
from deployer.connectors.redis_stream import is_redis_stream_uri
from deployer.spark.streams.driver_rows import DriverSink, Rows
from deployer.spark.streams.redis_sink import redis_stream_writer
from deployer.spark.translate.batch_order import batch_order
from operators import graph as g
from stores.urls import redact_text

Counter = Callable[[int, int], None]  # told the rows a writer wrote in a batch, and the batch's id
Writer = Callable[[DataFrame, int], object]  # a foreachBatch function: Spark ignores what it returns


def file_batch_writer(directory: Path, stream: str, names: tuple[str, ...], order: list[str]) -> DriverSink:
    """One JSON-lines file per micro-batch, replaced atomically on replay.

    The batch arrives with positional columns and is sorted by `order` (event time, then arrival)."""
    directory.mkdir(parents=True, exist_ok=True)

    def emit(rows: Rows, batch_id: int) -> int:
        if not rows:
            return 0
        target = directory / f"{stream}-batch-{batch_id:08d}.jsonl"
        tmp = directory / f".{target.name}.tmp"
        with tmp.open("w", encoding="utf-8") as f:
            for values in rows:
                f.write(event_json(names, values) + "\n")
        os.replace(tmp, target)
        return len(rows)

    return DriverSink(len(names), tuple(order), emit)


def console_batch_writer(stream: str, names: tuple[str, ...], tag: bool, order: list[str]) -> DriverSink:
    def emit(rows: Rows, batch_id: int) -> int:
        for values in rows:
            line = event_json(names, values)
            if tag:
                line = json.dumps({"$stream": stream}, ensure_ascii=False)[:-1] + ", " + line[1:]
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return len(rows)

    return DriverSink(len(names), tuple(order), emit)


def sink_writer(
    graph: g.Graph, stream: str, uri: str, tagged: bool, counted: Counter | None = None
) -> DriverSink:
    """The writer of a sink: a file directory, the console (`tagged`: say the stream, as several
    sinks write there), or a Redis stream. Each batch is written in the reference executor's order:
    event time, then arrival. The writer returns the rows it wrote, and tells `counted`."""
    write = _writer(graph, stream, uri, tagged)
    return write if counted is None else write.counting(counted)


def sink_order(graph: g.Graph, stream: str) -> list[str]:
    """The columns a sink's batch is sorted by: the reference executor's order (`batch_order`)."""
    return batch_order(graph, graph.streams[stream])


def _writer(graph: g.Graph, stream: str, uri: str, tagged: bool) -> DriverSink:
    schema = graph.stream_schema(stream)
    order = sink_order(graph, stream)
    if uri == "console":
        return console_batch_writer(stream, schema.names, tagged, order)
    if is_redis_stream_uri(uri):
        return redis_stream_writer(uri, stream, schema.names, order)
    d = file_dir(uri)
    if d is None:
        raise ValueError(
            f"sink '{stream}': unsupported URI {redact_text(uri)!r}; use file:DIR, redis://...?stream=KEY or console"
        )
    return file_batch_writer(d, stream, schema.names, order)
