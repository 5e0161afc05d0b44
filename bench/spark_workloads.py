"""Spark workloads: the project's translation of a CPL script vs a hand-written PySpark job.

Both sides read the same generator (Spark's `rate-micro-batch` source: a fixed number of rows per
micro-batch, so throughput is not capped by a clock), derive the same CDR fields from it, and
write to Spark's `noop` sink, so what is measured is the query plan. Throughput is rows processed
divided by the wall time of a fixed number of micro-batches after a warm-up batch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from cpl.compiler import compile_script
from deployer.spark.handlers import spark_graph
from deployer.spark.run.interrupt import interruptible
from deployer.spark.run.watermarks import declares_watermarks
from deployer.spark.translate.columns import col_name
from deployer.spark.translate.graph import SEQ, named

CDR = "idcaller integer, idreceiver integer, duration integer, ts timestamp TIMESTAMP BY ts"

STATELESS = f"""
CREATE STREAMSCHEMA cdr1 WITH {CDR};
CREATE STREAMSCHEMA cdr2 WITH {CDR};
INSERT INTO unionout SELECT * FROM cdr1, cdr2;
INSERT INTO costs SELECT idcaller, duration * 10 + 10 AS cost, ts FROM unionout WHERE duration >= 10;
"""

TIME_WINDOW = f"""
CREATE STREAMSCHEMA cdr1 WITH {CDR} WATERMARK 10 SECONDS;
INSERT INTO bill SELECT idcaller, sum(duration) AS total FROM cdr1 WINDOW TIME SIZE 1 MINUTE GROUP BY idcaller;
"""

# The same aggregate behind an OUTPUT clause (issue 41: the limiter costs at most 10 %): LAST per
# group every 2 minutes, so the limiter holds rows across micro-batches and ticks on event time.
TIME_WINDOW_LIMITED = TIME_WINDOW.replace(
    "GROUP BY idcaller;", "GROUP BY idcaller OUTPUT LAST EVERY 2 MINUTES;"
)

TUPLE_WINDOW = f"""
CREATE STREAMSCHEMA cdr1 WITH {CDR};
INSERT INTO recent SELECT idcaller, sum(duration) AS total, count(*) AS calls
  FROM cdr1 WINDOW TUPLE SIZE 10 ADVANCE 10 GROUP BY idcaller;
"""

# The same limit over the TUPLE window's rows, which the window's own processor holds
# (deployer.spark.windows.window_limit): no operator of the limit's own.
TUPLE_WINDOW_LIMITED = TUPLE_WINDOW.replace(
    "GROUP BY idcaller;", "GROUP BY idcaller OUTPUT LAST EVERY 2 MINUTES;"
)


# A MultiFilter into three sinks: deployer.spark.run.shared's one query, which plans every micro-batch.
MULTI_SINKS = f"""
CREATE STREAMSCHEMA cdr1 WITH {CDR};
INSERT INTO free SELECT idcaller, ts FROM cdr1 WHERE duration < 10;
INSERT INTO priced SELECT idcaller, duration * 10 + 10 AS cost, ts FROM cdr1 WHERE duration >= 10 AND duration < 600;
INSERT INTO marathon SELECT idcaller, duration, ts FROM cdr1 WHERE duration >= 600;
"""

# A job is a streaming DataFrame written to Spark's noop sink, or one with its foreachBatch writer.
Writer = Callable[[DataFrame, int], None]
Job = DataFrame | tuple[DataFrame, Writer]


def noop(df: DataFrame, batch_id: int) -> None:
    df.write.format("noop").mode("overwrite").save()


def generator(spark: SparkSession, rows_per_batch: int, offset: int = 0) -> DataFrame:
    """CDR-shaped rows: 1,000 callers, durations 0..599 s, event time = 1 ms per row."""
    df = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", 2)
        .load()
    )
    v = F.col("value") + offset
    return df.select(
        (v % 1000).cast("int").alias("idcaller"),
        (v % 997).cast("int").alias("idreceiver"),
        (v % 600).cast("int").alias("duration"),
        F.timestamp_millis(v).alias("ts"),
        F.format_string("%020d", v).alias(SEQ),
    )


def project_job(script: str, stream: str, ordered: bool = False) -> Callable[[SparkSession, int], DataFrame]:
    """The script's `stream` as `cep run` computes it; `ordered`: with the order key its sink
    writes the rows by (`__seq`), which `cep run` always computes (deployer.spark.streams.sinks),
    and which a plan without it leaves out (a window's then skips finding each group's first event)."""
    graph = compile_script(script).graph
    watermarks = declares_watermarks(graph)

    def build(spark: SparkSession, rows: int) -> DataFrame:
        sources = {}
        for k, s in enumerate(graph.sources()):
            df = generator(spark, rows, offset=k)
            df = df.select(*[F.col(f.name).alias(col_name(i)) for i, f in enumerate(s.schema)], SEQ)
            if s.event_time is not None and watermarks:
                # where and when `cep run` declares it (deployer.spark.streams.sources, only for a script
                # with state: deployer.spark.run.watermarks.declares_watermarks): the generated events are
                # in order, so they pass no Sequencer, as a generator: source's do not
                ts = col_name(s.schema.position(s.event_time))
                df = df.withWatermark(ts, f"{s.watermark_ms or 0} milliseconds")
            sources[s.stream] = df
        sg = spark_graph(graph, sources)
        return named(sg.port(graph.streams[stream]), graph.stream_schema(stream), *([SEQ] if ordered else []))

    return build


def to_driver(df: DataFrame, batch_id: int) -> int:
    """A sink's rows to the driver as Arrow, as every sink of `cep run` brings them (a file, the
    console, a Redis stream: deployer.spark.streams.sinks) before writing them out: what such a
    writer costs in Spark, the writing itself left out. It returns the rows, as the project's do."""
    return int(df.toArrow().num_rows)


def project_shared(spark: SparkSession, rows: int) -> Job:
    """MULTI_SINKS as `cep run` writes it: the shared query's writer (deployer.spark.run.shared), the
    sinks' rows brought to the driver as its sinks bring them, in `cep run`'s order, the writing
    itself left out."""
    from deployer.spark.run.shared import batch_plans, shared_writer, stem
    from deployer.spark.streams.driver_rows import DriverSink
    from deployer.spark.streams.sinks import sink_order

    graph = compile_script(MULTI_SINKS).graph
    src = graph.sources()[0]
    df = generator(spark, rows).select(
        *[F.col(f.name).alias(col_name(i)) for i, f in enumerate(src.schema)], SEQ
    )
    sinks = ("free", "priced", "marathon")
    write = shared_writer(
        graph,
        [src.stream],
        {
            s: DriverSink(len(graph.stream_schema(s)), tuple(sink_order(graph, s)), lambda rows, b: len(rows))
            for s in sinks
        },
        batch_plans(graph),
        lambda batch_id, report: None,
    )
    return stem({src.stream: df}, [src.stream]), write


def hand_shared(spark: SparkSession, rows: int) -> Job:
    """MULTI_SINKS by hand, in one query: foreachBatch persists the micro-batch, filters and
    projects it for each sink and brings its rows `to_driver`."""
    d = F.col("duration")

    def write(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            to_driver(batch.where(d < 10).select("idcaller", "ts"), batch_id)
            to_driver(
                batch.where((d >= 10) & (d < 600)).select("idcaller", (d * 10 + 10).alias("cost"), "ts"),
                batch_id,
            )
            to_driver(batch.where(d >= 600).select("idcaller", "duration", "ts"), batch_id)
        finally:
            batch.unpersist()

    return generator(spark, rows).drop(SEQ), write


def filters_uncounted(
    build: Callable[[SparkSession, int], DataFrame],
) -> Callable[[SparkSession, int], DataFrame]:
    """`build` with CEP_COUNT_FILTERED=0 while the plan is built: the Filters count nothing."""

    def uncounted(spark: SparkSession, rows: int) -> DataFrame:
        os.environ["CEP_COUNT_FILTERED"] = "0"
        try:
            return build(spark, rows)
        finally:
            del os.environ["CEP_COUNT_FILTERED"]

    return uncounted


def hand_stateless(spark: SparkSession, rows: int) -> DataFrame:
    """What a competent user writes by hand: union, filter, one select with the cost expression."""
    u = generator(spark, rows).drop(SEQ).union(generator(spark, rows, 1).drop(SEQ))
    return u.where(F.col("duration") >= 10).select(
        "idcaller", (F.col("duration") * 10 + 10).alias("cost"), "ts"
    )


def hand_stateless_counted(spark: SparkSession, rows: int) -> DataFrame:
    """`hand_stateless` that also counts the rows its filter drops, as the project's plan does by
    default (its run summary's "filtered"): an observation of the union's rows, Spark's way of
    counting inside a streaming query without an action of its own."""
    u = generator(spark, rows).drop(SEQ).union(generator(spark, rows, 1).drop(SEQ))
    keep = F.col("duration") >= 10
    counted = u.observe("filtered", F.count_if(~keep).alias("rows"))
    return counted.where(keep).select("idcaller", (F.col("duration") * 10 + 10).alias("cost"), "ts")


def hand_time_window(spark: SparkSession, rows: int) -> DataFrame:
    """Hand-written tumbling-window aggregate with a watermark."""
    df = generator(spark, rows).drop(SEQ).withWatermark("ts", "10 seconds")
    return (
        df.groupBy(F.window("ts", "1 minute"), "idcaller")
        .agg(F.sum("duration").cast("long").alias("total"))
        .select("idcaller", "total")
    )


def count_per_key() -> Any:
    """The least a `transformWithStateInPandas` processor does: count its rows, keep one number per
    key. What a micro-batch of that operator costs whatever is done in it: the floor the TUPLE
    window's micro-batch is compared with, besides the hand-written job's. (Defined in a function:
    the processor is pickled by value, and Spark's Python workers cannot import bench/.)"""
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import LongType, StructField, StructType

    class CountPerKey(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.n = handle.getValueState("n", StructType([StructField("n", LongType())]))

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            n = sum(len(frame) for frame in rows)
            old = self.n.get()
            self.n.update(((old[0] if old else 0) + n,))
            yield pd.DataFrame({"idcaller": [int(key[0])], "n": [n]})

        def close(self) -> None:
            pass

    return CountPerKey()


def bare_transform_with_state(spark: SparkSession, rows: int) -> DataFrame:
    """The generator's rows through `count_per_key`'s processor, grouped by caller."""
    df = generator(spark, rows).select("idcaller", "duration")
    return df.groupBy("idcaller").transformWithStateInPandas(
        statefulProcessor=count_per_key(),
        outputStructType="idcaller int, n long",
        outputMode="Append",
        timeMode="None",
    )


def on_spark_defaults(build: Callable[[SparkSession, int], Job]) -> Callable[[SparkSession, int], Job]:
    """`build` in a session of its own (the same SparkContext) that writes checkpoint files with
    Spark's default manager, not the one deployer.spark.run.deployment.SESSION_CONF picks: a micro-batch's
    fixed cost on Spark as it comes."""
    from deployer.spark.run.session import CHECKPOINT_FILE_MANAGER

    def job(spark: SparkSession, rows: int) -> Job:
        own = spark.newSession()
        own.conf.unset(CHECKPOINT_FILE_MANAGER)
        return build(own, rows)

    return job


def start(job: Job, checkpoint: str) -> StreamingQuery:
    """`job` started with no pause between micro-batches. A foreachBatch writer, the project's or a
    baseline's, is wrapped in deployer.spark.run.interrupt's `interruptible`, which only changes how
    it fails when the query is stopped in the middle of a batch (as every measurement ends): in two
    lines, not with a stack trace that makes Spark's stream thread overflow its stack."""
    df, writer = job if isinstance(job, tuple) else (job, None)
    w = df.writeStream.option("checkpointLocation", checkpoint).trigger(processingTime="0 seconds")
    return (w.foreachBatch(interruptible(writer)) if writer else w.format("noop")).start()


def measure(
    spark: SparkSession, build: Callable[[SparkSession, int], Job], rows: int, batches: int, checkpoint: str
) -> dict[str, Any]:
    return timed_batches(start(build(spark, rows), checkpoint), batches)


def batch_ms(
    spark: SparkSession, build: Callable[[SparkSession, int], Job], batches: int, checkpoint: str
) -> float:
    """The median duration (Spark's triggerExecution, ms) of `batches` micro-batches of 10 events,
    after two warm-up batches: what a micro-batch costs whatever its size."""
    q = start(build(spark, 10), checkpoint)
    try:
        while q.lastProgress is None or q.lastProgress["batchId"] < 2 + batches:
            time.sleep(0.05)
            if q.exception():
                raise RuntimeError(str(q.exception()))
        done = [
            p["durationMs"]["triggerExecution"] for p in q.recentProgress if 2 < p["batchId"] <= 2 + batches
        ]
    finally:
        q.stop()
    done.sort()
    return float(done[len(done) // 2])


def timed_batches(q: StreamingQuery, batches: int) -> dict[str, Any]:
    """Rows per second of `batches` micro-batches of a started query, after a warm-up batch; stops it."""
    try:
        while q.lastProgress is None or q.lastProgress["batchId"] < 1:  # warm-up: batch 0 done
            time.sleep(0.05)
            if q.exception():
                raise RuntimeError(str(q.exception()))
        start_batch = q.lastProgress["batchId"]
        t0 = time.perf_counter()
        while q.lastProgress["batchId"] < start_batch + batches:
            time.sleep(0.02)
            if q.exception():
                raise RuntimeError(str(q.exception()))
        elapsed = time.perf_counter() - t0
        done = [p for p in q.recentProgress if start_batch < p["batchId"] <= start_batch + batches]
        processed = sum(p["numInputRows"] for p in done)
    finally:
        q.stop()
    return {"rows": processed, "seconds": elapsed, "events_per_s": processed / elapsed if elapsed else 0.0}


def hand_tuple_window(spark: SparkSession, rows: int) -> DataFrame:
    """Hand-written count window per caller (10 calls, tumbling), as a careful user writes it with
    `applyInPandasWithState`: the state is the open window's count and sum, each key's new rows are
    summed with numpy, and a full window is emitted when the next call of its caller arrives (the
    paper's rule, which the project follows)."""
    import numpy as np
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    size = 10

    def per_key(key: Any, frames: Any, state: Any) -> Any:
        pdf = pd.concat(list(frames)).sort_values(SEQ)  # arrival order
        n, s = state.get if state.exists else (0, 0)
        d = pdf["duration"].to_numpy(dtype="int64")
        total = n + len(d)
        cum = np.concatenate([[s], s + np.cumsum(d)])  # cum[i] = sum of the first n + i values

        def prefix(p: np.ndarray) -> np.ndarray:
            return np.where(p >= n, cum[np.maximum(p - n, 0)], 0)

        full = (total - 1) // size  # windows followed by at least one more call
        ends = np.arange(1, full + 1) * size
        sums = prefix(ends) - prefix(ends - size)
        state.update(
            (int(total - full * size), int(cum[-1] - (prefix(np.array([full * size]))[0] if full else 0)))
        )
        yield pd.DataFrame({"idcaller": [key[0]] * full, "total": sums, "calls": [size] * full})

    df = generator(spark, rows).select("idcaller", "duration", SEQ)
    return df.groupBy("idcaller").applyInPandasWithState(
        per_key,
        "idcaller int, total long, calls long",
        "n long, s long",
        "append",
        GroupStateTimeout.NoTimeout,
    )
