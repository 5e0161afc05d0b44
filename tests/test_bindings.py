"""`--source` and `--sink` name streams of the script, checked alike by both engines before anything
runs (deployer.engine.check_bindings): a source binding for a stream a statement produces was
ignored by Spark and refused by the reference executor (found by the differential fuzzer)."""

from __future__ import annotations

import io

import pytest

from cpl.compiler import compile_script
from deployer import runner
from deployer.engine import RunRequest

SCRIPT = """
CREATE STREAMSCHEMA s1 WITH k integer, v integer;
INSERT INTO m5 SELECT * FROM s1;
INSERT INTO f6 SELECT * FROM s1 WHERE v > 1;
"""


@pytest.mark.parametrize("engine", ["local", "spark"])
@pytest.mark.parametrize(
    ("sources", "sinks", "message"),
    [
        ({"m5": "file:in"}, {}, r"source 'm5': the script has no source stream of that name \(s1\)"),
        ({"nope": "file:in"}, {}, r"source 'nope': the script has no source stream of that name \(s1\)"),
        ({}, {"nope": "file:out"}, r"sink 'nope': the script has no stream of that name \(s1, m5, f6\)"),
    ],
)
def test_both_engines_refuse_a_binding_for_no_such_stream(
    engine: str, sources: dict[str, str], sinks: dict[str, str], message: str
) -> None:
    graph = compile_script(SCRIPT).graph
    req = RunRequest(graph, engine=engine, sources=sources, sinks=sinks, until_idle=True)
    with pytest.raises(ValueError, match=message):
        runner.engine(engine)(req, None, io.StringIO())


def test_a_derived_stream_may_be_a_sink() -> None:
    graph = compile_script(SCRIPT).graph
    runner.engine("local")(
        RunRequest(graph, engine="local", sinks={"M5": "console"}, until_idle=True), None, io.StringIO()
    )
