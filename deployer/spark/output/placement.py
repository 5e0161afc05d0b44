"""Where an OutputRate node's limiter runs on Spark: in its own stateful processor
(deployer.spark.output.processor), or, for `ALL` and `LAST EVERY duration` over a TIME window's rows,
in a window aggregation of Spark's own after the window's (deployer.spark.output.in_window).

Kept apart from the translation (no pyspark here): the checkpoint's compatibility check
(deployer.spark.run.compat) tells the two state layouts apart from the graph alone.
"""

from __future__ import annotations

from operators import graph as g
from operators.output_node import ALL, LAST, OutputRate

# The hidden column of a TIME window's rows that a limit in Spark's window aggregation reads: the
# window's `window_time()`, the last instant it covers, which carries Spark's watermark.
WINDOW_TIME = "__wt"


def in_window(graph: g.Graph, node: OutputRate) -> bool:
    """Whether `node` limits a TIME window's rows by time, holding them (ALL, LAST): its buckets are
    then Spark's own tumbling windows over the rows' time, fired by Spark's watermark."""
    if node.every_ms is None or node.kind not in (ALL, LAST):
        return False
    producer = graph.node(node.inputs[0].node)
    return isinstance(producer, g.Aggregate) and producer.window.kind == "time"


def feeds_window_limit(graph: g.Graph, node: g.Aggregate) -> bool:
    """Whether a TIME window aggregate's rows go to a limit that reads their WINDOW_TIME."""
    return any(isinstance(c, OutputRate) and in_window(graph, c) for c in graph.consumers(g.Port(node.id)))
