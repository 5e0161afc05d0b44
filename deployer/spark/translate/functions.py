"""CPL's scalar functions as Spark Columns: the reference executor's `deployer.evaluation.functions`, with
the same NULL rules, results and failures.

Each translation gets the call, its arguments as Columns and `error(condition, message)`, which
records where the call fails for a row (the row is then dead-lettered, as the reference executor
dead-letters the event); operators.analysis.can_fail lists the same functions as able to fail.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from deployer.spark.functions import DOUBLE_ROUND, column
from deployer.spark.translate.columns import Message, msg, spark_type, text
from deployer.spark.translate.decimal_columns import decimal_arithmetic
from operators import expr as ir
from operators.decimals import round_may_overflow

Error = Callable[[Column, Message], None]
Translation = Callable[[ir.Func, list[Column], T.DataType, Error], Column]

# Functions that take their arguments as they are and cannot fail.
_SIMPLE: dict[str, Callable[..., Column]] = {
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


_INT_RANGE = {"integer": (-(2**31), 2**31 - 1), "bigint": (-(2**63), 2**63 - 1)}
_WIDE = T.DecimalType(38, 0)


def _overflow(wide: Column, kind: str) -> Message:
    """The reference's message for an integer result out of its type's range (`wide`: exact)."""
    return msg("integer overflow: ", wide.cast("string"), f" is out of range for {kind}")


def _abs(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    x, kind = args[0], e.args[0].type.kind
    if kind not in _INT_RANGE:
        return F.abs(x).cast(t)
    # Spark's abs of the least integer is itself (it wraps); the reference's does not fit.
    out = F.when(x < F.lit(0), F.try_subtract(F.lit(0).cast(t), x.cast(t))).otherwise(x.cast(t))
    error(x.isNotNull() & out.isNull(), _overflow(-x.cast(_WIDE), kind))
    return out


def _floor_ceil(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    x, kind = args[0], e.args[0].type.kind
    name = _name(e)
    if kind in ("integer", "bigint"):
        return x.cast(t)
    if kind == "double":
        shown = text(x, e.args[0].type)
        error(~_finite(x), msg("cannot convert ", shown, " to bigint"))
        # Spark's floor and ceil of a double clamp to the bigint range; the reference's overflow.
        beyond = _finite(x) & ((x >= F.lit(2.0**63)) | (x < F.lit(-(2.0**63))))
        error(beyond, msg(f"integer overflow: {name}(", shown, ") is out of range for bigint"))
    # of a decimal: decimal(p - s + 1, 0) in Spark as in operators.decimals, which always fits
    return (F.floor(x) if name == "floor" else F.ceil(x)).cast(t)


def _round(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    digits = 0 if len(args) == 1 else _int_literal(e.args[1])
    x, kind = args[0], e.args[0].type.kind
    if kind in _INT_RANGE:
        if digits >= 0:
            return x.cast(t)
        # exactly, as a decimal (Spark rounds an integer in its own type and wraps around)
        wide = F.round(x.cast(T.DecimalType(20, 0)), digits)
        out = wide.try_cast(t)
        error(x.isNotNull() & out.isNull(), _overflow(wide, kind))
        return out
    if kind == "double":  # of its shortest digits, as the reference rounds (deployer/spark/functions)
        return column(DOUBLE_ROUND, x, F.lit(digits)).cast(t)
    out = F.round(x, digits)
    if kind == "decimal" and round_may_overflow(e.args[0].type, digits):
        # Spark's type is operators.decimals.round_type: NULL only on overflow
        shown = msg("round(", text(x, e.args[0].type), f", {digits})")
        error(
            x.isNotNull() & out.isNull(), msg("decimal overflow: ", shown, f" is out of range for {e.type}")
        )
    return out.cast(t)


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
    if e.type.kind == "decimal":
        return decimal_arithmetic("%", e.args[0], e.args[1], args[0], args[1], e, error)
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
        # in bigint: start + length can pass the integer range, where Spark would wrap around
        end = start.cast("bigint") + length.cast("bigint")
        count = F.least(F.greatest(end - lo, F.lit(0)), F.lit(2**31 - 1)).cast("int")
    else:
        count = F.lit(2**31 - 1)
    return F.when(_all_set(args), s.substr(lo, count))


# The milliseconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z: the reference's timestamps
# (Python's datetime) hold no others, and Spark's fails the batch beyond its own range.
_MILLIS = (-62135596800000, 253402300799999)


def _from_epoch_millis(e: ir.Func, args: list[Column], t: T.DataType, error: Error) -> Column:
    ms = args[0].cast("bigint")
    beyond = (ms < F.lit(_MILLIS[0])) | (ms > F.lit(_MILLIS[1]))
    error(beyond, msg("from_epoch_millis(", ms.cast("string"), ") is out of the timestamp range"))
    return F.when(~beyond, F.timestamp_millis(ms))


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
    "from_epoch_millis": _from_epoch_millis,
    "abs": _abs,
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
