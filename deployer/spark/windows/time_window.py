"""TIME-window Aggregate on Spark: native `groupBy(window(ts, size, advance), keys)` with a watermark.

A window fires when the watermark passes its end (deployer.spark.watermarks); its rows carry as
`__seq` the window's end and the order key of its first event, so a sink writes them in the order
the reference executor emits them.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from deployer.spark.output.placement import WINDOW_TIME, feeds_window_limit, limit_in_aggregation
from deployer.spark.translate.columns import col_name
from deployer.spark.translate.expr import ExprCompiler
from deployer.spark.translate.graph import SEQ, SparkGraph, order_key
from deployer.spark.windows.aggregate_rows import AGG_ERR, finish_aggregate
from deployer.spark.windows.time_aggregates import window_aggregates
from deployer.spark.windows.time_window_limit import limited_rows
from operators import expr as ir
from operators import graph as g


def _arg(agg: ir.Expr, c: ExprCompiler) -> Column | None:
    assert isinstance(agg, ir.Agg)
    return None if agg.arg is None else c.compile(agg.arg)


def time_aggregate(sg: SparkGraph, node: g.Aggregate) -> None:
    df = sg.input(node)
    ts_index = sg.event_time_index(node.inputs[0])
    assert ts_index is not None, "the compiler guarantees event time for TIME windows"
    c = ExprCompiler()
    keys = [c.compile(k.expr).alias(f"_k{i}") for i, k in enumerate(node.keys)]
    args = [_arg(a.expr, c) for a in node.aggs]
    df = sg.split_errors(node, df, c.errors, len(node.input_schema), on_input=True)
    limit = limit_in_aggregation(sg.graph, node)
    if limit is not None:  # the rows an OUTPUT clause lets out, from the window's own aggregation
        assert limit.every_ms is not None
        row = limited_rows(node, limit.kind, limit.every_ms, df, col_name(ts_index), keys, args)
        sg.ports[g.Port(node.id)] = finish_aggregate(sg, node, row)
        return
    aggs = window_aggregates(node, args)
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
        F.col(AGG_ERR),
        # the row's time with Spark's watermark, for a limit in Spark's window aggregation
        *([F.window_time(F.col("_w")).alias(WINDOW_TIME)] if feeds_window_limit(sg.graph, node) else []),
    )
    sg.ports[g.Port(node.id)] = finish_aggregate(sg, node, row)
