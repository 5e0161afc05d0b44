"""A SELECT's result values → the values of a ReadSQL's result fields: the one rule both engines apply.

A store returns what its driver gives (stores/values.py has already turned SQLite's encodings, such as
timestamps as text and booleans as 0/1, into Python values where it could). Each value then becomes
a value of its field's CPL type, or is refused: the engine dead-letters the whole event (none of its
result rows goes on), with a reason that names the query, the column and the value, e.g.

    query plan_of, column 'idplan': 'abc' is not an integer

The reference executor converts row by row (`result_row`), the Spark translation column by column
inside its Arrow batches (`convert_column`); both call `convert`, so they accept and refuse the same
values with the same words. The rules (docs/language.md, "SQL queries") follow those of an input
record's fields (deployer/connectors/records.py) where a driver's value is like a record's:

- integer, bigint: an int (not a boolean), an integral float or decimal, the text of an integer;
  within the type's range;
- double: any number, or the text of one;
- decimal(p, s): any finite number or its text, rounded half up to s places, within p digits;
- boolean: a boolean, the integers 0 and 1, the texts true/false, t/f, yes/no, y/n, 1/0;
- timestamp: a datetime (naive: UTC), a date (its midnight, UTC), ISO 8601 text;
- varchar, char: text as it is; any other value becomes text: as CAST(x AS varchar) gives it for
  CPL's values, `\\x` and hex digits for bytes (PostgreSQL's bytea text), JSON for lists and dicts
  (json, jsonb and arrays as psycopg returns them), Python's `str` for anything else (a date, a
  uuid). varchar(n) and char(n) refuse text longer than n characters; a varchar without a length
  refuses nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from operators.datatypes import BIGINT, BOOLEAN, CHAR, DECIMAL, DOUBLE, INTEGER, TIMESTAMP, VARCHAR, DataType
from operators.values import INT_RANGES, EvalError, parse_timestamp, quantize, to_text

# A reason quotes the value it is about, but at most this many characters of it (as an input
# record's reasons do).
SHOWN_CHARS = 100


class Unfit(EvalError):
    """A result value that is not a value of its field's type; the message says why."""


def text_of(v: Any) -> str:
    """The text a non-NULL result value becomes in a varchar field."""
    if isinstance(v, str):
        return v
    if isinstance(v, bool | int | float | Decimal | datetime):
        return to_text(v)
    if isinstance(v, bytes | bytearray | memoryview):
        return "\\x" + bytes(v).hex()
    if isinstance(v, dict | list | tuple):
        return json.dumps(v, ensure_ascii=False, default=str)
    return str(v)


def shown(v: Any) -> str:
    """A value as a reason quotes it: text in quotes, anything else as its text; cut when long."""
    text = repr(v) if isinstance(v, str) else text_of(v)
    if len(text) > SHOWN_CHARS:
        return f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"
    return text


def _integral(v: Any) -> bool:
    """A float or decimal with no fraction (30.0 is the integer 30)."""
    if isinstance(v, float):
        return math.isfinite(v) and v == int(v)
    return isinstance(v, Decimal) and v.is_finite() and v == v.to_integral_value()


def _integer(v: Any, t: DataType) -> int:
    out: int | None = None
    if isinstance(v, bool):
        out = None
    elif isinstance(v, int):
        out = v
    elif _integral(v):
        out = int(v)
    elif isinstance(v, str):
        try:
            out = int(v.strip())
        except ValueError:
            out = None
    if out is None:
        raise Unfit(f"{shown(v)} is not an integer")
    lo, hi = INT_RANGES[t.kind]
    if not lo <= out <= hi:
        raise Unfit(f"{shown(out)} is out of range for {t.kind}")
    return out


def _double(v: Any, t: DataType) -> float:
    try:
        if isinstance(v, int | float | Decimal) and not isinstance(v, bool):
            return float(v)
        if isinstance(v, str):
            return float(v.strip())
    except ValueError:
        pass
    except OverflowError:
        raise Unfit(f"{shown(v)} is out of range for double") from None
    raise Unfit(f"{shown(v)} is not a number")


def _decimal(v: Any, t: DataType) -> Decimal:
    d: Decimal | None = None
    if isinstance(v, int | Decimal) and not isinstance(v, bool):
        d = Decimal(v)
    elif isinstance(v, float):
        d = Decimal(repr(v))  # the shortest text of the double, not its binary expansion
    elif isinstance(v, str):
        try:
            d = Decimal(v.strip())
        except InvalidOperation:
            d = None
    if d is None or not d.is_finite():
        raise Unfit(f"{shown(v)} is not a decimal number")
    try:
        return quantize(d, t)
    except EvalError as err:
        raise Unfit(str(err)) from None


_TRUE = ("true", "t", "yes", "y", "1")
_FALSE = ("false", "f", "no", "n", "0")


def _boolean(v: Any, t: DataType) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
    raise Unfit(f"{shown(v)} is not a boolean")


def _timestamp(v: Any, t: DataType) -> datetime:
    if isinstance(v, datetime):
        return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)
    if isinstance(v, date):
        return datetime(v.year, v.month, v.day, tzinfo=UTC)
    if isinstance(v, str):
        ts = parse_timestamp(v)
        if ts is not None:
            return ts
    raise Unfit(f"{shown(v)} is not a timestamp")


def _string(v: Any, t: DataType) -> str:
    s = text_of(v)
    if t.length is not None and len(s) > t.length:
        raise Unfit(f"{shown(s)} is longer than {t.length} characters")
    return s


_CONVERT: dict[str, Callable[[Any, DataType], Any]] = {
    INTEGER: _integer,
    BIGINT: _integer,
    DOUBLE: _double,
    DECIMAL: _decimal,
    BOOLEAN: _boolean,
    TIMESTAMP: _timestamp,
    CHAR: _string,
    VARCHAR: _string,
}


def convert(v: Any, t: DataType) -> Any:
    """`v` as a value of `t` (None stays None), or Unfit saying why it is not one."""
    if v is None:
        return None
    return _CONVERT[t.kind](v, t)


def reason(query: str, column: str, err: Exception) -> str:
    """The dead-letter reason of an event whose result value does not fit its column."""
    return f"query {query}, column '{column}': {err}"


def result_row(
    query: str, names: Sequence[str], types: Sequence[DataType], row: Sequence[Any]
) -> tuple[Any, ...]:
    """One result row as values of the fields' types; EvalError with the reason of its first
    column (from the left) whose value does not fit."""
    out = []
    for v, name, t in zip(row, names, types, strict=True):
        try:
            out.append(convert(v, t))
        except Unfit as err:
            raise EvalError(reason(query, name, err)) from None
    return tuple(out)


# The Python type of each kind's values, for the fast path of a column whose values all have it.
_PY_TYPE: dict[str, type] = {INTEGER: int, BIGINT: int, DOUBLE: float, BOOLEAN: bool, VARCHAR: str, CHAR: str}


def convert_column(values: list[Any], t: DataType) -> tuple[list[Any], dict[int, Unfit]]:
    """A result column as values of `t`, and the rows whose value does not fit (row → why; their
    place in the list holds None). Skips the per-value work when every value already is one of `t`
    (an int column within range, a text column without a length): the usual case, checked with one
    set of the values' types instead of a call per value."""
    kinds = {type(v) for v in values}
    kinds.discard(type(None))
    expected = _PY_TYPE.get(t.kind)
    if expected is not None and kinds <= {expected} and t.length is None:
        if t.kind not in INT_RANGES or not kinds:
            return values, {}
        ints = [v for v in values if v is not None]
        lo, hi = INT_RANGES[t.kind]
        if lo <= min(ints) and max(ints) <= hi:
            return values, {}
    out: list[Any] = []
    bad: dict[int, Unfit] = {}
    fn = _CONVERT[t.kind]
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(fn(v, t))
        except Unfit as err:
            bad[i] = err
            out.append(None)
    return out, bad


def result_columns(
    query: str, names: Sequence[str], types: Sequence[DataType], event: list[int], columns: list[list[Any]]
) -> tuple[list[int], list[list[Any]], list[str | None]]:
    """`result_row` for a batch's result rows given column by column (row i belongs to event
    `event[i]`): the columns converted, with the rows of an event that has a value that does not
    fit replaced by one row of NULLs that carries the reason (the last rows, one per such event),
    as `(event, columns, reasons)`. The reason is the one `result_row` gives: that of the event's
    first row, in the query's order, with such a value, and of its first such column."""
    converted: list[list[Any]] = []
    first: dict[int, tuple[int, int, Unfit]] = {}  # event → (row, column, why) of its first misfit
    for j, (values, t) in enumerate(zip(columns, types, strict=True)):
        values, bad = convert_column(values, t)
        converted.append(values)
        for i, err in bad.items():
            e = event[i]
            if e not in first or (i, j) < first[e][:2]:
                first[e] = (i, j, err)
    if not first:
        return event, converted, [None] * len(event)
    kept = [i for i, e in enumerate(event) if e not in first]
    failed = sorted(first)
    reasons: list[str | None] = [None] * len(kept)
    reasons += [reason(query, names[first[e][1]], first[e][2]) for e in failed]
    out = [[values[i] for i in kept] + [None] * len(failed) for values in converted]
    return [event[i] for i in kept] + failed, out, reasons
