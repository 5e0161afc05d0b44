"""The order the rows of a micro-batch at a port are written or applied in: the reference
executor's. A sink's writer, a keyed table's writer and an ON SQL update each sort a micro-batch by
these columns (a batch of a merge comes input by input, a TIME window's in the order of its
windows' ends), so that the last row of a key wins, and the statements run, as on the reference."""

from __future__ import annotations

from deployer.spark.translate.columns import col_name
from deployer.spark.translate.graph import SEQ
from operators import graph as g
from operators.analysis import in_release_order


def batch_order(graph: g.Graph, port: g.Port) -> list[str]:
    """The columns that sort a micro-batch of the rows at `port` into the reference's order: event
    time, when they carry it, then arrival (`SEQ`); none when they come in that order already,
    released by a delayed stream's Sequencer without their event time (`in_release_order`: `SEQ`
    alone would put them back in arrival order)."""
    producer = graph.node(port.node)
    if producer.event_time is not None:
        return [col_name(producer.schema.position(producer.event_time)), SEQ]
    return [] if in_release_order(graph, port) else [SEQ]
