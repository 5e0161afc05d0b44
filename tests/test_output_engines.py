"""OUTPUT rate limiting runs on the reference executor only, for now: the Spark engine refuses a script
with an OUTPUT clause before it starts anything, and says where it runs (docs/language.md, "Output
rate limiting")."""

from __future__ import annotations

import io
from typing import Any

import pytest

from cpl.compiler import compile_script
from deployer.engine import RunRequest
from deployer.spark.support import UnsupportedOnSpark, check_supported

SCRIPT = (
    "CREATE STREAMSCHEMA s WITH ip varchar, v integer, ts timestamp TIMESTAMP BY ts;\n"
    "INSERT INTO plain SELECT ip, v FROM s;\n"
    "INSERT INTO o SELECT ip, v FROM s OUTPUT LAST EVERY 1 SECOND;\n"
)


def test_a_script_with_an_output_clause_is_refused_for_spark_with_the_way_out() -> None:
    with pytest.raises(UnsupportedOnSpark) as info:
        check_supported(compile_script(SCRIPT).graph)
    message = str(info.value)
    assert "line 3" in message and "LAST EVERY 1 SECOND" in message
    assert "--engine local" in message


def test_a_script_without_one_is_not() -> None:
    check_supported(compile_script(SCRIPT.rsplit("INSERT INTO o", 1)[0]).graph)


def test_the_spark_engine_refuses_it_before_starting_a_session(monkeypatch: pytest.MonkeyPatch) -> None:
    from deployer.spark import engine  # pyspark is imported, no JVM is started

    def no_session(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the refusal must come before Spark starts")

    monkeypatch.setattr(engine, "spark_session", no_session)
    request = RunRequest(compile_script(SCRIPT).graph, engine="spark", sinks={"o": "out.jsonl"})
    with pytest.raises(UnsupportedOnSpark, match="--engine local"):
        engine.run(request, None, io.StringIO())


def test_the_spark_query_split_refuses_it_too() -> None:
    # `cep explain --format queries` and a deployment ask for the split: neither describes queries
    # that would not run
    from deployer.spark.run.queries import plan_queries

    graph = compile_script(SCRIPT).graph
    with pytest.raises(UnsupportedOnSpark, match="--engine local"):
        plan_queries(graph, ["o"], {"s": "file:/in/s"})
