"""A sink's or a table's rows that come from a Map or a Filter that can fail, through Maps and
Filters that cannot: the query that writes them writes that step's failures too, split from the one
collected batch on the driver (deployer.spark.run.driver_split, failures.py `stateless_on_driver`),
where its tasks spooled them in a Python stage of their own (a `mapInArrow`) in every micro-batch.

The runs have the reference executor's rows, tables, dead letters and counts (the steps' failures
beside the source's rejected records, events without event time and late events, which the source's
reader spools; the events the Filters drop), each once, over files read one a micro-batch; a
checkpoint whose queries spooled the failures resumes with the new layout and writes none twice.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from spark_helpers import (
    assert_same,
    assert_same_dead_letters,
    call_files,
    collect,
    compile_text,
    physical,
    prepare,
    query_plans,
    sqlite_rows,
    sqlite_store,
    write_files,
)

from deployer.local.driver import run_local
from deployer.runner import bind_stores
from deployer.spark.run import queries
from deployer.spark.run.deployment import SparkDeployment
from deployer.spark.run.queries import plan_queries, store_kinds
from deployer.spark.translate.graph import SPLIT_EVENT
from operators import graph as g
from stores.registry import StoreRegistry

pytestmark = pytest.mark.spark

# Three steps that can fail (a division by zero each, on other events): a Map into a sink through a
# Filter and a Map that cannot fail, a Map into a table, a Filter into a table through a Map.
SCRIPT = """
CREATE STREAMSCHEMA calls WITH k integer, caller integer, n integer, ts timestamp TIMESTAMP BY ts;
CREATE DATASTORE out TYPE sqlite;
CREATE TABLE shares (k integer, s integer) IN out;
CREATE TABLE picked (k integer, n integer) IN out;
INSERT INTO ratio SELECT k, caller, 100 / n AS r, ts FROM calls;
INSERT INTO per_call SELECT k, r, caller, ts FROM ratio WHERE caller > 0;
INSERT INTO TABLE shares SELECT k, 1000 / (n - 1) AS s FROM calls;
INSERT INTO TABLE picked SELECT k, n FROM calls WHERE 60 / (n - 2) > 25;
INSERT INTO calm SELECT k, caller + 1 AS c, ts FROM calls;
"""
SINKS = ["per_call"]
SHARED = ["per_call", "calm"]  # two stateless sinks: one query, deployer.spark.run.shared
TABLES = "CREATE TABLE shares (k integer, s integer); CREATE TABLE picked (k integer, n integer);"


def test_the_queries_of_a_failing_step_split_it_on_the_driver() -> None:
    graph = compile_text(SCRIPT)
    ratio, (shares, picked) = graph.streams["ratio"].node, _into_tables(graph)
    plan = {q.name: q for q in plan_queries(graph, SINKS, {"calls": "file:x"}, store_kinds(None))}
    assert plan["sink:per_call"].on_driver == (f"stateless-{ratio}",)
    assert f"stateless failures of {ratio} (split on the driver)" in plan["sink:per_call"].writes
    assert plan["table:shares"].on_driver == (f"stateless-{shares}",)
    where = graph.node(picked).inputs[0].node  # the Filter under the table's Map
    assert plan["table:picked"].on_driver == (f"stateless-{where}",)
    # a step after it that can fail comes first: the Map's failures are spooled by the tasks
    failing = compile_text(SCRIPT.replace("WHERE caller > 0", "WHERE 10 / caller > 0"))
    sink = plan_queries(failing, SINKS, {"calls": "file:x"}, store_kinds(None))[0]
    assert sink.on_driver == (f"stateless-{failing.node(failing.streams['per_call'].node).inputs[0].node}",)
    assert f"stateless failures of {ratio} (by its tasks)" in sink.writes
    # the shared query of two stateless sinks splits the step of each, which the other does not
    # compute (`caller + 1` can overflow)
    shared = plan_queries(graph, SHARED, {"calls": "file:x"}, store_kinds(None))[0]
    calm = graph.streams["calm"].node
    assert (shared.name, shared.on_driver) == ("sinks:stateless", (f"stateless-{ratio}", f"stateless-{calm}"))
    # not when both compute it: one would drop its failed rows, or bring them again
    both = plan_queries(graph, [*SINKS, "ratio"], {"calls": "file:x"}, store_kinds(None))[0]
    assert (both.name, both.on_driver) == ("sinks:stateless", ())
    assert f"stateless failures of {ratio} (by its tasks)" in both.writes


def _into_tables(graph: g.Graph) -> list[str]:
    """The nodes whose rows the tables' queries write."""
    return [n.inputs[0].node for n in graph.nodes if isinstance(n, g.Materialize)]


def _run(
    spark: Any, graph: g.Graph, tmp: Path, sources: dict[str, str], url: str, sinks: list[str]
) -> tuple[Any, dict[str, str]]:
    """A run until idle, one file a micro-batch, on checkpoint tmp/ck: its counts, its queries' plans."""
    deployment = SparkDeployment(
        spark,
        graph,
        sources,
        {s: f"file:{tmp / 'spark-out'}" for s in sinks},
        str(tmp / "ck"),
        dead_letter=f"file:{tmp / 'spark-dead'}",
        stores=bind_stores(graph, {"out": url}),
        until_idle=True,
        max_files_per_trigger=1,
    )
    return deployment.run(out=io.StringIO()), query_plans(deployment)


def _tables(url: str) -> dict[str, list[Any]]:
    return {t: sorted(sqlite_rows(url, f"SELECT * FROM {t}")) for t in ("shares", "picked")}


@pytest.mark.parametrize(
    ("sinks", "earlier"),
    [(SINKS, False), (SINKS, True), (SHARED, True)],
    ids=["new", "resumed-from-spooled", "shared-resumed-from-spooled"],
)
def test_the_runs_write_the_references_rows_dead_letters_and_counts_once(
    spark: Any, tmp_path: Path, sinks: list[str], earlier: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = compile_text(SCRIPT)
    files = call_files(6)
    url = sqlite_store(tmp_path / "spark.sqlite3", TABLES)
    sources = prepare(tmp_path, {"calls": files[:3]})
    with monkeypatch.context() as patch:
        if earlier:  # the layout before: the steps' failures spooled by the tasks
            patch.setattr(queries, "on_driver", lambda *_: ())
        first, plans = _run(spark, graph, tmp_path, sources, url, sinks)
    assert first.dead_lettered > 0
    # the tasks of a query that spools the Map's failures write them under <checkpoint>/spool
    spooled = tmp_path / "ck" / "spool" / f"stateless-{graph.streams['ratio'].node}"
    assert spooled.exists() == earlier
    if sinks == SINKS:
        assert ("MapInArrow" in physical(plans["cep:sink:per_call"])) == earlier
    write_files(tmp_path / "in" / "calls", files[3:])
    then, plans = _run(spark, graph, tmp_path, sources, url, sinks)
    assert not spooled.exists()
    spk = collect("spark", tmp_path / "spark-out", tmp_path / "spark-dead", sinks)
    ref_url = sqlite_store(tmp_path / "ref.sqlite3", TABLES)
    bound = bind_stores(graph, {"out": ref_url})
    assert bound is not None
    registry = StoreRegistry(bound)
    try:
        outs, dead = {s: f"file:{tmp_path / 'ref-out'}" for s in sinks}, f"file:{tmp_path / 'ref-dead'}"
        counts = run_local(graph, sources, outs, registry, dead_letter=dead, until_idle=True)
    finally:
        registry.close()
    ref = collect("reference", tmp_path / "ref-out", tmp_path / "ref-dead", sinks)

    for sink in sinks:
        assert_same(ref, spk, sink, min_rows=20, ordered=True)
    assert _tables(url) == _tables(ref_url)
    assert_same_dead_letters(ref, spk)
    stages = Counter(d["stage"] for d in ref.dead)
    # n = 0 fails the sink's Map, n = 1 the table's, n = 2 the other table's WHERE
    assert (stages["Map"], stages["Filter"]) == (24, 12), stages
    assert {"input", "Source", "late"} < set(stages), stages
    assert first.dead_lettered + then.dead_lettered == sum(stages.values()) - stages["late"]
    assert first.filtered + then.filtered == sum(counts.filtered.values()) > 0
    queries_ = ["cep:table:shares", "cep:table:picked", *(["cep:sink:per_call"] if sinks == SINKS else [])]
    for name in queries_:
        analyzed = plans[name].split("== Analyzed Logical Plan ==\n", 1)[1].splitlines()[0]
        assert SPLIT_EVENT in analyzed, analyzed
        # no Python stage after the source's reader: the steps' failures are split on the driver
        assert "MapInArrow" not in physical(plans[name]), plans[name]
