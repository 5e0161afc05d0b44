"""Which operators read Spark's watermark: whether a deployment declares one on its streams, and
which of its queries run Spark's micro-batches without data."""

from __future__ import annotations

from typing import TYPE_CHECKING

from operators import graph as g
from operators.output_node import OutputRate
from operators.watermarks import fired_by_watermark

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


def runs_empty_batches(graph: g.Graph, query: Query | None) -> bool:
    """Whether `query` runs Spark's micro-batches without data: only an operator Spark's watermark
    fires needs them (`fired_by_watermark`); elsewhere such a batch did nothing but cost a second or
    more (planning, state stores, the checkpoint's logs) after the last one of every query that
    declares a watermark. Unknown queries (None) keep them."""
    return query is None or any(fired_by_watermark(graph.node(n)) for n in query.stateful)
