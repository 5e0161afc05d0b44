"""The aggregates of a TIME window's row on Spark, native: Spark's own aggregate functions, with the
reference's exact sums and overflow errors (docs/language.md, "Aggregates")."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark.translate.columns import Message, error_column, spark_type
from deployer.spark.windows.aggregate_rows import AGG_ERR
from operators import expr as ir
from operators import graph as g
from operators.values import overflow_reason


def aggregate_column(
    agg: ir.Agg, arg: Column | None, only: Column | None = None
) -> tuple[Column, Column | None]:
    """An aggregate over the window's rows (`arg`: its argument compiled, None for `count(*)`), and
    the condition (over the same rows) under which it overflowed its type, then NULL (None: it
    cannot); the reference's values and errors (docs/language.md, "Aggregates"): sums are exact, and
    a total that does not fit is an error. `only`: over the rows for which it holds alone."""
    t = spark_type(agg.type)
    if arg is None:  # count(*)
        return F.count(F.lit(1) if only is None else F.when(only, F.lit(1))).cast(t), None
    assert agg.arg is not None  # compiled from it
    if only is not None:
        arg = F.when(only, arg)
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


def window_aggregates(
    node: g.Aggregate, args: list[Column | None], only: Column | None = None, suffix: str = ""
) -> list[Column]:
    """The node's aggregates (`_a0..`), then why the row cannot be emitted (AGG_ERR), over the
    window's rows, or those for which `only` holds; each name followed by `suffix`."""
    aggs = []
    overflows: list[tuple[Column, Message]] = []
    for i, (a, arg) in enumerate(zip(node.aggs, args, strict=True)):
        assert isinstance(a.expr, ir.Agg)
        value, overflow = aggregate_column(a.expr, arg, only)
        aggs.append(value.alias(f"_a{i}{suffix}"))
        if overflow is not None:
            overflows.append((overflow, overflow_reason(a.expr.to_cpl(), a.expr.type)))
    error = error_column(overflows)
    aggs.append((error if error is not None else F.lit(None).cast("string")).alias(AGG_ERR + suffix))
    return aggs


def _exact_long_sum(x: Column) -> Column:
    """The sum of bigints, exactly, as a decimal(38, 0): Spark's sum wraps around, and its try_sum
    gives NULL as soon as a partial sum leaves the range, where the total may still fit. So the
    high and low 32 bits are summed apart (neither sum can overflow below 2^31 rows) and put
    together."""
    high = F.try_sum(F.shiftright(x, 32)).cast(T.DecimalType(38, 0))
    low = F.try_sum(x.bitwiseAND(F.lit(0xFFFFFFFF))).cast(T.DecimalType(38, 0))
    return (high * F.lit(2**32).cast(T.DecimalType(10, 0)) + low).cast(T.DecimalType(38, 0))
