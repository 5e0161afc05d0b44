"""Where an operator's rows and its failures part (deployer.spark.translate.graph.SparkGraph.split_errors).

The rows that go on are those no error condition holds for, filtered by that one boolean: the error
messages, a CASE over the failing values, are only in the failures' plan. Spark's optimizer plans
a streaming query again in every micro-batch, and pushed the messages' CASE below every projection
and through every union each time (docs/architecture.md, "The rows that go on past a failure
point"). The two sides must still partition the rows exactly: a row is failed exactly when its
message is not NULL.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cpl.compiler import compile_script
from deployer.spark.handlers import spark_graph
from deployer.spark.translate.columns import UNSHOWN, error_column, msg
from deployer.spark.translate.graph import SEQ

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE STREAMSCHEMA e WITH k integer, d integer;
INSERT INTO priced SELECT k, d * 1000000 + 10 AS cost FROM e;
"""


def plans(df: DataFrame) -> str:
    """`df.explain`'s text, every plan (parsed, analyzed, optimized, physical)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain(extended=True)
    return out.getvalue()


def test_the_rows_that_go_on_are_filtered_without_the_messages(spark: Any) -> None:
    graph = compile_script(SCRIPT).graph
    src = graph.sources()[0]
    events = spark.createDataFrame(
        [(1, 5, "a"), (2, 3000, "b"), (3, None, "c")], f"_0 int, _1 int, {SEQ} string"
    )
    sg = spark_graph(graph, {src.stream: events})
    rows = sg.port(graph.streams["priced"])
    assert sorted(tuple(r)[:2] for r in rows.collect()) == [(1, 5_000_010), (3, None)]
    assert "out of range" not in plans(rows)
    [failures] = [d.df for d in sg.dead_letters if d.df is not None]
    reasons = [r["reason"] for r in failures.collect()]
    assert reasons == ["integer overflow: 3000000000 is out of range for integer"]
    assert "out of range" in plans(failures)


def test_a_message_made_of_a_null_value_still_fails_its_row(spark: Any) -> None:
    df = spark.createDataFrame([(1, None), (2, "x"), (3, None)], "a int, b string")
    err = error_column(
        [(F.col("a") == 1, msg("b is ", F.col("b"))), (F.col("a") == 2, msg("b is ", F.col("b")))]
    )
    assert [r[0] for r in df.orderBy("a").select(err).collect()] == [UNSHOWN, "b is x", None]
