"""Records → typed events, and events → JSON lines, the same for both engines and every source.

Converting. A record becomes a tuple in the source schema's order; field names match
case-insensitively and extra fields are ignored. JSON null is NULL; a missing field is an error.
integer/bigint take integral numbers or their text; double any number or its text; decimal(p, s)
numbers or text, rounded half up to s places; boolean true/false (also "t", "yes", 1/0, ...);
varchar/char text (numbers and booleans become their text; a value longer than n characters is an
error); timestamp ISO 8601 text (no zone = UTC) or epoch milliseconds (a number or digits-only
text). A record that does not convert raises `RecordError` with a reason that names the field and
value, e.g. "field 'duration': 'abc' is not an integer".

Writing. Sinks write one JSON object per line with the stream's field names in schema order;
timestamps as ISO 8601 UTC with `Z`; decimals as JSON strings (exact: no binary rounding on the way
to the reader); non-finite doubles as the strings "NaN", "Infinity", "-Infinity".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from operators.datatypes import BIGINT, BOOLEAN, DECIMAL, DOUBLE, INTEGER, TIMESTAMP, Field, Schema
from operators.values import (
    INT_RANGES,
    EvalError,
    format_timestamp_iso,
    from_micros,
    parse_timestamp,
    quantize,
)


class RecordError(Exception):
    """A raw record that cannot become an event of its stream; the message is the reason."""


@dataclass(frozen=True)
class RawRecord:
    """One input record before conversion: parsed fields, or the reason it could not be parsed."""

    text: str
    source: str  # "path:line" or "<stdin>:line"
    fields: dict[str, Any] | None
    error: str | None = None


def json_record(text: str, source: str) -> RawRecord:
    try:
        value = json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as err:
        return RawRecord(text, source, None, f"malformed JSON: {err.msg} at column {err.colno}")
    except (ValueError, RecursionError) as err:
        # Valid JSON that Python refuses to read (an integer of more than 4,300 digits, nesting
        # deeper than the recursion limit): one bad record, not the end of the run.
        return RawRecord(text, source, None, f"unreadable JSON: {python_reason(err)}")
    if not isinstance(value, dict):
        return RawRecord(text, source, None, f"a record must be a JSON object, not {type(value).__name__}")
    return RawRecord(text, source, value)


class _Empty:
    """An empty CSV cell: NULL for every type but varchar/char, where it is ''."""


EMPTY_CELL = _Empty()

# ---- converting ---------------------------------------------------------------------------------------


# A reason quotes the value it is about, but at most this many characters of it: a 10 MB field
# makes a short reason (the dead letter keeps the whole record beside it).
SHOWN_CHARS = 100


def _show(v: Any) -> str:
    if isinstance(v, str):
        if len(v) > SHOWN_CHARS:
            return f"{v[:SHOWN_CHARS]!r}... ({len(v)} characters)"
        return repr(v)
    try:
        text = json.dumps(v, default=str)
    except ValueError:  # an integer of more than 4,300 digits, which Python will not print
        return "a number of more than 4300 digits"
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} characters)"


def python_reason(err: BaseException) -> str:
    """The message of a Python error about a value, without its advice to the programmer."""
    if isinstance(err, RecursionError):
        return "nested too deeply"
    return str(err).split("; use ", 1)[0]


def _integer(f: Field, v: Any) -> int:
    kind = f.type.kind
    out: int | None = None
    if isinstance(v, bool):
        out = None
    elif isinstance(v, int):
        out = v
    elif isinstance(v, Decimal | float) and math.isfinite(v) and v == int(v):
        out = int(v)  # 30.0 is the integer 30
    elif isinstance(v, str):
        try:
            out = int(v.strip())
        except ValueError:
            out = None
    if out is None:
        raise RecordError(f"field '{f.name}': {_show(v)} is not an integer")
    lo, hi = INT_RANGES[kind]
    if not lo <= out <= hi:
        raise RecordError(f"field '{f.name}': {_show(out)} is out of range for {kind}")
    return out


def _double(f: Field, v: Any) -> float:
    if isinstance(v, int | float | Decimal) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            pass
    raise RecordError(f"field '{f.name}': {_show(v)} is not a number")


def _decimal(f: Field, v: Any) -> Decimal:
    d: Decimal | None = None
    if isinstance(v, int | Decimal) and not isinstance(v, bool):
        d = Decimal(v)
    elif isinstance(v, float):
        d = Decimal(repr(v))
    elif isinstance(v, str):
        try:
            d = Decimal(v.strip())
        except InvalidOperation:
            d = None
    if d is None or not d.is_finite():
        raise RecordError(f"field '{f.name}': {_show(v)} is not a decimal number")
    try:
        return quantize(d, f.type)
    except EvalError as err:
        raise RecordError(f"field '{f.name}': {err}") from None


def _boolean(f: Field, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("true", "t", "yes", "y", "1"):
            return True
        if s in ("false", "f", "no", "n", "0"):
            return False
    raise RecordError(f"field '{f.name}': {_show(v)} is not a boolean")


def _string(f: Field, v: Any) -> str:
    if isinstance(v, dict | list):
        raise RecordError(f"field '{f.name}': a JSON {type(v).__name__} is not text")
    s = v if isinstance(v, str) else ("true" if v is True else "false" if v is False else str(v))
    if f.type.length is not None and len(s) > f.type.length:
        raise RecordError(f"field '{f.name}': {_show(s)} is longer than {f.type.length} characters")
    return s


def _timestamp(f: Field, v: Any) -> datetime:
    millis: int | None = None
    if isinstance(v, int | Decimal) and not isinstance(v, bool) and v == int(v):
        millis = int(v)
    elif isinstance(v, str) and v.strip().lstrip("-").isdigit():
        millis = int(v.strip())
    if millis is not None:
        try:
            return from_micros(millis * 1000)
        except OverflowError:
            raise RecordError(f"field '{f.name}': {_show(v)} is out of the timestamp range") from None
    if isinstance(v, str):
        ts = parse_timestamp(v)
        if ts is not None:
            return ts
    raise RecordError(
        f"field '{f.name}': {_show(v)} is not a timestamp (ISO 8601 text or epoch milliseconds)"
    )


_CONVERT = {
    INTEGER: _integer,
    BIGINT: _integer,
    DOUBLE: _double,
    DECIMAL: _decimal,
    BOOLEAN: _boolean,
    TIMESTAMP: _timestamp,
}


def to_event(fields: dict[str, Any], schema: Schema) -> tuple[Any, ...]:
    """A parsed record → a typed tuple of `schema`, or RecordError naming the first bad field."""
    by_name = {k.lower(): v for k, v in fields.items()}
    out: list[Any] = []
    for f in schema:
        key = f.name.lower()
        if key not in by_name:
            raise RecordError(f"missing field '{f.name}'")
        v = by_name[key]
        if isinstance(v, _Empty):
            v = "" if f.type.is_string else None
        if v is None:
            out.append(None)
            continue
        try:
            out.append(_CONVERT.get(f.type.kind, _string)(f, v))
        except (ValueError, OverflowError) as err:
            # e.g. epoch milliseconds of more than 4,300 digits, which int() refuses: the record's
            # fault, so it is rejected like any other bad value instead of stopping the run
            raise RecordError(f"field '{f.name}': {_show(v)} cannot be read: {python_reason(err)}") from None
    return tuple(out)


def convert_record(text: str, origin: str, schema: Schema) -> tuple[tuple[Any, ...], str | None]:
    """A JSON text → (typed values, None), or (NULLs, the reason it was rejected)."""
    return converted(json_record(text, origin), schema)


def converted(rec: RawRecord, schema: Schema) -> tuple[tuple[Any, ...], str | None]:
    """A record → (typed values, None), or (NULLs, the reason it was rejected): what both engines make
    of every record they read."""
    if rec.error is not None or rec.fields is None:
        return (None,) * len(schema), rec.error or "unreadable record"
    try:
        return to_event(rec.fields, schema), None
    except RecordError as err:
        return (None,) * len(schema), str(err)


# ---- writing ---------------------------------------------------------------------------------------------


def json_value(v: Any) -> Any:
    if isinstance(v, datetime):
        return format_timestamp_iso(v)
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    return v


def event_json(names: tuple[str, ...], event: tuple[Any, ...]) -> str:
    return json.dumps({n: json_value(v) for n, v in zip(names, event, strict=True)}, ensure_ascii=False)
