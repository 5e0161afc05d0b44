"""An OutputRate node on Spark: the statement's rows, each with its time, into the limiter's stateful
processor (deployer.spark.output.processor) under one key, whose rows are the ones let through.

A row's time is the node's time column (a selected event-time field, or the hidden one the planner
adds: operators.output_node `time_index`), or for an aggregate's rows the time its order key starts
with (deployer.spark.translate.graph `order_key`): a TIME window's end, whose row's time is the last
instant the window covers, one µs before it, or the event that completed a TUPLE or BATCH window.
The row's values and its group cross as JSON text (timestamps as µs), read back here with the
statement's types: JSON keeps integers, decimals and text exact, and doubles too (Spark writes the
shortest text that reads back as the same double).
FIRST lets rows out as they come: its output keeps its event time, and Spark's watermark goes on
from it (checked on a copy of the row's time a microsecond on, `eventTimeColumnName`: deployer.
spark.translate.ties says why); the others have none (docs/language.md, "Output rate limiting").
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark.output.in_window import limit_in_window
from deployer.spark.output.placement import in_window, in_window_aggregation, in_window_processor
from deployer.spark.output.processor import GROUP, SEQ, TIME, VALUES, OutputProcessor
from deployer.spark.translate.columns import col_name, spark_type
from deployer.spark.translate.graph import ORDER_OFFSET, SparkGraph
from deployer.spark.translate.ties import MARK_TIME, remarked
from operators import graph as g
from operators.datatypes import Schema
from operators.output_node import OutputRate


def _json(schema: Schema, positions: range) -> Column:
    """The columns at `positions` as JSON text, timestamps as µs."""
    fields = [
        (
            F.unix_micros(F.col(col_name(i)))
            if schema.fields[i].type.kind == "timestamp"
            else F.col(col_name(i))
        )
        for i in positions
    ]
    if not fields:
        return F.lit("")
    return F.to_json(F.struct(*[f.alias(f"f{n}") for n, f in enumerate(fields)]))


def _json_type(schema: Schema) -> T.StructType:
    return T.StructType(
        [
            T.StructField(f"f{i}", T.LongType() if f.type.kind == "timestamp" else spark_type(f.type))
            for i, f in enumerate(schema)
        ]
    )


def _row_time(sg: SparkGraph, node: OutputRate) -> Column:
    if node.time_index is not None:
        return F.unix_micros(F.col(col_name(node.time_index)))
    producer = sg.graph.node(node.inputs[0].node)
    if node.every_ms is not None and isinstance(producer, g.Aggregate):
        last = 1 if producer.window.kind == "time" else 0  # a TIME window's key is its end
        return F.substring(F.col(SEQ), 1, 20).cast("long") - F.lit(ORDER_OFFSET + last)
    return F.lit(None).cast("long")  # ordered by `__seq` alone; a count needs no time


def output_rate(sg: SparkGraph, node: OutputRate) -> DataFrame:
    if in_window(sg.graph, node):
        return limit_in_window(sg, node)
    if in_window_processor(sg.graph, node) or in_window_aggregation(sg.graph, node):
        # held by the window's processor or aggregation: its rows are the limit's
        return sg.input(node).select(*[F.col(col_name(i)) for i in range(node.width)], F.col(SEQ))
    rows = sg.input(node).select(
        F.lit("").alias("__key"),
        _json(node.input_schema, node.keys).alias(GROUP),
        _row_time(sg, node).alias(TIME),
        F.col(SEQ),
        _json(node.input_schema, range(node.width)).alias(VALUES),
    )
    out_schema = T.StructType(
        [
            T.StructField(VALUES, T.StringType()),
            T.StructField(TIME, T.TimestampType() if node.event_time else T.LongType()),
            T.StructField(SEQ, T.StringType()),
            *([T.StructField(MARK_TIME, T.TimestampType())] if node.event_time else []),
        ]
    )
    out = rows.groupBy(F.col("__key")).transformWithStateInPandas(
        statefulProcessor=OutputProcessor(node, MARK_TIME if node.event_time else None),
        outputStructType=out_schema,
        outputMode="Append",
        timeMode="EventTime"
        if node.every_ms is not None or node.event_time or node.in_time_order
        else "None",
        eventTimeColumnName=MARK_TIME if node.event_time else "",
    )
    values = F.from_json(F.col(VALUES), _json_type(node.schema))
    timed = None if node.event_time is None else node.schema.position(node.event_time)
    columns = []
    for i, f in enumerate(node.schema):
        if i == timed:  # the row's time itself, with the mark Spark put on its copy (translate.ties)
            c = remarked(out, TIME, col_name(i))
        elif f.type.kind == "timestamp":
            c = F.timestamp_micros(values[f"f{i}"])
        else:
            c = values[f"f{i}"]
        columns.append(c.alias(col_name(i)))
    return out.select(*columns, F.col(SEQ))
