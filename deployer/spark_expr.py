"""Expression IR → PySpark `Column`s (DESIGN.md decision 2: never text for Spark to parse).

Inside a translated graph every DataFrame names its columns by position (`_0`, `_1`, ...; a join's
right side `_r0`, ...), so user field names, whatever characters they hold, are never resolved by
Spark's parser; real names are applied only when results leave the engine.

Some expressions can fail for one event (division by zero, a bad CAST). The reference executor
sends such an event to the dead-letter sink; here each compiled expression also yields error
conditions, which the deployer turns into a per-row error column and routes the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from operators import expr as ir
from operators.types import DataType, Schema


def spark_type(t: DataType) -> T.DataType:
    k = t.kind
    if k == "boolean":
        return T.BooleanType()
    if k == "integer":
        return T.IntegerType()
    if k == "bigint":
        return T.LongType()
    if k == "double":
        return T.DoubleType()
    if k == "decimal":
        return T.DecimalType(t.precision or 38, t.scale or 0)
    if k == "timestamp":
        return T.TimestampType()
    if k == "null":
        return T.StringType()
    return T.StringType()


def struct_of(schema: Schema, prefix: str = "_") -> T.StructType:
    return T.StructType(
        [T.StructField(f"{prefix}{i}", spark_type(f.type), True) for i, f in enumerate(schema)]
    )


def col_name(index: int, side: int = 0) -> str:
    return f"_{index}" if side == 0 else f"_r{index}"


@dataclass
class Compiled:
    value: Column
    errors: list[tuple[Column, str]] = field(default_factory=list)


class ExprCompiler:
    """Compiles IR trees over one input (or a join's two) into Columns, collecting error conditions."""

    def __init__(self, column: Callable[[ir.Col], Column] | None = None):
        self.column = column or (lambda c: F.col(col_name(c.index, c.side)))
        self.errors: list[tuple[Column, str]] = []
        # The condition under which the sub-expression being compiled is evaluated at all: the
        # reference executor short-circuits AND/OR and evaluates only the CASE branch it takes, so
        # an error in a branch not taken is no error.
        self.guard: Column | None = None

    def _error(self, cond: Column, message: str) -> None:
        cond = F.coalesce(cond, F.lit(False))
        if self.guard is not None:
            cond = cond & F.coalesce(self.guard, F.lit(False))
        self.errors.append((cond, message))

    def _under(self, extra: Column, e: ir.Expr) -> Column:
        saved = self.guard
        self.guard = extra if saved is None else (saved & extra)
        try:
            return self.compile(e)
        finally:
            self.guard = saved

    def compile(self, e: ir.Expr) -> Column:
        method = getattr(self, "_" + type(e).__name__.lower())
        out: Column = method(e)
        return out

    def _lit(self, e: ir.Lit) -> Column:
        v = e.value
        if v is None:
            return F.lit(None).cast(spark_type(e.type))
        if isinstance(v, datetime | Decimal):
            return F.lit(v).cast(spark_type(e.type))
        return F.lit(v).cast(spark_type(e.type))

    def _col(self, e: ir.Col) -> Column:
        return self.column(e)

    def _unary(self, e: ir.Unary) -> Column:
        arg = self.compile(e.arg)
        return ~arg if e.op == "not" else (-arg).cast(spark_type(e.type))

    def _binary(self, e: ir.Binary) -> Column:
        op = e.op
        left = self.compile(e.left)
        if op == "and":  # the right side is only evaluated when the left is not FALSE
            return left & self._under(F.coalesce(left, F.lit(True)), e.right)
        if op == "or":  # ... and when the left is not TRUE
            return left | self._under(F.coalesce(~left, F.lit(True)), e.right)
        right = self.compile(e.right)
        if op == "||":
            return F.concat(left.cast("string"), right.cast("string"))
        t = spark_type(e.type)
        if op in ("+", "-", "*"):
            lc, rc = left.cast(t), right.cast(t)
            return (lc + rc) if op == "+" else (lc - rc) if op == "-" else (lc * rc)
        if op in ("/", "%"):
            zero = right == F.lit(0)
            self._error(zero, "division by zero")
            safe_right = F.when(zero, F.lit(None)).otherwise(right)
            if op == "/":
                return (left.cast(t) / safe_right.cast(t)).cast(t)
            # SQL's % takes the sign of the dividend, as Spark's % (and Java's) does.
            return (left.cast(t) % safe_right.cast(t)).cast(t)
        if op == "=":
            return left == right
        if op == "<>":
            return left != right
        if op == "<":
            return left < right
        if op == "<=":
            return left <= right
        if op == ">":
            return left > right
        assert op == ">=", op
        return left >= right

    def _isnull(self, e: ir.IsNull) -> Column:
        arg = self.compile(e.arg)
        return arg.isNotNull() if e.negated else arg.isNull()

    def _inlist(self, e: ir.InList) -> Column:
        arg = self.compile(e.arg)
        result = arg.isin(*[self.compile(i) for i in e.items])
        return ~result if e.negated else result

    def _between(self, e: ir.Between) -> Column:
        arg = self.compile(e.arg)
        result = (arg >= self.compile(e.low)) & (arg <= self.compile(e.high))
        return ~result if e.negated else result

    def _like(self, e: ir.Like) -> Column:
        arg, pattern = self.compile(e.arg), self.compile(e.pattern)
        # Column.like takes a column pattern through F.expr-free `like` on Spark 4 (ilike/like functions).
        result = F.like(arg, pattern)
        return ~result if e.negated else result

    def _case(self, e: ir.Case) -> Column:
        t = spark_type(e.type)
        out: Column | None = None
        not_yet: Column = F.lit(True)  # no earlier WHEN held
        for cond, value in e.whens:
            c = self._under(not_yet, cond)
            taken = F.coalesce(c, F.lit(False))
            v = self._under(not_yet & taken, value).cast(t)
            out = F.when(c, v) if out is None else out.when(c, v)
            not_yet = not_yet & ~taken
        assert out is not None
        if e.else_ is not None:
            out = out.otherwise(self._under(not_yet, e.else_).cast(t))
        return out

    def _cast(self, e: ir.Cast) -> Column:
        arg = self.compile(e.arg)
        t = spark_type(e.type)
        if e.arg.type.is_string and e.type.kind != "varchar" and e.type.kind != "char":
            # try_cast gives NULL for a bad value; the event is dead-lettered as in the reference executor
            cast = arg.try_cast(t)
            self._error(arg.isNotNull() & cast.isNull(), f"cannot cast the value to {e.type}")
            return cast
        if e.type.is_string and e.arg.type.kind == "timestamp":
            return F.date_format(arg, "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX")
        return arg.cast(t)

    def _func(self, e: ir.Func) -> Column:
        args = [self.compile(a) for a in e.args]
        t = spark_type(e.type)
        name = e.name
        simple: dict[str, Callable[..., Column]] = {
            "abs": F.abs,
            "sqrt": F.sqrt,
            "lower": F.lower,
            "upper": F.upper,
            "trim": F.trim,
            "length": F.length,
            "coalesce": F.coalesce,
            "greatest": F.greatest,
            "least": F.least,
            "year": F.year,
            "month": F.month,
            "day": F.dayofmonth,
            "hour": F.hour,
            "minute": F.minute,
            "second": F.second,
            "floor": F.floor,
            "ceil": F.ceil,
            "power": F.pow,
        }
        if name in simple:
            typed = [a.cast(t) for a in args] if name in ("coalesce", "greatest", "least") else args
            return simple[name](*typed).cast(t)
        if name == "round":
            return F.round(args[0], 0 if len(args) == 1 else _int_lit(e.args[1])).cast(t)
        if name == "mod":
            zero = args[1] == F.lit(0)
            self._error(zero, "division by zero")
            return (args[0].cast(t) % F.when(zero, F.lit(None)).otherwise(args[1]).cast(t)).cast(t)
        if name == "substring":
            length = args[2] if len(args) > 2 else F.lit(2**31 - 1)
            return args[0].substr(args[1], length)
        if name == "concat":
            return F.concat(*[a.cast("string") for a in args])
        if name == "nullif":
            return F.when(args[0] == args[1], F.lit(None).cast(t)).otherwise(args[0].cast(t))
        if name == "epoch_millis":
            return F.unix_millis(args[0])
        if name == "from_epoch_millis":
            return F.timestamp_millis(args[0])
        raise NotImplementedError(f"function {name} has no Spark translation")


def _int_lit(e: ir.Expr) -> int:
    if isinstance(e, ir.Lit) and isinstance(e.value, int):
        return e.value
    raise ValueError("round() takes a literal number of digits on Spark")


def error_column(errors: list[tuple[Column, str]]) -> Column | None:
    """One column holding the first error message of a row, NULL when it has none."""
    if not errors:
        return None
    out: Column | None = None
    for cond, message in errors:
        out = F.when(cond, F.lit(message)) if out is None else out.when(cond, F.lit(message))
    assert out is not None
    return out
