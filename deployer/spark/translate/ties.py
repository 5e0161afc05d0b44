"""Rows at the watermark. In the language an event at its stream's watermark is not late (docs/
language.md, "Semantics of the stateful operators"); Spark takes a row at or behind its watermark
as late (WatermarkSupport: `ts <= watermark`, a watermark of a millisecond's grain). Where that
decides something:

- a join drops such a row of its input (deployer.spark.translate.join);
- a stateful processor whose rows carry event time (a pattern's matches with `match_time()`, the
  rows OUTPUT FIRST lets through) has Spark check every row it emits against the watermark of the
  micro-batch before, and one at it fails the query (EMITTING_ROWS_OLDER_THAN_WATERMARK_NOT_ALLOWED):
  a match an event at the watermark completed, say, or the first row of a group at it.

So the watermark's mark goes on a copy of the event time a microsecond on (the grain of a
timestamp), which Spark takes as late only when the event is behind the watermark, and back onto
the event time itself after (tests/spark/test_ties_at_the_watermark.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from deployer.spark.translate.graph import unmarked

TICK = timedelta(microseconds=1)
# Spark's metadata key that marks an event-time column (EventTimeWatermark.delayKey)
DELAY = "spark.watermarkDelayMs"
# A processor's output column: its row's time a microsecond on, the column Spark checks
# (eventTimeColumnName), dropped right after (`remarked`)
MARK_TIME = "__mark_time"

Mark = dict[str, Any]


def mark_of(df: DataFrame, column: str) -> Mark | None:
    """The watermark's mark of `column` in `df` (its metadata), None if it has none."""
    delay = df.schema[column].metadata.get(DELAY)
    return None if delay is None else {DELAY: delay}


def on_copy(df: DataFrame, ts: str, copy: str) -> tuple[DataFrame, Column, Mark | None]:
    """`df` with its event time `ts` unmarked and its mark on `copy`, `ts` a microsecond on; the copy's
    column and the mark. `df` as it is if `ts` has no mark (no watermark: nothing is late)."""
    mark = mark_of(df, ts)
    if mark is None:
        return df, F.col(ts), None
    out = df.select(
        *[unmarked(F.col(c)).alias(c) if c == ts else F.col(c) for c in df.columns],
        (F.col(ts) + F.lit(TICK)).alias(copy, metadata=mark),
    )
    return out, F.col(copy), mark


def remarked(out: DataFrame, column: str, name: str) -> Column:
    """`column` of a processor's output `out` as `name`, with the mark Spark put on `MARK_TIME`."""
    return F.col(column).alias(name, metadata=mark_of(out, MARK_TIME) or {DELAY: 0})
