"""A sink's or a table's rows that come from a Map that can fail, through Maps that cannot: the query
that writes them writes that Map's failures too, split from the one collected batch on the driver
(deployer.spark.run.driver_split, failures.py `stateless_on_driver`), where its tasks spooled them
in a Python stage of their own (a `mapInArrow`) in every micro-batch.

The runs have the reference executor's rows, table and dead letters (the Maps' failures beside the
source's rejected records, events without event time and late events, which the source's reader
spools), each once and counted, over files read one a micro-batch; a checkpoint whose queries
spooled the Maps' failures resumes with the new layout and writes none of them twice.
"""

from __future__ import annotations

import contextlib
import io
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    T0,
    assert_same,
    assert_same_dead_letters,
    collect,
    compile_text,
    iso,
    prepare,
    run_deployment,
    run_reference,
    sqlite_rows,
    sqlite_store,
    write_files,
)

from deployer.runner import bind_stores
from deployer.spark.run import queries
from deployer.spark.run.deployment import SparkDeployment
from deployer.spark.run.queries import plan_queries, store_kinds
from deployer.spark.translate.graph import SPLIT_EVENT
from operators import graph as g

pytestmark = pytest.mark.spark

# Two Maps that can fail (a division by zero each, on other events), one into a sink through a Map
# that cannot fail, one into a table.
SCRIPT = """
CREATE STREAMSCHEMA calls WITH k integer, caller integer, n integer, ts timestamp TIMESTAMP BY ts;
CREATE DATASTORE out TYPE sqlite;
CREATE TABLE shares (k integer, s integer) IN out;
INSERT INTO ratio SELECT k, caller, 100 / n AS r, ts FROM calls;
INSERT INTO per_call SELECT k, r, caller, ts FROM ratio;
INSERT INTO TABLE shares SELECT k, 1000 / (n - 1) AS s FROM calls;
"""
SINKS = ["per_call"]
SHARES = "SELECT k, s FROM shares"


def _event(k: int, seconds: int) -> dict[str, Any]:
    return {"k": k, "caller": k % 3, "n": k % 4, "ts": iso(T0 + timedelta(seconds=seconds))}


def _files() -> list[list[Any]]:
    files: list[list[Any]] = []
    for f in range(6):
        rows: list[Any] = [_event(10 * f + i, 20 * f + 2 * i) for i in range(8)]
        rows.insert(3, "{not json")  # does not parse
        rows.append({"k": 100 + f, "caller": 2, "n": 1, "ts": None})  # no event time
        if f:
            rows.append(_event(200 + f, 20 * f - 15))  # late: its file's events are past it
        files.append(rows)
    return files


def test_the_queries_of_a_failing_map_split_it_on_the_driver() -> None:
    graph = compile_text(SCRIPT)
    ratio, shares = graph.streams["ratio"].node, _into_table(graph)
    plan = {q.name: q for q in plan_queries(graph, SINKS, {"calls": "file:x"}, store_kinds(None))}
    assert plan["sink:per_call"].on_driver == f"stateless-{ratio}"
    assert plan["table:shares"].on_driver == f"stateless-{shares}"
    assert f"stateless failures of {ratio} (split on the driver)" in plan["sink:per_call"].writes
    # a Filter after the Map would drop its failed rows with the others: its tasks spool them
    filtered = compile_text(SCRIPT.replace("FROM ratio;", "FROM ratio WHERE caller > 0;"))
    (sink, table) = plan_queries(filtered, SINKS, {"calls": "file:x"}, store_kinds(None))
    assert sink.on_driver is None and f"stateless-{ratio}" in sink.spooled
    assert f"stateless failures of {ratio} (by its tasks)" in sink.writes
    assert table.on_driver == f"stateless-{_into_table(filtered)}"
    # the query that writes them is the first that computes the Map: a sink of the shared query's
    # stateless sinks does not split on the driver (its batch splits into several sinks' rows)
    two = plan_queries(graph, [*SINKS, "ratio"], {"calls": "file:x"}, store_kinds(None))
    assert [(q.name, q.on_driver) for q in two] == [
        ("sinks:stateless", None),
        ("table:shares", f"stateless-{shares}"),
    ]


def _into_table(graph: g.Graph) -> str:
    """The node whose rows the table's query writes."""
    return next(n for n in graph.nodes if isinstance(n, g.Materialize)).inputs[0].node


def _plans(deployment: SparkDeployment) -> dict[str, str]:
    """Each query's plans, as `StreamingQuery.explain` prints them."""
    plans = {}
    for query in deployment.queries:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            query.explain(extended=True)
        plans[query.name] = out.getvalue()
    return plans


def _physical(explained: str) -> str:
    return explained.split("== Physical Plan ==", 1)[1]


@pytest.mark.parametrize("earlier", [False, True], ids=["new", "resumed-from-spooled"])
def test_the_runs_write_the_references_rows_and_dead_letters_once(
    spark: Any, tmp_path: Path, earlier: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = compile_text(SCRIPT)
    files = _files()
    url = sqlite_store(tmp_path / "spark.sqlite3", "CREATE TABLE shares (k integer, s integer);")
    options: dict[str, Any] = {
        "checkpoint": tmp_path / "ck",
        "stores": bind_stores(graph, {"out": url}),
        "max_files": 1,
    }
    sources = prepare(tmp_path, {"calls": files[:3]})
    with monkeypatch.context() as patch:
        if earlier:  # the layout before: the Maps' failures spooled by the tasks
            patch.setattr(queries, "on_driver", lambda *_: None)
        first = run_deployment(spark, graph, tmp_path, sources, SINKS, **options)
    plans = _plans(first)
    assert first.written["dead"] > 0
    assert ("MapInArrow" in _physical(plans["cep:sink:per_call"])) == earlier
    write_files(tmp_path / "in" / "calls", files[3:])
    then = run_deployment(spark, graph, tmp_path, sources, SINKS, **options)
    plans = _plans(then)
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", SINKS)
    ref_url = sqlite_store(tmp_path / "ref.sqlite3", "CREATE TABLE shares (k integer, s integer);")
    ref = run_reference(graph, tmp_path / "ref", sources, SINKS, bind_stores(graph, {"out": ref_url}))
    assert {d["stage"] for d in ref.dead} == {"input", "Source", "late", "Map"}

    assert_same(ref, spk, "per_call", min_rows=30, ordered=True)
    assert sorted(sqlite_rows(url, SHARES)) == sorted(sqlite_rows(ref_url, SHARES))
    assert_same_dead_letters(ref, spk)
    assert first.written["dead"] + then.written["dead"] == sum(d["stage"] != "late" for d in ref.dead)
    maps = sum(d["stage"] == "Map" for d in ref.dead)
    assert maps == 12 + 12, maps  # n = 0 for the sink's Map, n = 1 for the table's
    for name in ("cep:sink:per_call", "cep:table:shares"):
        analyzed = plans[name].split("== Analyzed Logical Plan ==\n", 1)[1].splitlines()[0]
        assert SPLIT_EVENT in analyzed, analyzed
        # no Python stage after the source's reader: the Maps' failures are split on the driver
        assert "MapInArrow" not in _physical(plans[name]), plans[name]
