"""Values crossing the store boundary: Python objects in, driver-ready values out, and back.

Events carry int, float, Decimal, str, bool, aware UTC datetime or None (stores/api.py). Each store
needs them in a slightly different shape:

- Postgres, batched reads: one array per parameter, whose element type is chosen from the Python
  values (see `pg_array_type`); psycopg binds the arrays.
- SQLite: the stdlib driver has no Decimal and its datetime adapters are deprecated, so timestamps
  become UTC text in the layout SQLAlchemy uses for DateTime on SQLite and Decimals become text in
  plain notation. A table's decimal(p, s) column stores that text as it is (TEXT affinity,
  stores/schema.py), exact, with its scale: SQLite's NUMERIC affinity would make a binary double of
  it.
- Redis: every value is a string (`redis_text`); a decimal in plain notation with its scale.

Decimal columns of a table take every value rounded half up to their scale, and refuse a value that
does not fit (`conform_decimals`), on SQLite and Redis as PostgreSQL's numeric(p, s) does.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from operators.datatypes import (
    BIGINT,
    BOOLEAN,
    CHAR,
    DECIMAL,
    DOUBLE,
    INTEGER,
    TIMESTAMP,
    VARCHAR,
    DataType,
)
from operators.graph import Table
from operators.values import EvalError, quantize, to_text

Row = tuple[Any, ...]

_INT64 = (-(2**63), 2**63 - 1)


def as_utc(value: datetime) -> datetime:
    """An aware UTC datetime; a naive one is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


# ---------------------------------------------------------------------------------------------
# Postgres: the element type of each parameter array of a batched read


def pg_array_type(values: list[Any]) -> tuple[str | None, list[Any]]:
    """The Postgres element type for one parameter's values across a batch, and the values to bind.

    Strongly typed Python values give the type psycopg itself would send for a single event: bool →
    boolean, int → bigint (numeric beyond 64 bits), float → double precision, Decimal → numeric,
    datetime → timestamp with time zone (naive taken as UTC). A mix of numbers widens to the type
    that holds them all (any float → double precision, else any Decimal → numeric).

    None as the type means "let the server decide": the values are all str (psycopg sends a str as
    an untyped literal, so Postgres infers its type from the query, e.g. integer for `idcaller = ?`)
    or all None. The caller then asks the server what the parameter's type is in the user's query.
    """
    kinds = {type(v) for v in values if v is not None}
    if not kinds or kinds == {str}:
        return None, values
    if kinds == {bool}:
        return "boolean", values
    if kinds <= {datetime}:
        return "timestamp with time zone", [None if v is None else as_utc(v) for v in values]
    if bool in kinds or str in kinds or not kinds <= {int, float, Decimal}:
        names = ", ".join(sorted(k.__name__ for k in kinds))
        raise TypeError(f"values of incompatible types ({names}) for one parameter")
    if float in kinds:
        return "double precision", [None if v is None else float(v) for v in values]
    if Decimal in kinds:
        return "numeric", [v if v is None or isinstance(v, Decimal) else Decimal(v) for v in values]
    lo, hi = _INT64
    if all(v is None or lo <= v <= hi for v in values):
        return "bigint", values
    return "numeric", [None if v is None else Decimal(v) for v in values]


def pg_array_literal(values: Sequence[int | None]) -> str:
    """A bigint parameter array as Postgres array text, `{1,2,NULL}`: bound as one string and cast
    by the query (`%s::bigint[]`), it costs one `str` per value here instead of psycopg's per-element
    array dumper, the largest cost of a batched read on the client. Only ints go this way: their text
    form is unambiguous."""
    if None in values:
        return "{" + ",".join(["NULL" if v is None else str(v) for v in values]) + "}"
    return "{" + ",".join(map(str, values)) + "}"


def pg_text_array_literal(values: list[str]) -> str:
    """Text values as Postgres array text, `{"a","b"}`, for `%s::text[]`: every element quoted,
    with `\\` and `"` escaped, which is the whole of the array input syntax inside quotes (the
    values carry no NUL: Postgres text cannot). Like `pg_array_literal`, one string per batch instead
    of psycopg's per-element dumper, a visible cost of a ledgered UpdateSQL batch on the client."""
    return "{" + ",".join(['"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values]) + "}"


def pg_value(value: Any) -> Any:
    """A value for psycopg: naive datetimes are taken as UTC; the rest binds as it is."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


# ---------------------------------------------------------------------------------------------
# SQLite

SQLITE_TIMESTAMP = "%Y-%m-%d %H:%M:%S.%f"  # SQLAlchemy's DateTime storage format on SQLite


def sqlite_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return as_utc(value).strftime(SQLITE_TIMESTAMP)
    if isinstance(value, Decimal):
        return format(value, "f")  # str() would write 1E-8
    return value


def conform_decimals(
    table: Table, columns: Sequence[str], rows: Sequence[Row]
) -> tuple[list[Row], list[str | None]]:
    """The rows with each number bound for a decimal(p, s) column as a Decimal of scale s (rounded
    half up), and for each row why it is refused (a value that does not fit), None when it is not.
    A value that does not fit is left as an exact Decimal: PostgreSQL refuses it itself."""
    at = [
        (i, c, f.type)
        for i, c in enumerate(columns)
        if (f := table.columns.get(c)) is not None and f.type.kind == DECIMAL
    ]
    errors: list[str | None] = [None] * len(rows)
    if not at:
        return list(rows), errors
    out: list[Row] = []
    for k, row in enumerate(rows):
        values = list(row)
        for i, name, t in at:
            v = values[i]
            if v is None or isinstance(v, bool) or not isinstance(v, int | float | Decimal):
                continue
            exact = Decimal(repr(v)) if isinstance(v, float) else Decimal(v)
            try:
                values[i] = quantize(exact, t)
            except (EvalError, ArithmeticError):
                values[i] = exact
                errors[k] = errors[k] or f"column {name}: {to_text(v)} is out of range for {t}"
        out.append(tuple(values))
    return out, errors


# ---------------------------------------------------------------------------------------------
# Redis


def redis_text(value: Any) -> str:
    """The string stored in a Redis hash field for a non-None value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return as_utc(value).isoformat()
    if isinstance(value, float):
        return repr(value)  # shortest text that reads back to the same double
    if isinstance(value, Decimal):
        return format(value, "f")  # plain, with its scale (str() would write 1E-8)
    return str(value)


# ---------------------------------------------------------------------------------------------
# Results: from what a driver returned to the CPL type of the query's result column (its RETURNS,
# or what the store described: SqlQuery.result_types)


def from_db(value: Any, t: DataType) -> Any:
    """Coerce a value read from a store to the Python type of CPL type `t` (None stays None).

    Postgres already returns the right types; this matters for SQLite, which returns timestamps as
    text, booleans as integers and decimals as floats. Values that do not convert are returned as
    they are, and so are values read into a text column: the engines give every value its field's
    type by one rule, which refuses the first and gives the others their text (operators.results).
    """
    if value is None:
        return None
    try:
        if t.kind == TIMESTAMP:
            if isinstance(value, str):
                return as_utc(datetime.fromisoformat(value))
            return as_utc(value) if isinstance(value, datetime) else value
        if t.kind == BOOLEAN:
            if isinstance(value, str):
                return {"true": True, "t": True, "1": True, "false": False, "f": False, "0": False}.get(
                    value.lower(), value
                )
            return bool(value) if isinstance(value, int) and value in (0, 1) else value
        if t.kind in (INTEGER, BIGINT):
            if isinstance(value, bool):
                return int(value)
            if isinstance(value, float | Decimal) and value == int(value):
                return int(value)
            return int(value) if isinstance(value, str) else value
        if t.kind == DOUBLE:
            return (
                float(value)
                if isinstance(value, int | Decimal | str) and not isinstance(value, bool)
                else value
            )
        if t.kind == DECIMAL:
            # to the declared scale; a value that does not fit is left as it is, for the caller's
            # CAST (operators.values.cast_value) to report
            if isinstance(value, int | float | str | Decimal) and not isinstance(value, bool):
                return quantize(Decimal(str(value).strip()), t)
            return value
    except (ValueError, ArithmeticError, EvalError):
        return value
    return value


# The Python type each CPL type's values have when read from Postgres (timestamps are left out:
# they may come naive and need `as_utc` one by one; decimals too: each takes the declared scale).
_PY_TYPE: dict[str, type] = {
    INTEGER: int,
    BIGINT: int,
    DOUBLE: float,
    CHAR: str,
    VARCHAR: str,
    BOOLEAN: bool,
}


def coerce_column(values: list[Any], t: DataType | None) -> list[Any]:
    """`from_db` over one result column (`normalize_row` when no type is declared), skipped when
    every value already has the type's Python type: one set of types per column instead of a call
    per value, which is most of the cost of a large batched read."""
    kinds = {type(v) for v in values}
    kinds.discard(type(None))
    if t is None:
        if any(issubclass(k, datetime) for k in kinds):
            return [as_utc(v) if isinstance(v, datetime) else v for v in values]
        return values
    expected = _PY_TYPE.get(t.kind)
    if expected is not None and kinds <= {expected}:
        return values
    return [from_db(v, t) for v in values]


def normalize_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Datetimes as aware UTC; everything else unchanged."""
    if any(isinstance(v, datetime) for v in row):
        return tuple(as_utc(v) if isinstance(v, datetime) else v for v in row)
    return row
