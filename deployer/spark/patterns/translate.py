"""A Pattern node on Spark: its inputs in one DataFrame, grouped by partition key into the pattern's
stateful processor (deployer.spark.patterns.processor), whose rows are the matches and the dead
letters (an event a condition failed on, a match whose SELECT or WHERE failed, a partial dropped
beyond the cap), split at one failure point after the state, as a window's rows are.

The inputs are sequenced as a merge's are (operators.analysis.merged_sources): each micro-batch brings
a key's events in an order the processor sorts back to the merged one. Their event times and
timestamps cross to Python as microseconds (a Row's timestamp would be in the worker's local time).
With `match_time()` selected, the output's event time is that column, and Spark's watermark goes on
from it: the processor may emit a match at a deadline the watermark has just passed, which Spark's
watermark for the operators after it allows for. Spark checks each row's time against the watermark
on a copy a microsecond on (`eventTimeColumnName`: deployer.spark.translate.ties says why), whose mark
goes back onto the match time after.

The sinks of patterns over the same source streams share one query, whose one operator runs all their
processors (deployer.spark.patterns.shared): `matches` makes each pattern's port from its part of
those rows as `pattern` does from its own operator's.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer import settings
from deployer.spark.patterns.processor import FAIL, FAILED_EVENT, PatternProcessor
from deployer.spark.translate.columns import Message, col_name, spark_type
from deployer.spark.translate.graph import SEQ, SparkGraph
from deployer.spark.translate.ties import MARK_TIME, remarked
from operators import graph as g
from operators.datatypes import DataType, Schema, common_type


def _struct_type(schema: Schema) -> T.StructType:
    """An input's event as it crosses to Python: its fields, timestamps as µs."""
    return T.StructType(
        [
            T.StructField(f"f{i}", T.LongType() if f.type.kind == "timestamp" else spark_type(f.type))
            for i, f in enumerate(schema)
        ]
    )


def event_struct(schema: Schema) -> Column:
    return F.struct(
        *[
            (F.unix_micros(F.col(col_name(i))) if f.type.kind == "timestamp" else F.col(col_name(i))).alias(
                f"f{i}"
            )
            for i, f in enumerate(schema)
        ]
    )


def _key_type(node: g.Pattern) -> DataType | None:
    if node.partition is None:
        return None
    types = [s.fields[i].type for s, i in zip(node.input_schemas, node.partition, strict=True)]
    return reduce(lambda a, b: common_type(a, b) or a, types)


def partition_key(node: g.Pattern, i: int) -> Column:
    """The partition key of an event of input `i`, as text ("" without PARTITION BY)."""
    key_type = _key_type(node)
    if node.partition is None or key_type is None:
        return F.lit("")
    field = F.col(col_name(node.partition[i])).cast(spark_type(key_type))
    return F.to_json(F.struct(field.alias("k")))  # never NULL, whatever the key


def event_micros(node: g.Pattern, i: int) -> Column:
    """The event time of an event of input `i`, in µs."""
    return F.unix_micros(F.col(col_name(node.input_schemas[i].position(node.input_times[i]))))


def _input(sg: SparkGraph, node: g.Pattern, i: int) -> DataFrame:
    structs = [
        (event_struct(s) if j == i else F.lit(None).cast(_struct_type(s))).alias(f"__e{j}")
        for j, s in enumerate(node.input_schemas)
    ]
    return sg.input(node, i).select(
        partition_key(node, i).alias("__key"),
        F.lit(i).alias("__inp"),
        event_micros(node, i).alias("__t"),
        F.col(SEQ),
        *structs,
    )


def output_fields(node: g.Pattern) -> list[T.StructField]:
    """The columns of a match: the pattern's fields (`_0`, ...)."""
    return [T.StructField(col_name(i), spark_type(f.type)) for i, f in enumerate(node.schema)]


# a match's order key, and a dead letter's reason and event (patterns.processor)
TAIL = [
    T.StructField(SEQ, T.StringType()),
    T.StructField(FAIL, T.StringType()),
    T.StructField(FAILED_EVENT, T.StringType()),
]


def pattern(sg: SparkGraph, node: g.Pattern) -> DataFrame:
    inputs = reduce(DataFrame.unionByName, [_input(sg, node, i) for i in range(len(node.inputs))])
    timed = col_name(node.schema.position(node.event_time)) if node.event_time else None
    out_schema = T.StructType(
        [
            *output_fields(node),
            *TAIL,
            # the match time a microsecond on, which Spark checks against the watermark (translate.ties)
            *([T.StructField(MARK_TIME, T.TimestampType())] if timed else []),
        ]
    )
    processor = PatternProcessor(node, settings.current().pattern_max_partials, out_schema.names)
    out = inputs.groupBy(F.col("__key")).transformWithState(
        statefulProcessor=processor,
        outputStructType=out_schema,
        outputMode="Append",
        timeMode="EventTime",
        eventTimeColumnName=MARK_TIME if timed else "",
    )
    return matches(sg, node, out, timed)


def matches(sg: SparkGraph, node: g.Pattern, out: DataFrame, timed: str | None) -> DataFrame:
    """The node's port from its processor's rows `out`, split at its failure point: the rows of a
    dead letter are those with a reason (`FAIL`). `timed`: the column of the match time, when the
    processor's rows carry Spark's mark on a copy of it (`MARK_TIME`, translate.ties)."""
    event = F.from_json(F.col(FAILED_EVENT), T.ArrayType(T.StringType()))
    fields = output_fields(node)

    def then(kept: DataFrame) -> DataFrame:
        cols = [remarked(out, f.name, f.name) if f.name == timed else F.col(f.name) for f in fields]
        return kept.select(*cols, F.col(SEQ))

    return sg.split_errors(node, out, failures(), len(node.schema), then=then, event=event)


def failures() -> list[tuple[Column, Message]]:
    """When a processor's row is a dead letter: when it has a reason (`FAIL`), which is its message."""
    return [(F.col(FAIL).isNotNull(), F.col(FAIL))]
