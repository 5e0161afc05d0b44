"""`OUTPUT ALL | LAST EVERY duration` held in a TIME window's own aggregation on Spark
(deployer.spark.output.placement.in_window_aggregation): no operator, shuffle or state of the
limit's own.

The limit's bucket [k·T, (k+1)·T) on the epoch takes the windows whose last instant (`window_time()`,
the row's time for the limit) falls in it. So the aggregation is keyed by the bucket and the group
instead of the window and the group, and keeps apart each window of the group that ends in the
bucket: their ends are ADVANCE apart, so at most n = ⌈T / ADVANCE⌉ of them, the i-th the one whose
last instant is in [start + i·ADVANCE, start + (i+1)·ADVANCE); each aggregate is computed n times,
over its window's events alone (`F.when(i == …)`). Spark's watermark closes the bucket when it
passes its end, where it closes the last window in it: then
- LAST lets out the group's latest window (the greatest i with events);
- ALL lets out every window of the group that has events, one row each.
That is what the limit after the window emits at that tick (deployer.output.limiter), in the same
micro-batch as the second aggregation it replaces (deployer.spark.output.in_window) emitted it, with
the same order key: the bucket's end, then the order key of the group's first window in the bucket
(LAST) or of the row's own window (ALL), itself its end and its first event's order key.

The events of a window reach the aggregation while it is open: the Sequencer releases none behind
the watermark (deployer.spark.streams.sources), so keying the state by the later bucket end, which
Spark's late-row check then reads, drops nothing the window would have kept.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from deployer.spark.output.placement import windows_per_bucket
from deployer.spark.translate.columns import col_name
from deployer.spark.translate.graph import SEQ, order_key
from deployer.spark.windows.aggregate_rows import AGG_ERR
from deployer.spark.windows.time_aggregates import window_aggregates
from operators import graph as g
from operators.output_node import LAST

_US_PER_MS = 1000


def limited_rows(
    node: g.Aggregate,
    kind: str,
    every_ms: int,
    events: DataFrame,
    ts: str,
    keys: list[Column],
    args: list[Column | None],
) -> DataFrame:
    """The window's rows the limit lets out, as time_window's row (keys, aggregates, window start
    and end, `__seq`, AGG_ERR), when their bucket closes. `events`: the window's input, `ts` its
    event-time column, `keys` the group's (`_k0..`) and `args` the aggregates' arguments, compiled."""
    size, advance = node.window.size * _US_PER_MS, node.window.advance * _US_PER_MS
    n = windows_per_bucket(node.window, every_ms)
    windowed = events.select(
        "*",
        F.window(F.col(ts), f"{node.window.size} milliseconds", f"{node.window.advance} milliseconds").alias(
            "_w"
        ),
    )
    # the bucket of the window's last instant, which carries Spark's watermark
    timed = windowed.select("*", F.window_time(F.col("_w")).alias("_wt"))
    bucketed = timed.select("*", F.window(F.col("_wt"), f"{every_ms} milliseconds").alias("_b"))
    index = F.floor((F.unix_micros(F.col("_wt")) - F.unix_micros(F.col("_b.start"))) / F.lit(advance))
    bucketed = bucketed.withColumn("_i", index.cast("int"))
    aggs = []
    for i in range(n):
        only = F.col("_i") == F.lit(i)
        aggs += window_aggregates(node, args, only, suffix=f"_{i}")
        aggs.append(F.count(F.when(only, F.lit(1))).alias(f"_c_{i}"))
        first = F.concat(order_key(F.col(ts)), F.lit("|"), F.col(SEQ))
        aggs.append(F.min(F.when(only, first)).alias(f"_f_{i}"))
    grouped = bucketed.groupBy(F.col("_b"), *keys).agg(*aggs)
    start = F.unix_micros(F.col("_b.start"))
    windows = F.array(*[_window(node, i, start, size, advance) for i in range(n)])
    nk, na = len(node.keys), len(node.aggs)
    group = [F.col(f"_k{i}").alias(col_name(i)) for i in range(nk)]
    if kind == LAST:
        last, first_window = _latest(n), _earliest(n)
        picked = grouped.select(
            *group,
            F.element_at(windows, last).alias("_r"),
            F.element_at(windows, first_window)["seq"].alias("_first"),
            F.col("_b"),
            F.coalesce(*[F.col(f"{AGG_ERR}_{i}") for i in range(n)]).alias(AGG_ERR),
        )
    else:
        present = F.filter(windows, lambda w: w["count"] > F.lit(0))
        picked = grouped.select(*group, F.col("_b"), F.inline(present)).select(
            *[F.col(col_name(i)) for i in range(nk)],
            F.struct(*[F.col(f) for f in ("count", *[f"a{j}" for j in range(na)], "end", "seq")]).alias("_r"),
            F.col("seq").alias("_first"),
            F.col("_b"),
            F.col("err").alias(AGG_ERR),
        )
    return picked.select(
        *[F.col(col_name(i)) for i in range(nk)],
        *[F.col(f"_r.a{j}").alias(col_name(nk + j)) for j in range(na)],
        F.timestamp_micros(F.unix_micros(F.col("_r.end")) - F.lit(size)).alias(col_name(nk + na)),
        F.col("_r.end").alias(col_name(nk + na + 1)),
        F.concat(order_key(F.col("_b.end")), F.lit("|"), F.col("_first")).alias(SEQ),
        F.col(AGG_ERR),
    )


def _window(node: g.Aggregate, i: int, start: Column, size: int, advance: int) -> Column:
    """The i-th window of a bucket that starts at `start` (µs): its event count, aggregates, end,
    order key (time_window's: its end, then its first event's) and error. Its end is the one in
    (start + i·ADVANCE, start + (i+1)·ADVANCE] on Spark's grid of window ends, SIZE modulo ADVANCE."""
    end = F.timestamp_micros(start + F.lit((i + 1) * advance) - F.pmod(start - F.lit(size), F.lit(advance)))
    return F.struct(
        F.col(f"_c_{i}").alias("count"),
        *[F.col(f"_a{j}_{i}").alias(f"a{j}") for j in range(len(node.aggs))],
        end.alias("end"),
        F.concat(order_key(end), F.lit("|"), F.col(f"_f_{i}")).alias("seq"),
        F.col(f"{AGG_ERR}_{i}").alias("err"),
    )


def _latest(n: int) -> Column:
    """The position (from 1) of the group's latest window with events in the bucket."""
    present = [F.when(F.col(f"_c_{i}") > 0, F.lit(i + 1)) for i in range(n)]
    return present[0] if n == 1 else F.greatest(*present)


def _earliest(n: int) -> Column:
    present = [F.when(F.col(f"_c_{i}") > 0, F.lit(i + 1)) for i in range(n)]
    return present[0] if n == 1 else F.least(*present)
