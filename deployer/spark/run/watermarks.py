"""Which operators read Spark's watermark: whether a deployment declares one on its streams, and
which of its queries run Spark's micro-batches without data."""

from __future__ import annotations

from typing import TYPE_CHECKING

from operators import graph as g
from operators.output_node import OutputRate

if TYPE_CHECKING:
    from deployer.spark.run.queries import Query


def declares_watermarks(graph: g.Graph) -> bool:
    """Whether the deployment declares Spark's watermark on its streams with event time: only an
    operator with state of its own reads it (Spark's aggregation and join, a pattern's or an OUTPUT
    limit's event-time timers, the event time a processor gives its output), so a script of
    stateless operators and data store calls declares none. Lateness does not depend on it: the
    Sequencers decide it from their own state, a file source from its offsets. Spark's watermark is
    a plan node of its own, which ends the stage's generated code and notes every row's event time:
    a stateless plan ran about a quarter slower with it (bench/run's stateless rows)."""
    return any(isinstance(n, g.Aggregate | g.Join | g.Pattern | OutputRate) for n in graph.nodes)


def fired_by_watermark(node: g.Node) -> bool:
    """Whether Spark's own watermark drives the operator: it emits (a TIME window's rows) or evicts
    (a join's state) in the micro-batch after the one that advanced the watermark. The other stateful
    operators (the Sequencers, TUPLE and BATCH windows) act on the events of a batch alone and
    register no timers (a window that holds an OUTPUT limit registers the limit's: the OutputRate
    node's, which says so here); nor does an OUTPUT limit by count."""
    if isinstance(node, g.Pattern):
        return True  # its deadlines (absences, WITHIN) are event-time timers
    if isinstance(node, g.OutputRate):
        return node.every_ms is not None  # its ticks are event-time timers
    return isinstance(node, g.Join) or (isinstance(node, g.Aggregate) and node.window.kind == "time")


def runs_empty_batches(graph: g.Graph, query: Query | None) -> bool:
    """Whether `query` runs Spark's micro-batches without data: only an operator Spark's watermark
    fires needs them (`fired_by_watermark`); elsewhere such a batch did nothing but cost a second or
    more (planning, state stores, the checkpoint's logs) after the last one of every query that
    declares a watermark. Unknown queries (None) keep them."""
    return query is None or any(fired_by_watermark(graph.node(n)) for n in query.stateful)
