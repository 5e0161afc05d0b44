"""Which stateless failure point a sink's or a table's query splits on the driver, answered from the
graph alone (no pyspark here: deployer.spark.run.queries plans with it, `cep explain` prints it).

A sink's and a table's query brings its rows to the driver (a sink's writer, a table's statements).
When those rows come from a Map or a Filter that can fail through Maps and Filters that cannot, and
that query writes its failures (deployer.spark.run.queries `_by_readers`: `stateless-<node>`), it
runs every row of that step with its error and failed event beside it and splits the collected
batch there (deployer.spark.run.failures `stateless_on_driver`), as it does for a data store call's
failures; the Filters on the way pass the failed rows on (deployer.spark.translate.stateless).
Its tasks spooled them before, in a `mapInArrow` of their own (deployer.spark.streams.spool): a
Python worker per task, and the rows sent to it and back as Arrow, in every micro-batch.

Not a MultiFilter, whose failed rows would go on in each of its outputs; nor a step before another
that can fail (that one's failures are spooled, and it would judge failed rows by values that are
no event's).
"""

from __future__ import annotations

from collections.abc import Sequence

from operators import graph as g
from operators.analysis import can_fail


def output_port(graph: g.Graph, query: str, writes: Sequence[str]) -> g.Port | None:
    """The port whose rows query `query` brings to the driver: a sink's stream, a table's input;
    None for any other query."""
    if query.startswith("sink:"):
        return graph.streams[writes[0]]
    table = query.removeprefix("table:")
    if table == query:
        return None
    return next(n.inputs[0] for n in graph.nodes if isinstance(n, g.Materialize) and n.table.name == table)


def failing_step(graph: g.Graph, port: g.Port) -> str | None:
    """The Map or Filter that can fail whose rows become those of `port` through Maps and Filters
    that cannot (none or more); None when there is none (another operator comes first)."""
    node = graph.node(port.node)
    while isinstance(node, g.Map | g.Filter) and port.index == 0:
        exprs = [p.expr for p in node.projections] if isinstance(node, g.Map) else [node.predicate]
        if any(map(can_fail, exprs)):
            return node.id
        port = node.inputs[0]
        node = graph.node(port.node)
    return None


def on_driver(graph: g.Graph, query: str, writes: Sequence[str], spooled: Sequence[str]) -> str | None:
    """The label (`stateless-<node>`) of the failure point of `spooled`, the ones query `query`
    writes, that it splits on the driver; None if none."""
    port = output_port(graph, query, writes)
    node = failing_step(graph, port) if port is not None else None
    label = f"stateless-{node}"
    return label if node is not None and label in spooled else None
