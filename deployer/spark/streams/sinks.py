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
from deployer.spark.streams.driver_rows import ordered_values
from deployer.spark.streams.redis_source import redis_stream_writer
from deployer.spark.translate.columns import col_name
from deployer.spark.translate.graph import SEQ
from operators import graph as g
from stores.urls import redact_text

Counter = Callable[[int], None]
SinkWriter = Callable[[DataFrame, int], int]  # foreachBatch that returns the rows it wrote
Writer = Callable[[DataFrame, int], object]  # a foreachBatch function: Spark ignores what it returns


def file_batch_writer(directory: Path, stream: str, names: tuple[str, ...], order: list[str]) -> SinkWriter:
    """foreachBatch: one JSON-lines file per micro-batch, replaced atomically on replay.

    The batch arrives with positional columns and is sorted by `order` (event time, then arrival)."""
    directory.mkdir(parents=True, exist_ok=True)

    def write(df: DataFrame, batch_id: int) -> int:
        target = directory / f"{stream}-batch-{batch_id:08d}.jsonl"
        tmp = directory / f".{target.name}.tmp"
        count = 0
        with tmp.open("w", encoding="utf-8") as f:
            for values in ordered_values(df, len(names), order):
                f.write(event_json(names, values) + "\n")
                count += 1
        if count:
            os.replace(tmp, target)
        else:
            tmp.unlink()
        return count

    return write


def console_batch_writer(stream: str, names: tuple[str, ...], tag: bool, order: list[str]) -> SinkWriter:
    def write(df: DataFrame, batch_id: int) -> int:
        count = 0
        for values in ordered_values(df, len(names), order):
            line = event_json(names, values)
            if tag:
                line = json.dumps({"$stream": stream}, ensure_ascii=False)[:-1] + ", " + line[1:]
            sys.stdout.write(line + "\n")
            count += 1
        sys.stdout.flush()
        return count

    return write


def sink_writer(
    graph: g.Graph, stream: str, uri: str, tagged: bool, counted: Counter | None = None
) -> SinkWriter:
    """The foreachBatch writer of a sink: a file directory, the console (`tagged`: say the stream, as
    several sinks write there), or a Redis stream. Each batch is written in the reference executor's
    order: event time, then arrival. The writer returns the rows it wrote, and tells `counted`."""
    write = _writer(graph, stream, uri, tagged)
    if counted is None:
        return write

    def counting(df: DataFrame, batch_id: int) -> int:
        n = write(df, batch_id)
        counted(n)
        return n

    return counting


def _writer(graph: g.Graph, stream: str, uri: str, tagged: bool) -> SinkWriter:
    schema = graph.stream_schema(stream)
    producer = graph.node(graph.streams[stream].node)
    ts = schema.position(producer.event_time) if producer.event_time is not None else None
    order = ([col_name(ts)] if ts is not None else []) + [SEQ]
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
