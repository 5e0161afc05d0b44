"""Where an OutputRate node's limiter runs on Spark: in its own stateful processor
(deployer.spark.output.processor); for `ALL` and `LAST EVERY duration` over a TIME window's rows, in
the window's own aggregation, keyed by the limit's bucket (deployer.spark.windows.time_window_limit)
when the limit sees exactly the rows the window makes or a HAVING that cannot fail keeps, else in a
window aggregation of Spark's own
after the window's (deployer.spark.output.in_window); for the same limits over a TUPLE or BATCH
window's rows, inside the window's processor, which already holds the groups
(deployer.spark.windows.window_limit).

Kept apart from the translation (no pyspark here): the checkpoint's compatibility check
(deployer.spark.run.compat) tells the two state layouts apart from the graph alone.
"""

from __future__ import annotations

from operators import expr as ir
from operators import graph as g
from operators.analysis import can_fail, can_overflow
from operators.declarations import Window
from operators.output_node import ALL, LAST, OutputRate

# The hidden column of a TIME window's rows that a limit in Spark's window aggregation reads: the
# window's `window_time()`, the last instant it covers, which carries Spark's watermark.
WINDOW_TIME = "__wt"
# The most windows of a group that may end in one bucket of a limit held in a TIME window's own
# aggregation, which computes each of them apart (time_window_limit): beyond, the limit is a second
# aggregation (in_window), whose cost does not grow with their number.
MAX_WINDOWS_PER_BUCKET = 8


def _held_by_time(node: OutputRate) -> bool:
    """Whether `node` holds rows until a tick of event time (ALL or LAST EVERY duration): the two
    forms a window's own state can hold (FIRST lets a row out at once, SNAPSHOT and EVENTS differ)."""
    return node.every_ms is not None and node.kind in (ALL, LAST)


def in_window(graph: g.Graph, node: OutputRate) -> bool:
    """Whether `node` limits a TIME window's rows by time, holding them (ALL, LAST), in a second
    aggregation: its buckets are then Spark's own tumbling windows over the rows' time, fired by
    Spark's watermark. Not when the window's own aggregation holds them (in_window_aggregation)."""
    if not _held_by_time(node):
        return False
    producer = graph.node(node.inputs[0].node)
    return (
        isinstance(producer, g.Aggregate)
        and producer.window.kind == "time"
        and not in_window_aggregation(graph, node)
    )


def windows_per_bucket(window: Window, every_ms: int) -> int:
    """How many windows of a group may end in one bucket of `every_ms`: their ends are ADVANCE apart."""
    return -(-every_ms // window.advance)


def in_window_aggregation(graph: g.Graph, node: OutputRate) -> bool:
    """Whether `node` limits a TIME window's rows by time, holding them (ALL, LAST), in the window's
    own aggregation: keyed by the limit's bucket instead of the window, it keeps each window of the
    bucket apart and lets them out when the bucket closes (deployer.spark.windows.time_window_limit).
    When the limiter would see exactly the rows the window makes (`_sees_every_row`) or those a
    HAVING that cannot fail keeps (the aggregation evaluates it per window), no aggregate can
    overflow (a failed row must be dead-lettered when its window closes, not its bucket), and at
    most MAX_WINDOWS_PER_BUCKET of a group's windows end in one bucket."""
    if not _held_by_time(node) or node.time_index is not None:
        return False
    assert node.every_ms is not None  # _held_by_time
    producer = graph.node(node.inputs[0].node)
    return (
        isinstance(producer, g.Aggregate)
        and producer.window.kind == "time"
        and _sees_every_row(graph, producer, node, having=True)
        and not any(isinstance(a.expr, ir.Agg) and can_overflow(a.expr) for a in producer.aggs)
        and windows_per_bucket(producer.window, node.every_ms) <= MAX_WINDOWS_PER_BUCKET
    )


def limit_in_aggregation(graph: g.Graph, node: g.Aggregate) -> OutputRate | None:
    """The limit a TIME window aggregate holds its rows for, in its own aggregation, if any."""
    for c in graph.consumers(g.Port(node.id)):
        if isinstance(c, OutputRate) and in_window_aggregation(graph, c):
            return c
    return None


def feeds_window_limit(graph: g.Graph, node: g.Aggregate) -> bool:
    """Whether a TIME window aggregate's rows go to a limit that reads their WINDOW_TIME."""
    return any(isinstance(c, OutputRate) and in_window(graph, c) for c in graph.consumers(g.Port(node.id)))


def in_window_processor(graph: g.Graph, node: OutputRate) -> bool:
    """Whether `node` limits a TUPLE or BATCH window's rows by time, holding them (ALL, LAST), in
    the window's own processor: when the limiter would see exactly the rows the processor makes,
    that is, the statement has no HAVING (which drops rows after the processor) and no projection
    that can fail (a failed row is dead-lettered before the limiter and must not be held)."""
    if not _held_by_time(node) or node.time_index is not None:
        return False
    producer = graph.node(node.inputs[0].node)
    return (
        isinstance(producer, g.Aggregate)
        and producer.window.kind in ("tuple", "batch")
        and _sees_every_row(graph, producer, node)
    )


def _sees_every_row(graph: g.Graph, producer: g.Aggregate, node: OutputRate, having: bool = False) -> bool:
    """Whether the limit `node` sees every row its window aggregate `producer` makes, per the same
    groups, and nothing else does: no HAVING (which drops rows after the window; with `having`, one
    that cannot fail), no projection that can fail (a failed row is dead-lettered before the limiter
    and must not be held), the limit the window's only reader."""
    return (
        (producer.having is None or (having and not can_fail(producer.having)))
        and len(node.group_by) == len(producer.keys)
        and not any(can_fail(p.expr) for p in producer.projections)
        and len(graph.consumers(g.Port(producer.id))) == 1
        and g.Port(producer.id) not in graph.streams.values()
    )


def limit_held_by(graph: g.Graph, node: g.Aggregate) -> OutputRate | None:
    """The limit a TUPLE or BATCH window aggregate's processor holds its rows for, if any."""
    for c in graph.consumers(g.Port(node.id)):
        if isinstance(c, OutputRate) and in_window_processor(graph, c):
            return c
    return None
