"""Where the event-time watermark of a stateful operator's input is declared, and with which delay.

Watermarks and time. The watermark is declared at the input of each stateful operator, as max
event time less the largest WATERMARK of the sources behind it (after a Union: of all of them),
except after a Join, whose output carries the watermark Spark propagates. A TIME window fires when
that watermark reaches its end, so at the end of a bounded input it fires iff max event time -
WATERMARK >= end, the reference executor's rule. Known differences, by design:

- Late events (behind the watermark on arrival) are dead-lettered by the reference executor at
  the source; Spark drops them only in stateful operators (a TIME window drops an event when all
  its windows have closed), and stateless outputs keep them. Spark judges lateness against the
  watermark of the batch before the previous one, so an event late by one batch still joins a
  window that is being emitted in its batch.
- The watermark is declared at a stateful operator's input, after the filters and the expressions
  that can fail before it (Spark even pushes an aggregate's own failure filter below it): events
  dropped or dead-lettered on the way do not move it; the reference's per-source watermark counts
  every event read.
- Sources with different WATERMARK delays merged by a Union: Spark uses the largest delay for the
  merged stream, the reference each source's own, so Spark may close windows later (and at the
  end of the input, fire fewer).
- A TIME window over a Join's output: at the end of the input the reference closes windows up to
  the later of the join inputs' final times, Spark up to the earlier one less the join's bound.
- Out-of-order input across micro-batches for TUPLE/BATCH windows (see `deployer.spark.window_state`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from deployer.spark.columns import col_name
from deployer.spark.graph import SparkGraph
from operators import graph as g
from operators.analysis import after_join, upstream_delay


def watermarked(sg: SparkGraph, consumer: g.Node, input_index: int = 0) -> DataFrame:
    """The input of a stateful operator with the event-time watermark declared on it: max event time
    minus the largest WATERMARK delay of the sources it comes from (0 when none was declared)."""
    port = consumer.inputs[input_index]
    df = sg.port(port)
    ts_index = sg.event_time_index(port)
    if ts_index is None:
        return df
    producer = sg.graph.node(port.node)
    if after_join(sg.graph, producer):
        # A Join's output already carries the watermark Spark propagates through it (the inputs'
        # watermarks, less the join's time bound); Spark forbids declaring a second one.
        return df
    delay = (
        upstream_delay(sg.graph, producer)
        if not isinstance(producer, g.Source)
        else producer.watermark_ms or 0
    )
    return df.withWatermark(col_name(ts_index), f"{delay} milliseconds")

