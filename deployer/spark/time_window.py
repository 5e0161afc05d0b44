"""TIME-window Aggregate on Spark: native `groupBy(window(ts, size, advance), keys)` with a watermark.

A window fires when the watermark passes its end (deployer.spark.watermarks); its rows carry as
`__seq` the window's end and the order key of its first event, so a sink writes them in the order
the reference executor emits them.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from deployer.spark.aggregate_rows import finish_aggregate
from deployer.spark.columns import col_name, spark_type
from deployer.spark.expr import ExprCompiler
from deployer.spark.graph import SEQ, SparkGraph, order_key
from operators import expr as ir
from operators import graph as g


def aggregate_column(agg: ir.Agg, c: ExprCompiler) -> Column:
    t = spark_type(agg.type)
    if agg.arg is None:
        return F.count(F.lit(1)).cast(t)
    arg = c.compile(agg.arg)
    fn = {"count": F.count, "sum": F.sum, "avg": F.avg, "min": F.min, "max": F.max}[agg.func]
    if agg.func in ("sum", "avg"):
        arg = arg.cast(t)
    return fn(arg).cast(t)


def time_aggregate(sg: SparkGraph, node: g.Aggregate) -> None:
    df = sg.input(node)
    ts_index = sg.event_time_index(node.inputs[0])
    assert ts_index is not None, "the compiler guarantees event time for TIME windows"
    c = ExprCompiler()
    keys = [c.compile(k.expr).alias(f"_k{i}") for i, k in enumerate(node.keys)]
    aggs = [
        aggregate_column(a.expr, c).alias(f"_a{i}")
        for i, a in enumerate(node.aggs)
        if isinstance(a.expr, ir.Agg)
    ]
    df = sg.split_errors(node, df, c.errors, len(node.input_schema), on_input=True)
    window = F.window(
        F.col(col_name(ts_index)),
        f"{node.window.size} milliseconds",
        f"{node.window.advance} milliseconds",
    ).alias("_w")
    # The reference emits a window's rows when it closes, in window-end order, the groups in the
    # order of their first event in that window: the first event's order key (event time, then
    # arrival) is kept per window and group to sort the output the same way.
    first = F.min(F.concat(order_key(F.col(col_name(ts_index))), F.lit("|"), F.col(SEQ))).alias("_first")
    grouped = df.groupBy(window, *keys).agg(*aggs, first)
    nk = len(node.keys)
    na = len(node.aggs)
    row = grouped.select(
        *[F.col(f"_k{i}").alias(col_name(i)) for i in range(nk)],
        *[F.col(f"_a{j}").alias(col_name(nk + j)) for j in range(na)],
        F.col("_w.start").alias(col_name(nk + na)),  # window_start(), window_end()
        F.col("_w.end").alias(col_name(nk + na + 1)),
        F.concat(order_key(F.col("_w.end")), F.lit("|"), F.col("_first")).alias(SEQ),
    )
    sg.ports[g.Port(node.id)] = finish_aggregate(sg, node, row)
