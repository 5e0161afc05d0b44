"""decimal(p, s): the result type of every operation on decimals, and the values both engines compute.

The types are the rules SQL Server, Hive and Spark share (docs/language.md, "Decimals"), so that
Spark, given operands of exactly these types, computes a result of exactly the type the compiler
gave it (tests/spark/test_spark_decimal_values.py checks both). The values are exact, rounded half up
once to the result's scale: what Spark 4 computes with java.math.BigDecimal (a product or quotient
truncated to 39 digits first, which cannot change a rounding to at most 38 places). A result that
does not fit its type is an `EvalError` for the event (Spark gives NULL, which the Spark
translation turns into the same error).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

from operators import expr as ir
from operators.datatypes import BIGINT, DECIMAL, INTEGER, DataType
from operators.values import EvalError, overflow_reason, quantize, to_text

MAX_PRECISION = 38
# When a result would need more than 38 digits, its integer digits are kept first, but at least
# this many places (or the exact scale, when it is smaller) are kept too.
MIN_ADJUSTED_SCALE = 6
# The decimal type an integer operand counts as: as many digits as its type can hold.
INTEGER_DIGITS = {INTEGER: 10, BIGINT: 20}

# Exact sums and products: two 38-digit values with scales up to 38 need 77 digits (a product 76);
# a running total of many more. This is exact for any window a run can hold.
_EXACT = Context(prec=400, rounding=ROUND_HALF_UP, Emax=999_999, Emin=-999_999)
# Remainders: the quotient inside has at most 38 digits (remainder_too_wide), where this is exact.
_REMAINDER = Context(prec=MAX_PRECISION, rounding=ROUND_HALF_UP)


def decimal(p: int, s: int) -> DataType:
    return DataType(DECIMAL, precision=p, scale=s)


def digits(t: DataType) -> tuple[int, int]:
    """(precision, scale) of a decimal type."""
    return t.precision or MAX_PRECISION, t.scale or 0


def adjusted(p: int, s: int) -> DataType:
    """decimal(p, s), or when p > 38 the 38-digit type that keeps the integer digits first."""
    if p <= MAX_PRECISION:
        return decimal(p, s)
    scale = max(MAX_PRECISION - (p - s), min(s, MIN_ADJUSTED_SCALE))
    return decimal(MAX_PRECISION, scale)


def capped(p: int, s: int) -> DataType:
    return decimal(min(p, MAX_PRECISION), min(s, MAX_PRECISION))


def operand_type(e: ir.Expr) -> DataType:
    """The decimal type a numeric operand of a decimal operation counts as: an integer literal has
    as many digits as its value, an integer or bigint expression as many as its type can hold."""
    t = e.type
    if t.kind == DECIMAL:
        return t
    if isinstance(e, ir.Lit) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return decimal(max(1, len(str(abs(e.value)))), 0)
    return decimal(INTEGER_DIGITS.get(t.kind, MAX_PRECISION), 0)


def _natural(op: str, a: DataType, b: DataType) -> tuple[int, int]:
    """(precision, scale) of `a op b` before the 38-digit limit: one that holds every result."""
    p1, s1 = digits(a)
    p2, s2 = digits(b)
    if op in ("+", "-"):
        s = max(s1, s2)
        return max(p1 - s1, p2 - s2) + s + 1, s
    if op == "*":
        return p1 + p2 + 1, s1 + s2
    if op == "/":
        s = max(MIN_ADJUSTED_SCALE, s1 + p2 + 1)
        return p1 - s1 + s2 + s, s
    assert op == "%", op
    s = max(s1, s2)
    return min(p1 - s1, p2 - s2) + s, s


def arithmetic_type(op: str, a: DataType, b: DataType) -> DataType:
    """The type of `a op b` for two decimal types (integers given as their `operand_type`)."""
    return adjusted(*_natural(op, a, b))


def may_overflow(op: str, a: DataType, b: DataType) -> bool:
    """Whether some `a op b` does not fit its type: only when the type had to be cut to 38 digits
    (the natural type holds every result, rounding included)."""
    return _natural(op, a, b)[0] > MAX_PRECISION


def remainder_too_wide(a: DataType, b: DataType) -> bool:
    """Whether the quotient inside `a % b` may need more than 38 digits, which Spark cannot compute
    (java.math.BigDecimal raises "Division impossible" and fails the batch): refused by the compiler."""
    p1, s1 = digits(a)
    _, s2 = digits(b)
    return p1 - s1 + s2 > MAX_PRECISION


def sum_type(t: DataType) -> DataType:
    p, s = digits(t)
    return capped(p + 10, s)


def avg_type(t: DataType) -> DataType:
    p, s = digits(t)
    return capped(p + 4, s + 4)


def _round_natural(t: DataType, places: int) -> tuple[int, int]:
    p, s = digits(t)
    if places < 0:
        return max(p - s + 1, 1 - places), 0
    scale = min(s, places)
    return p - s + 1 + scale, scale


def round_type(t: DataType, places: int) -> DataType:
    """round(decimal(p, s), d): d places (none when d < 0), and room for the carry (99.5 → 100)."""
    return capped(*_round_natural(t, places))


def round_may_overflow(t: DataType, places: int) -> bool:
    """Whether some round(decimal, d) does not fit its type: only when it was cut to 38 digits."""
    return _round_natural(t, places)[0] > MAX_PRECISION


def integral_type(t: DataType) -> DataType:
    """floor and ceil of decimal(p, s): decimal(p - s + 1, 0), which always holds the result."""
    p, s = digits(t)
    return t if s == 0 else decimal(min(p - s + 1, MAX_PRECISION), 0)


# ---- values ------------------------------------------------------------------------------------------


def _fits(d: Decimal, t: DataType) -> Decimal | None:
    try:
        return quantize(d, t)
    except EvalError:
        return None


def rounded(d: Decimal, t: DataType, what: Callable[[], str]) -> Decimal:
    """`d` rounded half up to the scale of `t`; an EvalError naming `what()` when it does not fit."""
    out = _fits(d, t)
    if out is None:
        raise EvalError(overflow_reason(what(), t))
    return out


def exact_sum(a: Decimal, b: Any) -> Decimal:
    return _EXACT.add(a, Decimal(b))


def divide(a: Decimal, b: Decimal, scale: int) -> Decimal:
    """a / b rounded half up (away from zero) to `scale` places, exactly (b is not zero)."""
    sa, da, ea = a.as_tuple()
    sb, db, eb = b.as_tuple()
    assert isinstance(ea, int) and isinstance(eb, int)
    na = int("".join(map(str, da)) or "0")
    nb = int("".join(map(str, db)))
    # a / b = (na / nb) * 10^(ea - eb); scaled by 10^scale and rounded to an integer
    shift = scale + ea - eb
    num, den = (na * 10**shift, nb) if shift >= 0 else (na, nb * 10**-shift)
    q, r = divmod(num, den)
    if 2 * r >= den:
        q += 1
    negative = bool(sa) != bool(sb) and q != 0
    return Decimal((1 if negative else 0, tuple(int(c) for c in str(q)), -scale))


def _remainder(a: Decimal, b: Decimal) -> Decimal:
    # Python's remainder keeps the dividend's sign, as Java's does.
    try:
        return _REMAINDER.remainder(a, b)
    except InvalidOperation:  # the compiler refuses such operands (remainder_too_wide)
        raise EvalError("decimal overflow: the quotient has more than 38 digits") from None


def arithmetic(op: str, t: DataType) -> Callable[[Any, Any], Decimal]:
    """`a op b` for decimal (or integer) values, of the decimal type `t`."""
    scale = digits(t)[1]
    compute: Callable[[Decimal, Decimal], Decimal] = {
        "+": _EXACT.add,
        "-": _EXACT.subtract,
        "*": _EXACT.multiply,
        "/": lambda a, b: divide(a, b, scale),
        "%": _remainder,
    }[op]

    def fn(a: Any, b: Any) -> Decimal:
        if op in ("/", "%") and b == 0:
            raise EvalError("division by zero")
        return rounded(compute(Decimal(a), Decimal(b)), t, lambda: f"{to_text(a)} {op} {to_text(b)}")

    return fn


def average(total: Decimal, n: int, arg: DataType, t: DataType, what: str) -> Decimal:
    """avg of `n` values of type `arg` as Spark computes it: their total, which must fit
    decimal(38, s) (Spark's running total), over the count, rounded half up to the scale of `t`."""
    if _fits(total, decimal(MAX_PRECISION, digits(arg)[1])) is None:
        raise EvalError(overflow_reason(what, t))
    return rounded(divide(total, Decimal(n), digits(t)[1]), t, lambda: what)
