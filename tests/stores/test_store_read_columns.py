"""`read_columns`, the columnar ReadSQL path the Spark deployer uses, against `read`, the per-event
path the reference executor uses: for every query shape, the same rows in the same order, whatever
the backend (SQLite answers from `read`; Postgres has its own path with its own query)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from store_helpers import Backend, query

from operators.datatypes import T_DOUBLE, T_INTEGER, T_STRING, T_TIMESTAMP, Field, Schema
from stores.api import ReadColumns, columns_of, split_reads
from stores.errors import StoreError

SETUP = (
    "CREATE TABLE plans (idcaller integer, idplan integer, fee numeric(6,2), name varchar(20), since timestamp)",
    "INSERT INTO plans VALUES (1, 10, 1.50, 'basic', '2026-01-01 10:00:00'), (2, 20, 2.25, 'o''brien; --', NULL),"
    " (2, 21, 0.10, NULL, '2026-02-01 00:00:00'), (3, 30, NULL, 'x', NULL)",
)
RETURNS = Schema((Field("idplan", T_INTEGER), Field("fee", T_DOUBLE)))

CASES: list[tuple[str, str, Any, list[tuple[Any, ...]], int]] = [
    # name, query text, returns, parameter tuples, width read
    (
        "one row, many rows, none",
        "SELECT idplan, fee FROM plans WHERE idcaller = ? ORDER BY idplan",
        RETURNS,
        [(1,), (2,), (9,), (3,), (2,)],
        2,
    ),
    (
        "NULL parameter",
        "SELECT idplan, fee FROM plans WHERE idcaller = ? ORDER BY idplan",
        RETURNS,
        [(None,), (1,), (None,)],
        2,
    ),
    (
        "text and SQL in a parameter",
        "SELECT idplan FROM plans WHERE name = ?",
        None,
        [("o'brien; --",), ("basic' OR '1'='1",), ("basic",)],
        1,
    ),
    (
        "two parameters",
        "SELECT idplan, name FROM plans WHERE idcaller = ? AND idplan > ? ORDER BY idplan",
        Schema((Field("idplan", T_INTEGER), Field("name", T_STRING))),
        [(2, 0), (2, 20), (1, 100)],
        2,
    ),
    ("no parameter", "SELECT count(*) FROM plans", None, [(), (), ()], 1),
    ("unordered query, several rows", "SELECT idplan FROM plans WHERE idcaller = ?", None, [(2,), (1,)], 1),
    (
        "timestamps",
        "SELECT since FROM plans WHERE idcaller = ? ORDER BY since",
        Schema((Field("since", T_TIMESTAMP),)),
        [(1,), (2,)],
        1,
    ),
    # rows of another shape than ON SQL names: each event with rows is refused, with its reason
    ("fewer columns than read", "SELECT idplan FROM plans WHERE idcaller = ?", None, [(1,), (3,), (9,)], 2),
    ("more columns than read", "SELECT idplan, fee FROM plans WHERE idcaller = ?", None, [(9,), (1,)], 1),
]


def sorted_within_events(rc: ReadColumns) -> list[tuple[Any, ...]]:
    """Rows as (event, values...), sorted within each event: an unordered query's rows of one event
    may come in any order."""
    rows = list(zip(rc.event, *rc.columns, strict=True))
    return sorted(rows, key=lambda r: (r[0], repr(r[1:])))


@pytest.mark.parametrize("outer", [False, True], ids=["inner", "outer"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_read_columns_equals_read(sql_backend: Backend, case: Any, outer: bool) -> None:
    _, text, returns, params, width = case
    sql_backend.execute(*SETUP)
    q = query(text, returns=returns)
    expected = columns_of(sql_backend.store.read(q, params), q, width, outer)
    columns = [list(c) for c in zip(*params, strict=True)] if params and params[0] else []
    got = sql_backend.store.read_columns(q, columns, len(params), width=width, outer=outer)
    assert len(got.columns) == width
    if "ORDER BY" in text:
        assert got == expected
    else:
        assert sorted_within_events(got) == sorted_within_events(expected)
    # the events come in order, and an outer read has a row for every event it does not refuse
    assert got.event == sorted(got.event)
    if outer:
        assert set(got.event) | set(got.errors) == set(range(len(params)))


@pytest.mark.parametrize("outer", [False, True], ids=["inner", "outer"])
def test_rows_of_another_width_refuse_their_events(sql_backend: Backend, outer: bool) -> None:
    """The reason is the reference executor's for such a row; an event without rows has no row to
    refuse, and with OUTER keeps its row of NULLs (on Postgres, whose server adds that row, too)."""
    sql_backend.execute(*SETUP)
    q = query("SELECT idplan FROM plans WHERE idcaller = ?", name="plan_of")
    got = sql_backend.store.read_columns(q, [[1, 9, 2]], 3, width=2, outer=outer)
    why = "query 'plan_of' returned 1 column(s) but ON SQL names 2"
    assert got.errors == {0: why, 2: why}
    assert (got.event, got.columns) == (([1], [[None], [None]]) if outer else ([], [[], []]))


@pytest.mark.postgres
def test_returns_types_are_applied_column_by_column(pg_backend: Backend) -> None:
    """numeric → double, as declared: Postgres returns Decimal, the operator reads floats."""
    pg_backend.execute(*SETUP)
    got = pg_backend.store.read_columns(query(CASES[0][1], returns=RETURNS), [[2, 1]], 2, width=2)
    assert got.event == [0, 0, 1]
    assert got.columns == [[20, 21, 10], [2.25, 0.1, 1.5]]
    assert all(type(v) is float for v in got.columns[1])
    stamps = pg_backend.store.read_columns(
        query("SELECT since FROM plans WHERE since IS NOT NULL ORDER BY since"), [], 1, width=1
    )
    assert stamps.columns == [[datetime(2026, 1, 1, 10, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)]]
    assert not isinstance(got.columns[1][0], Decimal)


@pytest.mark.postgres
def test_large_integers_and_a_big_batch(pg_backend: Backend) -> None:
    """Integer parameters travel as one array literal: 64-bit extremes and NULLs survive, and a
    batch of 20,000 events keeps every event's own row."""
    pg_backend.execute("CREATE TABLE k (id bigint PRIMARY KEY, v bigint)")
    pg_backend.execute("INSERT INTO k SELECT g, g * 3 FROM generate_series(1, 20000) g")
    pg_backend.execute(f"INSERT INTO k VALUES ({-(2**63)}, 1), ({2**63 - 1}, 2)")
    ids = [*range(20000, 0, -1), -(2**63), None, 2**63 - 1]
    got = pg_backend.store.read_columns(query("SELECT v FROM k WHERE id = ?"), [ids], len(ids), width=1)
    assert got.event == [i for i, v in enumerate(ids) if v is not None]
    assert got.columns[0] == [v * 3 for v in range(20000, 0, -1)] + [1, 2]


def test_bad_arguments_are_refused(sql_backend: Backend) -> None:
    sql_backend.execute(*SETUP)
    q = query("SELECT idplan FROM plans WHERE idcaller = ?")
    with pytest.raises(StoreError, match="1 parameter"):
        sql_backend.store.read_columns(q, [[1], [2]], 1, width=1)
    with pytest.raises(StoreError, match="not a SELECT"):
        sql_backend.store.read_columns(query("DELETE FROM plans WHERE idcaller = ?"), [[1]], 1, width=0)


@pytest.mark.postgres
def test_an_event_whose_read_the_database_refuses_is_left_out(pg_backend: Backend) -> None:
    """`100 / ?` fails with division_by_zero (SQLSTATE 22012, a data exception: about the event) for
    the events with 0; the batched query fails whole, and the store reads halves of the batch until
    it has found them. They are reported with the message a read of that event alone raises, which
    is what the reference executor dead-letters it with; the other events are read."""
    q = query("SELECT 100 / ? AS v", name="share")
    got = pg_backend.store.read_columns(q, [[4, 0, None, 5, 0]], 5, width=1)
    with pytest.raises(StoreError) as alone:
        pg_backend.store.read(q, [(0,)])
    assert alone.value.about_event and "query share: division by zero" in str(alone.value)
    assert (got.event, got.columns) == ([0, 2, 3], [[25, None, 20]])
    assert got.errors == {1: str(alone.value), 4: str(alone.value)}


@pytest.mark.parametrize("text", ["SELECT v FROM missing WHERE k = ?", "SELEC 1 WHERE 1 = ?"])
def test_an_error_not_about_one_event_fails_the_batched_read(sql_backend: Backend, text: str) -> None:
    """A missing table or SQL the database refuses is no event's fault: the read raises, whole."""
    with pytest.raises(StoreError) as info:
        sql_backend.store.read_columns(query(text), [[1, 2]], 2, width=1)
    assert not info.value.about_event


def test_split_reads_reads_halves_down_to_the_refused_events() -> None:
    """Without a store: events 2 and 5 of 8 fail, every other one reads as its number; the batch
    is read in halves (ranges that hold neither are read whole), the result in event order."""
    calls: list[tuple[int, int]] = []

    def attempt(lo: int, hi: int) -> ReadColumns:
        calls.append((lo, hi))
        if any(e in (2, 5) for e in range(lo, hi)):
            raise StoreError("bad value", store="crm", about_event=True)
        return ReadColumns(list(range(hi - lo)), [[10 * e for e in range(lo, hi)]])

    got = split_reads(8, 1, attempt)
    assert got.event == [0, 1, 3, 4, 6, 7] and got.columns == [[0, 10, 30, 40, 60, 70]]
    assert got.errors == {2: "store crm: bad value", 5: "store crm: bad value"}
    assert calls == [(0, 8), (0, 4), (0, 2), (2, 4), (2, 3), (3, 4), (4, 8), (4, 6), (4, 5), (5, 6), (6, 8)]
    assert split_reads(0, 1, attempt) == ReadColumns([], [[]])
