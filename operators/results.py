"""A SELECT's result values → the values of a ReadSQL's result fields: the one rule both engines apply.

A store returns what its driver gives (stores/values.py has already turned SQLite's encodings, such as
timestamps as text and booleans as 0/1, into Python values where it could). Each value then becomes
a value of its field's CPL type, or is refused: the engine dead-letters the whole event (none of its
result rows goes on), with a reason that names the query, the column and the value, e.g.

    query plan_of, column 'idplan': 'abc' is not an integer

The reference executor converts row by row (`result_row`), the Spark translation column by column
inside its Arrow batches (`convert_column`); both call `convert`, so they accept and refuse the same
values with the same words.

Two cases are not about one event's value, and stop the run instead on both engines (raising
`TypeChanged`, which they report as the store's error): a value that does not fit a column the
store *vouched* for when the script was compiled (described as exact, e.g. PostgreSQL's int4 read as
integer: its driver returns nothing else) means that the column's type has changed in the database
since, and every later value of it may be wrong the same way: the script must be compiled again.
A query that returns another number of columns than ON SQL names (possible only when the store did
not describe it) dead-letters each event with result rows (`column_count_reason`). The rules (docs/language.md, "SQL queries") follow those of an input
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
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from operators.datatypes import BIGINT, BOOLEAN, CHAR, DECIMAL, DOUBLE, INTEGER, TIMESTAMP, VARCHAR, DataType
from operators.values import INT_RANGES, EvalError, parse_timestamp, quantize, sql_quoted, to_text

# A reason quotes the value it is about, but at most this many characters of it (as an input
# record's reasons do).
SHOWN_CHARS = 100


class Unfit(EvalError):
    """A result value that is not a value of its field's type; the message says why."""


class TypeChanged(Exception):
    """A value that does not fit a column its store vouched for: the column's type has changed since
    the script was compiled. Not about one event: the engines stop the run with this message."""


# Column index → the database's type the store described it as (e.g. "int4"), for the columns the
# store vouched for (operators.analysis.vouched_results).
Vouched = Mapping[int, str]
_NONE_VOUCHED: Vouched = {}


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
    text = sql_quoted(v) if isinstance(v, str) else text_of(v)
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


def column_count_reason(query: str, got: int, named: int) -> str:
    """The dead-letter reason of an event whose query returned rows of `got` columns where ON SQL
    names `named` (stores.api.columns_of gives it on Spark, the reference executor per row)."""
    return f"query '{query}' returned {got} column(s) but ON SQL names {named}"


def changed_type(query: str, column: str, err: Exception, described: str) -> TypeChanged:
    """The stop of a run whose vouched-for column returned a value that does not fit."""
    return TypeChanged(
        f"{reason(query, column, err)}, but the data store described that column as {described} when "
        "the script was compiled: its type has changed since. Compile and run the script again"
    )


def result_row(
    query: str,
    names: Sequence[str],
    types: Sequence[DataType],
    row: Sequence[Any],
    vouched: Vouched = _NONE_VOUCHED,
) -> tuple[Any, ...]:
    """One result row as values of the fields' types; EvalError with the reason of its first
    column (from the left) whose value does not fit, or TypeChanged for its first such column
    among the `vouched` ones, which comes first: the row is not the event's fault then."""
    out: list[Any] = []
    first: tuple[str, Unfit] | None = None
    for j, (v, name, t) in enumerate(zip(row, names, types, strict=True)):
        try:
            out.append(convert(v, t))
        except Unfit as err:
            if j in vouched:
                raise changed_type(query, name, err, vouched[j]) from None
            first = first or (name, err)
            out.append(None)
    if first is not None:
        raise EvalError(reason(query, *first))
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
    query: str,
    names: Sequence[str],
    types: Sequence[DataType],
    event: list[int],
    columns: list[list[Any]],
    refused: Mapping[int, str] | None = None,
    vouched: Vouched = _NONE_VOUCHED,
) -> tuple[list[int], list[list[Any]], list[str | None]]:
    """`result_row` for a batch's result rows given column by column (row i belongs to event
    `event[i]`): the columns converted, with the rows of an event that has a value that does not
    fit replaced by one row of NULLs that carries the reason (the last rows, one per such event),
    as `(event, columns, reasons)`. The reason is the one `result_row` gives: that of the event's
    first row, in the query's order, with such a value, and of its first such column.

    `refused`: events the store refused (event → reason), which have no rows: each gets its row of
    NULLs and reason too. A value that does not fit a `vouched` column raises TypeChanged for the
    first one, by row then column: the one the reference executor, event by event, stops at."""
    converted: list[list[Any]] = []
    first: dict[int, tuple[int, int, Unfit]] = {}  # event → (row, column, why) of its first misfit
    stale: tuple[int, int, Unfit] | None = None  # the first misfit in a vouched column
    for j, (values, t) in enumerate(zip(columns, types, strict=True)):
        values, bad = convert_column(values, t)
        converted.append(values)
        for i, err in bad.items():
            if j in vouched:
                stale = min(stale, (i, j, err), key=lambda x: x[:2]) if stale else (i, j, err)
                continue
            e = event[i]
            if e not in first or (i, j) < first[e][:2]:
                first[e] = (i, j, err)
    if stale is not None:
        raise changed_type(query, names[stale[1]], stale[2], vouched[stale[1]])
    reasons_of = {e: reason(query, names[j], err) for e, (_, j, err) in first.items()}
    reasons_of.update(refused or {})
    if not reasons_of:
        return event, converted, [None] * len(event)
    kept = [i for i, e in enumerate(event) if e not in reasons_of]
    failed = sorted(reasons_of)
    reasons: list[str | None] = [None] * len(kept)
    reasons += [reasons_of[e] for e in failed]
    out = [[values[i] for i in kept] + [None] * len(failed) for values in converted]
    return [event[i] for i in kept] + failed, out, reasons
