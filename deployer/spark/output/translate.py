"""An OutputRate node on Spark: the statement's rows, each with its time, into the limiter's stateful
processor (deployer.spark.output.processor) under one key, whose rows are the ones let through.

A row's time is the node's time column (a selected event-time field, or the hidden one the planner
adds: operators.output_node `time_index`), or for an aggregate's rows the time its order key starts
with (deployer.spark.translate.graph `order_key`): a TIME window's end, whose row's time is the last
instant the window covers, one µs before it, or the event that completed a TUPLE or BATCH window.
FIRST lets rows out as they come: its output keeps its event time, and Spark's watermark goes on
from it (`eventTimeColumnName`); the others have none (docs/language.md, "Output rate limiting").
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark.output.processor import TIME, OutputProcessor
from deployer.spark.translate.columns import col_name, spark_type
from deployer.spark.translate.graph import ORDER_OFFSET, SEQ, SparkGraph
from operators import graph as g
from operators.output_node import OutputRate


def _crossing(i: int, kind: str) -> Column:
    """Input column i as it crosses to Python: a timestamp as µs."""
    c = F.col(col_name(i))
    return F.unix_micros(c) if kind == "timestamp" else c


def _row_time(sg: SparkGraph, node: OutputRate) -> Column:
    if node.time_index is not None:
        return F.unix_micros(F.col(col_name(node.time_index)))
    producer = sg.graph.node(node.inputs[0].node)
    if node.every_ms is not None and isinstance(producer, g.Aggregate):
        last = 1 if producer.window.kind == "time" else 0  # a TIME window's key is its end
        return F.substring(F.col(SEQ), 1, 20).cast("long") - F.lit(ORDER_OFFSET + last)
    return F.lit(None).cast("long")  # ordered by `__seq` alone; a count needs no time


def output_rate(sg: SparkGraph, node: OutputRate) -> DataFrame:
    schema = node.input_schema
    kinds = [f.type.kind for f in schema]
    crossing = [_crossing(i, k).alias(col_name(i)) for i, k in enumerate(kinds)]
    rows = sg.input(node).select(
        F.lit("").alias("__key"), *crossing, _row_time(sg, node).alias(TIME), F.col(SEQ)
    )
    fields = [T.StructField(col_name(i), spark_type(f.type)) for i, f in enumerate(node.schema)]
    out_schema = T.StructType([*fields, T.StructField(SEQ, T.StringType())])
    in_names = [col_name(i) for i in range(len(schema))]
    processor = OutputProcessor(node, out_schema.names, in_names)
    timed = "" if node.event_time is None else col_name(node.schema.position(node.event_time))
    ticks = node.every_ms is not None
    out = rows.groupBy(F.col("__key")).transformWithState(
        statefulProcessor=processor,
        outputStructType=out_schema,
        outputMode="Append",
        timeMode="EventTime" if ticks or timed else "None",
        eventTimeColumnName=timed,
    )
    return out
