"""How values leave Spark: sink rows, dead-letter events and text forms, on batch DataFrames (fast)."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.connectors.records import json_value
from deployer.spark.streams.dead_letters import arrow_letters, dead_letter_frame, dead_letter_line, decoded
from deployer.spark.streams.driver_rows import ordered_values
from deployer.spark.translate.columns import double_text as _double_text
from deployer.spark.translate.expr import like_pattern

pytestmark = pytest.mark.spark

TS = datetime(2026, 3, 29, 1, 30, 0, 250000, tzinfo=UTC)  # the night Europe's clocks go forward


@pytest.fixture
def new_york() -> Iterator[None]:
    """The driver's local time zone is not UTC (PySpark converts timestamps into it)."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    yield
    if saved is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = saved
    time.tzset()


def test_sink_values_are_utc_whatever_the_local_time_zone(spark: Any, new_york: None) -> None:
    df = spark.createDataFrame([(1, TS), (2, None)], "_0 int, _1 timestamp")
    assert list(ordered_values(df, 2, [])) == [(1, TS), (2, None)]


def test_batches_are_written_in_order(spark: Any) -> None:
    rows = [(i, TS.replace(second=i % 3), f"s{i:03d}") for i in range(30)]
    df = spark.createDataFrame(rows, "_0 int, _1 timestamp, __seq string").repartition(3)
    out = list(ordered_values(df, 2, ["_1", "__seq"]))
    assert out == [(i, t) for i, t, _ in sorted(rows, key=lambda r: (r[1], r[2]))]


def test_a_null_sorts_first_as_in_spark(spark: Any) -> None:
    rows = [(0, TS, "s2"), (1, None, "s1"), (2, TS, "s0")]
    df = spark.createDataFrame(rows, "_0 int, _1 timestamp, __seq string")
    spark_order = [r[0] for r in df.orderBy("_1", "__seq").collect()]
    assert [r[0] for r in ordered_values(df, 2, ["_1", "__seq"])] == spark_order == [1, 2, 0]


def test_dead_letter_events_keep_every_value(spark: Any) -> None:
    values = (7, 2**40, 1.5e-7, float("nan"), float("-inf"), Decimal("-12.30"), True, 'é"\n', TS, None)
    schema = T.StructType(
        [
            T.StructField(f"_{i}", t)
            for i, t in enumerate(
                [
                    T.IntegerType(),
                    T.LongType(),
                    T.DoubleType(),
                    T.DoubleType(),
                    T.DoubleType(),
                    T.DecimalType(10, 2),
                    T.BooleanType(),
                    T.StringType(),
                    T.TimestampType(),
                    T.StringType(),
                ]
            )
        ]
    )
    df = spark.createDataFrame(
        [("bad", values)],
        T.StructType([T.StructField("reason", T.StringType()), T.StructField("event", schema)]),
    )
    [row] = dead_letter_frame(df, {"stage": "Map", "node": "n2", "line": 3}).collect()
    assert (row["stage"], row["reason"], row["node"], row["line"], row["record"]) == (
        "Map",
        "bad",
        "n2",
        3,
        None,
    )
    got = [decoded(x) for x in row["event"]]
    assert [json_value(v) for v in got] == [json_value(v) for v in values]
    assert math.isnan(got[3])
    # A spooling task, or the driver splitting a collected batch, builds the same dead letter from
    # the row's own values (dead_letters.arrow_letters).
    fixed = {"stage": "Map", "node": "n2", "line": 3}
    batch = df.withColumn("__event", F.col("event")).toArrow().to_batches()[0]
    assert arrow_letters(batch, "reason", "__event", fixed) == [dead_letter_line(row.asDict())]


@pytest.mark.parametrize(
    "x", [0.1, 100.0, 1234.5678, 12345678.9, 1e16, 1.5e-5, -2.5e-7, 1e-4, 123456789012345.6, 0.0, -0.0, 1e300]
)
def test_doubles_print_as_python_prints_them(spark: Any, x: float) -> None:
    [row] = spark.createDataFrame([(x,)], "x double").select(_double_text(F.col("x")).alias("t")).collect()
    assert row["t"] == repr(x)


def test_like_patterns_keep_cpl_escapes() -> None:
    assert like_pattern("a\\_b%") == "a\\_b%"
    assert like_pattern("a\\b") == "ab"  # a backslash before an ordinary character: just the character
    assert like_pattern("50\\") == "50\\\\"  # a trailing backslash is itself
