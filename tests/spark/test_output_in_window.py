"""Where the limiter runs on Spark (deployer.spark.output.placement): `ALL` and `LAST EVERY duration`
over a TIME window's rows in the window's own aggregation, keyed by the limit's bucket, or (with a
HAVING, a projection that can fail, an aggregate that can overflow, or more than
MAX_WINDOWS_PER_BUCKET windows to a bucket) in a second window aggregation of Spark's own, with no
Python operator either way; over a
TUPLE or BATCH window's rows (without HAVING) in the window's own processor; the other forms in the
limiter's stateful processor. The plans only (no query runs): the results are compared
with the reference executor's in tests/fuzz/test_output_on_both_engines.py."""

from __future__ import annotations

from typing import Any

import pytest

from cpl.compiler import compile_script
from deployer.spark.handlers import spark_graph

pytestmark = [pytest.mark.spark]

STREAM = "CREATE STREAMSCHEMA s WITH k integer, v integer, ts timestamp TIMESTAMP BY ts WATERMARK 1 SECOND;\n"
# a HAVING that can fail (a division): a TIME window's own aggregation does not hold the limit then
WINDOW = (
    "INSERT INTO o SELECT k, sum(v) AS total FROM s WINDOW {} GROUP BY k HAVING 10 / sum(v) < 5 OUTPUT {};\n"
)
NO_HAVING = "INSERT INTO o SELECT k, {} AS a FROM s WINDOW {} GROUP BY k OUTPUT {};\n"


def _plan(spark: Any, tmp_path: Any, window: str, output: str, statement: str | None = None) -> str:
    graph = compile_script(STREAM + (statement or WINDOW.format(window, output))).graph
    source = (
        spark.readStream.schema("_0 int, _1 int, _2 timestamp, __seq string")
        .json(str(tmp_path))
        .withWatermark("_2", "1 second")
    )
    df = spark_graph(graph, {"s": source}).port(graph.streams["o"])
    plan: str = df._jdf.queryExecution().analyzed().toString()
    return plan


@pytest.mark.parametrize("output", ["LAST EVERY 2 SECONDS", "ALL EVERY 500 MILLISECONDS"])
def test_a_time_windows_rows_are_held_in_sparks_own_window(spark: Any, tmp_path: Any, output: str) -> None:
    plan = _plan(spark, tmp_path, "TIME SIZE 1 SECOND", output)
    assert "TransformWithState" not in plan, plan
    assert plan.count("Aggregate [window") == 2, plan  # the window's, then the limit's buckets


@pytest.mark.parametrize(
    ("aggregate", "window", "output"),
    [
        ("sum(v)", "TIME SIZE 1 SECOND", "LAST EVERY 2 SECONDS"),
        ("count(*)", "TIME SIZE 2 SECONDS ADVANCE 1 SECOND", "ALL EVERY 3 SECONDS"),
        ("avg(v)", "TIME SIZE 1 SECOND", "LAST EVERY 8 SECONDS"),  # 8 windows to a bucket: the most
        ("max(v)", "TIME SIZE 3 SECONDS", "LAST EVERY 1 SECOND"),  # one window to a bucket
    ],
)
def test_a_time_windows_rows_are_held_by_its_own_aggregation(
    spark: Any, tmp_path: Any, aggregate: str, window: str, output: str
) -> None:
    plan = _plan(spark, tmp_path, window, output, NO_HAVING.format(aggregate, window, output))
    assert "TransformWithState" not in plan, plan
    assert plan.count("Aggregate [") == 1, plan  # keyed by the limit's bucket: no second one
    assert "Aggregate [_b" in plan, plan


@pytest.mark.parametrize("output", ["LAST EVERY 2 SECONDS", "ALL EVERY 3 SECONDS"])
def test_after_a_having_that_cannot_fail_too(spark: Any, tmp_path: Any, output: str) -> None:
    statement = (
        "INSERT INTO o SELECT k, max(v) AS top FROM s WINDOW TIME SIZE 1 SECOND GROUP BY k "
        f"HAVING count(*) > 1 AND max(v) > 2 OUTPUT {output};\n"
    )
    plan = _plan(spark, tmp_path, "", "", statement)
    assert "TransformWithState" not in plan, plan
    assert plan.count("Aggregate [") == 1 and "Aggregate [_b" in plan, plan


@pytest.mark.parametrize(
    "statement",
    [
        NO_HAVING.format("10 / sum(v)", "TIME SIZE 1 SECOND", "LAST EVERY 2 SECONDS"),  # can fail
        NO_HAVING.format(
            "sum(CAST(v AS bigint))", "TIME SIZE 1 SECOND", "LAST EVERY 2 SECONDS"
        ),  # can overflow
        NO_HAVING.format("sum(v)", "TIME SIZE 1 SECOND", "LAST EVERY 9 SECONDS"),  # 9 windows to a bucket
    ],
)
def test_a_limit_the_time_windows_aggregation_cannot_hold_is_a_second_one(
    spark: Any, tmp_path: Any, statement: str
) -> None:
    plan = _plan(spark, tmp_path, "", "", statement)
    assert "TransformWithState" not in plan, plan
    assert plan.count("Aggregate [window") == 2, plan
    assert "Aggregate [_b" not in plan, plan


@pytest.mark.parametrize(
    ("window", "output"),
    [
        ("TIME SIZE 1 SECOND", "FIRST EVERY 2 SECONDS"),  # no buckets: each group's last row sent
        ("TIME SIZE 1 SECOND", "LAST EVERY 3 EVENTS"),
        ("TIME SIZE 2 SECONDS ADVANCE 1 SECOND", "SNAPSHOT EVERY 1 SECOND"),
        ("TUPLE SIZE 3", "LAST EVERY 2 SECONDS"),
    ],
)
def test_the_other_limits_run_in_the_limiters_processor(
    spark: Any, tmp_path: Any, window: str, output: str
) -> None:
    plan = _plan(spark, tmp_path, window, output)
    assert "TransformWithState" in plan, plan


@pytest.mark.parametrize(
    ("aggregate", "window", "output"),
    [
        ("sum(v)", "TUPLE SIZE 3", "LAST EVERY 2 SECONDS"),  # per bucket of groups
        ("max(CAST(v AS varchar))", "TUPLE SIZE 3 ADVANCE 1", "ALL EVERY 1 SECOND"),  # per group
        ("count(*)", "BATCH START v > 3 STOP v < 2", "LAST EVERY 1 SECOND"),
    ],
)
def test_a_tuple_or_batch_windows_rows_are_held_by_its_processor(
    spark: Any, tmp_path: Any, aggregate: str, window: str, output: str
) -> None:
    plan = _plan(spark, tmp_path, window, output, NO_HAVING.format(aggregate, window, output))
    assert plan.count("TransformWithState") == 1, plan  # the window's, no limiter of its own


@pytest.mark.parametrize(
    "statement",
    [
        WINDOW.format("TUPLE SIZE 3", "LAST EVERY 2 SECONDS"),  # HAVING drops rows after the processor
        NO_HAVING.format("10 / sum(v)", "TUPLE SIZE 3", "LAST EVERY 2 SECONDS"),  # a projection that can fail
        NO_HAVING.format("sum(v)", "TUPLE SIZE 3", "FIRST EVERY 2 SECONDS"),
        NO_HAVING.format("sum(v)", "TUPLE SIZE 3", "LAST EVERY 2 EVENTS"),
    ],
)
def test_a_limit_the_window_cannot_hold_has_its_own_processor(
    spark: Any, tmp_path: Any, statement: str
) -> None:
    plan = _plan(spark, tmp_path, "", "", statement)
    assert plan.count("TransformWithState") == 2, plan
