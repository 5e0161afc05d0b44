"""`OUTPUT ALL | LAST EVERY duration` over a TIME window's rows on Spark, where the window's own
aggregation cannot hold them (a HAVING or a projection that can fail, an aggregate that can overflow,
more windows to a bucket than it keeps apart: deployer.spark.output.placement and
deployer.spark.windows.time_window_limit): a tumbling window of Spark's own over the rows' time, not
a Python operator.

A bucket of the limit is [k·T, (k+1)·T) on the epoch, and it closes when the watermark reaches its
end: exactly what Spark's append-mode window aggregation does with `window(time, T)` over a column
that carries the watermark. A TIME window's rows carry it in `window_time()` of their window (the last
instant the window covers: the row's time, deployer.spark.output.placement.WINDOW_TIME), passed on
through HAVING and the projections; the rows a window emits in a micro-batch end at or before that
batch's watermark and after the previous one's, so the limit's aggregation takes them in the same
micro-batch and, if their bucket closes there too, emits it in that batch, as the reference executor
does at that tick. So the limit adds a native stateful operator (its state: one row per group and
open bucket for LAST, one per row for ALL) and no Python process, per micro-batch or per query start.

- LAST: per bucket and group, the row with the largest order key (the latest window), `max_by`.
- ALL: every row, one group per row (its order key is unique), held until its bucket closes.

Order: the reference emits a tick's rows bucket by bucket, the groups in the order they first
appeared in the bucket (LAST) or the rows in the order they came (ALL); each row's order key is its
bucket's end, then the least order key of its group's rows in the bucket (for ALL, its own).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from deployer.spark.output.placement import WINDOW_TIME
from deployer.spark.translate.columns import col_name
from deployer.spark.translate.graph import SEQ, SparkGraph, order_key
from operators.output_node import LAST, OutputRate


def limit_in_window(sg: SparkGraph, node: OutputRate) -> DataFrame:
    rows = sg.input(node)
    bucket = F.window(F.col(WINDOW_TIME), f"{node.every_ms} milliseconds").alias("_bucket")
    values = F.struct(*[F.col(col_name(i)).alias(f"v{i}") for i in range(node.width)])
    if node.kind == LAST:
        keys = [F.col(col_name(i)).alias(f"_g{n}") for n, i in enumerate(node.keys)]
        held = rows.groupBy(bucket, *keys).agg(
            F.max_by(values, F.col(SEQ)).alias("_row"), F.min(F.col(SEQ)).alias("_first")
        )
    else:
        held = rows.groupBy(bucket, F.col(SEQ).alias("_first")).agg(F.first(values).alias("_row"))
    return held.select(
        *[F.col(f"_row.v{i}").alias(col_name(i)) for i in range(node.width)],
        F.concat(order_key(F.col("_bucket.end")), F.lit("|"), F.col("_first")).alias(SEQ),
    )
