"""TIME-window Aggregate on Spark: native `groupBy(window(ts, size, advance), keys)` with a watermark.

A window fires when the watermark passes its end (deployer.spark.watermarks); its rows carry as
`__seq` the window's end and the order key of its first event, so a sink writes them in the order
the reference executor emits them.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark.output.placement import WINDOW_TIME, feeds_window_limit
from deployer.spark.translate.columns import Message, col_name, error_column, spark_type
from deployer.spark.translate.expr import ExprCompiler
from deployer.spark.translate.graph import SEQ, SparkGraph, order_key
from deployer.spark.windows.aggregate_rows import AGG_ERR, finish_aggregate
from operators import expr as ir
from operators import graph as g
from operators.values import overflow_reason


def aggregate_column(agg: ir.Agg, c: ExprCompiler) -> tuple[Column, Column | None]:
    """An aggregate over the window's rows, and the condition (over the same rows) under which it
    overflowed its type, then NULL (None: it cannot); the reference's values and errors (docs/
    language.md, "Aggregates"): sums are exact, and a total that does not fit is an error."""
    t = spark_type(agg.type)
    if agg.arg is None:
        return F.count(F.lit(1)).cast(t), None
    arg = c.compile(agg.arg)
    kind = agg.arg.type.kind
    if agg.func in ("count", "min", "max"):
        return {"count": F.count, "min": F.min, "max": F.max}[agg.func](arg).cast(t), None
    if kind == "null":  # sum(NULL), avg(NULL)
        return F.lit(None).cast(t), None
    if kind == "decimal":
        # summed in decimal(38, s), Spark's widest, checked against the result type at the end
        wide = arg.cast(T.DecimalType(38, agg.arg.type.scale or 0))
        out = (F.sum(wide) if agg.func == "sum" else F.avg(wide)).cast(t)
        return out, (F.count(arg) > F.lit(0)) & out.isNull()
    if kind == "double":
        return (F.avg if agg.func == "avg" else F.sum)(arg).cast(t), None
    # integers: the exact total (below 2^32 integers no partial sum leaves the bigint range)
    total = (
        _exact_long_sum(arg) if kind == "bigint" else F.try_sum(arg.cast("bigint")).cast(T.DecimalType(38, 0))
    )
    if agg.func == "avg":  # the exact total over the count, as doubles, as the reference divides
        return total.cast("double") / F.count(arg).cast("double"), None
    out = total.try_cast(T.LongType())
    return out, (F.count(arg) > F.lit(0)) & out.isNull()


def _exact_long_sum(x: Column) -> Column:
    """The sum of bigints, exactly, as a decimal(38, 0): Spark's sum wraps around, and its try_sum
    gives NULL as soon as a partial sum leaves the range, where the total may still fit. So the
    high and low 32 bits are summed apart (neither sum can overflow below 2^31 rows) and put
    together."""
    high = F.try_sum(F.shiftright(x, 32)).cast(T.DecimalType(38, 0))
    low = F.try_sum(x.bitwiseAND(F.lit(0xFFFFFFFF))).cast(T.DecimalType(38, 0))
    return (high * F.lit(2**32).cast(T.DecimalType(10, 0)) + low).cast(T.DecimalType(38, 0))


def time_aggregate(sg: SparkGraph, node: g.Aggregate) -> None:
    df = sg.input(node)
    ts_index = sg.event_time_index(node.inputs[0])
    assert ts_index is not None, "the compiler guarantees event time for TIME windows"
    c = ExprCompiler()
    keys = [c.compile(k.expr).alias(f"_k{i}") for i, k in enumerate(node.keys)]
    aggs = []
    overflows: list[tuple[Column, Message]] = []
    for i, a in enumerate(node.aggs):
        assert isinstance(a.expr, ir.Agg)
        value, overflow = aggregate_column(a.expr, c)
        aggs.append(value.alias(f"_a{i}"))
        if overflow is not None:
            overflows.append((overflow, overflow_reason(a.expr.to_cpl(), a.expr.type)))
    error = error_column(overflows)
    aggs.append((error if error is not None else F.lit(None).cast("string")).alias(AGG_ERR))
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
        F.col(AGG_ERR),
        # the row's time with Spark's watermark, for a limit in Spark's window aggregation
        *([F.window_time(F.col("_w")).alias(WINDOW_TIME)] if feeds_window_limit(sg.graph, node) else []),
    )
    sg.ports[g.Port(node.id)] = finish_aggregate(sg, node, row)
