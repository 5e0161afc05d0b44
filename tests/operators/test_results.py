"""The rule both engines apply to ON SQL result values (operators.results), and the store type maps
it meets (stores/sql/result_types.py), without a database: what fits, what does not, and the words."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID

import pytest

from operators.datatypes import T_BIGINT, T_BOOLEAN, T_DOUBLE, T_INTEGER, T_STRING, T_TIMESTAMP, DataType
from operators.results import (
    TypeChanged,
    Unfit,
    column_count_reason,
    convert,
    convert_column,
    result_columns,
    result_row,
)
from operators.values import EvalError
from stores.sql.result_types import pg_column, sqlite_type

DEC = DataType("decimal", precision=6, scale=2)
V4 = DataType("varchar", length=4)


@pytest.mark.parametrize(
    ("value", "t", "want"),
    [
        (7, T_INTEGER, 7),
        (30.0, T_INTEGER, 30),
        (Decimal("12"), T_BIGINT, 12),
        (" 42 ", T_INTEGER, 42),
        (5_000_000_000, T_BIGINT, 5_000_000_000),
        (1, T_DOUBLE, 1.0),
        ("2.5", T_DOUBLE, 2.5),
        (Decimal("1.5"), T_DOUBLE, 1.5),
        (3.255, DEC, Decimal("3.26")),
        ("1", DEC, Decimal("1.00")),
        (1, T_BOOLEAN, True),
        ("f", T_BOOLEAN, False),
        ("2026-01-31 12:00:00.000000", T_TIMESTAMP, datetime(2026, 1, 31, 12, tzinfo=UTC)),
        (datetime(2026, 1, 31, 12), T_TIMESTAMP, datetime(2026, 1, 31, 12, tzinfo=UTC)),
        (
            datetime(2026, 1, 31, 14, tzinfo=timezone(timedelta(hours=2))),
            T_TIMESTAMP,
            datetime(2026, 1, 31, 12, tzinfo=UTC),
        ),
        (date(2026, 1, 31), T_TIMESTAMP, datetime(2026, 1, 31, tzinfo=UTC)),
        # every value has a varchar form: CAST's for CPL's values, PostgreSQL's for bytes, JSON for JSON
        (True, T_STRING, "true"),
        (2.5, T_STRING, "2.5"),
        (Decimal("1E+2"), T_STRING, "100"),
        (datetime(2026, 1, 31, 12, tzinfo=UTC), T_STRING, "2026-01-31 12:00:00"),
        (b"\x01\x02", T_STRING, "\\x0102"),
        ({"a": [1, 2]}, T_STRING, '{"a": [1, 2]}'),
        (UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"), T_STRING, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        (date(2026, 1, 31), T_STRING, "2026-01-31"),
        ("gold", V4, "gold"),
        (None, T_INTEGER, None),
    ],
)
def test_values_that_fit(value: Any, t: DataType, want: Any) -> None:
    got = convert(value, t)
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize(
    ("value", "t", "why"),
    [
        ("abc", T_INTEGER, "'abc' is not an integer"),
        (True, T_INTEGER, "true is not an integer"),
        (2.5, T_INTEGER, "2.5 is not an integer"),
        (3_000_000_000, T_INTEGER, "3000000000 is out of range for integer"),
        (2**63, T_BIGINT, "9223372036854775808 is out of range for bigint"),
        ("x", T_DOUBLE, "'x' is not a number"),
        (10**400, T_DOUBLE, "1" + "0" * 99 + "... (401 characters) is out of range for double"),
        (Decimal("NaN"), DEC, "NaN is not a decimal number"),
        (12345.678, DEC, "12345.678 is out of range for decimal(6, 2)"),
        (7, T_BOOLEAN, "7 is not a boolean"),
        ("soon", T_TIMESTAMP, "'soon' is not a timestamp"),
        (1_700_000_000_000, T_TIMESTAMP, "1700000000000 is not a timestamp"),
        ("too long", V4, "'too long' is longer than 4 characters"),
        (b"\x00" * 3, V4, "'\\x000000' is longer than 4 characters"),
    ],
)
def test_values_that_do_not_fit_and_why(value: Any, t: DataType, why: str) -> None:
    with pytest.raises(Unfit) as info:
        convert(value, t)
    assert str(info.value) == why


def test_a_row_names_the_query_and_its_first_column_that_does_not_fit() -> None:
    types = [T_INTEGER, T_DOUBLE]
    assert result_row("q", ["a", "b"], types, ("1", 2)) == (1, 2.0)
    with pytest.raises(EvalError) as info:
        result_row("q", ["a", "b"], types, ("x", "y"))
    assert str(info.value) == "query q, column 'a': 'x' is not an integer"


def test_columns_leave_one_row_per_failed_event_with_the_reason_of_its_first_misfit() -> None:
    # event 0: two good rows; event 1: a good row, then a bad one; event 2: bad in both columns
    event = [0, 0, 1, 1, 2]
    columns = [[1, 2, 3, "x", "y"], ["a", "b", "c", "d", 9.5]]
    rows, out, reasons = result_columns("q", ["n", "s"], [T_INTEGER, V4], event, columns)
    assert rows == [0, 0, 1, 2]
    assert out == [[1, 2, None, None], ["a", "b", None, None]]
    assert reasons == [
        None,
        None,
        "query q, column 'n': 'x' is not an integer",
        "query q, column 'n': 'y' is not an integer",
    ]
    # the same as row by row
    for e, want in ((1, reasons[2]), (2, reasons[3])):
        with pytest.raises(EvalError, match=want):
            for i in [i for i, x in enumerate(event) if x == e]:
                result_row("q", ["n", "s"], [T_INTEGER, V4], [columns[0][i], columns[1][i]])


def test_events_the_store_refused_get_their_row_and_reason_in_event_order() -> None:
    # event 1 has no rows: the store refused its read; event 3 does not fit
    rows, out, reasons = result_columns(
        "q", ["n"], [T_INTEGER], [0, 2, 3], [[1, 2, "x"]], refused={1: "store crm: division by zero"}
    )
    assert rows == [0, 2, 1, 3] and out == [[1, 2, None, None]]
    assert reasons == [
        None,
        None,
        "store crm: division by zero",
        "query q, column 'n': 'x' is not an integer",
    ]


def test_a_value_that_does_not_fit_a_vouched_column_stops_with_the_same_words_on_both_paths() -> None:
    """Column 1 (`m`) was described as int4 (vouched); a text there means the column's type changed:
    TypeChanged, not a dead letter, even after another column's misfit in the same row, and the
    first such value by row then column, as the reference executor meets them row by row."""
    types, names, vouched = [T_INTEGER, T_INTEGER], ["n", "m"], {1: "int4"}
    want = (
        "query q, column 'm': 'abc' is not an integer, but the data store described that column as int4 "
        "when the script was compiled: its type has changed since. Compile and run the script again"
    )
    with pytest.raises(TypeChanged) as by_row:
        result_row("q", names, types, ("x", "abc"), vouched)
    with pytest.raises(TypeChanged) as by_column:
        result_columns("q", names, types, [0, 1, 1], [["x", 1, 2], [7, "abc", "def"]], vouched=vouched)
    assert str(by_row.value) == str(by_column.value) == want
    # a value that fits is read as ever, and a misfit elsewhere still dead-letters its event
    assert result_row("q", names, types, ("1", "2"), vouched) == (1, 2)
    with pytest.raises(EvalError, match="column 'n'"):
        result_row("q", names, types, ("x", 2), vouched)


def test_the_reason_for_another_number_of_columns() -> None:
    assert column_count_reason("plan_of", 1, 2) == "query 'plan_of' returned 1 column(s) but ON SQL names 2"


def test_a_column_already_of_its_type_is_returned_as_it_is() -> None:
    values = [1, None, 2**31 - 1]
    assert convert_column(values, T_INTEGER)[0] is values
    assert convert_column([2**31], T_INTEGER)[1][0].args == ("2147483648 is out of range for integer",)


@pytest.mark.parametrize(
    ("declared", "want"),
    [
        ("INTEGER", "integer"),
        ("int", "integer"),
        ("SMALLINT", "integer"),
        ("BIGINT", "bigint"),
        ("UNSIGNED BIG INT", "bigint"),
        ("INT8", "bigint"),
        ("VARCHAR(5)", "varchar"),
        ("TEXT", "varchar"),
        ("CLOB", "varchar"),
        ("BLOB", "varchar"),
        ("", "varchar"),
        ("REAL", "double"),
        ("DOUBLE PRECISION", "double"),
        ("FLOAT", "double"),
        ("BOOLEAN", "boolean"),
        ("DATETIME", "timestamp"),
        ("DATE", "timestamp"),
        ("TIMESTAMP", "timestamp"),
        ("NUMERIC(10, 2)", "decimal(10, 2)"),
        ("DECIMAL(50,5)", "decimal(38, 5)"),
        ("NUMERIC", "decimal(38, 18)"),
        ("STRING", "varchar"),
        ("JSON", "varchar"),
    ],
)
def test_sqlite_declared_types(declared: str, want: str) -> None:
    assert str(sqlite_type(declared)) == want


def test_postgres_numeric_modifiers() -> None:
    def typmod(p: int, s: int) -> int:
        return ((p << 16) | (s & 0x7FF)) + 4

    assert str(pg_column("x", 1700, typmod(10, 2)).type) == "decimal(10, 2)"
    assert str(pg_column("x", 1700, typmod(5, -2)).type) == "decimal(7, 0)"
    assert str(pg_column("x", 1700, typmod(3, 5)).type) == "decimal(5, 5)"
    assert str(pg_column("x", 1700, typmod(60, 10)).type) == "decimal(38, 10)"
    assert str(pg_column("x", 1700, -1).type) == "decimal(38, 18)"
    uuid = pg_column("x", 2950, -1)  # any other type: its text, which cannot fail
    assert (str(uuid.type), uuid.source, uuid.exact) == ("varchar", "oid 2950", True)
