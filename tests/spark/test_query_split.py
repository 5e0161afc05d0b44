"""Golden tests of how a script splits into Spark streaming queries (deployer.spark.run.queries), without a
JVM: which sinks share the stateless query, which queries keep state or call a store, and where the
dead letters go. Each script of tests/cpl/golden/ runs with every sink stream requested, its sources
bound to files and its data stores to their declared kind; golden/*.cpl add cases of their own.

Regenerate after an intended change with `CEP_UPDATE_GOLDEN=1 pytest tests/spark/test_query_split.py`,
then read the diff. The deployment checks at start-up that its translation finds exactly the planned
failure points (deployer.spark.run.deployment), so these files describe what really runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cpl.compiler import compile_script
from deployer.spark.run.queries import describe, plan_queries
from operators import graph as g

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
SCRIPTS = sorted((HERE.parent / "cpl" / "golden").glob("*.cpl")) + sorted(GOLDEN.glob("*.cpl"))
UPDATE = os.environ.get("CEP_UPDATE_GOLDEN") == "1"


def split(script: Path) -> str:
    graph = compile_script(script.read_text(encoding="utf-8"), script.name).graph
    sinks = [n.stream for n in graph.nodes if isinstance(n, g.Sink)]
    sources = {s.stream: f"file:/in/{s.stream}" if s.trigger is None else "trigger:" for s in graph.sources()}
    kinds = {name: store.type for name, store in graph.stores.items()}
    return describe(graph, plan_queries(graph, sinks, sources, kinds))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_query_split(script: Path) -> None:
    expected = GOLDEN / f"{script.stem}.queries"
    actual = split(script)
    if UPDATE:
        expected.write_text(actual, encoding="utf-8")
    assert expected.exists(), f"missing {expected.name}; run with CEP_UPDATE_GOLDEN=1"
    assert actual == expected.read_text(encoding="utf-8")
