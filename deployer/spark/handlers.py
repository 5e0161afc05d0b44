"""Operator graph → Spark: the handler of every operator, one table (`HANDLERS`).

A handler translates one node: it reads its inputs' DataFrames from the SparkGraph (translating them
first) and stores the DataFrame of each of its output ports. Stateless operators, TIME windows and
joins are native Spark (docs/architecture.md, decision 3); TUPLE and BATCH windows keep per-key
ordered state (deployer.spark.windows.window_state, deployer.spark.windows.tuple_buckets); ReadSQL and UpdateSQL
call the stores once per Arrow batch (deployer.spark.datastores.sql). Sinks and tables have no output port:
deployer.spark.run.deployment writes their input. The reference executor (deployer.local) defines what
each operator means; tests/spark compares the two on the same input, and tests/architecture checks
that every operator of the graph has a handler here.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from deployer.spark.datastores.sql import read_sql, update_sql
from deployer.spark.output.translate import output_rate
from deployer.spark.patterns.translate import pattern
from deployer.spark.translate import stateless
from deployer.spark.translate.graph import Handler, SparkGraph
from deployer.spark.translate.join import join
from deployer.spark.windows.time_window import time_aggregate
from deployer.spark.windows.window_state import tuple_or_batch_aggregate
from operators import graph as g


def _aggregate(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Aggregate)
    if node.window.kind == "time":
        time_aggregate(sg, node)
    else:
        sg.ports[g.Port(node.id)] = tuple_or_batch_aggregate(sg, node)


def _join(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Join)
    join(sg, node)


def _join_without_ties(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Join)
    join(sg, node, ties=False)


def _readsql(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.ReadSQL)
    sg.ports[g.Port(node.id)] = read_sql(sg, node)


def _updatesql(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.UpdateSQL)
    sg.ports[g.Port(node.id)] = update_sql(sg, node)


def _pattern(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Pattern)
    sg.ports[g.Port(node.id)] = pattern(sg, node)


def _output_rate(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.OutputRate)
    sg.ports[g.Port(node.id)] = output_rate(sg, node)


def _terminal(sg: SparkGraph, node: g.Node) -> None:
    sg.input(node)  # Sink and Materialize: their input is what deployer.spark.run.deployment writes


HANDLERS: dict[type[g.Node], Handler] = {
    g.Source: stateless.source,
    g.Map: stateless.map_,
    g.Filter: stateless.filter_,
    g.MultiFilter: stateless.multifilter,
    g.Union: stateless.union,
    g.Aggregate: _aggregate,
    g.Join: _join,
    g.ReadSQL: _readsql,
    g.UpdateSQL: _updatesql,
    g.Materialize: _terminal,
    g.Pattern: _pattern,
    g.OutputRate: _output_rate,
    g.Sink: _terminal,
}


def handlers_for(
    join_ties: bool, merge_order: bool, release_order: bool = False
) -> dict[type[g.Node], Handler]:
    """The handlers of a run on a checkpoint of the layout they say (deployer.spark.run.layout): an
    earlier one's joins drop an event at its stream's watermark as late, as their state was written
    (`join_ties` false); its Maps that drop a merge's event time leave its rows' ids as they were
    (`merge_order` false), and so do those that drop a delayed stream's (`release_order` false)."""
    out = dict(HANDLERS)
    if not join_ties:
        out[g.Join] = _join_without_ties
    if merge_order:
        out[g.Map] = stateless.map_in_release_order if release_order else stateless.map_in_time_order
    return out


def spark_graph(
    graph: g.Graph, sources: dict[str, DataFrame], stores: Any = None, **options: Any
) -> SparkGraph:
    """The translation of `graph` over the given source DataFrames (stream name -> typed streaming or
    batch DataFrame, positional columns), by the handlers of this table; ports are translated on use."""
    return SparkGraph(graph, sources, HANDLERS, stores, **options)
