"""Which stateless failure point a sink's or a table's query splits on the driver, answered from the
graph alone (no pyspark here: deployer.spark.run.queries plans with it, `cep explain` prints it).

A sink's and a table's query brings its rows to the driver (a sink's writer, a table's statements),
as does the query the stateless sinks share (deployer.spark.run.shared), each sink's rows apart.
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
from operators.analysis import ancestors, can_fail


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


def on_driver(graph: g.Graph, query: str, writes: Sequence[str], spooled: Sequence[str]) -> tuple[str, ...]:
    """The labels (`stateless-<node>`) of the failure points of `spooled`, the ones query `query`
    writes, that it splits on the driver."""
    return tuple(f"stateless-{node}" for node in split_steps(graph, query, writes, spooled).values())


def split_steps(graph: g.Graph, query: str, writes: Sequence[str], spooled: Sequence[str]) -> dict[str, str]:
    """The outputs of query `query` (a sink's stream, a table's name) whose rows bring the failures
    of a step of `spooled` (`stateless-<node>`) to the driver -> that step. Of the shared query's
    sinks, one whose step another of them computes too is left out: that one would drop its failed
    rows, or bring them again."""
    ports = _outputs(graph, query, writes)
    out = {}
    for name, port in ports.items():
        node = failing_step(graph, port)
        if node is None or f"stateless-{node}" not in spooled:
            continue
        others = {a.id for n, p in ports.items() if n != name for a in ancestors(graph, p.node)}
        if node not in others:
            out[name] = node
    return out


def _outputs(graph: g.Graph, query: str, writes: Sequence[str]) -> dict[str, g.Port]:
    """The ports whose rows query `query` brings to the driver, by output: a sink's stream, the
    shared query's sinks', a table's input; none for any other query."""
    if query.startswith(("sink:", "sinks:")):
        return {w: graph.streams[w] for w in writes if w in graph.streams}
    table = query.removeprefix("table:")
    found = [n.inputs[0] for n in graph.nodes if isinstance(n, g.Materialize) and n.table.name == table]
    return {table: found[0]} if query != table and found else {}
