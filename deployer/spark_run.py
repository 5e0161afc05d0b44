"""Run a compiled graph on Spark Structured Streaming: one streaming query per output.

Outputs are the requested sinks (`--sink STREAM=URI`, any named stream), the Materialize nodes
(tables) and the dead letters. Each query keeps its own checkpoint under `--checkpoint DIR`, named
after its output, so a restart with the same DIR resumes every output where it stopped.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from deployer.io import file_dir
from deployer.spark_io import (
    SourceError,
    console_batch_writer,
    dead_letter_writer,
    file_batch_writer,
    file_source,
    generator_source,
)
from deployer.spark_plan import SparkGraph, named
from operators import graph as g


@dataclass
class SparkRunStats:
    batches: int = 0
    rows_in: int = 0
    queries: list[str] = field(default_factory=list)
    dead_lettered: int = 0


def spark_session(master: str | None = None, app: str = "paascep") -> SparkSession:
    """A session configured for CEP: UTC, few shuffle partitions, quiet logs."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app)
        .master(master or "local[*]")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", os.environ.get("CEP_SHUFFLE_PARTITIONS", "4"))
        # Division by zero and bad casts are handled per event (dead letter), not by failing a batch.
        .config("spark.sql.ansi.enabled", "false")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        .config("spark.driver.bindAddress", os.environ.get("CEP_SPARK_BIND", "127.0.0.1"))
        .config("spark.ui.showConsoleProgress", "false")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("CEP_SPARK_LOG_LEVEL", "ERROR"))
    return spark


def _stream(graph: g.Graph, name: str) -> str:
    for s in graph.streams:
        if s.lower() == name.lower():
            return s
    raise ValueError(f"the script has no stream named '{name}'; its streams: {', '.join(graph.streams)}")


class SparkDeployment:
    """Builds and starts the queries of one script; `run` drives them to the end or forever."""

    def __init__(
        self,
        spark: SparkSession,
        graph: g.Graph,
        sources: Mapping[str, str],
        sinks: Mapping[str, str],
        checkpoint: str | None,
        dead_letter: str | None = None,
        stores: Any = None,
        until_idle: bool = False,
        name: str = "cep",
    ):
        self.spark = spark
        self.graph = graph
        self.until_idle = until_idle
        self.name = name
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if checkpoint is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="cep-checkpoint-")
            checkpoint = self._tmp.name
        self.checkpoint = Path(checkpoint)
        frames: dict[str, DataFrame] = {}
        self.rejected: list[tuple[str, DataFrame]] = []
        for src in graph.sources():
            uri = next((u for s, u in sources.items() if s.lower() == src.stream.lower()), None)
            if uri is None:
                raise SourceError(f"stream '{src.stream}' has no input: add --source {src.stream}=file:DIR")
            if uri.startswith("generator:"):
                frames[src.stream] = generator_source(spark, uri, src.schema)
            else:
                good, bad = file_source(spark, uri, src.schema)
                frames[src.stream] = good
                self.rejected.append((src.stream, bad))
        for s in sources:
            _stream(graph, s)  # a binding for an unknown stream is a mistake worth reporting
        self.sg = SparkGraph(graph, frames, stores)
        self.sinks = {_stream(graph, s): uri for s, uri in sinks.items()}
        first = next((file_dir(u) for u in self.sinks.values() if file_dir(u) is not None), None)
        if dead_letter == "console":
            self.dead_dir: Path | None = None
        elif dead_letter:
            self.dead_dir = file_dir(dead_letter) or Path(dead_letter)
        else:
            self.dead_dir = (first.parent / "dead-letter") if first else Path("dead-letter")
        self.queries: list[StreamingQuery] = []

    def _start(self, df: DataFrame, name: str, writer: Any) -> None:
        w = df.writeStream.queryName(f"{self.name}:{name}").foreachBatch(writer)
        w = w.option("checkpointLocation", str(self.checkpoint / name.replace(":", "_")))
        w = w.trigger(availableNow=True) if self.until_idle else w.trigger(processingTime="0 seconds")
        self.queries.append(w.start())

    def start(self) -> None:
        consoles = [s for s, u in self.sinks.items() if u == "console"]
        for stream, uri in self.sinks.items():
            port = self.graph.streams[stream]
            schema = self.graph.stream_schema(stream)
            df = named(self.sg.port(port), schema)
            if uri == "console":
                writer = console_batch_writer(stream, schema.names, len(consoles) > 1)
            else:
                d = file_dir(uri)
                if d is None:
                    raise ValueError(f"sink '{stream}': unsupported URI {uri!r}; use file:DIR or console")
                writer = file_batch_writer(d, stream, schema.names)
            self._start(df, f"sink:{stream}", writer)
        for node in self.graph.nodes:
            if isinstance(node, g.Materialize):
                from deployer.spark_sql import materialize_writer

                df = named(self.sg.port(node.inputs[0]), node.input_schema)
                self._start(df, f"table:{node.table.name}", materialize_writer(self.sg, node))
        for stream, bad in self.rejected:
            self._start(
                bad, f"rejected:{stream}", dead_letter_writer(self.dead_dir, "source", {"stream": stream})
            )
        for dl in self.sg.dead_letters:
            self._start(
                dl.df,
                f"failed:{dl.node}",
                dead_letter_writer(self.dead_dir, "operator", {"node": dl.node, "line": dl.line}),
            )

    def run(self, progress_every: float = 5.0, out: Any = sys.stderr) -> SparkRunStats:
        self.start()
        stats = SparkRunStats(queries=[q.name for q in self.queries])
        ui = self.spark.sparkContext.uiWebUrl
        if ui:
            print(f"spark UI: {ui}", file=out)
        last = time.monotonic()
        try:
            while any(q.isActive for q in self.queries):
                for q in self.queries:
                    if q.exception() is not None:
                        raise RuntimeError(f"query {q.name} failed: {q.exception()}")
                time.sleep(0.2)
                if time.monotonic() - last >= progress_every:
                    last = time.monotonic()
                    print(self.progress_line(), file=out)
            for q in self.queries:
                exc = q.exception()
                if exc is not None:
                    raise RuntimeError(f"query {q.name} failed: {exc}")
        finally:
            self.stop()
        for q in self.queries:
            for p in q.recentProgress:
                stats.batches += 1
                stats.rows_in += int(p.get("numInputRows", 0) if isinstance(p, dict) else p.numInputRows)
        return stats

    def progress_line(self) -> str:
        parts = []
        for q in self.queries:
            p = q.lastProgress
            if not p:
                continue
            parts.append(
                f"{q.name.split(':', 1)[1]}: batch {p['batchId']}, "
                f"in {p.get('inputRowsPerSecond', 0.0):.0f}/s, processed {p.get('processedRowsPerSecond', 0.0):.0f}/s"
            )
        return "progress: " + ("; ".join(parts) if parts else "starting")

    def stop(self) -> None:
        for q in self.queries:
            try:
                if q.isActive:
                    q.stop()
            except Exception:  # a query stopping during shutdown may raise; it is stopped either way
                pass
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
