"""The reference implementation of every scalar function in `operators.functions`.

Each entry takes the argument closures and types (already compiled by `deployer.evaluation.evaluate`) and
returns one closure. NULL handling follows SQL: a NULL argument gives NULL, except where the
function exists to handle NULLs (coalesce, nullif, concat, greatest, least).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Context, Decimal
from typing import Any

from operators import decimals
from operators.datatypes import BIGINT, DECIMAL, INTEGER, DataType
from operators.functions import FUNCTION_ALIASES, FUNCTIONS
from operators.values import EPOCH, INT_RANGES, EvalError, check_int, to_text, widener

Fn = Callable[[Any], Any]

# Rounding exactly, whatever the digits (the result is checked against its type after).
_WIDE = Context(prec=400, Emax=999_999, Emin=-999_999)


def _strict(fn: Callable[..., Any], args: list[Fn]) -> Fn:
    """Call `fn` on the argument values, or give NULL when any of them is NULL."""
    if len(args) == 1:
        (a,) = args

        def one(r: Any) -> Any:
            v = a(r)
            return None if v is None else fn(v)

        return one

    def many(r: Any) -> Any:
        vals = [f(r) for f in args]
        return None if any(v is None for v in vals) else fn(*vals)

    return many


def _round(t: DataType) -> Callable[..., Any]:
    """round(v, d), half away from zero (SQL ROUND), not Python's half to even; of the result type
    `t` (a decimal: operators.decimals.round_type; an integer keeps its type and can overflow)."""

    def fn(v: Any, digits: int = 0) -> Any:
        if isinstance(v, float):
            if not math.isfinite(v):
                return v
            d = Decimal(repr(v)).quantize(Decimal(1).scaleb(-digits), ROUND_HALF_UP, _WIDE)
            return float(d)
        q = Decimal(v).quantize(Decimal(1).scaleb(-digits), ROUND_HALF_UP, _WIDE)
        if isinstance(v, int):
            return check_int(int(q), t.kind)
        return decimals.rounded(q, t, lambda: f"round({to_text(v)}, {digits})")

    return fn


def _integral(rounding: str, name: str) -> Callable[[Any], Any]:
    """floor and ceil: a bigint of an integer or a double, a decimal of scale 0 of a decimal."""

    def fn(v: Any) -> Any:
        if isinstance(v, int):
            return v
        if isinstance(v, Decimal):
            d = v.to_integral_value(rounding, _WIDE).quantize(Decimal(1), context=_WIDE)
            return d.copy_abs() if d.is_zero() else d  # ceil(-0.5) is 0, not -0
        if not math.isfinite(v):
            raise EvalError(f"cannot convert {to_text(v)} to bigint")
        # of the double's exact value, as Spark's Math.floor (its shortest text may be another
        # integer: -2^63 prints as -9.223372036854776e+18)
        out = math.floor(v) if rounding == ROUND_FLOOR else math.ceil(v)
        lo, hi = INT_RANGES[BIGINT]
        if not lo <= out <= hi:
            raise EvalError(f"integer overflow: {name}({to_text(v)}) is out of range for bigint")
        return out

    return fn


def _abs(kind: str) -> Callable[[Any], Any]:
    def fn(v: Any) -> Any:
        if isinstance(v, Decimal):
            return v.copy_abs()  # exact: abs() would round to the context's 28 digits
        if kind in (INTEGER, BIGINT):
            return check_int(abs(v), kind)  # abs of the least integer does not fit
        return abs(v)

    return fn


def _sqrt(v: Any) -> float:
    if v < 0:
        raise EvalError(f"cannot take the square root of a negative number ({to_text(v)})")
    return math.sqrt(v)


def _power(a: Any, b: Any) -> float:
    try:
        out = math.pow(float(a), float(b))
    except (OverflowError, ValueError):
        raise EvalError(f"power({to_text(a)}, {to_text(b)}) is out of range or undefined") from None
    return out


def sql_mod(a: Any, b: Any) -> Any:
    """SQL modulo: the result has the sign of the dividend; modulo by zero is an error."""
    if b == 0:
        raise EvalError("division by zero")
    if isinstance(a, float) or isinstance(b, float):
        return math.fmod(a, b)
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _substring(s: str, start: int, length: int | None = None) -> str:
    # SQL positions count from 1; the range [start, start + length) is cut to the string, so
    # substring('hello', 0, 3) = 'he' as in PostgreSQL.
    if length is not None and length < 0:
        raise EvalError("negative substring length not allowed")
    end = len(s) + 1 if length is None else start + length
    lo = max(start, 1)
    return s[lo - 1 : max(end - 1, lo - 1)] if end > lo else ""


def _from_epoch_millis(ms: int) -> datetime:
    try:
        return EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        raise EvalError(f"from_epoch_millis({ms}) is out of the timestamp range") from None


def _coalesce(args: list[Fn]) -> Fn:
    def fn(r: Any) -> Any:
        for f in args:
            v = f(r)
            if v is not None:
                return v
        return None

    return fn


def _nullif(args: list[Fn]) -> Fn:
    a, b = args

    def fn(r: Any) -> Any:
        x, y = a(r), b(r)
        return None if x is not None and y is not None and x == y else x

    return fn


def _extreme(pick: Callable[..., Any], args: list[Fn]) -> Fn:
    # NULL arguments are skipped (PostgreSQL and Spark); NULL only when every argument is NULL.
    def fn(r: Any) -> Any:
        vals = [v for v in (f(r) for f in args) if v is not None]
        return pick(vals) if vals else None

    return fn


def _concat(args: list[Fn]) -> Fn:
    # concat() skips NULLs as PostgreSQL does; `||` is the strict form (NULL in, NULL out).
    def fn(r: Any) -> Any:
        return "".join(to_text(v) for v in (f(r) for f in args) if v is not None)

    return fn


_STRICT: dict[str, Callable[..., Any]] = {
    "floor": _integral(ROUND_FLOOR, "floor"),
    "ceil": _integral(ROUND_CEILING, "ceil"),
    "sqrt": _sqrt,
    "power": _power,
    "mod": sql_mod,
    "lower": str.lower,
    "upper": str.upper,
    "trim": lambda s: s.strip(" "),
    "length": len,
    "substring": _substring,
    "year": lambda t: t.year,
    "month": lambda t: t.month,
    "day": lambda t: t.day,
    "hour": lambda t: t.hour,
    "minute": lambda t: t.minute,
    "second": lambda t: t.second,
    "epoch_millis": lambda t: (t - EPOCH) // timedelta(milliseconds=1),
    "from_epoch_millis": _from_epoch_millis,
}

# Functions whose meaning depends on their result type.
_TYPED: dict[str, Callable[[DataType], Callable[..., Any]]] = {
    "abs": lambda t: _abs(t.kind),
    "round": _round,
}

_SPECIAL: dict[str, Callable[[list[Fn]], Fn]] = {
    "coalesce": _coalesce,
    "nullif": _nullif,
    "greatest": lambda args: _extreme(max, args),
    "least": lambda args: _extreme(min, args),
    "concat": _concat,
}


def compile_function(name: str, args: list[Fn], arg_types: list[DataType], result: DataType) -> Fn:
    """One closure for a call of catalogue function `name` (any alias) over compiled arguments."""
    key = FUNCTION_ALIASES.get(name.lower(), name.lower())
    if key not in FUNCTIONS:
        raise ValueError(f"function {name!r} is not in the catalogue")
    if key == "mod" and result.kind == DECIMAL:  # as `%`: exact, of its own result type
        return _strict(decimals.arithmetic("%", result), args)
    if key in ("coalesce", "nullif", "greatest", "least", "mod"):
        # Arguments of a common type: widen integers/decimals to the result's kind first, so that
        # greatest(1, 2.5) compares doubles and coalesce(int_field, 0.5) always gives a double.
        widened = []
        for f, t in zip(args, arg_types, strict=True):
            w = widener(t, result)
            widened.append(f if w is None else _strict(w, [f]))
        args = widened
    if key in _SPECIAL:
        return _SPECIAL[key](args)
    if key in _TYPED:
        return _strict(_TYPED[key](result), args)
    return _strict(_STRICT[key], args)
