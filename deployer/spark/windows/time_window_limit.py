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
- LAST lets out the group's latest window (the greatest i with events, and that HAVING keeps,
  evaluated over each window's values: one that cannot fail, placement.in_window_aggregation);
- ALL lets out every window of the group that has events, one row each (HAVING drops rows after
  it, as after a window: aggregate_rows.finish_aggregate).
That is what the limit after the window emits at that tick (deployer.output.limiter), in the same
micro-batch as the second aggregation it replaces (deployer.spark.output.in_window) emitted it, with
the same order key: the bucket's end, then the order key of the group's first window in the bucket
(LAST) or of the row's own window (ALL), itself its end and its first event's order key.

The events of a window reach the aggregation while it is open: the Sequencer releases none behind
the watermark (deployer.spark.streams.sources), so keying the state by the later bucket end, which
Spark's late-row check then reads, drops nothing the window would have kept.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, GroupedData
from pyspark.sql import functions as F

from deployer.spark.output.placement import windows_per_bucket
from deployer.spark.translate.columns import col_name
from deployer.spark.translate.expr import ExprCompiler
from deployer.spark.translate.graph import SEQ, order_key
from deployer.spark.windows.aggregate_rows import AGG_ERR
from deployer.spark.windows.time_aggregates import window_aggregates
from operators import expr as ir
from operators import graph as g
from operators.output_node import LAST
from operators.values import US_PER_MS


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
    window = f"{node.window.size} milliseconds", f"{node.window.advance} milliseconds"
    windowed = events.select("*", F.window(F.col(ts), *window).alias("_w"))
    # the bucket of the window's last instant, which carries Spark's watermark
    timed = windowed.select("*", F.window_time(F.col("_w")).alias("_wt"))
    bucketed = timed.select("*", F.window(F.col("_wt"), f"{every_ms} milliseconds").alias("_b"))
    advance = node.window.advance * US_PER_MS
    index = F.floor((F.unix_micros(F.col("_wt")) - F.unix_micros(F.col("_b.start"))) / F.lit(advance))
    # an event's order key (time_window's `_first`), made once per event, not once per window
    first = F.concat(order_key(F.col(ts)), F.lit("|"), F.col(SEQ))
    bucketed = bucketed.select("*", index.cast("int").alias("_i"), first.alias("_o"))
    n = windows_per_bucket(node.window, every_ms)
    aggs = []
    for i in range(n):
        aggs += window_aggregates(node, args, F.col("_i") == F.lit(i), suffix=f"_{i}")
    grouped = bucketed.groupBy(F.col("_b"), *keys)
    if kind != LAST:
        picked = _all(node, grouped, aggs, n)  # HAVING drops rows after it, in finish_aggregate
    elif node.having is not None:
        picked = _last_kept(node, grouped, aggs, n)
    else:
        picked = _last(node, grouped, aggs, n)
    nk, na = len(node.keys), len(node.aggs)
    return picked.select(
        *[F.col(f"_k{i}").alias(col_name(i)) for i in range(nk)],
        *[F.col(f"_r.a{j}").alias(col_name(nk + j)) for j in range(na)],
        F.timestamp_micros(F.unix_micros(F.col("_end")) - F.lit(node.window.size * US_PER_MS)).alias(
            col_name(nk + na)
        ),
        F.col("_end").alias(col_name(nk + na + 1)),
        F.concat(order_key(F.col("_b.end")), F.lit("|"), F.col("_first")).alias(SEQ),
        F.col("_err").alias(AGG_ERR),
    )


def _last(node: g.Aggregate, grouped: GroupedData, aggs: list[Column], n: int) -> DataFrame:
    """Per bucket and group, its latest window's row; its order key is that of the group's first
    window in the bucket, whose first event is the group's first in the bucket: that event lies in
    some window of the bucket, so after the first window's start, and before one of the first
    window's events, so before its end."""
    held = grouped.agg(
        *aggs,
        F.max(F.col("_i")).alias("_hi"),
        F.min(F.col("_i")).alias("_lo"),
        F.min(F.col("_o")).alias("_f"),
    )
    return _picked(node, held, n, F.col("_f"))


def _last_kept(node: g.Aggregate, grouped: GroupedData, aggs: list[Column], n: int) -> DataFrame:
    """Per bucket and group, its latest window's row that HAVING keeps, with the order key of the
    first window HAVING keeps: HAVING (which cannot fail: placement.in_window_aggregation) evaluated
    over each window's values. A group none of whose windows HAVING keeps has no row."""
    held = grouped.agg(*aggs, *_counts_and_firsts(n))
    kept = [
        F.when((F.col(f"_c_{i}") > 0) & F.coalesce(_having(node, i), F.lit(False)), F.lit(i))
        for i in range(n)
    ]
    hi, lo = (kept[0], kept[0]) if n == 1 else (F.greatest(*kept), F.least(*kept))
    firsts = F.array(*[F.col(f"_f_{i}") for i in range(n)])
    held = held.select("*", hi.alias("_hi"), lo.alias("_lo")).filter(F.col("_hi").isNotNull())
    return _picked(node, held, n, F.element_at(firsts, F.col("_lo") + F.lit(1)))


def _picked(node: g.Aggregate, held: DataFrame, n: int, first: Column) -> DataFrame:
    """LAST's row: the values of the bucket's `_hi`-th window, ending there, ordered by the end of
    the `_lo`-th and `first`, its first event's order key. Why a row cannot be emitted is any
    window's, as the reference fails on any."""
    rows = F.array(*[_values(node, i) for i in range(n)])
    return held.select(
        "*",
        F.element_at(rows, F.col("_hi") + F.lit(1)).alias("_r"),
        _end(node, F.col("_hi")).alias("_end"),
        F.concat(order_key(_end(node, F.col("_lo"))), F.lit("|"), first).alias("_first"),
        F.coalesce(*[F.col(f"{AGG_ERR}_{i}") for i in range(n)]).alias("_err"),
    )


def _having(node: g.Aggregate, i: int) -> Column:
    """The statement's HAVING over the bucket's i-th window: its group, aggregates, start and end."""
    assert node.having is not None
    nk, na = len(node.keys), len(node.aggs)
    end = _end(node, F.lit(i))
    start = F.timestamp_micros(F.unix_micros(end) - F.lit(node.window.size * US_PER_MS))

    def column(c: ir.Col) -> Column:
        if c.index < nk:
            return F.col(f"_k{c.index}")
        if c.index < nk + na:
            return F.col(f"_a{c.index - nk}_{i}")
        return start if c.index == nk + na else end

    return ExprCompiler(column).compile(node.having)


def _counts_and_firsts(n: int) -> list[Column]:
    """Per window of the bucket, its number of events and its first event's order key."""
    only = [F.col("_i") == F.lit(i) for i in range(n)]
    return [
        *[F.count(F.when(only[i], F.lit(1))).alias(f"_c_{i}") for i in range(n)],
        *[F.min(F.when(only[i], F.col("_o"))).alias(f"_f_{i}") for i in range(n)],
    ]


def _all(node: g.Aggregate, grouped: GroupedData, aggs: list[Column], n: int) -> DataFrame:
    """Per bucket and group, a row for each of its windows that has events, each with its order key."""
    held = grouped.agg(*aggs, *_counts_and_firsts(n))
    windows = F.array(
        *[
            F.struct(
                F.col(f"_c_{i}").alias("count"),
                _values(node, i).alias("row"),
                _end(node, F.lit(i)).alias("end"),
                F.col(f"_f_{i}").alias("first"),
            )
            for i in range(n)
        ]
    )
    present = F.filter(windows, lambda w: w["count"] > F.lit(0))
    return held.select(
        F.col("_b"), *[F.col(f"_k{i}") for i in range(len(node.keys))], F.inline(present)
    ).select(
        "*",
        F.col("row").alias("_r"),
        F.col("end").alias("_end"),
        F.concat(order_key(F.col("end")), F.lit("|"), F.col("first")).alias("_first"),
        F.col("row.err").alias("_err"),
    )


def _values(node: g.Aggregate, i: int) -> Column:
    """The aggregates of the bucket's i-th window and why its row cannot be emitted."""
    return F.struct(
        *[F.col(f"_a{j}_{i}").alias(f"a{j}") for j in range(len(node.aggs))],
        F.col(f"{AGG_ERR}_{i}").alias("err"),
    )


def _end(node: g.Aggregate, i: Column) -> Column:
    """The end of the i-th window of the bucket `_b`: the one in (start + i·ADVANCE, start +
    (i+1)·ADVANCE] on Spark's grid of window ends, which are SIZE modulo ADVANCE."""
    size, advance = F.lit(node.window.size * US_PER_MS), F.lit(node.window.advance * US_PER_MS)
    start = F.unix_micros(F.col("_b.start"))
    return F.timestamp_micros(start + (i + F.lit(1)) * advance - F.pmod(start - size, advance))
