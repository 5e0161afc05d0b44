"""Run-time values of the reference executor: timestamps, text forms, numeric widening and CAST.

Values are plain Python objects: int (integer, bigint), float (double), Decimal (decimal), str
(char, varchar), bool, an aware UTC datetime (timestamp), or None (NULL). Event time is carried
internally as integer microseconds since the epoch, so window arithmetic is exact.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import ROUND_DOWN, ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

from operators.datatypes import (
    BIGINT,
    BOOLEAN,
    CHAR,
    DECIMAL,
    DOUBLE,
    INTEGER,
    NULL,
    TIMESTAMP,
    VARCHAR,
    DataType,
)


class EvalError(Exception):
    """A per-event evaluation failure: the event goes to the dead-letter sink, the run goes on."""


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Durations in the operator graph are milliseconds (windows, OUTPUT EVERY); event time is µs.
US_PER_MS = 1000
_MICRO = timedelta(microseconds=1)

# Decimal arithmetic: 38 digits as the widest decimal(p, s), rounding half up as SQL engines do.
DECIMAL_CONTEXT = Context(prec=38, rounding=ROUND_HALF_UP)

INT_RANGES = {INTEGER: (-(2**31), 2**31 - 1), BIGINT: (-(2**63), 2**63 - 1)}


# ---- timestamps ------------------------------------------------------------------------------------


def to_micros(ts: datetime) -> int:
    """Microseconds since the epoch; a naive datetime is taken as UTC."""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return (ts - EPOCH) // _MICRO


def from_micros(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def parse_timestamp(text: str) -> datetime | None:
    """ISO 8601 text (`T` or space, optional fraction and zone; `Z` for UTC) → aware UTC, else None."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _fraction(ts: datetime) -> str:
    return f".{ts.microsecond:06d}".rstrip("0") if ts.microsecond else ""


def format_timestamp_sql(ts: datetime) -> str:
    """The text CAST(ts AS varchar) gives: `2026-01-31 12:00:00[.123]`, UTC, as Spark prints it."""
    ts = ts.astimezone(UTC) if ts.tzinfo is not None else ts
    return ts.strftime("%Y-%m-%d %H:%M:%S") + _fraction(ts)


def format_timestamp_iso(ts: datetime) -> str:
    """The text sinks write: ISO 8601 UTC with `Z`, e.g. `2026-01-31T12:00:00.5Z`."""
    ts = ts.astimezone(UTC) if ts.tzinfo is not None else ts
    return ts.strftime("%Y-%m-%dT%H:%M:%S") + _fraction(ts) + "Z"


# ---- text --------------------------------------------------------------------------------------------


def to_text(v: Any) -> str:
    """The varchar form of a non-NULL value (CAST(v AS varchar), `||`, concat())."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, datetime):
        return format_timestamp_sql(v)
    return str(v)


# ---- numbers -----------------------------------------------------------------------------------------


def overflow_reason(what: str, t: DataType) -> str:
    """Why a value (`what`: an expression or an aggregate, as CPL) does not fit its type `t`."""
    return f"{'decimal' if t.kind == DECIMAL else 'integer'} overflow: {what} is out of range for {t}"


def check_int(v: int, kind: str) -> int:
    lo, hi = INT_RANGES[kind]
    if not lo <= v <= hi:
        raise EvalError(f"integer overflow: {v} is out of range for {kind}")
    return v


def quantize(d: Decimal, t: DataType) -> Decimal:
    """Round a decimal to the scale of decimal(p, s) and check that it fits its precision."""
    scale = t.scale or 0
    try:
        q = d.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=DECIMAL_CONTEXT)
    except InvalidOperation:
        raise EvalError(f"{d:f} is out of range for {t}") from None
    precision = t.precision or 38
    if q.adjusted() >= precision - scale:
        raise EvalError(f"{d:f} is out of range for {t}")
    # No negative zero: Spark's decimals (java.math.BigDecimal) have none, and it would print.
    return q.copy_abs() if q.is_zero() else q


def widener(src: DataType, dst: DataType) -> Callable[[Any], Any] | None:
    """How to turn a value of `src` into the wider numeric `dst` (None: nothing to do). A decimal
    takes the scale of its new type (rounded half up where the common type has fewer places)."""
    if dst.kind == DOUBLE and src.kind in (INTEGER, BIGINT, DECIMAL):
        return float
    if dst.kind == DECIMAL and src.kind in (INTEGER, BIGINT, DECIMAL) and src != dst:
        return lambda v: quantize(Decimal(v), dst)
    return None


# ---- CAST --------------------------------------------------------------------------------------------

_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


def sql_quoted(text: str) -> str:
    """Text as a CPL string literal: in single quotes, a quote doubled (`'x''y'`).

    Reasons quote text this way on both engines (Spark: `deployer.spark.translate.columns.quoted`); unlike
    Python's repr it needs no escapes that a Spark column would have to reproduce.
    """
    return "'" + text.replace("'", "''") + "'"


def _bad(v: Any, t: DataType) -> EvalError:
    shown = sql_quoted(v) if isinstance(v, str) else to_text(v)
    return EvalError(f"cannot cast {shown} to {t}")


def _to_int(v: Any, t: DataType) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        out = v
    elif isinstance(v, float):
        if not math.isfinite(v):
            raise _bad(v, t)
        out = int(v)  # toward zero, as Spark and Java do
    elif isinstance(v, Decimal):
        if not v.is_finite():
            raise _bad(v, t)
        out = int(v.to_integral_value(rounding=ROUND_DOWN))
    elif isinstance(v, str):
        try:
            out = int(v.strip())
        except ValueError:
            raise _bad(v, t) from None
    else:
        raise _bad(v, t)
    lo, hi = INT_RANGES[t.kind]
    if not lo <= out <= hi:
        raise EvalError(f"cannot cast {to_text(v)} to {t}: out of range")
    return out


def _to_double(v: Any, t: DataType) -> float:
    if isinstance(v, bool | int | float | Decimal):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            raise _bad(v, t) from None
    raise _bad(v, t)


# A number as text, in the forms both Python's Decimal and Java's BigDecimal (Spark) read; around it
# the characters Java's String.trim removes (those up to the space).
DECIMAL_TEXT = re.compile(r"[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)?")
JAVA_BLANKS = "".join(map(chr, range(33)))


def _to_decimal(v: Any, t: DataType) -> Decimal:
    shown = to_text(v)
    if isinstance(v, bool):
        d = Decimal(int(v))
    elif isinstance(v, int | Decimal):
        d = Decimal(v)
    elif isinstance(v, float):
        if not math.isfinite(v):
            raise _bad(v, t)
        d = Decimal(repr(v))  # the shortest text of the double, not its binary expansion
    elif isinstance(v, str):
        shown = v.strip(JAVA_BLANKS)
        if not DECIMAL_TEXT.fullmatch(shown):
            raise _bad(v, t)
        d = Decimal(shown)
    else:
        raise _bad(v, t)
    try:
        return quantize(d, t)
    except EvalError:
        # the value as it was given, which both engines can show
        raise EvalError(f"{shown} is out of range for {t}") from None


def _to_bool(v: Any, t: DataType) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float | Decimal):
        return v != 0
    if isinstance(v, str):
        s = v.strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
    raise _bad(v, t)


def _to_string(v: Any, t: DataType) -> str:
    s = to_text(v)
    # varchar(n) and char(n) keep the first n characters (no blank padding for char).
    return s[: t.length] if t.length is not None else s


def _to_timestamp(v: Any, t: DataType) -> datetime:
    if isinstance(v, datetime):
        return v if v.tzinfo is not None else v.replace(tzinfo=UTC)
    if isinstance(v, str):
        ts = parse_timestamp(v)
        if ts is not None:
            return ts
    raise _bad(v, t)


_CASTS: dict[str, Callable[[Any, DataType], Any]] = {
    INTEGER: _to_int,
    BIGINT: _to_int,
    DOUBLE: _to_double,
    DECIMAL: _to_decimal,
    BOOLEAN: _to_bool,
    CHAR: _to_string,
    VARCHAR: _to_string,
    TIMESTAMP: _to_timestamp,
}


def cast_value(v: Any, t: DataType) -> Any:
    """CAST(v AS t) with SQL semantics: NULL stays NULL, a value that does not convert is an EvalError."""
    if v is None or t.kind == NULL:
        return None
    return _CASTS[t.kind](v, t)


def caster(src: DataType, dst: DataType) -> Callable[[Any], Any] | None:
    """A converter from `src` to `dst` values, or None when values of `src` are already `dst` values."""
    if src.kind == dst.kind and dst.kind not in (DECIMAL, CHAR, VARCHAR):
        return None
    if src.kind == dst.kind and dst.kind in (CHAR, VARCHAR) and dst.length is None:
        return None
    fn = _CASTS.get(dst.kind)
    if fn is None:
        return None
    return lambda v: None if v is None else fn(v, dst)
