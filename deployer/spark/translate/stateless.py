"""Map, Filter, MultiFilter, Union and the Source on Spark: native `select`, `filter` and `union`.

Expressions compile to Columns (deployer.spark.translate.expr); rows whose expressions fail are split off into
dead letters first (SparkGraph.split_errors), as the reference executor dead-letters their events.
A Filter or MultiFilter counts the events it drops in an observed metric (graph.count_filtered).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from deployer.spark.translate.columns import Message, col_name, spark_type
from deployer.spark.translate.expr import ExprCompiler
from deployer.spark.translate.graph import ERR, SEQ, SparkGraph, any_of, count_filtered, order_key, project
from operators import graph as g
from operators.analysis import from_timed_merge, in_release_order


def source(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Source)
    # The stream's watermark is declared by its source (deployer.spark.streams.sources), before anything
    # drops an event; the event-time column carries it to the stateful operators downstream.
    df = sg.sources[node.stream]
    if node.event_time is not None and node.stream not in sg.timed_sources:
        # An event without event time cannot be placed in time: the reference dead-letters it.
        ts = col_name(node.schema.position(node.event_time))
        reason = f"event time field '{node.event_time}' is NULL"
        errors: list[tuple[Column, Message]] = sg.compiled(
            node, "errors", lambda: [(F.col(ts).isNull(), reason)]
        )
        df = sg.split_errors(node, df, errors, len(node.schema))
    sg.ports[g.Port(node.id)] = df


def map_(sg: SparkGraph, node: g.Node) -> None:
    _map(sg, node, merges=False, released=False)


def map_in_time_order(sg: SparkGraph, node: g.Node) -> None:
    """A Map that keeps the order of a merge's rows with event time when its SELECT drops the event
    time (`operators.analysis.from_timed_merge`): on Spark such rows come input by input, and a
    sink, a keyed table or an update after the Map sorts them by `SEQ` alone, where the reference
    keeps the merge's order (event time, then input, then arrival). Their `SEQ` becomes the event
    time's order key, then the merge's `SEQ` (input, then arrival): that order. Not on a checkpoint
    of the layout before, where a replayed micro-batch would give its events other ids
    (deployer.spark.run.layout.merge_order)."""
    _map(sg, node, merges=True, released=False)


def map_in_release_order(sg: SparkGraph, node: g.Node) -> None:
    """`map_in_time_order`, and the same for the rows of a stream with a WATERMARK delay, released in
    event-time order (`operators.analysis.in_release_order`): what sorts them by `SEQ` alone after the
    Map (a TUPLE or BATCH window, an OUTPUT limit) put them in arrival order, where the reference
    takes them as released (found by the differential fuzzer, seed 3511). Not on a checkpoint of the
    layout before (deployer.spark.run.layout.release_order)."""
    _map(sg, node, merges=True, released=True)


def _map(sg: SparkGraph, node: g.Node, merges: bool, released: bool) -> None:
    assert isinstance(node, g.Map)
    df = sg.input(node)
    ts = sg.event_time_index(node.inputs[0])
    port = node.inputs[0]
    ordered = (merges and from_timed_merge(sg.graph, port)) or (released and in_release_order(sg.graph, port))
    in_time_order = node.event_time is None and ts is not None and ordered

    def build() -> tuple[list[Column], list[tuple[Column, Message]]]:
        c = ExprCompiler()
        seq = F.col(SEQ)
        if in_time_order:
            assert ts is not None
            seq = F.concat(F.coalesce(order_key(F.col(col_name(ts))), F.lit("")), F.lit("|"), seq).alias(SEQ)
        return [*project(c, node.projections, timed=node.event_time), seq], c.errors

    cols, errors = sg.compiled(node, "map", build)
    if errors:
        # Evaluate the error conditions against the input row, before projecting it away.
        df = sg.split_errors(node, df, errors, len(node.input_schema))
    sg.ports[g.Port(node.id)] = df.select(*cols, *sg.carried)


def filter_(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Filter)

    def build() -> tuple[Column, list[tuple[Column, Message]]]:
        c = ExprCompiler()
        return c.compile(node.predicate), c.errors

    pred, errors = sg.compiled(node, "filter", build)
    df = sg.split_errors(node, sg.input(node), errors, len(node.input_schema))
    if ERR in sg.carried:  # a failed row goes on to the query that splits it on the driver
        pred = F.col(ERR).isNotNull() | F.coalesce(pred, F.lit(False))
    # counted after the split: an event that fails the predicate is dead-lettered, not filtered
    sg.ports[g.Port(node.id)] = count_filtered(sg, node, df, pred).filter(pred)


def multifilter(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.MultiFilter)

    def build() -> tuple[list[Column], list[tuple[Column, Message]], Column]:
        c = ExprCompiler()
        preds = [c.compile(p) for p in node.predicates]
        # filtered: the events that no predicate keeps (as the reference executor counts them)
        kept = any_of(F.coalesce(p, F.lit(False)) for p in preds)
        return preds, c.errors, kept

    preds, errors, kept = sg.compiled(node, "multifilter", build)
    df = sg.split_errors(node, sg.input(node), errors, len(node.input_schema))
    df = count_filtered(sg, node, df, kept)
    for i, p in enumerate(preds):
        sg.ports[g.Port(node.id, i)] = df.filter(p)


def union(sg: SparkGraph, node: g.Node) -> None:
    assert isinstance(node, g.Union)
    frames = []
    for i in range(len(node.inputs)):
        df = sg.input(node, i)
        # Same kinds by construction; cast so that e.g. char(5) and varchar(9) line up exactly.
        given = sg.graph.node(node.inputs[i].node).schema

        def build(i: int = i, given: Any = given) -> list[Column]:
            cols = [
                F.col(col_name(j))
                if given.fields[j].type == f.type
                else F.col(col_name(j)).cast(spark_type(f.type)).alias(col_name(j))
                for j, f in enumerate(node.schema)
            ]
            # Arrival order of a merge: input by input (the reference breaks event-time ties so).
            return [*cols, F.concat(F.lit(f"{i}|"), F.col(SEQ)).alias(SEQ)]

        frames.append(df.select(*sg.compiled(node, f"union:{i}", build)))
    out = frames[0]
    for df in frames[1:]:
        out = out.union(df)
    sg.ports[g.Port(node.id)] = out
