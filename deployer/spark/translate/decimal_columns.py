"""Decimal arithmetic and comparisons as Spark Columns: the result of operators.decimals, value
and type, and exact comparisons as the reference makes them.

Each operand is cast to the decimal type the compiler gave it (operators.decimals.operand_type), so
Spark's own typing rules (those of operators.decimals) give the result exactly the compiler's type,
and Spark computes it as the reference does (java.math.BigDecimal, rounded half up). Where the
result does not fit its type Spark (non-ANSI) gives NULL: with both operands set, that NULL is the
overflow, recorded as the reference executor words its error.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark.translate.columns import Message, msg, spark_type, text
from operators import expr as ir
from operators.datatypes import DataType
from operators.decimals import INTEGER_DIGITS, MAX_PRECISION, may_overflow, operand_type

Error = Callable[[Column, Message], None]


def decimal_arithmetic(
    op: str, left: ir.Expr, right: ir.Expr, lc: Column, rc: Column, result: ir.Expr, error: Error
) -> Column:
    """`lc op rc` of the decimal type `result.type`, where `lc` and `rc` are the compiled `left`
    and `right`; `error` records where it fails (division by zero, overflow)."""
    t = spark_type(result.type)
    if left.type.is_null or right.type.is_null:
        return F.lit(None).cast(t)
    ta, tb = operand_type(left), operand_type(right)
    a, b = lc.cast(spark_type(ta)), rc.cast(spark_type(tb))
    both = lc.isNotNull() & rc.isNotNull()
    if op in ("/", "%"):
        zero = both & (rc == F.lit(0))
        error(zero, "division by zero")
        b = F.when(~zero, b)
        both = both & ~zero
    out = {"+": a + b, "-": a - b, "*": a * b, "/": a / b, "%": a % b}[op]
    if may_overflow(op, ta, tb):  # else NULL cannot come of it (operators.analysis agrees)
        shown = msg(text(lc, left.type), f" {op} ", text(rc, right.type))
        error(both & out.isNull(), msg("decimal overflow: ", shown, f" is out of range for {result.type}"))
    # Spark's type is the compiler's already (tests/spark/test_spark_decimals.py): a cast that
    # changes nothing, kept so that a difference could never reach a sink as another type.
    return out.cast(t)


_COMPARE: dict[str, Callable[[Column, Column], Column]] = {
    "=": lambda x, y: x == y,
    "<>": lambda x, y: x != y,
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
}


def exactly_comparable(a: DataType, b: DataType) -> bool:
    """Two numbers the reference compares exactly: decimals, or a decimal and an integer."""
    kinds = {a.kind, b.kind}
    return "decimal" in kinds and kinds <= {"decimal", "integer", "bigint"}


def compare(op: str, a: Column, ta: DataType, b: Column, tb: DataType) -> Column:
    """`a op b`, exactly, for two `exactly_comparable` values. Spark compares two decimals of
    different types in one type of at most 38 digits, where one of them may be rounded (0.4 = 0
    between decimal(38, 36) and decimal(38, 0)); when they need more, the integer parts are
    compared first (as decimal(38, 0)), then the fractions (as decimal(38, 38)), both exact."""
    (pa, sa), (pb, sb) = _digits(ta), _digits(tb)
    a, b = a.cast(T.DecimalType(pa, sa)), b.cast(T.DecimalType(pb, sb))
    whole, scale = max(pa - sa, pb - sb), max(sa, sb)
    fn = _COMPARE[op]
    if whole + scale <= MAX_PRECISION:
        common = T.DecimalType(whole + scale, scale)
        return fn(a.cast(common), b.cast(common))
    one = F.lit(1).cast(T.DecimalType(1, 0))
    # x % 1 is x's fraction with x's sign, and x - x % 1 its integer part: (integer, fraction)
    # orders numbers as they are, the intervals of the integer parts being disjoint
    fa, fb = a % one, b % one
    ia, ib = (a - fa).cast(T.DecimalType(38, 0)), (b - fb).cast(T.DecimalType(38, 0))
    fa, fb = fa.cast(T.DecimalType(38, 38)), fb.cast(T.DecimalType(38, 38))
    return F.when(ia != ib, fn(ia, ib)).otherwise(fn(fa, fb))


def _digits(t: DataType) -> tuple[int, int]:
    if t.kind == "decimal":
        return t.precision or MAX_PRECISION, t.scale or 0
    return INTEGER_DIGITS[t.kind], 0
