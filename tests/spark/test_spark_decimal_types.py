"""Spark, given operands of the decimal types the compiler gives them, computes results of exactly the
compiler's types (operators.decimals): so it rounds a result once, where the reference does, and
the Spark translation's final cast to the compiler's type changes nothing. On batch DataFrames."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark.translate.columns import spark_type
from operators.decimals import arithmetic_type, decimal, integral_type, remainder_too_wide, round_type

pytestmark = pytest.mark.spark

TYPES = [
    decimal(p, s)
    for p, s in [
        (1, 0),
        (5, 2),
        (10, 0),
        (10, 2),
        (18, 9),
        (20, 0),
        (28, 6),
        (38, 0),
        (38, 10),
        (38, 38),
        (7, 7),
    ]
]


def test_arithmetic_types_are_sparks(spark: Any) -> None:
    columns = [f"c{i}" for i in range(len(TYPES))]
    schema = T.StructType([T.StructField(c, spark_type(t)) for c, t in zip(columns, TYPES, strict=True)])
    df = spark.createDataFrame([], schema)
    exprs, wanted = [], []
    for (i, a), (j, b) in itertools.product(enumerate(TYPES), repeat=2):
        x, y = F.col(columns[i]), F.col(columns[j])
        for op, fn in (("+", x + y), ("-", x - y), ("*", x * y), ("/", x / y), ("%", x % y)):
            if op == "%" and remainder_too_wide(a, b):
                continue
            exprs.append(fn.alias(f"{a}{op}{b}"))
            wanted.append(spark_type(arithmetic_type(op, a, b)))
    got = [f.dataType for f in df.select(*exprs).schema.fields]
    wrong = [
        (e, g, w)
        for e, g, w in zip([f.name for f in df.select(*exprs).schema.fields], got, wanted, strict=True)
        if g != w
    ]
    assert not wrong, wrong[:10]


def test_round_floor_and_ceil_types_are_sparks(spark: Any) -> None:
    columns = [f"c{i}" for i in range(len(TYPES))]
    schema = T.StructType([T.StructField(c, spark_type(t)) for c, t in zip(columns, TYPES, strict=True)])
    df = spark.createDataFrame([], schema)
    exprs, wanted = [], []
    for c, t in zip(columns, TYPES, strict=True):
        for d in (-2, 0, 1, 5, 40):
            exprs.append(F.round(F.col(c), d))
            wanted.append(spark_type(round_type(t, d)))
        exprs += [F.floor(F.col(c)), F.ceil(F.col(c))]
        wanted += [spark_type(integral_type(t))] * 2
    got = [f.dataType for f in df.select(*exprs).schema.fields]
    assert got == wanted
