"""The query pattern sinks share (deployer.spark.run.pattern_groups): what it runs and how it writes.

It runs the patterns' shared operator (deployer.spark.patterns.shared). Each sink is written as its
own query would write it (deployer.spark.run.failures `along`: the rows, through the Maps after the
pattern, then the dead letters of the pattern and of those Maps), from its pattern's part of every
micro-batch, in the order of the query's sinks; the batch is persisted, so the operator runs once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import DataFrame

from deployer.spark.patterns.shared import part, shared_patterns
from deployer.spark.patterns.translate import failures, matches
from deployer.spark.run.failures import along
from deployer.spark.run.pattern_groups import split_chain
from deployer.spark.run.queries import Query
from deployer.spark.streams.dead_letters import DeadLetterWriter
from deployer.spark.streams.sinks import Writer
from deployer.spark.translate.columns import error_column
from deployer.spark.translate.graph import ERR, SparkGraph
from operators import graph as g


def pattern_query(
    sg: SparkGraph, query: Query, writers: Mapping[str, Writer], dead: Callable[[str], DeadLetterWriter]
) -> tuple[DataFrame, Writer, set[str]]:
    """What `query` runs, its foreachBatch, and the failure points it writes, given each sink's
    writer (`writers`) and the writers of dead letters (`dead`, by failure point)."""
    graph = sg.graph
    sinks = [w for w in query.writes if w in writers]
    patterns = [_pattern(graph, s) for s in sinks]
    names = [s.lower() for s in sinks]
    rows = shared_patterns(sg, patterns, names)
    parts = {node.id: part(rows, k, node, names[k]) for k, node in enumerate(patterns)}

    def handler(over: SparkGraph, node: g.Node) -> None:
        assert isinstance(node, g.Pattern) and node.id in parts, f"{node.id} is not a pattern of {query.name}"
        over.ports[g.Port(node.id)] = matches(over, node, parts[node.id], None)

    # The sinks' rows from the patterns' parts: a graph of its own, as another query that reads
    # one of the patterns translates it with its own operator
    over = SparkGraph(
        graph,
        sg.sources,
        {**sg.handlers, g.Pattern: handler},
        sg.stores_config,
        timed_sources=sg.timed_sources,
    )
    over.spool, over.deployment = sg.spool, sg.deployment
    assigned = set(query.along)
    steps: list[tuple[Callable[[DataFrame], DataFrame], Writer]] = []
    written: set[str] = set()
    for k, (sink, node) in enumerate(zip(sinks, patterns, strict=True)):
        frame, write, mine = along(over, graph.streams[sink], assigned, dead, writers[sink])
        whole = _whole(k, node, names[k])
        # `along` splits micro-batches of the pattern's rows before its failure point (`Split.whole`)
        assert frame.columns == whole(rows).columns, f"{sink}: {frame.columns} != {whole(rows).columns}"
        steps.append((whole, write))
        written |= mine

    def write_all(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            for whole, write in steps:
                write(whole(batch), batch_id)
        finally:
            batch.unpersist()

    return rows, write_all, written


def _pattern(graph: g.Graph, sink: str) -> g.Pattern:
    found = split_chain(graph, graph.streams[sink])
    assert found is not None and isinstance(found[0], g.Pattern), f"{sink} is not a pattern's sink"
    return found[0]


def _whole(k: int, node: g.Pattern, name: str) -> Callable[[DataFrame], Any]:
    """Pattern `k`'s rows of a micro-batch of the shared operator, before the split at its failure
    point, as SparkGraph.split_errors makes them (`Split.whole`: its error column added)."""
    err = error_column(failures())
    assert err is not None
    return lambda rows: part(rows, k, node, name).withColumn(ERR, err)
