"""CPL's scalar functions as Spark Columns: the reference executor's `deployer.local.functions`, with
the same NULL rules, results and failures.

Each translation gets the call, its arguments as Columns and `error(condition, message)`, which
records where the call fails for a row (the row is then dead-lettered, as the reference executor
dead-letters the event); operators.analysis.can_fail lists the same functions as able to fail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark.columns import Message, msg, spark_type, text
from operators import expr as ir

Error = Callable[[Column, Message], None]
Translation = Callable[[ir.Func, list[Column], T.DataType, Error], Column]

# Functions that take their arguments as they are and cannot fail.
_SIMPLE: dict[str, Callable[..., Column]] = {
    "abs": F.abs,
    "lower": F.lower,
    "upper": F.upper,
    "trim": F.trim,
    "length": F.length,
    "year": F.year,
    "month": F.month,
    "day": F.dayofmonth,
    "hour": F.hour,
    "minute": F.minute,
    "second": F.second,
}
_ALIASES = {"substr": "substring", "ceiling": "ceil", "pow": "power", "char_length": "length"}


def _all_set(args: list[Column]) -> Column:
    out = F.lit(True)
    for a in args:
        out = out & a.isNotNull()
    return out


def _finite(x: Column) -> Column:
    return ~F.isnan(x) & (F.abs(x) != F.lit(float("inf")))


def _widened(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    """coalesce, greatest, least: the arguments widened to the result type first; greatest and
    least skip NULLs."""
    fn = {"coalesce": F.coalesce, "greatest": F.greatest, "least": F.least}[_name(e)]
    typed = [a.cast(t) for a in args]
    return (fn(*typed) if len(typed) > 1 else typed[0]).cast(t)


def _nullif(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    a, b = (x.cast(t) for x in args)
    return F.when(a.isNotNull() & b.isNotNull() & (a == b), F.lit(None).cast(t)).otherwise(a)


def _floor_ceil(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    x, kind = args[0], e.args[0].type.kind
    if kind in ("integer", "bigint"):
        return x.cast(t)
    if kind == "double":
        error(~_finite(x), msg("cannot convert ", text(x, e.args[0].type), " to bigint"))
    return (F.floor(x) if _name(e) == "floor" else F.ceil(x)).cast(t)


def _round(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    digits: Any = 0 if len(args) == 1 else _int_literal(e.args[1])
    return F.round(args[0], digits).cast(t)


def _int_literal(e: ir.Expr) -> int:
    if isinstance(e, ir.Lit) and isinstance(e.value, int):
        return e.value
    raise ValueError("round() takes a literal number of digits on Spark")


def _sqrt(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    shown = text(args[0], e.args[0].type)
    error(args[0] < F.lit(0), msg("cannot take the square root of a negative number (", shown, ")"))
    return F.sqrt(args[0]).cast(t)


def _power(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    a, b = (x.cast("double") for x in args)
    out = F.pow(a, b)
    bad = _all_set(args) & _finite(a) & _finite(b) & ~_finite(out)
    shown = [text(x, y.type) for x, y in zip(args, e.args, strict=True)]
    error(bad, msg("power(", shown[0], ", ", shown[1], ") is out of range or undefined"))
    return out


def _mod(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    a, b = (x.cast(t) for x in args)
    zero = _all_set(args) & (b == F.lit(0))
    error(zero, "division by zero")
    return (a % F.when(zero, F.lit(None)).otherwise(b)).cast(t)


def _substring(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    """SQL positions count from 1 and [start, start + length) is cut to the string, so
    substring('hello', 0, 3) = 'he' as in PostgreSQL (Spark would count from the end)."""
    s, start = args[0], args[1]
    lo = F.greatest(start, F.lit(1))
    if len(args) > 2:
        length = args[2]
        error(_all_set(args) & (length < F.lit(0)), "negative substring length not allowed")
        count = F.greatest(start + length - lo, F.lit(0))
    else:
        count = F.lit(2**31 - 1)
    return F.when(_all_set(args), s.substr(lo, count))


def _concat(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    """concat() skips NULLs as PostgreSQL does; `||` is the strict form."""
    return F.concat_ws("", *[text(a, x.type) for a, x in zip(args, e.args, strict=True)])


_TRANSLATIONS: dict[str, Translation] = {
    "coalesce": _widened,
    "greatest": _widened,
    "least": _widened,
    "nullif": _nullif,
    "floor": _floor_ceil,
    "ceil": _floor_ceil,
    "round": _round,
    "sqrt": _sqrt,
    "power": _power,
    "mod": _mod,
    "substring": _substring,
    "concat": _concat,
    "epoch_millis": lambda e, args, t, error: F.unix_millis(args[0]),
    "from_epoch_millis": lambda e, args, t, error: F.timestamp_millis(args[0]),
}


def _name(e: ir.Func) -> str:
    name = e.name.lower()
    return _ALIASES.get(name, name)


def translate_function(e: ir.Func, args: list[Column], error: Error) -> Column:
    """The Column of the call `e` whose arguments compiled to `args`."""
    t = spark_type(e.type)
    name = _name(e)
    if name in _SIMPLE:
        return _SIMPLE[name](*args).cast(t)
    if name not in _TRANSLATIONS:
        raise NotImplementedError(f"function {name} has no Spark translation")
    return _TRANSLATIONS[name](e, args, t, error)
